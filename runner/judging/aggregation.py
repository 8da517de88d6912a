"""Per-item aggregation of judge votes, dispatched by name through :data:`AGGREGATIONS`.

An aggregation is a pure function ``(item_id, votes, **params) -> ItemResult`` where ``votes`` are
the valid votes for one item (system names or ``"tie"``). Unscored and errored judgments never reach
it: :func:`aggregate_items` filters them out, so an item with no valid vote is a failure
(``final_verdict is None``), never a tie.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runner.core.registry import Registry
from runner.core.types import TIE, ItemResult, Judgment, Order, Status

Aggregation = Callable[..., ItemResult]

AGGREGATIONS: Registry[Aggregation] = Registry("aggregation")

# Stages whose judgments count as verdicts; a later "synthesis" replaces the first "judge" round.
FINAL_STAGES = frozenset({"judge", "synthesis"})

UNANIMOUS = "unanimous"
MAJORITY = "majority"
NO_CONSENSUS = "no_consensus"
CONFIDENCES = (UNANIMOUS, MAJORITY, NO_CONSENSUS)


@AGGREGATIONS.register("majority_vote")
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
        return ItemResult(item_id, (), {}, None, None, {"num_votes": 0})
    label, top = max(counts.items(), key=lambda kv: kv[1])
    if top * 2 <= len(votes):
        final, confidence = TIE, NO_CONSENSUS
    else:
        final = label
        confidence = UNANIMOUS if len(counts) == 1 else MAJORITY
    return ItemResult(item_id, tuple(votes), counts, final, confidence, {"num_votes": len(votes)})


def final_judgments(judgments: Sequence[Judgment]) -> list[Judgment]:
    """Keep the last judgment per ``(item_id, repeat, order)`` among the verdict stages.

    A swap-and-synthesize run records a first ``judge`` round and then a ``synthesis`` round for the
    same key; the later one replaces the earlier. Keys keep the position of their first occurrence.

    Args:
        judgments: All judgments of a run, in the order they were recorded.

    Returns:
        One judgment per key, scored or not.
    """
    last: dict[tuple[str, int, Order], Judgment] = {}
    for judgment in judgments:
        if judgment.request.stage in FINAL_STAGES:
            req = judgment.request
            last[(req.item_id, req.repeat, Order(req.order))] = judgment
    return list(last.values())


def aggregate_items(
    judgments: Sequence[Judgment],
    item_ids: Sequence[str],
    name: str,
    params: Mapping[str, Any],
) -> list[ItemResult]:
    """Aggregate the scored judgments of every item with the registered aggregation ``name``.

    Args:
        judgments: All judgments of the run; only the final one per ``(item, repeat, order)`` is
            used (see :func:`final_judgments`) and only if it is SCORED.
        item_ids: Every item that was planned, in output order. An item without a scored
            judgment is kept and becomes a failure.
        name: Registered aggregation name, e.g. ``"majority_vote"``.
        params: Keyword parameters for the aggregation.

    Returns:
        One :class:`ItemResult` per id in ``item_ids``.

    Raises:
        UnknownNameError: If ``name`` is not registered.
    """
    fn = AGGREGATIONS.get(name)
    votes: dict[str, list[str]] = {item_id: [] for item_id in item_ids}
    for judgment in final_judgments(judgments):
        if judgment.status == Status.SCORED and judgment.winner is not None:
            if judgment.item_id in votes:
                votes[judgment.item_id].append(judgment.winner)
    return [fn(item_id, tuple(votes[item_id]), **dict(params)) for item_id in item_ids]
