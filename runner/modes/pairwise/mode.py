"""The pairwise :class:`~runner.modes.base.RunMode`: two candidates per item, verdicts aggregated per item;
an ensemble's members' verdicts combined by ``judge.combine`` (runner.modes.panel)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.core.config import RunConfig
from runner.modes import panel
from runner.modes.base import Json, MemberReport, ModeInputs, ModeSetup, Report, RunMode, View, expand, register
from runner.modes.pairwise import report, setup, views


class PairwiseMode(RunMode):
    """Pairwise runs (``prompt.mode: pairwise``)."""

    name = report.MODE
    items_take_gold = True
    ordered = True

    def prepare(self, cfg: RunConfig, prompts_dir: Path) -> ModeSetup:
        """The rubric's labels and parsers, the aggregation's params, the templates and their variables."""
        setup.check_rubric(cfg)
        template, synthesis = setup.load_templates(cfg, prompts_dir)
        return ModeSetup(template, synthesis, setup.response_schema_for(cfg))

    def build(self, inputs: ModeInputs) -> Report:
        """A single judge's report, or an ensemble's with each member's own."""
        cfg, refs = inputs.cfg, inputs.refs
        if inputs.by_member is None:
            summary, gold, metrics = report.build(cfg, refs, list(inputs.judgments))
            return Report(self.name, summary, metrics, gold)
        summary, metrics, members = panel.build(cfg, refs, inputs.by_member)
        return Report(self.name, summary, metrics, None,
                      {m: MemberReport(doc, member_metrics) for m, (doc, _, member_metrics) in members.items()})

    def summary_metrics(self, document: Mapping[str, Any]) -> dict[str, float]:
        """The summary's metrics; an ensemble's section adds its aggregations' and members' agreement."""
        out = report.summary_metrics(document)
        if document.get("ensemble"):
            out.update(panel.ensemble_metrics(document["ensemble"]))
        return out

    def console_lines(self, document: Mapping[str, Any], gold: Mapping[str, Any] | None,
                      judge_stats: Mapping[str, Any]) -> list[str]:
        """Headline, trust, the ensemble's lines (a single judge: bias) and the statistics."""
        ensemble = document.get("ensemble")
        return views.console_lines(document, gold, judge_stats, panel.console_lines(ensemble) if ensemble else None)

    def views(self, document: Mapping[str, Any]) -> list[View]:
        """Verdicts, confusion against gold, statistics; an ensemble's aggregations and members."""
        ensemble = document.get("ensemble")
        return views.views(document) + (views.ensemble_views(ensemble) if ensemble else [])

    def items(self, document: Mapping[str, Any]) -> list[Json]:
        """``aggregated_results``: item_id, verdicts, final_verdict, confidence, ``verdict_counts.<label>``."""
        results = document.get("aggregated_results") or {}
        return expand(({"item_id": k, **v} for k, v in results.items()), "verdict_counts", fill=0)


MODE = register(PairwiseMode())
