"""Combine the verdicts of several member judges into one ensemble verdict per item.

Pure functions over ``votes``: judge name -> item key -> label (a system name or ``"tie"``) or score,
``None`` where that judge has no valid verdict for the item. Missing votes are left out, never counted as
a tie or a 0, so an item nobody judged gets no ensemble label (``None``). Aggregations are chosen by name
from :data:`LABEL_COMBINERS` (``majority_vote``, ``weighted``, ``dawid_skene``) and
:data:`SCORE_COMBINERS` (``mean``, ``median``, ``weighted``).

Dawid-Skene's EM is in :mod:`runner.stats.dawid_skene`.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runner.core.registry import Registry
from runner.core.types import TIE
from runner.judging.aggregation import MAJORITY, NO_CONSENSUS, UNANIMOUS
from runner.stats.agreement import cohen_kappa, inter_judge
from runner.stats.dawid_skene import dawid_skene
from runner.stats.votes import Votes, cast_votes, item_keys

logger = logging.getLogger(__name__)



@dataclass(frozen=True)
class EnsembleItem:
    """The ensemble's verdict on one item.

    Attributes:
        item: The item key.
        label: The ensemble label; ``"tie"`` without a strict majority, ``None`` when no judge voted.
        confidence: ``unanimous``, ``majority`` or ``no_consensus``; ``None`` when no judge voted.
        votes: Judge -> label, only the judges that voted.
        posterior: Label -> posterior probability (``dawid_skene`` only).
    """

    item: str
    label: Hashable | None
    confidence: str | None
    votes: Mapping[str, Hashable]
    posterior: Mapping[Hashable, float] | None = None


@dataclass(frozen=True)
class EnsembleResult:
    """The outcome of one label aggregation over every item.

    Attributes:
        method: The aggregation's registered name.
        items: Item key -> :class:`EnsembleItem`, items in first-seen order.
        weights: Judge -> weight used (1.0 each for ``majority_vote``); ``None`` for ``dawid_skene``, whose
            confusion matrices play that role.
        estimated_accuracy: Judge -> Dawid-Skene estimated accuracy (``dawid_skene`` only).
        fit: Everything :func:`dawid_skene` returned (``dawid_skene`` only).
    """

    method: str
    items: Mapping[str, EnsembleItem]
    weights: Mapping[str, float] | None = None
    estimated_accuracy: Mapping[str, float | None] | None = None
    fit: Mapping[str, Any] = field(default_factory=dict)

    @property
    def labels(self) -> dict[str, Hashable | None]:
        """Item key -> ensemble label."""
        return {key: entry.label for key, entry in self.items.items()}


LABEL_COMBINERS: Registry[Callable[..., EnsembleResult]] = Registry("ensemble label aggregation")
SCORE_COMBINERS: Registry[Callable[..., float | None]] = Registry("ensemble score aggregation")


def combine_labels(
    votes: Votes, method: str, weights: Mapping[str, float] | None = None, **params: Any
) -> EnsembleResult:
    """Combine every judge's label per item with the aggregation registered as ``method``.

    Args:
        votes: Judge -> item key -> label, ``None`` for a missing vote.
        method: ``majority_vote``, ``weighted`` or ``dawid_skene``.
        weights: Judge -> non-negative weight; required by ``weighted`` and rejected by the others.
        **params: The method's own parameters (``dawid_skene``: ``labels``, ``max_iter``, ``tol``, ``smoothing``).

    Returns:
        The per-item verdicts and per-judge weights or estimated accuracies.

    Raises:
        UnknownNameError: If ``method`` is not registered.
        ParamsError: If the parameters do not fit the method (also a TypeError).
        ValueError: If the weights do not name exactly the judges, or one is negative or not finite.
    """
    if weights is not None:
        params["weights"] = weights
    LABEL_COMBINERS.check_params(method, params)
    return LABEL_COMBINERS.get(method)(votes, **params)


def combine_scores(votes: Votes, method: str, weights: Mapping[str, float] | None = None) -> dict[str, float | None]:
    """Combine every judge's score per item with the aggregation registered as ``method``.

    Args:
        votes: Judge -> item key -> score, ``None`` for a missing score.
        method: ``mean``, ``median`` or ``weighted`` (weighted mean).
        weights: Judge -> non-negative weight; required by ``weighted`` and rejected by the others.

    Returns:
        Item key -> combined score (items in first-seen order), ``None`` when no judge scored the item or
        the judges that did all weigh 0.

    Raises:
        UnknownNameError: If ``method`` is not registered.
        ParamsError: If ``weights`` do not fit the method (also a TypeError).
        ValueError: If the weights do not name exactly the judges, or one is negative or not finite.
    """
    params: dict[str, Any] = {} if weights is None else {"weights": _checked_weights(votes, weights)}
    SCORE_COMBINERS.check_params(method, params)
    fn = SCORE_COMBINERS.get(method)
    result: dict[str, float | None] = {}
    for key in item_keys(votes):
        scores = {judge: float(v[key]) for judge, v in votes.items() if v.get(key) is not None}
        result[key] = fn(scores, **params) if scores else None
    return result


def member_comparison(
    votes: Votes, final: Mapping[str, Hashable | None], gold: Mapping[str, Hashable | None]
) -> dict[str, Any]:
    """Each member's and the ensemble's agreement with gold labels, over the items that have one.

    Args:
        votes: Judge -> item key -> label, ``None`` for a missing vote.
        final: Item key -> the ensemble's label (e.g. :attr:`EnsembleResult.labels`).
        gold: Item key -> gold label; ``None`` or an absent key means the item has no gold label.

    Returns:
        ``n_gold``, ``members`` (judge -> stats), ``ensemble`` (stats) and ``ensemble_minus_best_member``
        (accuracy difference, ``None`` if undefined); stats are ``n`` (voted items), ``unscored``,
        ``accuracy`` (over ``n``), ``accuracy_all`` (an unscored item counts as wrong) and ``cohen_kappa``.
    """
    keys = [key for key, label in gold.items() if label is not None]
    members = {judge: _versus_gold(by_item, gold, keys) for judge, by_item in votes.items()}
    ensemble = _versus_gold(final, gold, keys)
    best = max((m["accuracy"] for m in members.values() if m["accuracy"] is not None), default=None)
    gain = None if best is None or ensemble["accuracy"] is None else ensemble["accuracy"] - best
    return {"n_gold": len(keys), "members": members, "ensemble": ensemble, "ensemble_minus_best_member": gain}


def inter_judge_agreement(votes: Votes) -> dict[str, Any]:
    """Agreement between the member judges (:func:`runner.stats.agreement.inter_judge`) over every item.

    Args:
        votes: Judge -> item key -> label, ``None`` for a missing vote.

    Returns:
        What :func:`runner.stats.agreement.inter_judge` returns.
    """
    keys = item_keys(votes)
    return inter_judge({judge: [by_item.get(key) for key in keys] for judge, by_item in votes.items()})


@LABEL_COMBINERS.register("majority_vote")
def _majority_vote(votes: Votes) -> EnsembleResult:
    """Strict majority of the votes, as :func:`runner.judging.aggregation.majority_vote`."""
    return _weighted_vote(votes, {judge: 1.0 for judge in votes}, "majority_vote")


@LABEL_COMBINERS.register("weighted")
def _weighted(votes: Votes, weights: Mapping[str, float]) -> EnsembleResult:
    """Strict majority of the summed judge weights."""
    return _weighted_vote(votes, _checked_weights(votes, weights), "weighted")


@LABEL_COMBINERS.register("dawid_skene")
def _dawid_skene(
    votes: Votes,
    labels: Sequence[Hashable] | None = None,
    max_iter: int = 100,
    tol: float = 1e-6,
    smoothing: float = 1.0,
) -> EnsembleResult:
    """Strict majority of the Dawid-Skene posterior; the parameters are :func:`dawid_skene`'s."""
    fit = dawid_skene(votes, labels, max_iter, tol, smoothing)
    items = {}
    for key in item_keys(votes):
        cast = cast_votes(votes, key)
        posterior = fit["posteriors"].get(key)
        label, confidence = _decide(posterior or {}, cast)
        items[key] = EnsembleItem(key, label, confidence, cast, posterior)
    return EnsembleResult("dawid_skene", items, None, fit["accuracy"], fit)


@SCORE_COMBINERS.register("mean")
def _mean(scores: Mapping[str, float]) -> float:
    """Arithmetic mean of one item's scores."""
    return statistics.fmean(scores.values())


@SCORE_COMBINERS.register("median")
def _median(scores: Mapping[str, float]) -> float:
    """Median of one item's scores (the mean of the middle two for an even count)."""
    return float(statistics.median(scores.values()))


@SCORE_COMBINERS.register("weighted")
def _weighted_mean(scores: Mapping[str, float], weights: Mapping[str, float]) -> float | None:
    """Weighted mean of one item's scores, ``None`` when the judges that scored all weigh 0."""
    total = sum(weights[judge] for judge in scores)
    return sum(weights[judge] * score for judge, score in scores.items()) / total if total > 0 else None


def _weighted_vote(votes: Votes, weights: Mapping[str, float], method: str) -> EnsembleResult:
    """Per item, the label with more than half of the voting judges' weight, else a tie."""
    items = {}
    for key in item_keys(votes):
        cast = cast_votes(votes, key)
        shares: dict[Hashable, float] = {}
        for judge, label in cast.items():
            shares[label] = shares.get(label, 0.0) + weights[judge]
        items[key] = EnsembleItem(key, *_decide(shares, cast), cast)
    return EnsembleResult(method, items, dict(weights))


def _decide(shares: Mapping[Hashable, float], cast: Mapping[str, Hashable]) -> tuple[Hashable | None, str | None]:
    """(label, confidence): a strict majority of ``shares`` wins, otherwise a tie; nothing without votes."""
    if not cast:
        return None, None
    label, top = max(shares.items(), key=lambda kv: kv[1], default=(None, 0.0))
    total = sum(shares.values())
    if top * 2 <= total or math.isclose(top * 2, total, rel_tol=1e-9):  # isclose: 0.1 + 0.2 vs 0.3
        return TIE, NO_CONSENSUS
    return label, UNANIMOUS if all(vote == label for vote in cast.values()) else MAJORITY


def _versus_gold(
    pred: Mapping[str, Hashable | None], gold: Mapping[str, Hashable | None], keys: Sequence[str]
) -> dict[str, Any]:
    """``n``, ``unscored``, ``accuracy``, ``accuracy_all`` and ``cohen_kappa`` of ``pred`` on ``keys``."""
    pairs = [(pred[key], gold[key]) for key in keys if pred.get(key) is not None]
    correct = sum(p == g for p, g in pairs)
    return {
        "n": len(pairs),
        "unscored": len(keys) - len(pairs),
        "accuracy": correct / len(pairs) if pairs else None,
        "accuracy_all": correct / len(keys) if keys else None,
        "cohen_kappa": cohen_kappa([p for p, _ in pairs], [g for _, g in pairs]),
    }


def _checked_weights(votes: Votes, weights: Mapping[str, float]) -> dict[str, float]:
    """``weights`` as floats, after checking they name exactly the judges and are finite and >= 0."""
    missing, unknown = set(votes) - set(weights), set(weights) - set(votes)
    if missing or unknown:
        raise ValueError(f"weights must name exactly the judges: missing {sorted(missing)}, unknown {sorted(unknown)}")
    bad = {judge: w for judge, w in weights.items() if not (math.isfinite(w) and w >= 0)}
    if bad:
        raise ValueError(f"weights must be finite and >= 0, got {bad}")
    return {judge: float(weights[judge]) for judge in votes}
