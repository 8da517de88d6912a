"""The pairwise :class:`~runner.modes.base.RunMode`: two candidates per item, verdicts aggregated per item;
an ensemble's members' verdicts combined by ``judge.combine`` (runner.modes.panel)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runner.core.config import RunConfig
from runner.inputs.datasets import ItemRef
from runner.modes import panel, panel_views
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
from runner.modes.pairwise import report, setup, views
from runner.modes.sections import PairwiseReport, Record


class PairwiseMode(RunMode):
    """Pairwise runs (``prompt.mode: pairwise``)."""

    name = report.MODE
    report_type = PairwiseReport
    items_take_gold = True
    ordered = True

    def prepare(self, cfg: RunConfig, prompts_dirs: Sequence[Path]) -> ModeSetup:
        """The rubric's labels and parsers, the aggregation's params, the templates and their variables."""
        setup.check_rubric(cfg)
        template, synthesis = setup.load_templates(cfg, prompts_dirs)
        return ModeSetup(template, synthesis, setup.response_schema_for(cfg))

    def read(self, document: Document, *, lenient: bool = False) -> PairwiseReport:
        """The typed pairwise summary (runner.modes.sections.PairwiseReport)."""
        if isinstance(document, PairwiseReport):  # the run's own report: already read
            return document
        return PairwiseReport.from_json(document, "pairwise summary", lenient=lenient)

    def build(self, inputs: ModeInputs) -> Report:
        """A single judge's report, or an ensemble's with each member's own."""
        cfg, refs = inputs.cfg, inputs.refs
        if inputs.by_member is None:
            typed, metrics = report.build(cfg, refs, inputs.judgments)
            return Report(self.name, typed, metrics, typed.gold)
        typed, metrics, members = panel.build(cfg, refs, inputs.by_member)
        return Report(self.name, typed, metrics, None,
                      {m: MemberReport(typed_m, metrics_m) for m, (typed_m, metrics_m) in members.items()})

    def summary_metrics(self, typed: Record) -> dict[str, float]:
        """The summary's metrics; an ensemble's section adds its aggregations' and members' agreement."""
        rep = self.read(typed)
        out = report.summary_metrics(rep)
        if rep.ensemble is not None:
            out.update(panel_views.ensemble_metrics(rep.ensemble))
        return out

    def console_lines(self, typed: Record, judge_stats: Mapping[str, Any]) -> list[str]:
        """Headline (with gold accuracy where the report has it), trust, the ensemble's lines (a single judge: bias)
        and the statistics."""
        rep = self.read(typed)
        ensemble = panel_views.console_lines(rep.ensemble) if rep.ensemble is not None else None
        return views.console_lines(rep, rep.gold, judge_stats, ensemble)

    def views(self, typed: Record) -> list[View]:
        """Verdicts, confusion against gold, statistics; an ensemble's aggregations and members."""
        rep = self.read(typed, lenient=True)
        return views.views(rep) + (views.ensemble_views(rep.ensemble) if rep.ensemble is not None else [])

    def item_outcomes(self, typed: Record, refs: Sequence[ItemRef]) -> dict[str, ItemOutcome]:
        """Each item's final verdict and confidence; wrong against its gold label."""
        return views.item_outcomes(self.read(typed, lenient=True), refs)

    def items(self, typed: Record) -> list[Json]:
        """``aggregated_results``: item_id, verdicts, final_verdict, confidence, ``verdict_counts.<label>``."""
        results = self.read(typed).aggregated_results
        return expand(({"item_id": k, **v.to_json()} for k, v in results.items()), "verdict_counts", fill=0)

    def without_verdict(self, report: Record) -> tuple[int, int] | None:
        """``summary.failed_items`` of ``summary.total_subsets``."""
        summary = self.read(report).summary
        return len(summary.failed_items), summary.total_subsets

    def posteriors(self, report: Record) -> dict[str, Mapping[str, float]]:
        """``aggregated_results.<id>.details.posterior`` of the items whose aggregation gave one (Dawid-Skene)."""
        results = self.read(report).aggregated_results
        return {item: r.posterior for item, r in results.items() if r.posterior is not None}


MODE = register(PairwiseMode())
