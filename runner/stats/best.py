"""The sweep's answer: the best configuration and those not shown worse than some other, with a family-wise bound.

The configurations are judged on the same items, so each comparison is paired: per item, the outcome of one
configuration minus the outcome of another. Every pair is tested with the exact paired sign-flip test
(:func:`runner.stats.paired.paired_test`'s, McNemar's exact test on 0/1 outcomes; the paired t-test off a small
lattice), and the decision is made over configurations, not over the comparisons with an observed best:

- H_j, "configuration j is among the best" (its true mean is the maximum), is the intersection over the other
  configurations i of "i is not better than j". Its p-value is Bonferroni's over those k - 1 one-sided paired
  tests: ``min(1, (k - 1) * min_i p(i better than j))``; the one-sided p-value is half the two-sided one when i's
  mean is the higher, and is taken as 1 otherwise (it is at least 1/2 then).
- Holm's step-down over the k hypotheses H_j. A configuration whose adjusted p-value is below ``alpha`` is
  *worse than the best*; every other is *tied with the best*.

Error bound (Holm 1979, any dependence between the tests): P(some configuration whose true mean is the maximum is
called worse than the best) <= alpha, the selection of the best on the same items included, because no step uses
which configuration looked best. Testing k - 1 configurations against the observed best (this module's rule before
issue 45) does not: with all configurations equal, the observed best is the luckiest, and at k = 12 one of the
others was called worse in 13% of simulated sweeps at alpha = 0.05 (tests/unit/test_sweep_best_simulation.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from runner.stats import paired

EXACT, T_TEST = "sign_flip_exact", "paired_t"  # paired.paired_test's names
METHOD = "holm_over_configurations_bonferroni_paired_sign_flip"


@dataclass(frozen=True)
class Comparison:
    """One configuration of a sweep: how it compares with the best and with the configuration most likely better."""

    name: str
    mean: float
    difference: float  # its mean minus the best's (0 for the best)
    against: str | None  # the configuration whose paired test is the strongest evidence that it is worse; None when
    #                      no configuration has a higher mean (the best among them)
    p_value: float | None  # one-sided, unadjusted: that ``against`` is better; None when ``against`` is None
    p_holm: float | None  # the adjusted p-value of "it is among the best" (x (k - 1), then Holm over k)
    test: str | None  # EXACT | T_TEST; None when ``against`` is None
    tied_with_best: bool  # p_holm is None or >= alpha


def sign_flip_test(differences: Sequence[float]) -> tuple[float, str]:
    """Two-sided p-value of the paired test that the mean of ``differences`` is 0, and the test used
    (:data:`EXACT` on a lattice, else :data:`T_TEST`); 1.0 when every difference is 0."""
    result = paired.paired_test(np.asarray(differences, dtype=float))
    p = result["p_value"]
    return (1.0 if p is None else float(p)), str(result["test"])


def pairwise_p(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two-sided p-value of :func:`sign_flip_test` for every pair of configurations, for one sweep or many.

    When every outcome lies on one lattice (multiples of 1/q, q <= 720: shares of a few judgments, means of integer
    scores) the pairs' differences are too, and the exact test of all pairs is computed together (one null
    distribution per distinct multiset of absolute differences); the paired t-test where the exact distribution
    would be too large. Otherwise each pair goes through :func:`sign_flip_test`.

    Args:
        values: Outcomes, shape ``(..., k, n)``: k configurations on the same n items (any leading sweep axes).

    Returns:
        ``p`` and ``exact``, both of shape ``(..., k, k)``, symmetric: the two-sided p-value of each pair (1 on the
        diagonal, and where every difference is 0) and whether its test was the exact one.
    """
    x = np.asarray(values, dtype=float)
    *lead, k, n = x.shape
    first, second = np.triu_indices(k, 1)
    p = np.ones((*lead, k, k))
    exact = np.ones((*lead, k, k), dtype=bool)
    if not n or not first.size:
        return p, exact
    found = paired.lattice(x.ravel())
    if found is None:
        tests = [sign_flip_test(d) for d in (x[..., second, :] - x[..., first, :]).reshape(-1, n)]
        p_pairs = np.array([p for p, _ in tests]).reshape(*lead, -1)
        exact_pairs = np.array([t == EXACT for _, t in tests], dtype=bool).reshape(*lead, -1)
    else:
        p_pairs, exact_pairs = _lattice_pairs(found[1].reshape(x.shape), first, second)
    for out, pairs in ((p, p_pairs), (exact, exact_pairs)):
        out[..., first, second] = pairs
        out[..., second, first] = pairs
    return p, exact


def _lattice_pairs(ints: np.ndarray, first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact sign-flip p-values of the pairs ``(first, second)`` of integer outcomes ``ints`` (..., k, n): the
    outcomes times q on their lattice 1/q, and which were exact; the paired t-test where the convolution would be too
    large."""
    from scipy import stats as scipy_stats

    *lead, _, n = ints.shape
    small = ints.astype(np.min_scalar_type(-2 * int(np.abs(ints).max(initial=0)) - 1))  # less memory to go through
    d = (small[..., second, :] - small[..., first, :]).reshape(-1, n)
    p = paired.sign_flip_exact_p_rows(d)
    exact = ~np.isnan(p)
    if not exact.all():
        p[~exact] = scipy_stats.ttest_1samp(d[~exact].astype(float), 0.0, axis=1).pvalue
    return p.reshape(*lead, -1), exact.reshape(*lead, -1)


def holm(p: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values along the last axis (as statsmodels ``multipletests(method="holm")``)."""
    m = p.shape[-1]
    order = np.argsort(p, axis=-1, kind="stable")
    stepped = np.take_along_axis(p, order, axis=-1) * (m - np.arange(m))
    stepped = np.minimum(1.0, np.maximum.accumulate(stepped, axis=-1))
    adjusted = np.empty_like(stepped)
    np.put_along_axis(adjusted, order, stepped, axis=-1)
    return adjusted


def decide(means: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sweep's decision (see the module docstring) for one sweep or many, from the configurations' means and
    their pairs' two-sided p-values (:func:`pairwise_p`).

    Args:
        means: Shape ``(..., k)``.
        p: Shape ``(..., k, k)``.

    Returns:
        Per configuration, shape ``(..., k)``: its adjusted p-value (worse than the best where below alpha; 1 where
        no configuration has a higher mean), the index of the configuration whose test gives it (-1 where none has a
        higher mean) and that test's one-sided p-value (1 where none).
    """
    k = means.shape[-1]
    higher = means[..., :, None] > means[..., None, :]  # [i, j]: i's mean above j's
    one_sided = np.where(higher, p / 2, 1.0)  # that i is better than j: the two-sided test's tail on i's side
    against = one_sided.argmin(axis=-2)
    strongest = np.take_along_axis(one_sided, against[..., None, :], axis=-2)[..., 0, :]
    beaten = higher.any(axis=-2)
    local = np.where(beaten, np.minimum(1.0, (k - 1) * strongest), 1.0)  # Bonferroni over j's k - 1 tests
    return holm(local), np.where(beaten, against, -1), strongest


def best_set(outcomes: Mapping[str, Sequence[float]], alpha: float = 0.05,
             costs: Mapping[str, float] | None = None) -> list[Comparison]:
    """Which configurations are tied with the best on paired per-item outcomes (higher is better).

    Args:
        outcomes: Configuration -> its outcome per item, the items in the same order for every configuration.
        alpha: The bound on the family-wise error of calling a best configuration worse (module docstring).
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
    p, exact = pairwise_p(np.stack([values[name] for name in ranked]))
    adjusted, against, one_sided = decide(np.array([means[name] for name in ranked]), p)
    out = []
    for j, name in enumerate(ranked):
        i = int(against[j])
        beaten = i >= 0
        out.append(Comparison(name, means[name], means[name] - means[ranked[0]], ranked[i] if beaten else None,
                              float(one_sided[j]) if beaten else None, float(adjusted[j]) if beaten else None,
                              (EXACT if exact[i, j] else T_TEST) if beaten else None,
                              bool(not beaten or adjusted[j] >= alpha)))
    return out
