"""Paired significance tests of two judges on the same items: McNemar, Wilcoxon signed-rank, Holm's correction.

Pure functions over plain sequences that return plain, JSON-serializable dicts. As in :mod:`runner.stats.scores`,
a statistic or p-value that is undefined on the data (nothing to test) is ``None``, never NaN and never an
exception. Intervals (bootstrap) are :mod:`runner.stats.uncertainty`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from runner.stats.uncertainty import check_paired, finite_or_none

# scipy.stats (~0.9 s cold) and statsmodels.stats (+0.35 s) are imported inside the functions that use them: a run
# imports neither before its first judge call (tests/unit/test_startup.py).

# Below this many discordant pairs McNemar's chi-square approximation is poor, so the exact binomial test is
# used instead (the usual textbook rule of thumb).
MCNEMAR_EXACT_BELOW = 25


def mcnemar_test(a_correct: Sequence[bool], b_correct: Sequence[bool]) -> dict[str, Any]:
    """McNemar's test: do two judges' accuracies on the same items differ?

    Exact binomial test when there are fewer than ``MCNEMAR_EXACT_BELOW`` discordant pairs (``statistic``
    is then the smaller discordant count), else the chi-square test with continuity correction.

    Args:
        a_correct: Per item, whether judge A was right.
        b_correct: Per item, whether judge B was right, in the same item order.

    Returns:
        ``n``, ``b01`` (A wrong, B right), ``b10`` (A right, B wrong), ``exact``, ``statistic`` and
        ``p_value``; the last two are ``None`` when there is no discordant pair (nothing to test).

    Raises:
        ValueError: If the sequences differ in length.
    """
    check_paired(a_correct, b_correct)
    pairs = [(bool(x), bool(y)) for x, y in zip(a_correct, b_correct, strict=True)]
    b01 = sum(1 for x, y in pairs if not x and y)
    b10 = sum(1 for x, y in pairs if x and not y)
    exact = b01 + b10 < MCNEMAR_EXACT_BELOW
    statistic = p_value = None
    if b01 + b10:
        from statsmodels.stats.contingency_tables import mcnemar

        both = sum(1 for x, y in pairs if x and y)
        table = [[both, b10], [b01, len(pairs) - both - b01 - b10]]
        bunch = mcnemar(table, exact=exact, correction=True)
        statistic, p_value = finite_or_none(bunch.statistic), finite_or_none(bunch.pvalue)
    return {"n": len(pairs), "b01": b01, "b10": b10, "exact": exact, "statistic": statistic, "p_value": p_value}


def wilcoxon_test(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Wilcoxon signed-rank test of the paired differences ``b - a`` (zero differences dropped).

    Args:
        a: Per-item values of the baseline.
        b: Per-item values of the contender, in the same item order.

    Returns:
        ``n``, ``n_nonzero``, ``zero_method`` (``"wilcox"``), ``statistic`` and ``p_value``; the last two
        are ``None`` when every difference is zero.

    Raises:
        ValueError: If the sequences differ in length.
    """
    from scipy import stats as scipy_stats

    check_paired(a, b)
    differences = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    nonzero = int(np.count_nonzero(differences))
    statistic = p_value = None
    if nonzero:
        test = scipy_stats.wilcoxon(differences, zero_method="wilcox")
        statistic, p_value = finite_or_none(test.statistic), finite_or_none(test.pvalue)
    return {
        "n": int(differences.size),
        "n_nonzero": nonzero,
        "zero_method": "wilcox",
        "statistic": statistic,
        "p_value": p_value,
    }


def holm(p_values: Mapping[str, float | None]) -> dict[str, float | None]:
    """Holm-Bonferroni adjusted p-values (statsmodels ``multipletests(method="holm")``).

    Args:
        p_values: Test name -> raw p-value; ``None`` (an undefined test) stays ``None`` and is not counted
            among the tests being corrected for.

    Returns:
        Test name -> adjusted p-value, in the input order.
    """
    defined = {name: p for name, p in p_values.items() if p is not None}
    adjusted: dict[str, float] = {}
    if defined:
        from statsmodels.stats.multitest import multipletests

        corrected = multipletests(list(defined.values()), method="holm")[1]
        adjusted = dict(zip(defined, (float(p) for p in corrected), strict=True))
    return {name: adjusted.get(name) for name in p_values}
