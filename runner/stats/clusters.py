"""The item as the unit: statistics of rows that come in clusters (an item's judgments over orders and repeats).

Rows of one item are not independent (an item a judge gets right in one order it mostly gets right in the
other), so resampling or counting rows as if they were understates the uncertainty. Here:

- :func:`cluster_bootstrap_ci`: a percentile bootstrap that resamples clusters (items) with replacement and keeps
  all their rows together (Davison & Hinkley 1997, sec. 3.8; Field & Welsh 2007). A resample is a vector of
  multinomial cluster counts, turned into row weights, so a metric is computed from weighted rows and clusters of
  any size resample in one vectorized step.
- :func:`design_effect`: Kish's design effect of a proportion over clustered rows, the ratio of its
  cluster-robust (linearized ratio-estimator) variance to the binomial variance, estimated from the outcomes:
  reported beside an interval, not used by it.
- :func:`worst_case_effective_n`: the effective sample size when an item's rows are perfectly correlated (Kish's
  n^2 / sum(n_c^2)), which depends on the cluster sizes only; :mod:`runner.stats.proportions` computes its
  interval on it, so that one more error can never raise a bound.

As elsewhere in runner.stats, an undefined bound is ``None``, never NaN and never an exception.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from runner.stats.uncertainty import BATCH_VALUES, check_settings, finite_or_none

# A weighted metric: (weights: resamples x rows, *columns: rows) -> one value per resample (NaN where undefined).
WeightedMetric = Callable[..., np.ndarray]


def cluster_codes(clusters: Sequence[Hashable]) -> tuple[np.ndarray, int]:
    """Each row's cluster as an integer code (0 .. k-1, in order of first appearance) and the number k."""
    codes: dict[Hashable, int] = {}
    out = np.fromiter((codes.setdefault(c, len(codes)) for c in clusters), dtype=np.int64, count=len(clusters))
    return out, len(codes)


def cluster_bootstrap_ci(columns: Sequence[Sequence[Any]], clusters: Sequence[Hashable], metric: WeightedMetric,
                         level: float = 0.95, resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Percentile interval of a metric of rows, resampling whole clusters (see the module docstring).

    Args:
        columns: The rows' fields, one sequence per field, all the same length.
        clusters: Each row's cluster (e.g. its item id).
        metric: A :data:`WeightedMetric` (e.g. :func:`weighted_kappa`); all-ones weights give the estimate.
        level: Confidence level in (0, 1).
        resamples: Number of bootstrap resamples.
        seed: Seed of the numpy ``Generator`` that draws the cluster counts.

    Returns:
        ``n`` (rows), ``clusters``, ``unit`` (``"cluster"``), ``estimate``, ``low``, ``high``, ``level``,
        ``resamples``, ``undefined_resamples`` and ``method`` (``"cluster percentile"``); the bounds are None with
        fewer than two clusters, when every resample is undefined or all give the same value.
    """
    check_settings(level, resamples)
    arrays = [np.asarray(c) for c in columns]
    n = len(clusters)
    if any(len(a) != n for a in arrays):
        raise ValueError(f"columns and clusters differ in length: {[len(a) for a in arrays]} vs {n}")
    codes, k = cluster_codes(clusters)
    result: dict[str, Any] = {
        "n": n, "clusters": k, "unit": "cluster",
        "estimate": finite_or_none(metric(np.ones((1, n)), *arrays)[0]) if n else None,
        "low": None, "high": None, "level": level, "resamples": resamples, "undefined_resamples": 0,
        "method": "cluster percentile"}
    if k < 2:
        return result
    rng = np.random.default_rng(seed)
    values = np.empty(resamples)
    batch = max(1, BATCH_VALUES // max(n, k))
    for start in range(0, resamples, batch):
        size = min(batch, resamples - start)
        counts = rng.multinomial(k, np.full(k, 1.0 / k), size=size)  # how often each cluster is drawn
        values[start:start + size] = metric(counts[:, codes].astype(float), *arrays)
    defined = values[np.isfinite(values)]
    result["undefined_resamples"] = resamples - int(defined.size)
    if defined.size and np.ptp(defined) > 0:
        tail = (1 - level) / 2
        low, high = np.quantile(defined, [tail, 1 - tail])
        result.update(low=float(low), high=float(high))
    return result


def weighted_mean(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The weighted mean of ``values`` per row of ``weights``."""
    return (weights @ np.asarray(values, dtype=float)) / weights.sum(axis=1)


def weighted_kappa(weights: np.ndarray, a: np.ndarray, b: np.ndarray, n_labels: int) -> np.ndarray:
    """Cohen's (nominal) kappa of two label-code columns with row weights, one value per row of ``weights``;
    all-ones weights give :func:`runner.stats.coefficients.cohen_kappa` (tested). NaN where undefined (both
    raters used one and the same label)."""
    total = weights.sum(axis=1)
    eye = np.eye(n_labels)
    pa, pb = (weights @ eye[a]) / total[:, None], (weights @ eye[b]) / total[:, None]
    observed = (weights @ (a == b).astype(float)) / total
    expected = np.sum(pa * pb, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = (observed - expected) / (1.0 - expected)
    return np.where(expected >= 1.0 - 1e-12, np.nan, kappa)


def weighted_ac1(weights: np.ndarray, a: np.ndarray, b: np.ndarray, n_labels: int) -> np.ndarray:
    """Gwet's AC1 of two label-code columns with row weights, one value per row of ``weights``; all-ones weights
    give the estimate (Gwet 2008, "Computing inter-rater reliability and its variance in the presence of high
    agreement", Br. J. Math. Stat. Psychol. 61(1), eq. for two raters; checked against the irrCAC package).

    ``(pa - pe) / (1 - pe)``: ``pa`` the share of rows where the two agree, ``pe = sum_k pi_k (1 - pi_k) / (q - 1)``
    with ``pi_k`` the mean of the two raters' shares of category k and ``q = n_labels`` the categories of the
    scale (those offered, not only those used). Unlike kappa it does not collapse when one category dominates
    (kappa's paradox). NaN with fewer than two categories."""
    if n_labels < 2:
        return np.full(weights.shape[0], np.nan)
    total = weights.sum(axis=1)
    eye = np.eye(n_labels)
    pi = ((weights @ eye[a]) + (weights @ eye[b])) / (2 * total[:, None])
    observed = (weights @ (a == b).astype(float)) / total
    expected = np.sum(pi * (1.0 - pi), axis=1) / (n_labels - 1)
    return (observed - expected) / (1.0 - expected)  # expected <= 1/q <= 1/2


def design_effect(successes: Sequence[float], clusters: Sequence[Hashable]) -> float | None:
    """Kish's design effect of the proportion of ``successes`` (0/1 per row) over clustered rows.

    The cluster-robust variance of the ratio estimator p = sum(y) / n over k clusters with totals y_c and sizes
    n_c is k / (k - 1) * sum((y_c - p n_c)^2) / n^2; the design effect is its ratio to p (1 - p) / n, at least 1
    (an effective sample size never above the row count, as Korn & Graubard 1998 truncate it).

    Returns:
        The design effect, or None where it is undefined: fewer than two clusters, or p is 0 or 1 (no
        variance to compare).
    """
    y = np.asarray(successes, dtype=float)
    codes, k = cluster_codes(clusters)
    n = y.size
    p = float(y.mean()) if n else 0.0
    if k < 2 or p in (0.0, 1.0):
        return None
    totals = np.bincount(codes, weights=y, minlength=k)
    sizes = np.bincount(codes, minlength=k).astype(float)
    robust = k / (k - 1) * float(np.sum((totals - p * sizes) ** 2)) / n**2
    return max(robust / (p * (1 - p) / n), 1.0)


def worst_case_effective_n(clusters: Sequence[Hashable]) -> float:
    """The effective sample size of a proportion over clustered rows whose rows agree within each cluster.

    With every row of a cluster sharing one outcome (intra-cluster correlation 1, the largest there is) the
    proportion sum(n_c z_c) / n has variance p (1 - p) sum(n_c^2) / n^2, that of a binomial proportion over
    n^2 / sum(n_c^2) trials (Kish 1965's effective size of unequal cluster weights): the number of clusters when
    they all have the same size, and never more. Any smaller correlation gives a smaller variance, so an interval
    on this size is valid (conservative) whatever the correlation; it depends on the sizes, not the outcomes.
    """
    codes, k = cluster_codes(clusters)
    if not k:
        return 0.0
    sizes = np.bincount(codes, minlength=k).astype(float)
    return float(sizes.sum() ** 2 / np.sum(sizes**2))
