"""What every run mode is: the :class:`RunMode` interface, the :class:`Report` it builds and the views it shows.

A run's mode (pairwise or pointwise) is chosen once, from ``prompt.mode``, by runner.modes.catalog.mode_for (each
mode registers itself into :data:`MODES`; this interface knows none of them); the rest of the package asks the
mode object, never the shape of a dict, what kind of run it holds. A mode owns its start-up
validation, the JSON schema of its judge's answer, its typed report, that report's metrics, its console lines and
its HTML views. An ensemble is a judge made of members; the mode combines their judgments (``inputs.by_member``).

Views are data (:class:`View`): the mode says what to draw, runner.outputs.html_report draws it, so this layer
needs no plotting library.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, cast

from runner.core.config import RunConfig
from runner.core.types import Item, Judgment
from runner.inputs.datasets import ItemRef
from runner.inputs.prompts import Template
from runner.modes.drilldown import ItemOutcome
from runner.modes.record import Record
from runner.modes.sections import EndedReport, Gate, GoldAccuracy, RunEnd, ScoreSection, run_end_missing, with_run_end
from runner.modes.view import View as View  # re-exported: the outputs layer draws a View
from runner.modes.view import cell as cell

Json = dict[str, Any]
Document = Mapping[str, Any] | Record  # a summary.json document, or the typed report a run already holds (read's)


@dataclass(frozen=True)
class ModeSetup:
    """A validated mode's start-up products: its templates, its answer schema and what only it needs."""

    template: Template
    synthesis_template: Template | None = None
    response_schema: dict[str, Any] | None = None
    point: Any = None  # pointwise: runner.modes.pointwise.PointwiseSetup
    generator_template: Template | None = None  # a run that writes its candidates first (generator)


@dataclass(frozen=True)
class ModeInputs:
    """What a mode builds its report from, once the judges have answered."""

    cfg: RunConfig
    setup: ModeSetup
    refs: Sequence[ItemRef]
    judgments: Sequence[Judgment]  # every judge call (an ensemble's members' included)
    by_member: Mapping[str, Sequence[Judgment]] | None = None  # an ensemble's judgments per member
    candidates: Iterable[Item] = ()  # pointwise: the judged outputs (for the deterministic checks)
    not_generated: frozenset[str] = frozenset()  # pointwise: items whose generation failed


@dataclass(frozen=True)
class MemberReport:
    """An ensemble member's own typed report and metrics (written under members/<name>/)."""

    typed: Record
    metrics: Mapping[str, float]

    def to_json(self) -> Json:
        """The member's summary.json document."""
        return self.typed.to_json()


@dataclass(frozen=True)
class Report:
    """A run's report: the mode that built it, its typed summary (the mode's runner.modes.sections record), gold
    accuracy and metrics.

    ``to_json()`` is summary.json's content; ``metrics`` are the MLflow metrics the summary determines.
    """

    mode: str
    typed: Record  # pairwise: runner.modes.sections.PairwiseReport; pointwise: PointwiseReport
    metrics: Mapping[str, float]
    gold: GoldAccuracy | None = None  # pairwise with gold labels: accuracy per order (LLMBar's)
    members: Mapping[str, MemberReport] = field(default_factory=lambda: MappingProxyType({}))

    def to_json(self) -> Json:
        """The summary.json document."""
        return self.typed.to_json()

    @property
    def gates(self) -> tuple[Gate, ...]:
        """The gates the run's end checked (RunEnd), none before."""
        return cast(EndedReport, self.typed).gates or ()  # every mode's report is one: checked by register

    @property
    def partial_reason(self) -> str | None:
        """Why an aborted run stopped (its report is of what completed), or None."""
        return cast(EndedReport, self.typed).partial_reason

    def ended(self, end: RunEnd) -> Report:
        """This report with what the run's end adds (skipped rows, failed calls, gates, partial: see RunEnd)."""
        return replace(self, typed=with_run_end(self.typed, end))


class RunMode(ABC):
    """One kind of run. Subclasses are stateless; :data:`MODES` holds one instance of each."""

    name: ClassVar[str]
    report_type: ClassVar[type[Record]]  # its typed report: an EndedReport (runner.modes.sections), checked by register
    items_take_gold: ClassVar[bool] = False  # the results API adds each item's gold label (from its judgments)
    ordered: ClassVar[bool] = False  # the judge sees candidates in an order (order=fixed|both|random applies)

    @abstractmethod
    def prepare(self, cfg: RunConfig, prompts_dirs: Sequence[Path]) -> ModeSetup:
        """Validate everything the mode needs that costs nothing and load its templates (each from the first of
        ``prompts_dirs`` that holds it).

        Raises:
            ConfigurationError and its kin, naming the file or key.
        """

    @abstractmethod
    def read(self, document: Document, *, lenient: bool = False) -> Record:
        """The typed report of a summary.json document of this mode: strict (a key the builder always writes must
        be there; runner.modes.record.ReportFormatError names the section and key otherwise), or ``lenient`` for
        the HTML views, which draw what a document has (see runner.modes.record)."""

    @abstractmethod
    def build(self, inputs: ModeInputs) -> Report:
        """The run's typed report (a single judge's, or an ensemble's combined from its members)."""

    @abstractmethod
    def summary_metrics(self, report: Record) -> dict[str, float]:
        """The metrics this mode's typed report determines (a run read back from disk: :meth:`read` first)."""

    @abstractmethod
    def console_lines(self, report: Record, judge_stats: Mapping[str, Any]) -> list[str]:
        """The end-of-run console summary, one line per string (printed as data, never as markup)."""

    @abstractmethod
    def views(self, report: Record) -> list[View]:
        """The HTML report's sections for this mode (headline, gates and metrics are the report's own); a report
        read leniently from a document draws the sections it has."""

    @abstractmethod
    def item_outcomes(self, report: Record, refs: Sequence[ItemRef]) -> dict[str, ItemOutcome]:
        """Each item's final verdict or score and its flags (wrong against gold, failed, unscored, inconsistent),
        for the HTML report's drill-down (runner.modes.drilldown)."""

    @abstractmethod
    def items(self, report: Record) -> list[Json]:
        """One row per item of the report (for the results API's ``items`` frame)."""

    def scores(self, report: Record) -> ScoreSection | None:
        """The report's scored section over every item, whose pass counts and checks the gates read; None in a mode
        that gives verdicts instead of scores."""
        return None

    def without_verdict(self, report: Record) -> tuple[int, int] | None:
        """(items without a valid final verdict, items) where a run with too many of them fails (``max_unscored_rate``:
        an answer that cannot be read is not a vote); None in a mode that scores its items instead (its gates say)."""
        return None

    def posteriors(self, report: Record) -> dict[str, Mapping[str, float]]:
        """Item id -> the posterior its aggregation gave it (label -> p: an ensemble's Dawid-Skene), for the items that
        have one: results.jsonl adds it to each of the item's judgments. None in a mode that has none."""
        return {}


MODES: dict[str, RunMode] = {}


def register(mode: RunMode) -> RunMode:
    """Add a mode to :data:`MODES` under its name (``prompt.mode``).

    Raises:
        ValueError: The name is taken.
        TypeError: The mode's report type lacks a field the run's end replaces (runner.modes.sections.EndedReport).
    """
    if mode.name in MODES:
        raise ValueError(f"run mode {mode.name!r} is registered twice")
    missing = run_end_missing(mode.report_type)
    if missing:
        raise TypeError(f"run mode {mode.name!r}: its report type {mode.report_type.__name__} lacks what the run's "
                        f"end sets: {missing}")
    MODES[mode.name] = mode
    return mode


def expand(rows: Iterable[Mapping[str, Any]], column: str, fill: Any = None) -> list[Json]:
    """Rows with the dict in ``column`` replaced by one ``<column>.<key>`` entry per key (the union of keys
    over all rows; a row without a key gets ``fill``, or no entry when ``fill`` is None)."""
    copies = [dict(r) for r in rows]
    keys = list(dict.fromkeys(k for r in copies for k in (r.get(column) or {})))
    out = []
    for row in copies:
        nested = row.pop(column, None) or {}
        row.update({f"{column}.{k}": nested.get(k, fill) for k in keys if k in nested or fill is not None})
        out.append(row)
    return out
