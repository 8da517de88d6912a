"""The metric registry: a statistic is one function plus one registration, and then it shows everywhere.

A registered :class:`Statistic` computes a table, group -> measure -> :class:`Estimate` (a value, its n and its
confidence interval), from a run's :class:`StatInputs` (config, items, judgments, the mode's per-item results). Every
run of a mode it is registered for then carries it, with nothing else to edit:

- summary.json: ``statistics.<name>.<group>.<measure>`` = ``{"value", "n", "ci_low", "ci_high"}``;
- MLflow and metrics.json: ``<name>/<group>/<measure>`` with ``_ci_low`` / ``_ci_high`` beside it, and
  ``<name>/<group>/n``; a headline statistic (``headline=True``: one group, ``all``, the whole run) drops the
  group: ``<name>/<measure>`` and ``<name>/n``;
- the console: one line per group; the HTML report: one table per statistic;
- the sweep table: every metric of a registered statistic's family is a column (runner.outputs.sweep).

The last three read the summary document, so a run read back from disk (runner.outputs.results) shows the
same. A statistic is shown as a share (``42.0%``) or, with ``percent=False``, as a coefficient (``0.42``, e.g. a
kappa); ``digits`` sets its decimals (``overall``'s verdict accuracy: two, as JudgeBench publishes it). A statistic
that returns an empty table (e.g. per category on a dataset without categories) adds nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from runner.core.config import RunConfig
from runner.core.types import Judgment
from runner.inputs.datasets import ItemRef
from runner.modes.record import Record
from runner.modes.view import View

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class Estimate(Record):
    """One measured value with its sample size and (when there is spread to resample) its interval; its JSON
    (``to_json``, ``from_json``) is ``{"value", "n", "ci_low", "ci_high"}``."""

    value: float | None
    n: int
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass(frozen=True)
class StatInputs:
    """What a statistic is computed from."""

    cfg: RunConfig
    refs: Sequence[ItemRef]
    judgments: Sequence[Judgment]
    results: Sequence[Any]  # the mode's per-item results (pairwise: runner.core.types.ItemResult)


Table = Mapping[str, Mapping[str, Estimate]]  # group -> measure -> estimate
Statistics = Mapping[str, Table]  # summary.json's ``statistics``: statistic -> its table
Compute = Callable[[StatInputs], Table]


@dataclass(frozen=True)
class Statistic:
    """A registered statistic: its family name (the metric prefix), its title, the modes it runs for, whether its
    one group ``all`` is left out of its metric keys (``headline``) and whether its values are shares."""

    name: str
    title: str
    modes: frozenset[str]
    compute: Compute
    headline: bool = False
    percent: bool = True
    digits: int | None = None  # decimals shown (default: 1 for a share, 3 for a coefficient)
    labels: Mapping[str, str] = field(default_factory=dict)  # measure -> its shown name (default: its key, spaced)

    def label(self, measure: str) -> str:
        """How the console and the HTML table name ``measure``."""
        return self.labels.get(measure, measure.replace("_", " "))


STATISTICS: dict[str, Statistic] = {}


HEADLINE_GROUP = "all"  # a headline statistic's one group: the whole run


def statistic(name: str, title: str, modes: Sequence[str], *, headline: bool = False,
              percent: bool = True, digits: int | None = None,
              labels: Mapping[str, str] | None = None) -> Callable[[Compute], Compute]:
    """Register ``fn(inputs: StatInputs) -> Table`` as the statistic ``name`` of the given modes.

    Args:
        name: The metric family and summary.json's key (snake_case).
        title: The console's and the HTML table's name for it.
        modes: The run modes it is computed for.
        headline: Its table has one group, :data:`HEADLINE_GROUP`, left out of the metric keys.
        percent: Its values are shares, shown as percentages; False: coefficients, shown as numbers.
        digits: The decimals shown (default: 1 for a percentage, 3 for a coefficient), e.g. 2 for a figure
            published with two (JudgeBench's 65.71).
        labels: A measure's shown name where its key would mislead (``win_rate``: ``ties-half rate``).
    """
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ValueError(f"statistic name {name!r}: snake_case, it becomes a metric family")

    def decorate(fn: Compute) -> Compute:
        if name in STATISTICS:
            raise ValueError(f"statistic {name!r} is registered twice")
        STATISTICS[name] = Statistic(name, title, frozenset(modes), fn, headline, percent, digits,
                                     dict(labels or {}))
        return fn

    return decorate


def compute(mode: str, inputs: StatInputs) -> dict[str, Any]:
    """The JSON of :func:`estimates`: summary.json's ``statistics`` section."""
    return {name: {group: {measure: est.to_json() for measure, est in row.items()} for group, row in table.items()}
            for name, table in estimates(mode, inputs).items()}


def estimates(mode: str, inputs: StatInputs) -> Statistics:
    """Every statistic registered for ``mode``, typed: the report's ``statistics`` section (empty tables left
    out; read-only)."""
    out: dict[str, Table] = {}
    for stat in STATISTICS.values():
        if mode in stat.modes:
            table = stat.compute(inputs)
            if table:
                out[stat.name] = MappingProxyType({group: MappingProxyType(dict(row)) for group, row in table.items()})
    return MappingProxyType(out)


def key_part(text: str) -> str:
    """``text`` made safe inside an MLflow metric key."""
    return _UNSAFE.sub("_", text) or "_"


def read(section: Mapping[str, Any]) -> Statistics:
    """A ``statistics`` section with every estimate typed (each given as an :class:`Estimate` or as its JSON)."""
    return {name: {group: {measure: Estimate.of(est, f"statistics.{name}.{group}.{measure}")
                           for measure, est in row.items()} for group, row in table.items()}
            for name, table in section.items()}


def metrics(section: Mapping[str, Any]) -> dict[str, float]:
    """The MLflow metrics of a ``statistics`` section (typed or as JSON): value, n and CI bounds per group and
    measure."""
    out: dict[str, float] = {}
    for name, table in read(section).items():
        for group, row in table.items():
            prefix = key_part(name) if _is_headline(name, group) else f"{key_part(name)}/{key_part(group)}"
            for measure, est in row.items():
                key = f"{prefix}/{key_part(measure)}"
                for suffix, value in (("", est.value), ("_ci_low", est.ci_low), ("_ci_high", est.ci_high)):
                    if value is not None:
                        out[key + suffix] = float(value)
            if row:
                out[f"{prefix}/n"] = float(max(est.n for est in row.values()))
    return out


def _is_headline(name: str, group: str) -> bool:
    stat = STATISTICS.get(name)
    return stat is not None and stat.headline and group == HEADLINE_GROUP


def _shown(name: str, est: Estimate) -> str:
    """A value and its interval: as percentages for a share (a statistic not registered here: a share), else as a
    coefficient with 3 decimals."""
    if est.value is None:
        return "n/a"
    stat = STATISTICS.get(name)
    scale, unit, digits = (100, "%", 1) if stat is None or stat.percent else (1, "", 3)
    digits = digits if stat is None or stat.digits is None else stat.digits
    text = f"{est.value * scale:.{digits}f}{unit}"
    if est.ci_low is not None and est.ci_high is not None:
        text += f" [{est.ci_low * scale:.{digits}f}, {est.ci_high * scale:.{digits}f}]"
    return text


def _title(name: str) -> str:
    stat = STATISTICS.get(name)
    return stat.title if stat is not None else name


def _label(name: str, measure: str) -> str:
    stat = STATISTICS.get(name)
    return stat.label(measure) if stat is not None else measure.replace("_", " ")


def console_lines(section: Mapping[str, Any]) -> list[str]:
    """One console line per group of every statistic (typed or as JSON): its measures with their intervals and n."""
    lines = []
    for name, table in read(section).items():
        for group, row in table.items():
            n = max((est.n for est in row.values()), default=0)
            measures = ", ".join(f"{_label(name, measure)} {_shown(name, est)}" for measure, est in row.items())
            shown_group = "" if _is_headline(name, group) else f" {group}"
            lines.append(f"{_title(name)}{shown_group} (n={n}): {measures}")
    return lines


def views(section: Mapping[str, Any]) -> list[View]:
    """One HTML table per statistic (typed or as JSON): a row per group, a column per measure (value [CI])."""
    out = []
    for name, table in read(section).items():
        measures = list(dict.fromkeys(m for row in table.values() for m in row))
        rows = tuple((group, str(max((e.n for e in row.values()), default=0)),
                      *(_shown(name, row[m]) if m in row else "" for m in measures)) for group, row in table.items())
        out.append(View(_title(name), columns=("group", "n", *(_label(name, m) for m in measures)), rows=rows,
                        notes=("value [confidence interval]; the interval is empty where there was no spread",)))
    return out


def families() -> frozenset[str]:
    """The metric families of the registered statistics (the sweep table shows their metrics)."""
    return frozenset(key_part(name) for name in STATISTICS)
