"""The shipped aggregations, each registered once in :data:`REGISTRY` with its kind and uses.

The order of registration is the order an ensemble reports them in (its ``by_combine`` section): the votes,
then the score combines, then the model fitted over every item.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from typing import cast

from runner.core.types import TIE, ItemResult
from runner.judging.aggregations.records import MAJORITY, NO_CONSENSUS, UNANIMOUS, EnsembleItem, EnsembleResult
from runner.judging.aggregations.registry import BOTH, ENSEMBLE_ONLY, REGISTRY, Kind, Use
from runner.stats.dawid_skene import bootstrap_intervals, dawid_skene, param_problems
from runner.stats.votes import Votes, cast_votes, item_keys

logger = logging.getLogger(__name__)


@REGISTRY.register("majority_vote", Kind.label, BOTH)
def majority_vote(item_id: str, votes: Sequence[str]) -> ItemResult:
    """Strict-majority vote over the valid votes of one item.

    The label holding MORE than half of the votes wins (``"tie"`` can be that label). Without such a
    label the item is a tie with confidence ``no_consensus``. With no votes at all the item failed.

    Args:
        item_id: The item's id.
        votes: Valid votes in judgment order: system names or ``"tie"``.

    Returns:
        The item's result; ``confidence`` is ``unanimous``, ``majority`` or ``no_consensus``, and
        both ``final_verdict`` and ``confidence`` are ``None`` when there was no vote.
    """
    counts = dict(Counter(votes))  # Counter keeps first-seen order
    if not votes:
        return ItemResult(item_id, (), {}, None, None)
    label, top = max(counts.items(), key=lambda kv: kv[1])
    if top * 2 <= len(votes):
        final, confidence = TIE, NO_CONSENSUS
    else:
        final = label
        confidence = UNANIMOUS if len(counts) == 1 else MAJORITY
    return ItemResult(item_id, tuple(votes), counts, final, confidence)


@REGISTRY.register("weighted", Kind.label, ENSEMBLE_ONLY, weighted=True)
def weighted_vote(item_id: str, votes: Sequence[str], weights: Sequence[float]) -> ItemResult:
    """Strict majority of the summed weights: each vote counts its voter's weight (a tie without one).

    Args:
        item_id: The item's id.
        votes: The valid votes on the item.
        weights: The weight of each vote, in the same order (finite, >= 0).
    """
    shares: dict[Hashable, float] = {}
    for label, weight in zip(votes, weights, strict=True):
        shares[label] = shares.get(label, 0.0) + weight
    final, confidence = decide(shares, votes)
    return ItemResult(item_id, tuple(votes), dict(Counter(votes)), cast(str | None, final), confidence)


@REGISTRY.register("mean", Kind.label, frozenset({Use.repeats}))
def mean_preference(item_id: str, votes: Sequence[str]) -> ItemResult:
    """The mean of the votes as preferences: a vote gives its system 1 and the other 0, a tie 1/2 to each.

    The system whose mean is above 1/2 wins, exactly 1/2 is a tie; for a pair this is "more votes than the other
    system, ties aside". Over one judge's two orders it is JudgeBench's rule (utils/metrics.py: +1 per order that
    picks a system, -1 per order that picks the other, the system wins when the sum is above 0), so (A, tie) is A
    and (A, B) a tie. The ensemble's ``mean`` (judge.combine) averages each member's preference the same way.

    Args:
        item_id: The item's id.
        votes: The valid votes on the item: system names or ``"tie"``.
    """
    counts = dict(Counter(votes))
    if not votes:
        return ItemResult(item_id, (), {}, None, None)
    ties = counts.get(TIE, 0)
    shares = {label: (n + ties / 2) / len(votes) for label, n in counts.items() if label != TIE}
    final = next((label for label, share in shares.items() if share > 0.5), TIE)
    confidence = NO_CONSENSUS if final == TIE and len(counts) > 1 else UNANIMOUS if len(counts) == 1 else MAJORITY
    return ItemResult(item_id, tuple(votes), counts, final, confidence)


@REGISTRY.register("mean", Kind.score, BOTH)
def mean(values: Sequence[float]) -> float:
    """The arithmetic mean of an item's scores."""
    return statistics.fmean(values)


@REGISTRY.register("median", Kind.score, BOTH)
def median(values: Sequence[float]) -> float:
    """The median of an item's scores (the mean of the middle two for an even count; robust to one odd score)."""
    return float(statistics.median(values))


@REGISTRY.register("weighted", Kind.score, ENSEMBLE_ONLY, weighted=True)
def weighted_mean(values: Sequence[float], weights: Sequence[float]) -> float | None:
    """The weighted mean of an item's scores; ``None`` when the voters that scored it all weigh 0."""
    total = sum(weights)
    return sum(w * v for v, w in zip(values, weights, strict=True)) / total if total > 0 else None


@REGISTRY.register("dawid_skene", Kind.label, ENSEMBLE_ONLY, min_voters=3, whole_table=True, check=param_problems)
def dawid_skene_vote(
    votes: Votes,
    labels: Sequence[Hashable] | None = None,
    max_iter: int = 1000,
    tol: float = 1e-6,
    smoothing: float = 0.0,
    annotators: str = "judge",
    resamples: int = 100,
    level: float = 0.95,
    seed: int = 0,
) -> EnsembleResult:
    """Strict majority of the Dawid-Skene posterior (EM over every item's votes, no gold labels needed).

    ``max_iter``, ``tol`` and ``smoothing`` are :func:`runner.stats.dawid_skene.dawid_skene`'s; ``labels`` keeps a
    class nobody voted. ``annotators="judge"`` makes each judge one annotator (a vote column
    ``member[/order][/repeat]`` belongs to its member: its orders and repeats share one vote per item),
    ``"vote"`` every column its own; with fewer than 3 judges pooling is not identifiable, so each column stays
    an annotator and ``fit["annotators"]`` says ``"vote"``. ``resamples`` (seeded by ``seed``) bootstrap items
    for ``level`` intervals on the accuracies and priors (``fit["intervals"]``).
    """
    member_of = {column: column.split("/", 1)[0] for column in votes}
    if annotators == "judge" and len(set(member_of.values())) < 3 <= len(member_of):
        logger.warning("dawid_skene with %d judges: each of their %d vote columns is an annotator (one per "
                       "judge needs 3 judges)", len(set(member_of.values())), len(member_of))
        annotators = "vote"
    groups = member_of if annotators == "judge" else None
    fit = dawid_skene(votes, labels, max_iter, tol, smoothing, groups)
    fit["annotators"] = annotators
    fit["intervals"] = bootstrap_intervals(votes, fit, groups, resamples, level, seed, max_iter, tol, smoothing)
    items = {}
    for key in item_keys(votes):
        voted = cast_votes(votes, key)
        posterior = fit["posteriors"].get(key)
        label, confidence = decide(posterior or {}, list(voted.values()))
        items[key] = EnsembleItem(key, label, confidence, voted, posterior)
    return EnsembleResult("dawid_skene", items, None, fit["accuracy"], fit)


def decide(shares: Mapping[Hashable, float], votes: Sequence[Hashable]) -> tuple[Hashable | None, str | None]:
    """(label, confidence): a strict majority of ``shares`` wins, otherwise a tie; nothing without votes."""
    if not votes:
        return None, None
    label, top = max(shares.items(), key=lambda kv: kv[1], default=(None, 0.0))
    total = sum(shares.values())
    if top * 2 <= total or math.isclose(top * 2, total, rel_tol=1e-9):  # isclose: 0.1 + 0.2 vs 0.3
        return TIE, NO_CONSENSUS
    return label, UNANIMOUS if all(vote == label for vote in votes) else MAJORITY
