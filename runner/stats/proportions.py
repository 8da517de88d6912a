"""Intervals of proportions (accuracy, agreement, pass rates): Wilson's score interval or the exact
Clopper-Pearson interval (statsmodels' ``proportion_confint`` figures, to the bit), never empty and never reaching
100% (or 0%) unless every row is a success (failure).

Rows in clusters (an item's judgments over orders and repeats) are not independent: the interval is then computed
on an effective sample size (Korn & Graubard 1998 for Clopper-Pearson, the same substitution for Wilson), the one
of rows perfectly correlated within their item (:func:`runner.stats.clusters.worst_case_effective_n`: the item
count when every item has as many rows). It depends on the cluster sizes only, so both bounds rise with the share
of successes and one more error can never raise either of them. An effective size estimated from the outcomes
(the row count over Kish's design effect) could not promise that: with one error in 50 items x 2 orders it
doubles the effective size from the 50 items of the all-correct case, and the lower bound rose with the error
(issue 31). That estimate is still reported (``design_effect``): its n / deff is how much the item-level size
undercounts when the orders are less than perfectly correlated.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

from runner.stats.clusters import cluster_codes, design_effect, worst_case_effective_n
from runner.stats.uncertainty import finite_or_none

# Not statsmodels: its proportion module imports pandas and pyarrow, ~65 MB at the run's peak (the end of the run,
# where scipy.stats and matplotlib are already loaded) for a two-line formula. scipy is imported inside interval():
# a run imports it only once it summarizes.

METHODS = ("wilson", "clopper_pearson")


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
        ``method``, ``design_effect`` (Kish's, estimated from the outcomes: for reference, left out without
        clusters or where undefined) and ``effective_n`` (the size the interval uses, see the module); the bounds
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
    effective = float(n) if clusters is None or k == n else worst_case_effective_n(clusters)
    out: dict[str, Any] = {"n": n, "clusters": k, "unit": "item", "estimate": p, "low": None, "high": None,
                           "level": level, "method": method,
                           **({"design_effect": deff} if deff is not None else {}), "effective_n": effective}
    if n and p is not None:
        low, high = interval(p * effective, effective, 1 - level, method)
        # exactly 0 / 1 at the edges (Wilson's formula leaves a rounding residue there)
        out.update(low=0.0 if p == 0.0 else finite_or_none(max(float(low), 0.0)),
                   high=1.0 if p == 1.0 else finite_or_none(min(float(high), 1.0)))
    return out


def interval(count: float, nobs: float, alpha: float = 0.05, method: str = "wilson") -> tuple[float, float]:
    """The two-sided interval of ``count / nobs``, equal to statsmodels' ``proportion_confint`` (``"wilson"``, or
    ``"clopper_pearson"``: its ``"beta"``) bit for bit, without its pandas import.

    Args:
        count: Successes (may be fractional: an effective count).
        nobs: Trials, > 0.
        alpha: 1 - the confidence level, split between the two tails (statsmodels' argument).
        method: ``"wilson"`` (clipped to [0, 1]) or ``"clopper_pearson"`` (exactly 0 / 1 at a share of 0 / 1).
    """
    tail = alpha / 2.0  # two-sided
    q = count / nobs
    if method == "wilson":
        from scipy.special import ndtri  # scipy.stats.norm.isf(a) is -ndtri(a)

        crit = -float(ndtri(tail))
        crit2 = crit**2
        denom = 1 + crit2 / nobs
        center = (q + crit2 / (2 * nobs)) / denom
        dist = crit * math.sqrt(q * (1.0 - q) / nobs + crit2 / (4.0 * nobs**2)) / denom
        return min(max(center - dist, 0.0), 1.0), min(max(center + dist, 0.0), 1.0)
    from scipy.stats import beta

    low = 0.0 if q == 0 else float(beta.ppf(tail, count, nobs - count + 1))
    high = 1.0 if q == 1 else float(beta.isf(tail, count + 1, nobs - count))
    return low, high


def sign_test_p(count: int, nobs: int) -> float:
    """The two-sided exact binomial test of ``count`` successes in ``nobs`` trials against 1/2: scipy's
    ``binomtest(count, nobs, 0.5).pvalue`` (equal to ~1e-11 relative) without importing scipy.stats.

    At 1/2 the distribution is symmetric, so the outcomes at most as likely as ``count`` are the two tails beyond
    ``min(count, nobs - count)``: p = 2 P(X <= min(count, nobs - count)), 1 at the centre. scipy.stats (~52 MB and
    ~0.5 CPU-s to import) is otherwise imported by a pairwise run without gold for this test alone (issue 28).
    """
    from scipy.special import bdtr  # the binomial CDF scipy.stats.binom is computed with

    if nobs <= 0:
        raise ValueError("the sign test needs at least one trial")
    if 2 * count == nobs:
        return 1.0
    return min(1.0, 2.0 * float(bdtr(min(count, nobs - count), nobs, 0.5)))
