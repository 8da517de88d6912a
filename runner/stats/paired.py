"""Two judges (or configurations) on the same items, the item as the unit: is B's per-item value different from
A's, by how much, with an interval that agrees with the test.

- Per-item correctness that is 0 or 1 in both runs (one judgment per item, or an item's judgments all agree):
  McNemar's exact test (statsmodels) on the discordant items, and the interval of the difference
  ``(b01 - b10) / n`` from the exact (Clopper-Pearson) interval of b01 / (b01 + b10), scaled by the discordant
  share. The exact test's p-value is the doubled smaller tail, which is exactly the inversion of that interval:
  the interval excludes 0 if and only if p < 1 - level.
- Anything else (per-item correctness averaged over orders and repeats, scores): a paired sign-flip
  permutation test of the mean difference (Good 2005, Permutation Tests, ch. 3), and the interval of all shifts
  the same test would not reject (test inversion, with the same seeded sign draws), so again the interval
  excludes 0 exactly when p < 1 - level, up to the resolution of the draws.

As elsewhere in runner.stats, an undefined value is None, never NaN and never an exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from runner.stats.uncertainty import BATCH_VALUES, check_paired, finite_or_none

BISECTION_STEPS = 40  # the interval's bounds to ~1e-12 of the data's range


def paired_items(a: Sequence[float], b: Sequence[float], level: float = 0.95, resamples: int = 2000,
                 seed: int = 0) -> dict[str, Any]:
    """Compare per-item values ``a`` and ``b`` (the same items, in the same order); the difference is ``b - a``.

    Returns:
        ``n``, ``mean_a``, ``mean_b``, ``mean_difference``, ``low``, ``high``, ``level``, ``method`` (the
        interval's), ``test`` (``mcnemar_exact`` or ``sign_flip_permutation``), ``statistic``, ``p_value`` and
        ``details`` (the discordant counts, or the permutation's draws and seed). Bounds and p-value are None
        when every difference is 0.
    """
    check_paired(a, b)
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n = int(xa.size)
    out: dict[str, Any] = {"n": n, "mean_a": finite_or_none(xa.mean()) if n else None,
                           "mean_b": finite_or_none(xb.mean()) if n else None,
                           "mean_difference": finite_or_none((xb - xa).mean()) if n else None, "level": level}
    binary = bool(np.isin(xa, (0.0, 1.0)).all() and np.isin(xb, (0.0, 1.0)).all())
    out.update(_mcnemar(xa, xb, level) if binary else _sign_flip(xb - xa, level, resamples, seed))
    return out


def _mcnemar(a: np.ndarray, b: np.ndarray, level: float) -> dict[str, Any]:
    b01, b10 = int(np.sum((a == 0) & (b == 1))), int(np.sum((a == 1) & (b == 0)))
    n, discordant = int(a.size), b01 + b10
    out: dict[str, Any] = {"low": None, "high": None, "method": "exact conditional (Clopper-Pearson)",
                           "test": "mcnemar_exact", "statistic": None, "p_value": None,
                           "details": {"b01": b01, "b10": b10}}
    if discordant:
        from statsmodels.stats.contingency_tables import mcnemar
        from statsmodels.stats.proportion import proportion_confint

        both = int(np.sum((a == 1) & (b == 1)))
        test = mcnemar([[both, b10], [b01, n - both - discordant]], exact=True)
        low, high = proportion_confint(b01, discordant, alpha=1 - level, method="beta")
        share = discordant / n
        out.update(low=share * (2 * float(low) - 1), high=share * (2 * float(high) - 1),
                   statistic=finite_or_none(test.statistic), p_value=finite_or_none(test.pvalue))
    return out


def _sign_flip(d: np.ndarray, level: float, resamples: int, seed: int) -> dict[str, Any]:
    out: dict[str, Any] = {"low": None, "high": None, "method": "sign-flip test inversion",
                           "test": "sign_flip_permutation", "statistic": None, "p_value": None,
                           "details": {"resamples": resamples, "seed": seed, "n_nonzero": int(np.count_nonzero(d))}}
    if not np.any(d):
        return out
    n = d.size
    rng = np.random.default_rng(seed)
    u, v = np.empty(resamples), np.empty(resamples)  # per draw: mean(s * d) and mean(s), so mean(s * (d - t)) = u - t v
    batch = max(1, BATCH_VALUES // n)
    for start in range(0, resamples, batch):
        signs = rng.choice((-1.0, 1.0), size=(min(batch, resamples - start), n))
        u[start:start + len(signs)], v[start:start + len(signs)] = signs @ d / n, signs.mean(axis=1)
    mean = float(d.mean())

    def p_value(shift: float) -> float:
        observed = abs(mean - shift)
        return float((1 + np.sum(np.abs(u - shift * v) >= observed * (1 - 1e-12))) / (resamples + 1))

    alpha = 1 - level

    def bound(inside: float, outside: float) -> float:  # the shift where p crosses alpha, between the two
        for _ in range(BISECTION_STEPS):
            middle = (inside + outside) / 2
            inside, outside = (middle, outside) if p_value(middle) > alpha else (inside, middle)
        return inside

    span = float(np.ptp(d)) or 1.0
    out.update(statistic=mean, p_value=p_value(0.0),
               low=bound(mean, float(d.min()) - span), high=bound(mean, float(d.max()) + span))
    return out
