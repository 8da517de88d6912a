"""The typed summary.json of each mode: :class:`PairwiseReport` and :class:`PointwiseReport`, made of the typed
sections (runner.modes.sections), the registered statistics (runner.modes.statistics.Estimate) and the gates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from runner.modes.record import Record, optional
from runner.modes.sections.agreement import TrustSection
from runner.modes.sections.bias import BiasReport, ScoreBias
from runner.modes.sections.ensembles import PairwiseEnsemble, PointwiseEnsemble
from runner.modes.sections.scores import DetailedResult, PointwiseSummary, ScoreSection
from runner.modes.sections.verdicts import AggregatedResult, GoldAccuracy, PairErrors, VerdictSummary
from runner.modes.statistics import Statistics


@dataclass(frozen=True, kw_only=True)
class Gate(Record):
    """A gate's outcome (runner.run.gates.GateResult), added when the run ends."""

    name: str
    passed: bool
    value: float | None
    threshold: float | None
    message: str


@dataclass(frozen=True, kw_only=True)
class PairwiseReport(Record):
    """A pairwise summary.json: a single judge's (with ``bias``; ``gold`` with gold labels) or an ensemble's."""

    summary: VerdictSummary
    aggregated_results: Mapping[str, AggregatedResult]
    gold: GoldAccuracy | None = optional()
    trust: TrustSection
    bias: BiasReport | None = optional()
    statistics: Statistics | None = optional()
    pair_errors: PairErrors | None = optional()  # only under the rubric's pair_error: drop
    ensemble: PairwiseEnsemble | None = optional()
    gates: tuple[Gate, ...] | None = optional()
    partial: bool | None = optional()  # the run was stopped (max_error_rate): this is what completed
    partial_reason: str | None = optional()


@dataclass(frozen=True, kw_only=True)
class PointwiseReport(Record):
    """A pointwise summary.json (the scorecard; an ensemble's adds ``ensemble``)."""

    summary: PointwiseSummary
    by_tag: Mapping[str, ScoreSection]
    by_category: Mapping[str, ScoreSection]
    detailed_results: tuple[DetailedResult, ...]
    bias: ScoreBias | None = optional()
    statistics: Statistics | None = optional()
    ensemble: PointwiseEnsemble | None = optional()
    gates: tuple[Gate, ...] | None = optional()
    partial: bool | None = optional()  # the run was stopped (max_error_rate): this is what completed
    partial_reason: str | None = optional()
