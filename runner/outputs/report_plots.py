"""The run report's plots, as PNG bytes: verdict shares with Wilson intervals, a confusion matrix, a score
histogram, labelled bars. Labels go through :func:`runner.outputs.frontier.literal` so matplotlib does not read a
``$`` as math."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runner.modes.base import cell
from runner.outputs.frontier import figure, literal, png_bytes
from runner.stats.proportions import interval


def wilson(count: int, n: int) -> tuple[float, float]:
    """The 95% Wilson score interval of ``count / n`` (statsmodels' ``proportion_confint`` figures, without its
    pandas import); it stays inside [0, 1] for shares near 0 or 1. ``(0, 0)`` for no items."""
    if n <= 0:
        return 0.0, 0.0
    return interval(count, n, 0.05, "wilson")


def verdict_png(distribution: Mapping[str, int], n: int, win_rate: Mapping[str, Any] | None = None) -> bytes:
    """Bars of each verdict's share of ``n`` items with 95% Wilson intervals; the win rate's CI in the title."""
    fig = figure(6.0, 3.4)
    ax = fig.subplots()
    names = list(distribution)
    shares = [distribution[k] / n if n else 0.0 for k in names]
    bounds = [wilson(distribution[k], n) for k in names]
    # max(0, ...): at a share of 0 or 1 the Wilson bound lands an ulp past it, and matplotlib refuses < 0
    err = [[max(s - lo, 0.0) for s, (lo, _) in zip(shares, bounds, strict=True)],
           [max(hi - s, 0.0) for s, (_, hi) in zip(shares, bounds, strict=True)]]
    ax.bar([literal(k) for k in names], shares, yerr=err, capsize=4, color="#42a5f5")
    ax.set_ylim(0, 1)
    ax.set_ylabel(f"share of {n} items")
    title = "final verdicts (95% Wilson CI)"
    ci = (win_rate or {}).get("ci") or {}
    if win_rate and win_rate.get("rate") is not None and ci.get("low") is not None:
        title += f"\nties-half rate (a tie half a win): {win_rate['rate']:.3f} [{ci['low']:.3f}, {ci['high']:.3f}]"
    ax.set_title(title, fontsize=10)
    return png_bytes(fig)


def confusion_png(labels: Sequence[str], matrix: Sequence[Sequence[int]]) -> bytes:
    """Heatmap of a confusion matrix (rows = gold label, columns = the judge's), counts written in."""
    size = 1.2 + 0.9 * len(labels)
    fig = figure(size + 1.2, size)
    ax = fig.subplots()
    image = ax.imshow(matrix, cmap="Blues")
    peak = max((v for row in matrix for v in row), default=0)
    for i, row in enumerate(matrix):
        for j, value in enumerate(row):
            ax.text(j, i, str(value), ha="center", va="center", color="white" if value > peak / 2 else "black")
    ticks = [literal(label) for label in labels]
    ax.set_xticks(range(len(labels)), ticks, rotation=30, ha="right")
    ax.set_yticks(range(len(labels)), ticks)
    ax.set_xlabel("judge")
    ax.set_ylabel("gold")
    fig.colorbar(image, ax=ax, shrink=0.8)
    return png_bytes(fig)


def histogram_png(scores: Sequence[float], scale: Sequence[float] | None = None) -> bytes:
    """Histogram of overall scores over the rubric's scale, with the mean marked."""
    fig = figure(6.0, 3.4)
    ax = fig.subplots()
    limits = (float(scale[0]), float(scale[1])) if scale else (min(scores, default=0.0), max(scores, default=1.0))
    ax.hist(scores, bins=20, range=limits if limits[1] > limits[0] else None, color="#66bb6a", edgecolor="white")
    if scores:
        mean = sum(scores) / len(scores)
        ax.axvline(mean, color="#2e7d32", linestyle="--", label=f"mean {mean:.2f}")
        ax.legend(fontsize=8)
    ax.set_xlabel("overall score")
    ax.set_ylabel("items")
    return png_bytes(fig)


def bars_png(values: Mapping[str, float | None], xlabel: str, limits: Sequence[float] | None = None) -> bytes:
    """Horizontal bars, one per name, values written beside them (a missing value: an empty bar, "n/a")."""
    names = list(values)
    fig = figure(6.0, 1.0 + 0.32 * len(names))
    ax = fig.subplots()
    bars = ax.barh([literal(n) for n in names], [values[n] or 0.0 for n in names], color="#ab47bc")
    ax.bar_label(bars, labels=[cell(values[n]) if values[n] is not None else "n/a" for n in names], padding=3,
                 fontsize=8)
    ax.invert_yaxis()
    if limits:
        ax.set_xlim(float(limits[0]), float(limits[1]))
    ax.set_xlabel(xlabel)
    return png_bytes(fig)
