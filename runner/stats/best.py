"""Multiple comparisons with the best: which configurations of a sweep are not distinguishable from the best one.

The configurations are judged on the same items, so each comparison is paired: per item, the outcome of a
configuration minus the outcome of the best. Each configuration is tested against the best with the paired
sign-flip (randomization) test of a zero mean difference, two-sided, and the k - 1 p-values are Holm-adjusted
(statsmodels). A configuration whose adjusted p-value is at least ``alpha`` is *tied with the best*.

The test is :func:`runner.stats.paired.paired_test`, the one ``judgesweep compare`` uses: the sign-flip test
computed exactly on the differences' lattice (McNemar's exact test on 0/1 outcomes), so no p-value is floored by a
resample count, else the paired t-test; the test used is recorded with each p-value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from runner.stats import paired

EXACT, T_TEST = "sign_flip_exact", "paired_t"  # paired.paired_test's names
METHOD = "holm_paired_sign_flip_vs_best"


@dataclass(frozen=True)
class Comparison:
    """One configuration against the best."""

    name: str
    mean: float
    difference: float  # its mean minus the best's (0 for the best)
    p_value: float | None  # two-sided, unadjusted; None for the best itself
    p_holm: float | None
    test: str | None  # EXACT | T_TEST; None for the best
    tied_with_best: bool


def sign_flip_test(differences: Sequence[float]) -> tuple[float, str]:
    """Two-sided p-value of the paired test that the mean of ``differences`` is 0, and the test used
    (:data:`EXACT` on a lattice, else :data:`T_TEST`); 1.0 when every difference is 0."""
    result = paired.paired_test(np.asarray(differences, dtype=float))
    p = result["p_value"]
    return (1.0 if p is None else float(p)), str(result["test"])


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
    from statsmodels.stats.multitest import multipletests  # ~0.35 s: not at import (html_report imports this module)

    tests = [sign_flip_test(values[name] - values[best]) for name in others]
    adjusted = multipletests([p for p, _ in tests], alpha=alpha, method="holm")[1] if others else []
    out = [Comparison(best, means[best], 0.0, None, None, None, True)]
    for name, (p, test), p_holm in zip(others, tests, adjusted, strict=True):
        out.append(Comparison(name, means[name], means[name] - means[best], p, float(p_holm), test,
                              bool(p_holm >= alpha)))
    return out
