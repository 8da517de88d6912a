"""The cost-quality frontier of a sweep: the configs that no other config beats on both cost and quality.

Cost is the list price of a config's judge calls per 1,000 items judged (``cost/usd_list / items/total *
1000``, :func:`runner.judging.estimate.list_cost`): what the config costs to run, not what this sweep paid, so a job
served from the cache is not free and a replayed judge is worth what its recorded model charges
(``judge.price_as``). Per 1,000 items, configs run on different numbers of items compare. Quality is a
sweep column, agreement with the labels by default.
A config is Pareto-optimal when no other config has lower-or-equal cost and higher-or-equal quality
with at least one of the two strictly better. Consequences worth knowing:

- Equal configs (same cost, same quality) do not dominate each other: all of them are on the frontier.
- Configs that cost nothing (local models litellm cannot price and no ``price_as`` names) compete on quality
  alone: the best of them is on the frontier with every config that ties it, and it dominates every
  paid config that is not better.
- A config without the quality metric, the cost or its item count is not compared: its ``pareto`` is
  ``None`` (not assessed), never ``False``.

Plots draw on a bare ``matplotlib.figure.Figure`` (no pyplot), so nothing sets a global backend and
no figure is kept in a process-wide registry; matplotlib is imported only when a plot is drawn.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runner.outputs import sweep

FRONTIER_CSV = "frontier.csv"
FRONTIER_PNG = "frontier.png"
ITEMS = "items"
UNPRICED = "unpriced calls"
COST_PER_1K = "cost/1k items"
PARETO = "pareto"
LABEL = "config"
# Costs are sums of float prices and qualities ratios: two configs equal on paper may differ in the last
# bits, and such noise must not make one "dominate" the other.
_COST_DIGITS, _QUALITY_DIGITS = 9, 12
# Columns read from each job's metrics.json that the sweep table does not carry.
JOB_METRICS = {"items/total": ITEMS, "cost/list_unpriced_calls": UNPRICED}
LIST_COST = "list $"  # the sweep table's column of cost/usd_list


def with_job_counts(sweep_dir: Path, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of ``rows`` with the items judged and the unpriced calls of each job (from its metrics.json)."""
    out = []
    for row in rows:
        path = sweep_dir / str(row["job"]) / "metrics.json"
        metrics = json.loads(path.read_text()) if path.is_file() else {}
        out.append({**row, **{name: metrics.get(key) for key, name in JOB_METRICS.items()}})
    return out


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _cost_per_1k(row: dict[str, Any], cost_key: str, items_key: str) -> float | None:
    cost, items = _number(row.get(cost_key)), _number(row.get(items_key))
    if cost is None or items is None or items <= 0:
        return None
    return cost / items * 1000


def frontier(rows: Sequence[dict[str, Any]], cost_key: str = LIST_COST, quality_key: str = "agreement",
             items_key: str = ITEMS) -> list[dict[str, Any]]:
    """Mark the Pareto-optimal configs on (cost per 1k items, quality).

    Args:
        rows: Sweep rows (:func:`runner.outputs.sweep.collect`), with ``items_key`` added
            (:func:`with_job_counts`).
        cost_key: The column with the list price of the job's judge calls in dollars.
        quality_key: The column to maximize.
        items_key: The column with the number of items the job judged.

    Returns:
        Copies of the rows, in the same order, with ``cost/1k items`` (``None`` when unknown), ``pareto``
        (``True``/``False``, ``None`` when the row is not compared) and ``config`` (the overrides that
        vary across the rows, as a label).
    """
    labels = config_labels(rows)
    out = []
    for row, label in zip(rows, labels, strict=True):
        cost = _cost_per_1k(row, cost_key, items_key)
        out.append({**row, LABEL: label, COST_PER_1K: cost, PARETO: None})
    points = {i: (round(r[COST_PER_1K], _COST_DIGITS), round(q, _QUALITY_DIGITS)) for i, r in enumerate(out)
              if r.get("status", "ok") == "ok" and r[COST_PER_1K] is not None
              and (q := _number(r.get(quality_key))) is not None}
    for i, (cost, quality) in points.items():
        out[i][PARETO] = not any(c <= cost and q >= quality and (c, q) != (cost, quality)
                                 for j, (c, q) in points.items() if j != i)
    return out


def config_labels(rows: Sequence[dict[str, Any]]) -> list[str]:
    """A label per row from the overrides that differ between rows (``judge=a, prompt=b``), else ``job N``."""
    reserved = {*sweep.HEADLINE.values(), *JOB_METRICS.values(), "job", "status", LABEL, COST_PER_1K, PARETO}
    keys = [k for k in dict.fromkeys(k for row in rows for k in row) if k not in reserved and not sweep.is_statistic(k)]
    varying = [k for k in keys if len({str(row.get(k)) for row in rows}) > 1]
    return [", ".join(f"{k}={row.get(k)}" for k in varying) or f"job {row.get('job')}" for row in rows]


def write_csv(path: Path, rows: Sequence[dict[str, Any]], quality_key: str = "agreement") -> Path:
    """Write the frontier table: one line per config, frontier first, cheapest first within each group."""
    ci_keys = [k for k in sweep.CI_COLUMNS.get(quality_key, ()) if k]
    columns = ["job", LABEL, quality_key, *ci_keys, COST_PER_1K, LIST_COST, "cost $", ITEMS, UNPRICED, PARETO]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(ordered(rows))
    return path


def ordered(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows sorted for reading: frontier first, then the rest, then the not compared; by cost within."""
    rank = {True: 0, False: 1, None: 2}
    return sorted(rows, key=lambda r: (rank[r.get(PARETO)], r.get(COST_PER_1K) or 0.0, r.get("job", 0)))


def figure(width: float, height: float) -> Any:
    """A matplotlib figure detached from pyplot (no backend switch, no global figure registry)."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def png_bytes(fig: Any) -> bytes:
    """The figure as PNG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def literal(text: Any) -> str:
    """Text shown as typed: matplotlib reads ``$...$`` as math and fails on an unbalanced ``$``."""
    return str(text).replace("$", r"\$")


def _ci_error(row: dict[str, Any], value: float, quality_key: str) -> tuple[float, float]:
    """Distances from ``value`` down and up to its CI bounds (0 where the sweep has no CI column)."""
    low_key, high_key = sweep.CI_COLUMNS.get(quality_key, ("", ""))
    low, high = _number(row.get(low_key)), _number(row.get(high_key))
    return (0.0 if low is None else max(value - low, 0.0)), (0.0 if high is None else max(high - value, 0.0))


def frontier_png(rows: Sequence[dict[str, Any]], quality_key: str = "agreement") -> bytes:
    """Scatter of the compared configs (quality with its CI against cost per 1k items), labelled by their
    varying overrides, the frontier highlighted and joined by a step line."""
    fig = figure(7.5, 4.8)
    ax = fig.subplots()
    compared = [r for r in rows if r.get(PARETO) is not None]
    for on_front, colour in ((False, "#9e9e9e"), (True, "#1565c0")):
        group = [r for r in compared if r[PARETO] is on_front]
        if not group:
            continue
        x, y = [r[COST_PER_1K] for r in group], [float(r[quality_key]) for r in group]
        err = list(zip(*(_ci_error(r, v, quality_key) for r, v in zip(group, y, strict=True)), strict=True))
        ax.errorbar(x, y, yerr=err, fmt="o", color=colour, capsize=3,
                    label="Pareto-optimal" if on_front else "dominated")
    front = sorted((r for r in compared if r[PARETO]), key=lambda r: (r[COST_PER_1K], float(r[quality_key])))
    if len(front) > 1:
        ax.plot([r[COST_PER_1K] for r in front], [float(r[quality_key]) for r in front], color="#1565c0",
                drawstyle="steps-post", linewidth=1)
    for r in compared:
        ax.annotate(literal(r[LABEL]), (r[COST_PER_1K], float(r[quality_key])), textcoords="offset points",
                    xytext=(5, 4), fontsize=7)
    ax.set_xlabel(literal("list price of the judge calls per 1,000 items ($)"))
    ax.set_ylabel(literal(quality_key))
    unpriced = any((_number(r.get(UNPRICED)) or 0) > 0 for r in compared)
    ax.set_title("cost-quality frontier" + (" (no config has both values)" if not compared else
                                            " (costs leave out calls that have no price)" if unpriced else ""))
    if compared:
        right = max(r[COST_PER_1K] for r in compared) * 1.15 or 1.0  # all free: still a cost axis from 0
        ax.set_xlim(-0.05 * right, right)
        ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    return png_bytes(fig)


def plot_frontier(rows: Sequence[dict[str, Any]], path: Path, quality_key: str = "agreement") -> Path:
    """Write :func:`frontier_png` to ``path``; returns it."""
    path.write_bytes(frontier_png(rows, quality_key))
    return path
