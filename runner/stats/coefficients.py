"""Chance-corrected agreement coefficients: Cohen's kappa, Fleiss' kappa and Krippendorff's alpha.

The building blocks of :mod:`runner.stats.agreement` (a judge against gold labels) and
:mod:`runner.stats.inter_rater` (judges or annotators against each other). As there, a coefficient that is
undefined on the data (no pairs, a single label) is ``None``, never NaN and never an exception; labels are
any hashable values of one kind, ``None`` marking a missing label.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any, Literal

import numpy as np

# sklearn.metrics (+0.5 s on top of scipy.stats, 1.3-1.5 s cold), statsmodels.stats (+0.35 s, 1.2 s cold) and
# krippendorff are imported inside the functions that use them: a run imports none of them before its first judge
# call (tests/unit/test_startup.py).

AlphaLevel = Literal["nominal", "ordinal", "interval", "ratio"]


def cohen_kappa(
    a: Sequence[Hashable], b: Sequence[Hashable], weights: str | None = None, labels: Sequence[Hashable] | None = None
) -> float | None:
    """Cohen's kappa of two raters' paired labels (sklearn), ``None`` where it is undefined.

    Cheap enough to serve as the metric of ``uncertainty.bootstrap_metric_ci``, unlike the full reports.
    Kappa is 0/0 exactly when the chance agreement is 1, i.e. both raters used one and the same label
    (with weights too: the expected disagreement is then 0), or when there are no pairs.

    Args:
        a: One rater's labels (no ``None``: pair up the scored items first).
        b: The other rater's labels for the same items.
        weights: ``None`` (nominal), ``"linear"`` or ``"quadratic"`` (ordinal labels).
        labels: The categories in order; weighted kappa weighs by position in this list.

    Returns:
        The kappa, or ``None`` when undefined.
    """
    if len({*a, *b}) < 2:
        return None
    from sklearn.metrics import cohen_kappa_score

    return finite(cohen_kappa_score(a, b, weights=weights, labels=labels))


def label_codes(*columns: Sequence[Hashable]) -> tuple[list[list[int]], int]:
    """The columns' labels as integer codes (one code per distinct label, in sorted order) and how many there are.

    Args:
        *columns: Label sequences (e.g. predicted and gold), no ``None``.

    Returns:
        ``(coded columns, number of distinct labels)``, for :func:`nominal_kappa`.
    """
    code = {label: n for n, label in enumerate(sorted({label for column in columns for label in column}, key=str))}
    return [[code[label] for label in column] for column in columns], len(code)


def nominal_kappa(a: np.ndarray, b: np.ndarray, n_labels: int) -> np.ndarray:
    """Cohen's (nominal) kappa of each row of two label-code arrays, vectorized for the bootstrap.

    Equal to :func:`cohen_kappa` row by row (tested against sklearn), NaN where it is undefined (both raters
    used one and the same label, so the chance agreement is 1).

    Args:
        a: One rater's label codes (0 .. n_labels-1), one resample per row.
        b: The other rater's codes, the same shape.
        n_labels: The number of distinct codes.

    Returns:
        One kappa per row.
    """
    observed = np.mean(a == b, axis=-1)
    expected = sum(np.mean(a == c, axis=-1) * np.mean(b == c, axis=-1) for c in range(n_labels))
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = (observed - expected) / (1.0 - expected)
    return np.where(expected >= 1.0, np.nan, kappa)


def fleiss_kappa(rows: Sequence[Sequence[Hashable]]) -> float | None:
    """Fleiss' kappa over items x raters, ``None`` with no item, fewer than two raters or a single label."""
    if not rows or len(rows[0]) < 2:
        return None
    codes, domain = encode([list(column) for column in zip(*rows, strict=True)])
    if len(domain) < 2:
        return None
    from statsmodels.stats.inter_rater import aggregate_raters
    from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa

    table, _ = aggregate_raters(codes.T.astype(int))
    return finite(statsmodels_fleiss_kappa(table, method="fleiss"))


def nominal_alpha(columns: Sequence[Sequence[Hashable | None]]) -> float | None:
    """Krippendorff's nominal alpha over raters x items, labels encoded as integer codes."""
    # Codes rather than the labels themselves: krippendorff reads the string "nan" as a missing value.
    codes, _ = encode(columns)
    return alpha(codes, "nominal")


def alpha(columns: Sequence[Sequence[float | None]] | np.ndarray, level: AlphaLevel) -> float | None:
    """Krippendorff's alpha over raters x items (``None``/NaN = missing), ``None`` when undefined."""
    import krippendorff

    data = np.array([[np.nan if v is None else v for v in column] for column in columns], dtype=float)
    pairable = data.size and (np.sum(~np.isnan(data), axis=0) >= 2).any()
    if not pairable or np.unique(data[~np.isnan(data)]).size < 2:
        return None
    # Alpha is 0/0 when the pairable units hold a single value; numpy would warn, we return None instead.
    with np.errstate(divide="ignore", invalid="ignore"):
        return finite(krippendorff.alpha(reliability_data=data, level_of_measurement=level))


def encode(columns: Sequence[Sequence[Hashable | None]]) -> tuple[np.ndarray, list[Hashable]]:
    """Raters x items label codes as floats (NaN = missing) and the sorted label domain they index."""
    domain = label_set(*columns)
    index = {label: i for i, label in enumerate(domain)}
    codes = np.array([[np.nan if v is None else index[v] for v in column] for column in columns], dtype=float)
    return codes, domain


def label_set(*sequences: Sequence[Hashable | None]) -> list[Hashable]:
    """Every non-None label in ``sequences``, sorted (by ``str`` when the labels are not mutually orderable)."""
    # Any: whether the labels compare with each other is only known by trying (TypeError: sort by str).
    found: set[Any] = {label for sequence in sequences for label in sequence if label is not None}
    try:
        return sorted(found)
    except TypeError:
        return sorted(found, key=str)


def check_lengths(**sequences: Sequence[Any]) -> None:
    """Raise ``ValueError`` unless all named sequences have the same length."""
    lengths = {name: len(sequence) for name, sequence in sequences.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"sequences differ in length: {lengths}")


def finite(value: Any) -> float | None:
    """``value`` as a Python float, or ``None`` when it is NaN or infinite."""
    result = float(value)
    return result if math.isfinite(result) else None
