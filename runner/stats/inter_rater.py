"""Agreement between raters labelling the same items: several judges, or the human annotators of a dataset.

No rater is the reference here (agreement with gold labels is :mod:`runner.stats.agreement`): every pair of
raters is compared over the items both labelled, and all of them together with Fleiss' kappa and
Krippendorff's alpha. The human annotators' agreement is the ceiling a judge can be held to. As in
:mod:`runner.stats.agreement`, an undefined statistic is ``None`` and ``None`` marks a missing label.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from runner.stats import scores as stats
from runner.stats.coefficients import check_lengths, cohen_kappa, fleiss_kappa, nominal_alpha


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
    check_lengths(**labels_by_judge)
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
        "fleiss_kappa": fleiss_kappa(complete),
        "fleiss_n": len(complete),
        "krippendorff_alpha": nominal_alpha(columns),
    }


NOT_IDENTIFIED = ("annotator columns are not the same people on every item (dataset.annotators_identified=false): "
                  "pairwise Cohen's kappa would pair strangers, so only Fleiss' kappa and Krippendorff's alpha, "
                  "which need no identities, are reported")


def human_ceiling(annotations: Sequence[Sequence[Hashable | None]], judge: Sequence[Hashable | None] | None = None,
                  identified: bool = False) -> dict[str, Any]:
    """How well human annotators agree with each other, and the judge scored the same way: the ceiling.

    Each annotator column is scored against the :func:`majority` of the other columns (ties to the
    lowest-numbered of them) over the items where both exist; the judge is scored against that same reference on
    that same item set (an item it has no label for counts as a miss in its accuracy), so judge and humans stand
    side by side like for like.

    Args:
        annotations: Per item, the labels of its k annotators, always in the same column order (``None`` where a
            column has no label for the item).
        judge: The judge's label per item (same item order), ``None`` where it has none; omitted: humans only.
        identified: Whether column j is the same person on every item. Only then are pairwise Cohen's kappas
            (and their mean) reported; otherwise ``pairwise`` is empty and ``pairwise_omitted`` says why.

    Returns:
        Everything :func:`inter_judge` returns for columns named ``annotator1`` .. ``annotatorK``, plus
        ``annotators`` (k), ``identified``, ``mean_pairwise_accuracy``, ``leave_one_out`` (column ->
        ``{"n", "accuracy", "cohen_kappa"}``), ``mean_leave_one_out_accuracy``, ``mean_leave_one_out_kappa``;
        with ``judge``: ``judge_leave_one_out`` (column -> the judge's ``{"n", "accuracy", "cohen_kappa"}``
        against that column's reference on its items) and ``mean_judge_leave_one_out_accuracy`` / ``_kappa``.

    Raises:
        ValueError: If items have different numbers of annotations, or ``judge`` another length.
    """
    widths = {len(row) for row in annotations}
    if len(widths) > 1:
        raise ValueError(f"every item needs the same number of annotations (None for missing), got {sorted(widths)}")
    if judge is not None and len(judge) != len(annotations):
        raise ValueError(f"judge labels {len(judge)} for {len(annotations)} annotated items")
    k = widths.pop() if widths else 0
    names = [f"annotator{j + 1}" for j in range(k)]
    result = inter_judge({name: [row[j] for row in annotations] for j, name in enumerate(names)})
    references = {name: [_majority_without(row, j) for row in annotations] for j, name in enumerate(names)}
    leave_one_out = {name: _pair_agreement([row[j] for row in annotations], references[name])
                     for j, name in enumerate(names)}
    if not identified:
        result.update(pairwise=[], mean_pairwise_kappa=None, pairwise_omitted=NOT_IDENTIFIED)
    result.update(
        annotators=k,
        identified=identified,
        mean_pairwise_accuracy=_mean_defined(pair["accuracy"] for pair in result["pairwise"]),
        leave_one_out=leave_one_out,
        mean_leave_one_out_accuracy=_mean_defined(entry["accuracy"] for entry in leave_one_out.values()),
        mean_leave_one_out_kappa=_mean_defined(entry["cohen_kappa"] for entry in leave_one_out.values()),
    )
    if judge is not None:
        scored = {name: _judge_agreement([row[j] for row in annotations], references[name], judge)
                  for j, name in enumerate(names)}
        result.update(
            judge_leave_one_out=scored,
            mean_judge_leave_one_out_accuracy=_mean_defined(entry["accuracy"] for entry in scored.values()),
            mean_judge_leave_one_out_kappa=_mean_defined(entry["cohen_kappa"] for entry in scored.values()),
        )
    return result


def _judge_agreement(human: Sequence[Hashable | None], reference: Sequence[Hashable | None],
                     judge: Sequence[Hashable | None]) -> dict[str, Any]:
    """The judge against ``reference`` on the items where ``human`` and ``reference`` both exist (the human's items):
    ``n`` those items, ``accuracy`` with a missing judge label as a miss, ``cohen_kappa`` over the labelled ones."""
    rows = [(j, r) for h, r, j in zip(human, reference, judge, strict=True) if h is not None and r is not None]
    labelled = [(j, r) for j, r in rows if j is not None]
    return {
        "n": len(rows),
        "accuracy": sum(j == r for j, r in labelled) / len(rows) if rows else None,
        "cohen_kappa": cohen_kappa([j for j, _ in labelled], [r for _, r in labelled]),
    }


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


def _mean_defined(values: Any) -> float | None:
    """Mean of the values that are not ``None``, ``None`` when there are none."""
    return stats.mean([v for v in values if v is not None])
