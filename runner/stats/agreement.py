"""Agreement of a judge's labels or scores with gold labels: accuracy, kappa, macro-F1, alpha, confusion.

Pure functions over plain label sequences that return plain, JSON-serializable dicts. A statistic that is
undefined on the data at hand (no pairs, a single class, no item labelled by two raters) is ``None``, never
NaN and never an exception: a report is built from whatever a run produced, and one degenerate slice must
not sink it. Malformed input (sequences of different lengths, a missing gold label) still raises
``ValueError``, because that is a caller bug rather than a property of the data.

Nominal labels are any hashable values of one kind (system names, "tie", 0/1/2); ``None`` marks a missing
label (an unscored judgment, or an annotator who did not label the item). Correlations with human scores
live in :mod:`runner.stats.scores` and are reused here, not recomputed. Agreement between judges, and between
human annotators, is :mod:`runner.stats.inter_rater`; the coefficients both use are
:mod:`runner.stats.coefficients`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

from runner.stats import scores as stats
from runner.stats.coefficients import alpha, check_lengths, cohen_kappa, finite, label_set, nominal_alpha

# sklearn.metrics (+0.5 s on top of scipy.stats, 1.3-1.5 s cold) is imported inside the functions that use it: a
# run imports none of the statistics stack before its first judge call (tests/unit/test_startup.py).


def label_agreement(
    pred: Sequence[Hashable | None], gold: Sequence[Hashable], labels: Sequence[Hashable] | None = None
) -> dict[str, Any]:
    """Agreement of a judge's nominal labels with gold labels.

    Unscored items (``pred`` is ``None``) are counted, not dropped silently: every metric is computed over
    the scored pairs, and ``accuracy_all`` additionally counts each unscored item as wrong.

    Args:
        pred: The judge's label per item, ``None`` where the judgment was unscored.
        gold: The gold (e.g. human-majority) label per item, in the same order.
        labels: Labels that macro-F1 averages over; default: the classes present in gold over the scored pairs
            (sklearn's ``labels=``: a label only the judge uses, such as a tie no gold label has, is not a class
            of its own, though its predictions still cost the gold classes their precision). Kappa and alpha
            always use every label seen.

    Returns:
        ``n`` (scored pairs), ``n_total``, ``unscored``, ``accuracy``, ``accuracy_all``, ``cohen_kappa``,
        ``macro_f1``, ``krippendorff_alpha`` (nominal), ``labels`` (those macro-F1 averaged over) and
        ``confusion`` = ``{"labels": [...], "matrix": [[...]]}`` with rows = gold and columns = pred; its
        labels are ``labels`` followed by any other label seen, so the matrix always sums to ``n``.

    Raises:
        ValueError: If the sequences differ in length or a gold label is ``None``.
    """
    check_lengths(pred=pred, gold=gold)
    if any(g is None for g in gold):
        raise ValueError("gold labels must not be None; leave items without a gold label out first")
    pairs = [(p, g) for p, g in zip(pred, gold, strict=True) if p is not None]
    scored_pred = [p for p, _ in pairs]
    scored_gold = [g for _, g in pairs]
    n, n_total = len(pairs), len(gold)
    correct = sum(p == g for p, g in pairs)
    seen = label_set(scored_pred, scored_gold)
    f1_labels = list(labels) if labels is not None else label_set(scored_gold)
    matrix_labels = f1_labels + [label for label in seen if label not in f1_labels]
    return {
        "n": n,
        "n_total": n_total,
        "unscored": n_total - n,
        "accuracy": correct / n if n else None,
        "accuracy_all": correct / n_total if n_total else None,
        "cohen_kappa": cohen_kappa(scored_pred, scored_gold),
        "macro_f1": _macro_f1(scored_gold, scored_pred, f1_labels),
        "krippendorff_alpha": nominal_alpha([scored_gold, scored_pred]),
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
    check_lengths(pred=pred, gold=gold)
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
        krippendorff_alpha_ordinal=alpha([scored_pred, scored_gold], "ordinal"),
        krippendorff_alpha_interval=alpha([scored_pred, scored_gold], "interval"),
    )
    return result


def _macro_f1(gold: Sequence[Hashable], pred: Sequence[Hashable], labels: Sequence[Hashable]) -> float | None:
    """Macro-averaged F1 over ``labels`` (a label never predicted nor present scores 0), ``None`` if none."""
    if not gold or not labels:
        return None
    from sklearn.metrics import f1_score

    return finite(f1_score(gold, pred, labels=list(labels), average="macro", zero_division=0))


def _confusion(gold: Sequence[Hashable], pred: Sequence[Hashable], labels: Sequence[Hashable]) -> list[list[int]]:
    """Confusion counts, rows = gold and columns = pred, in ``labels`` order."""
    if len(labels) < 2:
        # sklearn warns about a 1 x 1 matrix even when the labels are given; it is just the count anyway.
        return [[len(gold)] for _ in labels]
    if not gold:
        return [[0] * len(labels) for _ in labels]
    from sklearn.metrics import confusion_matrix

    return confusion_matrix(gold, pred, labels=list(labels)).tolist()
