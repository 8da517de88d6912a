"""The pointwise :class:`~runner.modes.base.RunMode`: one candidate per item scored on the rubric's criteria; an
ensemble's members' scores combined by ``judge.combine`` (runner.modes.score_panel)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.core.config import RunConfig
from runner.modes import score_panel, scorecard
from runner.modes import summary as summaries
from runner.modes.base import Json, MemberReport, ModeInputs, ModeSetup, Report, RunMode, View, expand, register
from runner.modes.pointwise import report, setup, views


class PointwiseMode(RunMode):
    """Pointwise runs (``prompt.mode: pointwise``)."""

    name = report.MODE

    def prepare(self, cfg: RunConfig, prompts_dir: Path) -> ModeSetup:
        """The scored rubric, parser, aggregation, checks, templates and the generator's template."""
        template, point = setup.prepare(cfg, prompts_dir)
        return ModeSetup(template, None, setup.response_format_schema(point, cfg.rubric.parser.name), point,
                         point.generator_template)

    def build(self, inputs: ModeInputs) -> Report:
        """The scorecard of a single judge, or an ensemble's combined scorecard with each member's own."""
        cfg, point = inputs.cfg, inputs.setup.point
        violations = setup.check_candidates(inputs.candidates, point.check_calls)
        if inputs.by_member is None:
            rep = report.build(cfg, point, inputs.refs, inputs.judgments, violations, inputs.not_generated)
            return Report(self.name, rep, scorecard.report_metrics(rep))
        rep, reports = report.build_panel(cfg, point, inputs.refs, inputs.by_member, violations, inputs.not_generated)
        metrics = {**scorecard.report_metrics(rep), **score_panel.ensemble_metrics(rep["ensemble"])}
        members = {}
        for name, member_rep in reports.items():
            member_metrics = {**scorecard.report_metrics(member_rep),
                              **summaries.numeric(summaries.judge_metrics(inputs.by_member[name]))}
            members[name] = MemberReport(member_rep, member_metrics)
            metrics.update({f"member/{name}/{k}": v for k, v in member_metrics.items()})
        return Report(self.name, rep, metrics, None, members)

    def summary_metrics(self, document: Mapping[str, Any]) -> dict[str, float]:
        """The scorecard's metrics (and the ensemble section's)."""
        return report.summary_metrics(document)

    def console_lines(self, document: Mapping[str, Any], gold: Mapping[str, Any] | None,
                      judge_stats: Mapping[str, Any]) -> list[str]:
        """Scores, pass rate, tags, consistency, human agreement, checks, calls; the ensemble's lines."""
        ensemble = document.get("ensemble")
        return views.console_lines(document, judge_stats) + (score_panel.console_lines(ensemble) if ensemble else [])

    def views(self, document: Mapping[str, Any]) -> list[View]:
        """Score histogram, criteria, tags, categories, statistics; an ensemble's members."""
        ensemble = document.get("ensemble")
        return views.views(document) + (views.ensemble_views(ensemble) if ensemble else [])

    def items(self, document: Mapping[str, Any]) -> list[Json]:
        """``detailed_results``: item_id, status, tags, category, overall, passed, ``scores.<criterion>``, ..."""
        rows = ({("item_id" if k == "id" else k): v for k, v in d.items()}
                for d in document.get("detailed_results") or [])
        return expand(rows, "scores")


MODE = register(PointwiseMode())
