"""The pointwise :class:`~runner.modes.base.RunMode`: one candidate per item scored on the rubric's criteria; an
ensemble's members' scores combined by ``judge.combine`` (runner.modes.score_panel)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runner.core.config import RunConfig
from runner.inputs.datasets import ItemRef
from runner.modes import score_panel, scorecard
from runner.modes import summary as summaries
from runner.modes.base import (
    Document,
    Json,
    MemberReport,
    ModeInputs,
    ModeSetup,
    Report,
    RunMode,
    View,
    expand,
    register,
)
from runner.modes.drilldown import ItemOutcome
from runner.modes.pointwise import report, setup, views
from runner.modes.sections import PointwiseReport, Record, ScoreSection


class PointwiseMode(RunMode):
    """Pointwise runs (``prompt.mode: pointwise``)."""

    name = report.MODE
    report_type = PointwiseReport

    def prepare(self, cfg: RunConfig, prompts_dirs: Sequence[Path]) -> ModeSetup:
        """The scored rubric, parser, aggregation, checks, templates and the generator's template."""
        template, point = setup.prepare(cfg, prompts_dirs)
        return ModeSetup(template, None, setup.response_format_schema(point, cfg.rubric.parser.name), point,
                         point.generator_template)

    def read(self, document: Document, *, lenient: bool = False) -> PointwiseReport:
        """The typed pointwise report (runner.modes.sections.PointwiseReport)."""
        if isinstance(document, PointwiseReport):  # the run's own report: already read
            return document
        return PointwiseReport.from_json(document, "pointwise report", lenient=lenient)

    def build(self, inputs: ModeInputs) -> Report:
        """The scorecard of a single judge, or an ensemble's combined scorecard with each member's own."""
        cfg, point = inputs.cfg, inputs.setup.point
        violations, texts = setup.read_candidates(inputs.candidates, point.check_calls, cfg.dataset.input_variable,
                                                  cfg.dataset.expected_variable)
        if inputs.by_member is None:
            rep = report.build(cfg, point, inputs.refs, inputs.judgments, violations, inputs.not_generated, texts)
            return Report(self.name, rep, scorecard.report_metrics(rep))
        rep, reports = report.build_panel(cfg, point, inputs.refs, inputs.by_member, violations, inputs.not_generated,
                                          texts)
        assert rep.ensemble is not None
        metrics = {**scorecard.report_metrics(rep), **score_panel.ensemble_metrics(rep.ensemble)}
        members = {}
        for name, member_rep in reports.items():
            member_metrics = {**scorecard.report_metrics(member_rep),
                              **summaries.numeric(summaries.judge_metrics(inputs.by_member[name]))}
            members[name] = MemberReport(member_rep, member_metrics)
            metrics.update({f"member/{name}/{k}": v for k, v in member_metrics.items()})
        return Report(self.name, rep, metrics, None, members)

    def summary_metrics(self, typed: Record) -> dict[str, float]:
        """The scorecard's metrics (and the ensemble section's)."""
        return report.summary_metrics(self.read(typed))

    def console_lines(self, typed: Record, judge_stats: Mapping[str, Any]) -> list[str]:
        """Scores, pass rate, tags, consistency, human agreement, checks, calls; the ensemble's lines."""
        rep = self.read(typed)
        ensemble = score_panel.console_lines(rep.ensemble) if rep.ensemble is not None else []
        return views.console_lines(rep, judge_stats) + ensemble

    def views(self, typed: Record) -> list[View]:
        """Score histogram, criteria, tags, categories, statistics; an ensemble's members."""
        rep = self.read(typed, lenient=True)
        return views.views(rep) + (views.ensemble_views(rep.ensemble) if rep.ensemble is not None else [])

    def item_outcomes(self, typed: Record, refs: Sequence[ItemRef]) -> dict[str, ItemOutcome]:
        """Each item's overall score and pass/fail; failed, wrong against the human score, inconsistent, unscored."""
        return views.item_outcomes(self.read(typed, lenient=True))

    def items(self, typed: Record) -> list[Json]:
        """``detailed_results``: item_id, status, tags, category, overall, passed, ``scores.<criterion>``, ..."""
        rows = ({("item_id" if k == "id" else k): v for k, v in d.to_json().items()}
                for d in self.read(typed).detailed_results)
        return expand(rows, "scores")

    def scores(self, report: Record) -> ScoreSection | None:
        """The report's ``summary``."""
        return self.read(report).summary


MODE = register(PointwiseMode())
