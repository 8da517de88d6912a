"""The typed summary.json of each mode: :class:`PairwiseReport` and :class:`PointwiseReport`, made of the typed
sections (runner.modes.sections), the registered statistics (runner.modes.statistics.Estimate) and the gates."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from runner.modes.record import Record, optional
from runner.modes.sections.agreement import TrustSection
from runner.modes.sections.bias import BiasReport, ScoreBias
from runner.modes.sections.ensembles import PairwiseEnsemble, PointwiseEnsemble
from runner.modes.sections.scores import DetailedResult, PointwiseSummary, ScoreSection
from runner.modes.sections.verdicts import AggregatedResult, GoldAccuracy, PairErrors, VerdictSummary
from runner.modes.statistics import Statistics


@dataclass(frozen=True)
class Gate(Record):
    """A gate's outcome (runner.run.gates), added when the run ends."""

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


@dataclass(frozen=True)
class RunEnd:
    """What the end of a run adds to its report (a None is a key the report leaves out): in ``summary``, the dataset
    rows left out, the calls that failed and their retries, the batch rows sent again, and why an aborted run is
    partial; beside it, the gates (none: no ``gates`` key) and the partial mark again."""

    skipped_rows: tuple[str, ...] | None = None
    failed_calls: int | None = None
    retries: int | None = None
    batch_resent: int | None = None
    answers_from_cache: int | None = None  # judge answers the response cache served (None: none)
    gates: tuple[Gate, ...] = ()
    partial_reason: str | None = None  # an aborted run's summary of what completed: why it stopped


class EndedReport(Protocol):
    """What :func:`with_run_end` and runner.modes.base.Report read and replace on every mode's report; a mode's
    report type is checked against it when the mode registers (:func:`run_end_missing`)."""

    @property
    def summary(self) -> Any:
        """The section with ``skipped_rows``, ``failed_calls``, ``retries``, ``batch_resent``, ``partial`` and
        ``partial_reason`` (:data:`SUMMARY_END_FIELDS`)."""

    @property
    def gates(self) -> tuple[Gate, ...] | None:
        """The gates the run's end checked (None: no ``gates`` key)."""

    @property
    def partial(self) -> bool | None:
        """True when the run was stopped."""

    @property
    def partial_reason(self) -> str | None:
        """Why the run was stopped."""


REPORT_END_FIELDS = ("summary", "gates", "partial", "partial_reason")
SUMMARY_END_FIELDS = ("skipped_rows", "failed_calls", "retries", "batch_resent", "answers_from_cache", "partial",
                      "partial_reason")


def run_end_missing(report_type: type) -> list[str]:
    """The fields a mode's report type lacks that :func:`with_run_end` replaces (``summary.<name>`` for its summary
    section's); empty when it has them all. Only dataclass records can be replaced."""
    if not dataclasses.is_dataclass(report_type):
        return ["(not a dataclass)"]
    names = {f.name for f in dataclasses.fields(report_type)}
    missing = [n for n in REPORT_END_FIELDS if n not in names]
    if "summary" in names:
        summary_type = typing.get_type_hints(report_type)["summary"]
        inner = {f.name for f in dataclasses.fields(summary_type)} if dataclasses.is_dataclass(summary_type) else set()
        missing += [f"summary.{n}" for n in SUMMARY_END_FIELDS if n not in inner]
    return missing


ReportT = TypeVar("ReportT", bound=Record)


def with_run_end(report: ReportT, end: RunEnd) -> ReportT:
    """``report`` (a mode's document: a ``summary`` section, then ``gates``, ``partial`` and ``partial_reason``) with
    what the run's end adds: a new record, the built one is frozen."""
    partial = True if end.partial_reason is not None else None
    document = cast(Any, report)  # an EndedReport: checked when its mode registered (run_end_missing)
    summary = dataclasses.replace(document.summary, skipped_rows=end.skipped_rows, failed_calls=end.failed_calls,
                                  retries=end.retries, batch_resent=end.batch_resent,
                                  answers_from_cache=end.answers_from_cache, partial=partial,
                                  partial_reason=end.partial_reason)
    return cast(ReportT, dataclasses.replace(document, summary=summary, gates=end.gates or None, partial=partial,
                                             partial_reason=end.partial_reason))
