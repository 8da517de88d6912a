"""Two judges (or configurations) on the same items, the item as the unit: is B's per-item value different from
A's, and by how much.

The test (no p-value depends on a number of random draws):

- An item's value is a share of a few judgments (orders x repeats) or a mean of integer scores, so the
  differences ``b - a`` lie on a lattice: multiples of ``1/q`` for a small ``q``. On a lattice the paired
  sign-flip permutation distribution of the sum of differences (Good 2005, Permutation Tests, ch. 3) is computed
  exactly, by convolving one binomial per distinct absolute difference (``sign_flip_exact``). When every
  outcome is 0 or 1 this is McNemar's exact test (the binomial test of b01 among the discordant items).
- Off a small lattice (or when the exact distribution would be too large to convolve): the paired t-test
  (``paired_t``), asymptotic.
- Many pairs at once (the sweep's all-pairs comparisons, runner.stats.best, and its simulations):
  :func:`sign_flip_exact_p_rows` convolves one null distribution per distinct multiset of absolute differences, each
  on its coarsest lattice (the p-value does not depend on the lattice's scale), for the same p-values.

The interval of the difference is an estimator with nominal coverage, not an inversion of the test:

- 0/1 outcomes: Agresti & Min (2005): the Wald interval of the difference of matched proportions after adding
  1/2 to each cell of the 2x2 table (the exact conditional interval scaled by the discordant share undercovers).
- Otherwise: the paired t interval of the mean difference.

As elsewhere in runner.stats, an undefined value is None, never NaN and never an exception.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from runner.stats.uncertainty import check_paired, finite_or_none

MAX_DENOMINATOR = 720  # the lattice 1/q searched for: q = 1..720 (720 = 6!, a multiple of every count up to 6)
MAX_CONVOLUTION = 2_000_000_000  # multiply-adds of the exact distribution (~1-2 s); beyond: the paired t-test
LATTICE_TOLERANCE = 1e-9
SMALL_LATTICE = 8  # up to this many distinct absolute differences, rows are counted value by value


def paired_items(a: Sequence[float], b: Sequence[float], level: float = 0.95,
                 simultaneous_level: float | None = None) -> dict[str, Any]:
    """Compare per-item values ``a`` and ``b`` (the same items, in the same order); the difference is ``b - a``.

    Args:
        a: The baseline's per-item values.
        b: The contender's, in the same item order.
        level: Confidence level of the (unadjusted) interval ``low``, ``high``.
        simultaneous_level: Also the same interval at this level (``simultaneous_low``, ``simultaneous_high``):
            a comparison of m pairs passes 1 - (1 - level) / m (Bonferroni).

    Returns:
        ``n``, ``mean_a``, ``mean_b``, ``mean_difference``, ``low``, ``high``, ``level``, ``method`` (the
        interval's: ``agresti_min`` or ``paired_t``), ``test`` (``mcnemar_exact``, ``sign_flip_exact`` or
        ``paired_t``), ``statistic``, ``p_value`` and ``details`` (discordant counts, or the lattice ``1/q`` and
        the non-zero differences, and the standard deviation of the differences). p-value (and, for non-0/1
        outcomes, the bounds) are None when every difference is 0.
    """
    check_paired(a, b)
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = xb - xa
    n = int(d.size)
    out: dict[str, Any] = {"n": n, "mean_a": finite_or_none(xa.mean()) if n else None,
                           "mean_b": finite_or_none(xb.mean()) if n else None,
                           "mean_difference": finite_or_none(d.mean()) if n else None, "level": level}
    binary = bool(np.isin(xa, (0.0, 1.0)).all() and np.isin(xb, (0.0, 1.0)).all())
    details: dict[str, Any] = {"n_nonzero": int(np.count_nonzero(d)), "sd": finite_or_none(d.std(ddof=1)) if n > 1
                               else None}
    if binary:
        details.update(b01=int(np.sum(d > 0)), b10=int(np.sum(d < 0)))
    test = paired_test(d, binary)
    details["lattice"] = test.pop("lattice")
    out.update(details=details, **test)
    low, high = difference_interval(xa, xb, level, binary)
    out.update(low=low, high=high, method="agresti_min" if binary else "paired_t")
    if simultaneous_level is not None:
        out["simultaneous_low"], out["simultaneous_high"] = difference_interval(xa, xb, simultaneous_level, binary)
    return out


def paired_test(d: np.ndarray, binary: bool = False) -> dict[str, Any]:
    """The test of a zero mean difference: exact sign-flip on a lattice (McNemar's exact test for 0/1), else t.

    Returns:
        ``test``, ``statistic`` (the mean difference, or t), ``p_value`` (None when every difference is 0) and
        ``lattice`` (``"1/q"``, the differences' spacing the exact test used; None for the t-test).
    """
    name = "mcnemar_exact" if binary else "sign_flip_exact"
    if not np.any(d):
        return {"test": name, "statistic": None, "p_value": None, "lattice": None}
    found = lattice(d)
    if found is not None:
        p = sign_flip_exact_p(found[1])
        if p is not None:
            return {"test": name, "statistic": finite_or_none(d.mean()), "p_value": p, "lattice": f"1/{found[0]}"}
    from scipy import stats as scipy_stats

    t = scipy_stats.ttest_1samp(d, 0.0)
    return {"test": "paired_t", "statistic": finite_or_none(t.statistic), "p_value": finite_or_none(t.pvalue),
            "lattice": None}


def sign_flip_exact_p(x: Sequence[int] | np.ndarray) -> float | None:
    """Exact two-sided p-value of the paired sign-flip test of integer differences ``x``.

    Under the null each difference's sign is + or - with probability 1/2, independently: P(|sum s_i x_i| >=
    |sum x_i|) over all 2^n sign vectors. The distribution of T, the sum of the absolute differences whose sign
    is +, is the convolution of one binomial per distinct absolute value ``v`` (``v`` x Binomial(count, 1/2)).

    Returns:
        The p-value, or None when the convolution would exceed ``MAX_CONVOLUTION`` multiply-adds.
    """
    ints = np.abs(np.asarray(x, dtype=np.int64))
    observed = abs(int(np.sum(np.asarray(x, dtype=np.int64))))
    if observed == 0:
        return 1.0
    values, counts = np.unique(ints[ints != 0], return_counts=True)
    unit = int(np.gcd.reduce(values))  # the same p-value on the coarsest lattice, for less work
    if not _convolvable(values // unit, counts):
        return None
    cdf = _null_cdf(values // unit, counts, _binomial_pmfs(counts))
    return float(_two_sided(cdf, np.array([observed // unit]))[0])


def sign_flip_exact_p_rows(x: np.ndarray) -> np.ndarray:
    """:func:`sign_flip_exact_p` of each row of a 2-D integer array, NaN where it would be None.

    The null distribution depends on the row's counts of each absolute difference only, so it is convolved once per
    distinct count vector (the rows of a simulation share a few hundred): many rows cost little more than one.
    """
    rows = np.asarray(x)
    observed = np.abs(rows.sum(axis=1, dtype=np.int64))
    counts = _abs_counts(np.abs(rows))
    p = np.full(rows.shape[0], np.nan)
    distinct, which = _distinct_rows(counts)
    order = np.argsort(which, kind="stable")
    bounds = np.searchsorted(which[order], np.arange(distinct.shape[0] + 1))
    values = np.arange(1, counts.shape[1] + 1)
    units = [int(np.gcd.reduce(values[row > 0])) or 1 for row in distinct]  # as in sign_flip_exact_p
    kept = [group for group, row in enumerate(distinct) if _convolvable(values[row > 0] // units[group], row[row > 0])]
    pmfs = _binomial_pmfs(distinct[kept].ravel())
    for group in kept:
        members, row, unit = order[bounds[group]:bounds[group + 1]], distinct[group], units[group]
        p[members] = _two_sided(_null_cdf(values[row > 0] // unit, row[row > 0], pmfs), observed[members] // unit)
    return p


def _distinct_rows(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a non-negative integer array and, per row, the index of its distinct row (np.unique
    along axis 0, through one integer key per row where the counts fit in one: a sort of numbers, not of rows)."""
    base = int(counts.max(initial=0)) + 1
    if base ** counts.shape[1] >= 2 ** 62:
        distinct, which = np.unique(counts, axis=0, return_inverse=True)
        return distinct, which.ravel()
    keys, which = np.unique(counts @ (base ** np.arange(counts.shape[1], dtype=np.int64)), return_inverse=True)
    return (keys[:, None] // base ** np.arange(counts.shape[1], dtype=np.int64)) % base, which.ravel()


def _abs_counts(ints: np.ndarray, chunk_cells: int = 1 << 22) -> np.ndarray:
    """Per row of non-negative integers, how many of its entries equal 1, 2, ..., max (rows x max)."""
    top = int(ints.max(initial=0))
    counts = np.zeros((ints.shape[0], top), dtype=np.int64)
    if top == 0:
        return counts
    if top <= SMALL_LATTICE:  # a pass per value costs less than a bincount of one index per entry
        for value in range(1, top + 1):
            counts[:, value - 1] = np.count_nonzero(ints == value, axis=1)
        return counts
    step = max(1, chunk_cells // max(1, ints.shape[1]))
    for start in range(0, ints.shape[0], step):
        block = ints[start:start + step]
        index = np.arange(block.shape[0])[:, None] * (top + 1) + block.astype(np.int64)
        counts[start:start + step] = np.bincount(index.ravel(), minlength=block.shape[0] * (top + 1)).reshape(
            block.shape[0], top + 1)[:, 1:]
    return counts


def _binomial_pmfs(counts: np.ndarray) -> dict[int, np.ndarray]:
    """Count c -> the probabilities of Binomial(c, 1/2), for each distinct positive c (one scipy call for all)."""
    from scipy import stats as scipy_stats

    distinct = np.unique(counts[counts > 0]).astype(np.int64)
    if not distinct.size:
        return {}
    successes = np.concatenate([np.arange(c + 1) for c in distinct])
    pmf = scipy_stats.binom.pmf(successes, np.repeat(distinct, distinct + 1), 0.5)
    return dict(zip(distinct.tolist(), np.split(pmf, np.cumsum(distinct + 1)[:-1]), strict=True))


def _convolvable(values: np.ndarray, counts: np.ndarray) -> bool:
    """Whether :func:`_null_cdf` of these takes at most ``MAX_CONVOLUTION`` multiply-adds."""
    size, cost = 1, 0
    for v, c in zip(values, counts, strict=True):
        cost += size * (int(v) * int(c) + 1)
        size += int(v) * int(c)
    return cost <= MAX_CONVOLUTION


def _null_cdf(values: np.ndarray, counts: np.ndarray, pmfs: Mapping[int, np.ndarray]) -> np.ndarray:
    """The cumulative null distribution of T (the sum of the absolute differences whose sign is +) for ``counts[i]``
    differences of absolute value ``values[i]`` (``pmfs``: :func:`_binomial_pmfs` of the counts)."""
    dist = np.ones(1)
    for v, c in zip(values, counts, strict=True):
        part = np.zeros(int(v) * int(c) + 1)
        part[::int(v)] = pmfs[int(c)]
        dist = np.convolve(dist, part)
    return np.cumsum(dist)


def _two_sided(cdf: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Two-sided p-values of observed ``|sum|`` values under the null whose T has cumulative distribution ``cdf``.

    S = 2T - total, symmetric: |S| >= observed <=> T <= (total - observed) / 2 or T >= (total + observed) / 2.
    """
    total = cdf.size - 1
    return np.minimum(1.0, 2 * cdf[(total - observed) // 2])


def difference_interval(a: np.ndarray, b: np.ndarray, level: float, binary: bool
                        ) -> tuple[float | None, float | None]:
    """The interval of the mean difference ``b - a``: Agresti-Min for 0/1 outcomes, else paired t."""
    from scipy import stats as scipy_stats

    n = int(a.size)
    if binary:
        return agresti_min(int(np.sum((a == 0) & (b == 1))), int(np.sum((a == 1) & (b == 0))), n, level)
    d = b - a
    if n < 2 or not np.any(d):
        return None, None
    half = float(scipy_stats.t.ppf(0.5 + level / 2, n - 1)) * float(d.std(ddof=1)) / math.sqrt(n)
    mean = float(d.mean())
    return mean - half, mean + half


def agresti_min(b01: int, b10: int, n: int, level: float = 0.95) -> tuple[float | None, float | None]:
    """Agresti & Min (2005) interval of ``(b01 - b10) / n``, the difference of two matched proportions.

    The Wald interval after adding 1/2 to each of the four cells (n + 2 pairs), clipped to [-1, 1].

    Args:
        b01: Items only B gets right.
        b10: Items only A gets right.
        n: All paired items.
        level: Confidence level.
    """
    from scipy import stats as scipy_stats

    if n <= 0:
        return None, None
    m = n + 2
    p01, p10 = (b01 + 0.5) / m, (b10 + 0.5) / m
    centre = p01 - p10
    half = float(scipy_stats.norm.ppf(0.5 + level / 2)) * math.sqrt((p01 + p10 - centre ** 2) / m)
    return max(-1.0, centre - half), min(1.0, centre + half)


def lattice(d: np.ndarray) -> tuple[int, np.ndarray] | None:
    """The smallest ``q <= MAX_DENOMINATOR`` with every ``d * q`` an integer, and those integers; None if none."""
    for q in range(1, MAX_DENOMINATOR + 1):
        scaled = d * q
        rounded = np.rint(scaled)
        if np.all(np.abs(scaled - rounded) <= LATTICE_TOLERANCE * np.maximum(1.0, np.abs(scaled))):
            return q, rounded.astype(np.int64)
    return None
