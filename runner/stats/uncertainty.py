"""Uncertainty of judge metrics: bootstrap confidence intervals, of one sample, of a metric over rows, of a paired
difference.

Pure functions over plain sequences that return plain, JSON-serializable dicts. As in :mod:`runner.stats.scores`,
a bound that is undefined on the data (too few items, no spread) is ``None``, never NaN and never an exception.
Every resampling is seeded, so the same inputs give the same interval. The paired significance tests are
:mod:`runner.stats.significance`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

# scipy.stats (~0.9 s cold) is imported inside the function that uses it: a run does not import it before its
# first judge call (tests/unit/test_startup.py).

# Bounded memory at any size. scipy.stats.bootstrap holds every resample at once unless given a batch; BCa's
# jackknife also builds n leave-one-out samples (n x n values: 9.3 GiB at n = 100,000). Resamples are therefore
# drawn BATCH_VALUES values at a time (8 MB of float64; larger batches were no faster), and above BCA_MAX_N
# values the percentile interval is used: BCa's jackknife costs O(n^2) time even in batches, and its bias and
# acceleration corrections shrink like 1/sqrt(n), so at that size BCa and percentile bounds agree to the third
# decimal (tested).
BATCH_VALUES = 1 << 20
BCA_MAX_N = 10_000

# Named statistics run vectorized inside scipy.stats.bootstrap, far faster than a Python callable per resample.
_NAMED_STATISTICS: Mapping[str, Callable[..., Any]] = {"mean": np.mean, "median": np.median}


def bootstrap_ci(
    values: Sequence[float],
    statistic: str | Callable[[np.ndarray], float] = "mean",
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    unit: str | None = None,
) -> dict[str, Any]:
    """Bootstrap confidence interval of a statistic of one sample, via ``scipy.stats.bootstrap``.

    BCa (bias-corrected and accelerated) is tried first for up to ``BCA_MAX_N`` values. It is degenerate
    when its jackknife or the bootstrap distribution collapses (few distinct values, e.g. a median of
    mostly equal scores): scipy then warns and returns NaN bounds, and the percentile interval is used
    instead. Above ``BCA_MAX_N`` values the percentile interval is used directly (see ``BATCH_VALUES``
    for why). ``method`` says which one produced the bounds. Memory stays within a few times the data.

    Args:
        values: The sample (e.g. one score per item).
        statistic: ``"mean"``, ``"median"``, or a callable mapping a 1-D array to a float.
        level: Confidence level in (0, 1).
        resamples: Number of bootstrap resamples.
        seed: Seed of the numpy ``Generator`` that draws the resamples.
        unit: What one value is (e.g. ``"item"``), written as ``unit`` after ``n``; None: no such key.

    Returns:
        ``n``, ``estimate`` (the statistic of ``values``), ``low``, ``high``, ``level``, ``resamples`` and
        ``method`` (``"BCa"``, ``"percentile"``, or ``None`` when no interval was computed). The bounds
        are ``None`` when n < 2 or all values are equal (no spread to resample).

    Raises:
        ValueError: If ``statistic`` is an unknown name, ``level`` is outside (0, 1) or ``resamples`` < 1.
    """
    check_settings(level, resamples)
    func: Callable[..., Any]
    if isinstance(statistic, str):
        func, vectorized = _named_statistic(statistic), True
    else:
        func, vectorized = statistic, False
    data = np.asarray(values, dtype=float)
    result: dict[str, Any] = {
        "n": int(data.size),
        **({"unit": unit} if unit is not None else {}),
        "estimate": finite_or_none(func(data)) if data.size else None,
        "low": None,
        "high": None,
        "level": level,
        "resamples": resamples,
        "method": None,
    }
    if data.size < 2 or np.all(data == data[0]):
        return result
    for method in ("BCa", "percentile") if data.size <= BCA_MAX_N else ("percentile",):
        low, high = _scipy_interval(data, func, vectorized, method, level, resamples, seed)
        if low is not None and high is not None:
            result.update(low=low, high=high, method=method)
            break
    return result


def bootstrap_metric_ci(
    columns: Sequence[Sequence[Any]],
    metric: Callable[..., np.ndarray],
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Percentile bootstrap interval of a statistic of whole rows (e.g. kappa over (pred, gold) pairs).

    The rows are the positions of ``columns`` (equal-length sequences, e.g. predicted and gold label codes);
    they are resampled by index with ``numpy.random.Generator(seed)``, ``BATCH_VALUES`` values at a time, so
    memory does not grow with ``resamples``. ``metric`` is vectorized: it gets one 2-D array per column,
    a resample per row, and returns one value per resample, NaN where it is undefined (kappa when a
    resample holds one class only). Undefined resamples are left out of the quantiles and counted in
    ``undefined_resamples``. The percentile method is used because BCa's jackknife would cost n more metric
    evaluations of n rows each.

    Args:
        columns: The rows' fields, one sequence per field, all the same length.
        metric: Maps 2-D arrays (resamples x rows), one per column, to a 1-D array of values.
        level: Confidence level in (0, 1).
        resamples: Number of bootstrap resamples.
        seed: Seed of the numpy ``Generator`` that draws the resamples.

    Returns:
        ``n``, ``estimate`` (the metric of all rows), ``low``, ``high``, ``level``, ``resamples``,
        ``undefined_resamples`` and ``method`` (``"percentile"``). The bounds are ``None`` when n < 2,
        when every resample is undefined, or when all defined resamples give the same value.

    Raises:
        ValueError: If ``level`` is outside (0, 1), ``resamples`` < 1 or the columns differ in length.
    """
    check_settings(level, resamples)
    arrays = [np.asarray(column) for column in columns]
    n = len(arrays[0]) if arrays else 0
    if any(len(a) != n for a in arrays):
        raise ValueError(f"columns differ in length: {[len(a) for a in arrays]}")
    result = {
        "n": n,
        "estimate": finite_or_none(metric(*(a[np.newaxis, :] for a in arrays))[0]) if n else None,
        "low": None,
        "high": None,
        "level": level,
        "resamples": resamples,
        "undefined_resamples": 0,
        "method": "percentile",
    }
    if n < 2:
        return result
    rng = np.random.default_rng(seed)
    values = np.empty(resamples)
    batch = max(1, BATCH_VALUES // n)
    for start in range(0, resamples, batch):
        indices = rng.integers(0, n, size=(min(batch, resamples - start), n))
        values[start:start + len(indices)] = metric(*(a[indices] for a in arrays))
    defined = values[np.isfinite(values)]
    result["undefined_resamples"] = resamples - defined.size
    if defined.size and np.ptp(defined) > 0:
        tail = (1 - level) / 2
        low, high = np.quantile(defined, [tail, 1 - tail])
        result.update(low=float(low), high=float(high))
    return result


def paired_difference(
    a: Sequence[float], b: Sequence[float], level: float = 0.95, resamples: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """Mean difference ``b - a`` over paired items with a paired bootstrap interval.

    Resampling items and keeping each item's pair together is the same as bootstrapping the per-item
    differences, which is what this does (with :func:`bootstrap_ci`, so BCa with a percentile fallback).

    Args:
        a: Per-item values of the baseline (e.g. 1.0/0.0 correctness of judge A).
        b: Per-item values of the contender, in the same item order.
        level: Confidence level in (0, 1).
        resamples: Number of bootstrap resamples.
        seed: Seed of the resampling.

    Returns:
        ``n``, ``mean_a``, ``mean_b``, ``mean_difference`` (b - a), ``low``, ``high``, ``level``,
        ``resamples`` and ``method``; bounds are ``None`` when n < 2 or every difference is the same.

    Raises:
        ValueError: If the sequences differ in length, or on invalid ``level``/``resamples``.
    """
    check_paired(a, b)
    differences = [float(y) - float(x) for x, y in zip(a, b, strict=True)]
    ci = bootstrap_ci(differences, "mean", level=level, resamples=resamples, seed=seed)
    return {
        "n": ci["n"],
        "mean_a": finite_or_none(np.mean(a)) if len(a) else None,
        "mean_b": finite_or_none(np.mean(b)) if len(b) else None,
        "mean_difference": ci["estimate"],
        **{key: ci[key] for key in ("low", "high", "level", "resamples", "method")},
    }


def _scipy_interval(
    data: np.ndarray,
    func: Callable[..., Any],
    vectorized: bool,
    method: str,
    level: float,
    resamples: int,
    seed: int,
) -> tuple[float | None, float | None]:
    """One ``scipy.stats.bootstrap`` interval, ``(None, None)`` where scipy found it degenerate."""
    from scipy import stats as scipy_stats

    # A degenerate BCa shows as a DegenerateDataWarning and a 0/0 inside scipy; the NaN bounds it returns
    # are the cue for the caller's fallback, so the warnings carry nothing more and are silenced.
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", scipy_stats.DegenerateDataWarning)
        interval = scipy_stats.bootstrap(
            (data,),
            func,
            n_resamples=resamples,
            confidence_level=level,
            method=method,
            vectorized=vectorized,
            batch=max(1, BATCH_VALUES // data.size),
            rng=np.random.default_rng(seed),
        ).confidence_interval
    return finite_or_none(interval.low), finite_or_none(interval.high)


def _named_statistic(name: str) -> Callable[..., Any]:
    """The numpy function behind a statistic name; ``ValueError`` listing the known names otherwise."""
    try:
        return _NAMED_STATISTICS[name]
    except KeyError:
        raise ValueError(f"unknown statistic {name!r}; known: {sorted(_NAMED_STATISTICS)}") from None


def check_settings(level: float, resamples: int) -> None:
    """Raise ``ValueError`` on a confidence level outside (0, 1) or fewer than one resample."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")


def check_paired(a: Sequence[Any], b: Sequence[Any]) -> None:
    """Raise ``ValueError`` unless the two paired sequences have the same length."""
    if len(a) != len(b):
        raise ValueError(f"paired sequences differ in length: {len(a)} != {len(b)}")


def finite_or_none(value: Any) -> float | None:
    """``value`` as a Python float, or ``None`` when it is missing, NaN or infinite."""
    if value is None:
        return None
    result = float(value)
    return result if math.isfinite(result) else None
