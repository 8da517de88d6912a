"""Combine the verdicts of several member judges into one ensemble verdict per item.

Pure functions over ``votes``: judge name -> item key -> label (a system name or ``"tie"``) or score,
``None`` where that judge has no valid verdict for the item. Missing votes are left out, never counted as
a tie or a 0, so an item nobody judged gets no ensemble label (``None``). Aggregations are chosen by name
from the one registry (runner.judging.aggregations): :data:`LABEL_COMBINERS` and :data:`SCORE_COMBINERS` are
its label and score aggregations usable for an ensemble's members (``majority_vote``, ``weighted``,
``dawid_skene``; ``mean``, ``median``, ``weighted``).

Dawid-Skene's EM is in :mod:`runner.stats.dawid_skene`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from runner.core.types import TIE
from runner.judging.aggregations import REGISTRY, AggregationRef, AggregationSpec, Kind, Use
from runner.judging.aggregations.records import EnsembleItem, EnsembleResult
from runner.stats.coefficients import cohen_kappa
from runner.stats.inter_rater import inter_judge
from runner.stats.votes import Votes, cast_votes, item_keys

logger = logging.getLogger(__name__)

LABEL_COMBINERS = REGISTRY.view(Kind.label, Use.ensemble, "ensemble label aggregation")
SCORE_COMBINERS = REGISTRY.view(Kind.score, Use.ensemble, "ensemble score aggregation")

__all__ = ["LABEL_COMBINERS", "SCORE_COMBINERS", "combine_labels", "combine_scores", "inter_judge_agreement",
           "member_comparison", "member_weights", "vote_methods"]


def combine_labels(
    votes: Votes, method: str, weights: Mapping[str, float] | None = None, **params: Any
) -> EnsembleResult:
    """Combine every judge's label per item with the aggregation registered as ``method``.

    Args:
        votes: Judge -> item key -> label, ``None`` for a missing vote.
        method: ``majority_vote``, ``weighted``, ``dawid_skene`` or another registered label aggregation.
        weights: Judge -> non-negative weight; required by a weighted aggregation and rejected by the others.
        **params: The method's own parameters (``dawid_skene``: ``labels``, ``max_iter``, ``tol``, ``smoothing``).

    Returns:
        The per-item verdicts and per-judge weights or estimated accuracies.

    Raises:
        UnknownNameError: If ``method`` is not registered.
        ParamsError: If the parameters do not fit the method (also a TypeError).
        ValueError: If the weights do not name exactly the judges, or one is negative or not finite.
    """
    spec = LABEL_COMBINERS.spec(method)
    if weights is not None:
        params["weights"] = weights
    LABEL_COMBINERS.check_params(method, params)
    if spec.weighted:
        params["weights"] = _checked_weights(votes, params["weights"])
    if spec.whole_table:
        result: EnsembleResult = spec.fn(votes, **params)
        return result
    return _vote_per_item(spec, votes, params)


def _vote_per_item(spec: AggregationSpec, votes: Votes, params: dict[str, Any]) -> EnsembleResult:
    """Each item's voters' labels through a per-item label aggregation (its weights lined up with the votes)."""
    weights = params.pop("weights", None)
    items = {}
    for key in item_keys(votes):
        cast = cast_votes(votes, key)
        per_vote = {} if weights is None else {"weights": [weights[judge] for judge in cast]}
        result = spec.fn(key, list(cast.values()), **per_vote, **params)
        items[key] = EnsembleItem(key, result.final_verdict, result.confidence, cast)
    return EnsembleResult(spec.name, items, dict.fromkeys(votes, 1.0) if weights is None else weights)


def combine_scores(
    votes: Votes, method: str, weights: Mapping[str, float] | None = None, **params: Any
) -> dict[str, float | None]:
    """Combine every judge's score per item with the aggregation registered as ``method``.

    Args:
        votes: Judge -> item key -> score, ``None`` for a missing score.
        method: ``mean``, ``median``, ``weighted`` (weighted mean) or another registered score aggregation.
        weights: Judge -> non-negative weight; required by a weighted aggregation and rejected by the others.
        **params: The method's own parameters.

    Returns:
        Item key -> combined score (items in first-seen order), ``None`` when no judge scored the item or
        the judges that did all weigh 0.

    Raises:
        UnknownNameError: If ``method`` is not registered.
        ParamsError: If ``weights`` do not fit the method (also a TypeError).
        ValueError: If the weights do not name exactly the judges, or one is negative or not finite.
    """
    fn = SCORE_COMBINERS.get(method)
    if weights is not None:
        params["weights"] = weights
    if "weights" in params:
        params["weights"] = _checked_weights(votes, params["weights"])
    SCORE_COMBINERS.check_params(method, params)
    weights = params.pop("weights", None)
    result: dict[str, float | None] = {}
    for key in item_keys(votes):
        scores = {judge: float(v[key]) for judge, v in votes.items() if v.get(key) is not None}
        per_vote = {} if weights is None else {"weights": [weights[judge] for judge in scores]}
        result[key] = fn(list(scores.values()), **per_vote, **params) if scores else None
    return result


def member_weights(members: Iterable[str], weights: Mapping[str, float], combine: AggregationRef) -> dict[str, float]:
    """Member -> the weight of each of its votes under a weighted combine.

    ``judge.weights`` is the default of the combine's ``params.weights``; a member neither names weighs 1.0.
    """
    chosen = combine.params.get("weights", weights)
    return {member: float(chosen.get(member, 1.0)) for member in members}


def vote_methods(voters: int | None = None) -> list[str]:
    """The label aggregations an ensemble offers that need no weights (``majority_vote``, ``dawid_skene``), in
    registration order; with ``voters``, those offered for that many."""
    return [spec.name for spec in REGISTRY.specs(Use.ensemble, (Kind.label,))
            if not spec.weighted and (voters is None or voters >= spec.min_voters)]


def member_comparison(
    votes: Votes, final: Mapping[str, Hashable | None], gold: Mapping[str, Hashable | None]
) -> dict[str, Any]:
    """Each member's and the ensemble's agreement with gold labels, over the items that have one.

    Args:
        votes: Judge -> item key -> label, ``None`` for a missing vote.
        final: Item key -> the ensemble's label (e.g. :attr:`EnsembleResult.labels`).
        gold: Item key -> gold label; ``None`` or an absent key means the item has no gold label.

    Returns:
        ``n_gold``, ``members`` (judge -> stats), ``ensemble`` (stats), ``ensemble_minus_best_member`` (accuracy
        difference, ``None`` if undefined) and ``ensemble_minus_best_member_ties_half`` (the same on
        ``accuracy_ties_half``); stats are ``n`` (voted items), ``unscored``, ``accuracy`` (over ``n``, a tie
        wrong), ``accuracy_ties_half`` (over ``n``, a tie half right where gold is no tie: the expected accuracy
        when every tie is broken by a fair coin), ``accuracy_all`` (an unscored item counts as wrong) and
        ``cohen_kappa``.

    A member judging both orders ties where its two verdicts disagree, while an ensemble (Dawid-Skene above all)
    seldom ties; counted as wrong, those ties flatter the ensemble against its members. Counted half right, for
    the members and the ensemble alike, both stand on the same footing.
    """
    keys = [key for key, label in gold.items() if label is not None]
    members = {judge: _versus_gold(by_item, gold, keys) for judge, by_item in votes.items()}
    ensemble = _versus_gold(final, gold, keys)
    return {"n_gold": len(keys), "members": members, "ensemble": ensemble,
            "ensemble_minus_best_member": _gain(members, ensemble, "accuracy"),
            "ensemble_minus_best_member_ties_half": _gain(members, ensemble, "accuracy_ties_half")}


def _gain(members: Mapping[str, Mapping[str, Any]], ensemble: Mapping[str, Any], key: str) -> float | None:
    """The ensemble's ``key`` minus the best member's; None if either is undefined."""
    best = max((m[key] for m in members.values() if m[key] is not None), default=None)
    return None if best is None or ensemble[key] is None else ensemble[key] - best


def inter_judge_agreement(votes: Votes) -> dict[str, Any]:
    """Agreement between the member judges (:func:`runner.stats.agreement.inter_judge`) over every item.

    Args:
        votes: Judge -> item key -> label, ``None`` for a missing vote.

    Returns:
        What :func:`runner.stats.agreement.inter_judge` returns.
    """
    keys = item_keys(votes)
    return inter_judge({judge: [by_item.get(key) for key in keys] for judge, by_item in votes.items()})


def _versus_gold(
    pred: Mapping[str, Hashable | None], gold: Mapping[str, Hashable | None], keys: Sequence[str]
) -> dict[str, Any]:
    """``n``, ``unscored``, ``accuracy``, ``accuracy_all``, ``cohen_kappa`` and ``accuracy_ties_half`` of ``pred``
    on ``keys``."""
    pairs = [(pred[key], gold[key]) for key in keys if pred.get(key) is not None]
    correct = sum(p == g for p, g in pairs)
    halves = sum(p == TIE and g != TIE for p, g in pairs) / 2  # a coin flip between the two systems
    return {
        "n": len(pairs),
        "unscored": len(keys) - len(pairs),
        "accuracy": correct / len(pairs) if pairs else None,
        "accuracy_all": correct / len(keys) if keys else None,
        "cohen_kappa": cohen_kappa([p for p, _ in pairs], [g for _, g in pairs]),
        "accuracy_ties_half": (correct + halves) / len(pairs) if pairs else None,
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
