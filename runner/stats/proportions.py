"""Intervals of proportions (accuracy, agreement, pass rates) from statsmodels: Wilson's score interval or the
exact Clopper-Pearson interval, never empty and never reaching 100% (or 0%) unless every row is a success
(failure).

Rows in clusters (an item's judgments over orders and repeats) are not independent: the interval is then computed
on the effective sample size, the row count divided by Kish's design effect (:func:`runner.stats.clusters.
design_effect`; Korn & Graubard 1998 for Clopper-Pearson, the same substitution for Wilson). When the design
effect is undefined (every row a success, or every row a failure), the number of clusters is the effective size:
with no variance to estimate the correlation from, every item is counted once.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from runner.stats.clusters import cluster_codes, design_effect
from runner.stats.uncertainty import finite_or_none

# statsmodels.stats (+0.35 s cold) is imported inside the function: a run imports it only once it summarizes.

METHODS = {"wilson": "wilson", "clopper_pearson": "beta"}  # ours -> statsmodels' proportion_confint method


def proportion_ci(successes: Sequence[float], clusters: Sequence[Hashable] | None = None, level: float = 0.95,
                  method: str = "wilson") -> dict[str, Any]:
    """The proportion of successes with its interval.

    Args:
        successes: One 0/1 (or bool) per row.
        clusters: Each row's cluster (item id) when an item has several rows; None: every row its own item.
        level: Confidence level in (0, 1).
        method: ``"wilson"`` or ``"clopper_pearson"``.

    Returns:
        ``n`` (rows), ``clusters``, ``unit`` (``"item"``), ``estimate``, ``low``, ``high``, ``level``,
        ``method``, ``design_effect`` (left out without clusters or where undefined) and ``effective_n``; the bounds
        are None only when there is no row.

    Raises:
        ValueError: An unknown method or a level outside (0, 1).
    """
    if method not in METHODS:
        raise ValueError(f"unknown interval method {method!r}; known: {sorted(METHODS)}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    y = [float(s) for s in successes]
    n = len(y)
    k = n if clusters is None else cluster_codes(clusters)[1]
    deff = design_effect(y, clusters) if clusters is not None and k < n else None  # one row per item: no clusters
    p = sum(y) / n if n else None
    effective = n / deff if deff is not None else float(k)  # k == n without clusters
    out: dict[str, Any] = {"n": n, "clusters": k, "unit": "item", "estimate": p, "low": None, "high": None,
                           "level": level, "method": method,
                           **({"design_effect": deff} if deff is not None else {}), "effective_n": effective}
    if n and p is not None:
        from statsmodels.stats.proportion import proportion_confint

        low, high = proportion_confint(p * effective, effective, alpha=1 - level, method=METHODS[method])
        # exactly 0 / 1 at the edges (Wilson's formula leaves a rounding residue there)
        out.update(low=0.0 if p == 0.0 else finite_or_none(max(float(low), 0.0)),
                   high=1.0 if p == 1.0 else finite_or_none(min(float(high), 1.0)))
    return out
