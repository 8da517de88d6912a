"""Multiple comparisons with the best: which configurations of a sweep are not distinguishable from the best one.

The configurations are judged on the same items, so each comparison is paired: per item, the outcome of a
configuration minus the outcome of the best. Each configuration is tested against the best with the paired
sign-flip (randomization) test of a zero mean difference, two-sided, and the k - 1 p-values are Holm-adjusted
(statsmodels). A configuration whose adjusted p-value is at least ``alpha`` is *tied with the best*.

The sign-flip test is computed exactly, without resampling, when the differences lie on a lattice (multiples of
``1 / q``): per-item outcomes are shares of a few judgments (0/1 for one judgment, 0, 1/2, 1 for two orders) or means
of integer scores over a few repeats. Its null distribution is then the convolution of the items' ``±|d|``, so no
p-value is floored by a resample count. With 0/1 outcomes it is McNemar's exact test (the binomial test of the
discordant items). Differences on no small lattice get the normal approximation of the same statistic
(``sum d / sqrt(sum d^2)``), and the test used is recorded with each p-value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests

EXACT, NORMAL = "exact_sign_flip", "normal_sign_flip"
METHOD = "holm_paired_sign_flip_vs_best"
MAX_DENOMINATOR = 120  # lattices 1/q for q up to this: shares of up to 120 judgments, means of up to 120 repeats
MAX_WORK = 50_000_000  # items x lattice units above which the exact convolution gives way to the normal one
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Comparison:
    """One configuration against the best."""

    name: str
    mean: float
    difference: float  # its mean minus the best's (0 for the best)
    p_value: float | None  # two-sided, unadjusted; None for the best itself
    p_holm: float | None
    test: str | None  # EXACT | NORMAL; None for the best
    tied_with_best: bool


def _lattice(magnitudes: np.ndarray) -> np.ndarray | None:
    """The magnitudes as integers in units of ``1/q`` for the smallest q that makes them all whole, else None."""
    for q in range(1, MAX_DENOMINATOR + 1):
        units = magnitudes * q
        whole = np.rint(units)
        if np.all(np.abs(units - whole) < _TOLERANCE * max(1.0, q)):
            return whole.astype(np.int64)
    return None


def sign_flip_test(differences: Sequence[float]) -> tuple[float, str]:
    """Two-sided p-value of the paired sign-flip test that the mean of ``differences`` is 0.

    Returns:
        The p-value and the test used (:data:`EXACT` on a lattice, else :data:`NORMAL`).
    """
    d = np.asarray(differences, dtype=float)
    d = d[d != 0]
    if d.size == 0:
        return 1.0, EXACT
    units = _lattice(np.abs(d))
    if units is None or units.size * int(units.sum()) > MAX_WORK:
        z = float(d.sum() / np.sqrt(np.square(d).sum()))
        return float(min(1.0, 2 * stats.norm.sf(abs(z)))), NORMAL
    total = int(units.sum())
    # distribution of T = the units of the items whose difference keeps a positive sign; S = 2T - total
    dist = np.zeros(total + 1)
    dist[0] = 1.0
    for u in units:
        shifted = np.zeros_like(dist)
        shifted[u:] = dist[:-u]
        dist = (dist + shifted) / 2
    observed = abs(2 * int(units[d > 0].sum()) - total)
    extreme = np.abs(2 * np.arange(total + 1) - total) >= observed
    return float(min(1.0, dist[extreme].sum())), EXACT


def best_set(outcomes: Mapping[str, Sequence[float]], alpha: float = 0.05,
             costs: Mapping[str, float] | None = None) -> list[Comparison]:
    """Compare every configuration with the best on paired per-item outcomes (higher is better).

    Args:
        outcomes: Configuration -> its outcome per item, the items in the same order for every configuration.
        alpha: Family-wise error rate of the Holm-adjusted tests.
        costs: Configuration -> cost; among configurations with the same mean the cheapest is the best (then the
            first given).

    Returns:
        The best first, then the others from the highest mean down.

    Raises:
        ValueError: No configuration, or configurations with different numbers of items.
    """
    if not outcomes or len({len(v) for v in outcomes.values()}) != 1:
        raise ValueError("best_set needs one or more configurations with outcomes on the same items")
    values = {name: np.asarray(v, dtype=float) for name, v in outcomes.items()}
    means = {name: float(v.mean()) if v.size else float("nan") for name, v in values.items()}
    order = list(values)
    cost = costs or {}
    ranked = sorted(order, key=lambda n: (-means[n], cost.get(n, 0.0), order.index(n)))
    best, others = ranked[0], ranked[1:]
    tests = [sign_flip_test(values[name] - values[best]) for name in others]
    adjusted = multipletests([p for p, _ in tests], alpha=alpha, method="holm")[1] if others else []
    out = [Comparison(best, means[best], 0.0, None, None, None, True)]
    for name, (p, test), p_holm in zip(others, tests, adjusted, strict=True):
        out.append(Comparison(name, means[name], means[name] - means[best], p, float(p_holm), test,
                              bool(p_holm >= alpha)))
    return out
