"""Statistics over plain numbers: agreement of judge scores with human scores, and repeat consistency.

Everything here is pure and takes plain sequences of floats, so callers decide which judgments count
(scored ones only) before calling. Undefined statistics are ``None``, never NaN: a NaN in a JSON report
or an MLflow metric reads like a number and hides that the statistic did not exist.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# How item_std measures the spread of an item's repeats; written beside every consistency section.
STD_KIND = "sample (n-1)"

# Below three pairs a correlation is either undefined (n < 2) or trivially +-1 with p = 1 (n == 2).
MIN_CORRELATION_PAIRS = 3

# Scores are often means of repeats (3.3333...), so |judge - human| can land a rounding error above
# a tolerance it equals on paper; this slack keeps the "<= tolerance" boundary inclusive in practice.
_BOUNDARY_REL_TOL = 1e-9
_BOUNDARY_ABS_TOL = 1e-12


@dataclass(frozen=True)
class HumanCorrelation:
    """How well judge scores track human scores over the same items.

    Attributes:
        n: Number of (judge, human) pairs.
        pearson_r: Pearson correlation, ``None`` when undefined (n < 3 or a constant side).
        pearson_p: Two-sided p-value of ``pearson_r``, ``None`` when undefined.
        spearman_rho: Spearman rank correlation, ``None`` when undefined.
        spearman_p: Two-sided p-value of ``spearman_rho``, ``None`` when undefined.
        within_1_rate: Share of pairs with ``|judge - human| <= tolerance``, ``None`` when n == 0.
        mean_abs_error: Mean of ``|judge - human|``, ``None`` when n == 0.
        tolerance: The tolerance used for ``within_1_rate``.
    """

    n: int
    pearson_r: float | None
    pearson_p: float | None
    spearman_rho: float | None
    spearman_p: float | None
    within_1_rate: float | None
    mean_abs_error: float | None
    tolerance: float

    def to_dict(self) -> dict[str, Any]:
        """Return a plain, JSON-serializable dict (``None`` for undefined statistics)."""
        return {
            "n": self.n,
            "pearson": {"r": self.pearson_r, "p": self.pearson_p},
            "spearman": {"rho": self.spearman_rho, "p": self.spearman_p},
            "within_1_rate": self.within_1_rate,
            "mean_abs_error": self.mean_abs_error,
            "tolerance": self.tolerance,
        }


@dataclass(frozen=True)
class Consistency:
    """How much a judge's score for the same item moves across repeats.

    Attributes:
        repeats: Repeats requested per item (scored ones may be fewer).
        threshold: An item is unstable when its score std is strictly above this.
        items_measured: Items with at least two scored repeats; only these enter the statistics.
        mean_std: Mean of the per-item sample std (ddof=1), ``None`` when no item was measured.
        max_std: Largest per-item std, ``None`` when no item was measured.
        share_above_threshold: Share of measured items whose std exceeds ``threshold``.
        items_above_threshold: Ids of those items, in input order.
    """

    repeats: int
    threshold: float
    items_measured: int
    mean_std: float | None
    max_std: float | None
    share_above_threshold: float | None
    items_above_threshold: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """Return a plain, JSON-serializable dict (``None`` for undefined statistics)."""
        return {
            "repeats": self.repeats,
            "threshold": self.threshold,
            "items_measured": self.items_measured,
            "mean_std": self.mean_std,
            "max_std": self.max_std,
            "share_above_threshold": self.share_above_threshold,
            "items_above_threshold": list(self.items_above_threshold),
            "std": STD_KIND,
        }


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean as a Python float.

    Args:
        values: The numbers.

    Returns:
        The mean, or ``None`` when ``values`` is empty.
    """
    if not values:
        return None
    return float(statistics.fmean(values))


def item_std(scores: Sequence[float]) -> float | None:
    """Sample standard deviation (ddof=1, ``n - 1`` in the denominator) of one item's scores across repeats.

    Sample rather than population std: the users' own consistency scripts use it (``statistics.stdev``,
    pandas' ``Series.std``), so the number in the report is the one they compare against; with k = 3
    repeats the two differ by a factor of about 1.22. :data:`STD_KIND` names it in the report.

    Args:
        scores: The scored overall scores of the item's repeats.

    Returns:
        The std as a float, or ``None`` for fewer than two scores (no spread to measure).
    """
    if len(scores) < 2:
        return None
    return float(statistics.stdev(scores))


def human_correlation(judge: Sequence[float], human: Sequence[float], tolerance: float = 1.0) -> HumanCorrelation:
    """Compare judge scores with human scores for the same items.

    Args:
        judge: Judge scores, one per item.
        human: Human scores for the same items, in the same order.
        tolerance: Largest ``|judge - human|`` still counted by ``within_1_rate`` (inclusive).

    Returns:
        The correlation record. Correlations are ``None`` when n < 3 or either side is constant;
        ``within_1_rate`` and ``mean_abs_error`` are ``None`` only when there are no pairs.

    Raises:
        ValueError: If the sequences differ in length or ``tolerance`` is negative.
    """
    if len(judge) != len(human):
        raise ValueError(f"judge and human scores differ in length: {len(judge)} != {len(human)}")
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    n = len(judge)
    diffs = [abs(float(j) - float(h)) for j, h in zip(judge, human, strict=True)]
    within = [
        d <= tolerance or math.isclose(d, tolerance, rel_tol=_BOUNDARY_REL_TOL, abs_tol=_BOUNDARY_ABS_TOL)
        for d in diffs
    ]
    pearson, spearman = _correlations(judge, human)
    return HumanCorrelation(
        n=n,
        pearson_r=pearson[0],
        pearson_p=pearson[1],
        spearman_rho=spearman[0],
        spearman_p=spearman[1],
        within_1_rate=sum(within) / n if n else None,
        mean_abs_error=mean(diffs),
        tolerance=float(tolerance),
    )


def consistency(per_item: Mapping[str, Sequence[float]], repeats: int, threshold: float = 0.5) -> Consistency:
    """Summarize how stable each item's score is across repeats.

    Args:
        per_item: Item id -> the scored overall scores of its repeats (unscored repeats left out).
        repeats: Repeats requested per item, recorded as context.
        threshold: Std strictly above which an item counts as unstable.

    Returns:
        The consistency record; items with fewer than two scores are not measured.

    Raises:
        ValueError: If ``repeats`` < 1 or ``threshold`` is negative.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    stds: dict[str, float] = {}
    for item_id, scores in per_item.items():
        std = item_std(scores)
        if std is not None:
            stds[item_id] = std
    above = tuple(item_id for item_id, std in stds.items() if std > threshold)
    measured = len(stds)
    return Consistency(
        repeats=repeats,
        threshold=float(threshold),
        items_measured=measured,
        mean_std=mean(list(stds.values())),
        max_std=max(stds.values()) if stds else None,
        share_above_threshold=len(above) / measured if measured else None,
        items_above_threshold=above,
    )


_NONE_PAIR: tuple[float | None, float | None] = (None, None)


def _correlations(
    judge: Sequence[float], human: Sequence[float]
) -> tuple[tuple[float | None, float | None], tuple[float | None, float | None]]:
    """Pearson (r, p) and Spearman (rho, p), each ``(None, None)`` when undefined."""
    from scipy import stats as scipy_stats

    if len(judge) < MIN_CORRELATION_PAIRS or _is_constant(judge) or _is_constant(human):
        return _NONE_PAIR, _NONE_PAIR
    xs = [float(v) for v in judge]
    ys = [float(v) for v in human]
    # Constancy is ruled out above; the filter only stops scipy's near-constant warnings (values that
    # differ by rounding noise) from escaping into callers that treat warnings as errors.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy_stats.ConstantInputWarning)
        warnings.simplefilter("ignore", scipy_stats.NearConstantInputWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        pearson = scipy_stats.pearsonr(xs, ys)
        spearman = scipy_stats.spearmanr(xs, ys)
    return (
        (_finite(pearson.statistic), _finite(pearson.pvalue)),
        (_finite(spearman.statistic), _finite(spearman.pvalue)),
    )


def _is_constant(values: Sequence[float]) -> bool:
    """True when every value equals the first (a correlation with it is undefined)."""
    first = values[0]
    return all(v == first for v in values)


def _finite(value: Any) -> float | None:
    """``value`` as a Python float, or ``None`` when scipy returned NaN or inf."""
    result = float(value)
    return result if math.isfinite(result) else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default method), None for no values.

    Sorted as one float64 array (a run's million latencies: 8 MB, where ``sorted`` made a list of a million float
    objects, 32 MB); the interpolation is the same arithmetic on Python floats.
    """
    if not len(values):
        return None
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    low, high = float(ordered[lo]), float(ordered[hi])
    return low + (high - low) * (pos - lo)
