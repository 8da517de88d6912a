"""Agreement of judge labels with gold labels, between judges, and between human annotators.

Pure functions over plain label sequences that return plain, JSON-serializable dicts. A statistic that is
undefined on the data at hand (no pairs, a single class, no item labelled by two raters) is ``None``, never
NaN and never an exception: a report is built from whatever a run produced, and one degenerate slice must
not sink it. Malformed input (sequences of different lengths, a missing gold label) still raises
``ValueError``, because that is a caller bug rather than a property of the data.

Nominal labels are any hashable values of one kind (system names, "tie", 0/1/2); ``None`` marks a missing
label (an unscored judgment, or an annotator who did not label the item). Correlations with human scores
live in :mod:`runner.stats.scores` and are reused here, not recomputed.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from runner.stats import scores as stats

# sklearn.metrics (+0.5 s on top of scipy.stats, 1.3-1.5 s cold), statsmodels.stats (+0.35 s, 1.2 s cold) and
# krippendorff are imported inside the functions that use them: a run imports none of them before its first judge
# call (tests/unit/test_startup.py).


def label_agreement(
    pred: Sequence[Hashable | None], gold: Sequence[Hashable], labels: Sequence[Hashable] | None = None
) -> dict[str, Any]:
    """Agreement of a judge's nominal labels with gold labels.

    Unscored items (``pred`` is ``None``) are counted, not dropped silently: every metric is computed over
    the scored pairs, and ``accuracy_all`` additionally counts each unscored item as wrong.

    Args:
        pred: The judge's label per item, ``None`` where the judgment was unscored.
        gold: The gold (e.g. human-majority) label per item, in the same order.
        labels: Labels that macro-F1 averages over (e.g. to leave out "tie"); default: every label seen in
            the scored pairs. Kappa and alpha always use every label seen.

    Returns:
        ``n`` (scored pairs), ``n_total``, ``unscored``, ``accuracy``, ``accuracy_all``, ``cohen_kappa``,
        ``macro_f1``, ``krippendorff_alpha`` (nominal), ``labels`` (those macro-F1 averaged over) and
        ``confusion`` = ``{"labels": [...], "matrix": [[...]]}`` with rows = gold and columns = pred; its
        labels are ``labels`` followed by any other label seen, so the matrix always sums to ``n``.

    Raises:
        ValueError: If the sequences differ in length or a gold label is ``None``.
    """
    _check_lengths(pred=pred, gold=gold)
    if any(g is None for g in gold):
        raise ValueError("gold labels must not be None; leave items without a gold label out first")
    pairs = [(p, g) for p, g in zip(pred, gold, strict=True) if p is not None]
    scored_pred = [p for p, _ in pairs]
    scored_gold = [g for _, g in pairs]
    n, n_total = len(pairs), len(gold)
    correct = sum(p == g for p, g in pairs)
    seen = _label_set(scored_pred, scored_gold)
    f1_labels = list(labels) if labels is not None else seen
    matrix_labels = f1_labels + [label for label in seen if label not in f1_labels]
    return {
        "n": n,
        "n_total": n_total,
        "unscored": n_total - n,
        "accuracy": correct / n if n else None,
        "accuracy_all": correct / n_total if n_total else None,
        "cohen_kappa": cohen_kappa(scored_pred, scored_gold),
        "macro_f1": _macro_f1(scored_gold, scored_pred, f1_labels),
        "krippendorff_alpha": _nominal_alpha([scored_gold, scored_pred]),
        "labels": f1_labels,
        "confusion": {"labels": matrix_labels, "matrix": _confusion(scored_gold, scored_pred, matrix_labels)},
    }


def ordinal_agreement(pred: Sequence[float | None], gold: Sequence[float], tolerance: float = 1.0) -> dict[str, Any]:
    """Agreement of a judge's numeric scores with gold scores on an ordinal scale.

    Weighted kappas need categories, so they are computed on scores rounded half up to integers (3.5 -> 4,
    2.5 -> 3; Python's ``round`` would send 2.5 to 2), with every integer between the smallest and the
    largest rounded score as a category: sklearn weighs by category index, so a gap in the observed
    scores must not shrink the distance between its neighbours. Krippendorff's alpha (ordinal and
    interval) and the correlations use the unrounded scores.

    Args:
        pred: The judge's score per item, ``None`` where the judgment was unscored.
        gold: The gold (human) score per item, in the same order.
        tolerance: Largest ``|pred - gold|`` that ``within_1_rate`` still counts (see ``stats.human_correlation``).

    Returns:
        The fields of ``stats.human_correlation(...).to_dict()`` over the scored pairs (``n``, ``pearson``,
        ``spearman``, ``within_1_rate``, ``mean_abs_error``, ``tolerance``) plus ``unscored``,
        ``kappa_linear``, ``kappa_quadratic``, ``krippendorff_alpha_ordinal`` and
        ``krippendorff_alpha_interval``.

    Raises:
        ValueError: If the sequences differ in length or ``tolerance`` is negative.
    """
    _check_lengths(pred=pred, gold=gold)
    pairs = [(float(p), float(g)) for p, g in zip(pred, gold, strict=True) if p is not None]
    scored_pred = [p for p, _ in pairs]
    scored_gold = [g for _, g in pairs]
    rounded_pred = [math.floor(v + 0.5) for v in scored_pred]
    rounded_gold = [math.floor(v + 0.5) for v in scored_gold]
    rounded = rounded_pred + rounded_gold
    scale = list(range(min(rounded), max(rounded) + 1)) if rounded else None
    result = stats.human_correlation(scored_pred, scored_gold, tolerance).to_dict()
    result.update(
        unscored=len(pred) - len(pairs),
        kappa_linear=cohen_kappa(rounded_pred, rounded_gold, weights="linear", labels=scale),
        kappa_quadratic=cohen_kappa(rounded_pred, rounded_gold, weights="quadratic", labels=scale),
        krippendorff_alpha_ordinal=_alpha([scored_pred, scored_gold], "ordinal"),
        krippendorff_alpha_interval=_alpha([scored_pred, scored_gold], "interval"),
    )
    return result


def majority(labels: Sequence[Hashable | None]) -> Hashable | None:
    """The most frequent label, the first-seen one among those tied for most frequent.

    This is PandaLM's ``compute_metrics`` rule: the mode of the annotations, and on a tie in counts the
    value that occurs first in ``labels``; with three annotators and three classes a tie happens only when
    all three differ, and then annotator 1 wins. ``None`` entries (missing labels) are ignored.

    Args:
        labels: One item's labels, in annotator order.

    Returns:
        The majority label, or ``None`` when there is no label at all.
    """
    # Counter.most_common orders equal counts by first insertion (documented), which is exactly the tie rule.
    counts = Counter(label for label in labels if label is not None)
    return counts.most_common(1)[0][0] if counts else None


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

    return _finite(cohen_kappa_score(a, b, weights=weights, labels=labels))


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


def inter_judge(labels_by_judge: Mapping[str, Sequence[Hashable | None]]) -> dict[str, Any]:
    """Agreement between several judges (or annotators) labelling the same items.

    Args:
        labels_by_judge: Judge name -> its label per item (all sequences in the same item order), ``None``
            where that judge has no label for the item.

    Returns:
        ``judges`` (names), ``n_items``, ``pairwise`` (one ``{"a", "b", "n", "accuracy", "cohen_kappa"}`` per
        judge pair, over the items both labelled), ``mean_pairwise_kappa``, ``fleiss_kappa`` with
        ``fleiss_n`` (over the items every judge labelled; Fleiss needs equal raters per item) and
        ``krippendorff_alpha`` (nominal, over all items, missing labels allowed).

    Raises:
        ValueError: If the sequences differ in length.
    """
    _check_lengths(**labels_by_judge)
    names = list(labels_by_judge)
    columns = [list(labels_by_judge[name]) for name in names]
    pairwise = [
        {"a": names[i], "b": names[j], **_pair_agreement(columns[i], columns[j])}
        for i, j in itertools.combinations(range(len(names)), 2)
    ]
    complete = [row for row in zip(*columns, strict=True) if all(label is not None for label in row)]
    return {
        "judges": names,
        "n_items": len(columns[0]) if columns else 0,
        "pairwise": pairwise,
        "mean_pairwise_kappa": _mean_defined(pair["cohen_kappa"] for pair in pairwise),
        "fleiss_kappa": _fleiss_kappa(complete),
        "fleiss_n": len(complete),
        "krippendorff_alpha": _nominal_alpha(columns),
    }


def human_ceiling(annotations: Sequence[Sequence[Hashable | None]]) -> dict[str, Any]:
    """How well human annotators agree with each other: the ceiling a judge can be held to.

    Args:
        annotations: Per item, the labels of its k annotators, always in the same annotator order
            (``None`` where an annotator did not label the item).

    Returns:
        Everything :func:`inter_judge` returns for annotators named ``annotator1`` .. ``annotatorK``, plus
        ``annotators`` (k), ``mean_pairwise_accuracy``, ``leave_one_out`` (annotator name ->
        ``{"n", "accuracy", "cohen_kappa"}`` against the :func:`majority` of the other annotators, whose
        ties go to the lowest-numbered of them), ``mean_leave_one_out_accuracy`` and
        ``mean_leave_one_out_kappa``.

    Raises:
        ValueError: If items have different numbers of annotations.
    """
    widths = {len(row) for row in annotations}
    if len(widths) > 1:
        raise ValueError(f"every item needs the same number of annotations (None for missing), got {sorted(widths)}")
    k = widths.pop() if widths else 0
    names = [f"annotator{j + 1}" for j in range(k)]
    result = inter_judge({name: [row[j] for row in annotations] for j, name in enumerate(names)})
    leave_one_out = {
        name: _pair_agreement([row[j] for row in annotations], [_majority_without(row, j) for row in annotations])
        for j, name in enumerate(names)
    }
    result.update(
        annotators=k,
        mean_pairwise_accuracy=_mean_defined(pair["accuracy"] for pair in result["pairwise"]),
        leave_one_out=leave_one_out,
        mean_leave_one_out_accuracy=_mean_defined(entry["accuracy"] for entry in leave_one_out.values()),
        mean_leave_one_out_kappa=_mean_defined(entry["cohen_kappa"] for entry in leave_one_out.values()),
    )
    return result


def _majority_without(row: Sequence[Hashable | None], left_out: int) -> Hashable | None:
    """The :func:`majority` of one item's labels without annotator ``left_out``."""
    return majority([*row[:left_out], *row[left_out + 1 :]])


def _pair_agreement(a: Sequence[Hashable | None], b: Sequence[Hashable | None]) -> dict[str, Any]:
    """``n``, ``accuracy`` and ``cohen_kappa`` of two raters over the items both labelled."""
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    n = len(pairs)
    return {
        "n": n,
        "accuracy": sum(x == y for x, y in pairs) / n if n else None,
        "cohen_kappa": cohen_kappa([x for x, _ in pairs], [y for _, y in pairs]),
    }


def _macro_f1(gold: Sequence[Hashable], pred: Sequence[Hashable], labels: Sequence[Hashable]) -> float | None:
    """Macro-averaged F1 over ``labels`` (a label never predicted nor present scores 0), ``None`` if none."""
    if not gold or not labels:
        return None
    from sklearn.metrics import f1_score

    return _finite(f1_score(gold, pred, labels=list(labels), average="macro", zero_division=0))


def _confusion(gold: Sequence[Hashable], pred: Sequence[Hashable], labels: Sequence[Hashable]) -> list[list[int]]:
    """Confusion counts, rows = gold and columns = pred, in ``labels`` order."""
    if len(labels) < 2:
        # sklearn warns about a 1 x 1 matrix even when the labels are given; it is just the count anyway.
        return [[len(gold)] for _ in labels]
    if not gold:
        return [[0] * len(labels) for _ in labels]
    from sklearn.metrics import confusion_matrix

    return confusion_matrix(gold, pred, labels=list(labels)).tolist()


def _fleiss_kappa(rows: Sequence[Sequence[Hashable]]) -> float | None:
    """Fleiss' kappa over items x raters, ``None`` with no item, fewer than two raters or a single label."""
    if not rows or len(rows[0]) < 2:
        return None
    codes, domain = _encode([list(column) for column in zip(*rows, strict=True)])
    if len(domain) < 2:
        return None
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    table, _ = aggregate_raters(codes.T.astype(int))
    return _finite(fleiss_kappa(table, method="fleiss"))


def _nominal_alpha(columns: Sequence[Sequence[Hashable | None]]) -> float | None:
    """Krippendorff's nominal alpha over raters x items, labels encoded as integer codes."""
    # Codes rather than the labels themselves: krippendorff reads the string "nan" as a missing value.
    codes, _ = _encode(columns)
    return _alpha(codes, "nominal")


def _alpha(columns: Sequence[Sequence[float | None]] | np.ndarray, level: str) -> float | None:
    """Krippendorff's alpha over raters x items (``None``/NaN = missing), ``None`` when undefined."""
    import krippendorff

    data = np.array([[np.nan if v is None else v for v in column] for column in columns], dtype=float)
    pairable = data.size and (np.sum(~np.isnan(data), axis=0) >= 2).any()
    if not pairable or np.unique(data[~np.isnan(data)]).size < 2:
        return None
    # Alpha is 0/0 when the pairable units hold a single value; numpy would warn, we return None instead.
    with np.errstate(divide="ignore", invalid="ignore"):
        return _finite(krippendorff.alpha(reliability_data=data, level_of_measurement=level))


def _encode(columns: Sequence[Sequence[Hashable | None]]) -> tuple[np.ndarray, list[Hashable]]:
    """Raters x items label codes as floats (NaN = missing) and the sorted label domain they index."""
    domain = _label_set(*columns)
    index = {label: i for i, label in enumerate(domain)}
    codes = np.array([[np.nan if v is None else index[v] for v in column] for column in columns], dtype=float)
    return codes, domain


def _label_set(*sequences: Sequence[Hashable | None]) -> list[Hashable]:
    """Every non-None label in ``sequences``, sorted (by ``str`` when the labels are not mutually orderable)."""
    found = {label for sequence in sequences for label in sequence if label is not None}
    try:
        return sorted(found)
    except TypeError:
        return sorted(found, key=str)


def _mean_defined(values: Any) -> float | None:
    """Mean of the values that are not ``None``, ``None`` when there are none."""
    return stats.mean([v for v in values if v is not None])


def _check_lengths(**sequences: Sequence[Any]) -> None:
    """Raise ``ValueError`` unless all named sequences have the same length."""
    lengths = {name: len(sequence) for name, sequence in sequences.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"sequences differ in length: {lengths}")


def _finite(value: Any) -> float | None:
    """``value`` as a Python float, or ``None`` when it is NaN or infinite."""
    result = float(value)
    return result if math.isfinite(result) else None
