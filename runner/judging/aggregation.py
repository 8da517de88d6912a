"""Per-item aggregation of one judge's repeat votes, dispatched by name through :data:`AGGREGATIONS`.

:data:`AGGREGATIONS` is the label aggregations that the one registry (runner.judging.aggregations) offers for
repeats. Such an aggregation is a pure function ``(item_id, votes, **params) -> ItemResult`` where ``votes``
are the valid votes for one item (system names or ``"tie"``). Unscored and errored judgments never reach
it: :func:`aggregate_items` filters them out, so an item with no valid vote is a failure
(``final_verdict is None``), never a tie.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from runner.core.judgments import Judgments
from runner.core.types import ItemResult, Judgment, Order, Status
from runner.judging.aggregations import MAJORITY, REGISTRY, UNANIMOUS, Kind, Use

Aggregation = Callable[..., ItemResult]

AGGREGATIONS = REGISTRY.view(Kind.label, Use.repeats, "aggregation")

# Stages whose judgments count as verdicts; a later "synthesis" replaces the first "judge" round.
FINAL_STAGES = frozenset({"judge", "synthesis"})

__all__ = ["AGGREGATIONS", "FINAL_STAGES", "Aggregation", "aggregate_items", "final_judgments"]


def final_judgments(judgments: Sequence[Judgment]) -> Sequence[Judgment]:
    """Keep the last judgment per ``(item_id, repeat, order)`` among the verdict stages.

    A swap-and-synthesize run records a first ``judge`` round and then a ``synthesis`` round for the
    same key; the later one replaces the earlier. Keys keep the position of their first occurrence.

    Args:
        judgments: All judgments of a run, in the order they were recorded.

    Returns:
        One judgment per key, scored or not: ``judgments`` itself when every one is already final (the usual
        run: one verdict stage, one call per key), so a run's stored judgments (runner.core.judgments) are
        not copied into a list of objects; otherwise a new list.
    """
    if isinstance(judgments, Judgments) and judgments.keys_unique(FINAL_STAGES):
        return judgments  # checked on its columns: no key tuple per judgment
    last: dict[tuple[str, int, Order], int] = {}  # key -> position of its last judgment
    for n, (item_id, repeat, order, stage) in enumerate(_requests(judgments)):
        if stage in FINAL_STAGES:
            last[(item_id, repeat, Order(order))] = n
    if len(last) == len(judgments):  # every judgment final and its key's only one: positions are 0..n-1 in order
        return judgments
    return [judgments[n] for n in last.values()]


def _requests(judgments: Sequence[Judgment]) -> Iterator[tuple[str, int, Order | None, str]]:
    if isinstance(judgments, Judgments):
        return judgments.requests()
    return ((j.request.item_id, j.request.repeat, j.request.order, j.request.stage) for j in judgments)


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
        One :class:`ItemResult` per id in ``item_ids``. ``unanimous`` means every final judgment of the item was a
        valid vote for the same label: two agreeing votes beside an unscored one are a ``majority``.

    Raises:
        UnknownNameError: If ``name`` is not registered.
    """
    fn = AGGREGATIONS.get(name)
    votes: dict[str, list[str]] = {item_id: [] for item_id in item_ids}
    cast: Counter[str] = Counter()  # final judgments per item, valid or not
    for judgment in final_judgments(judgments):
        cast[judgment.item_id] += 1
        if judgment.status == Status.SCORED and judgment.winner is not None:
            if judgment.item_id in votes:
                votes[judgment.item_id].append(judgment.winner)
    results = (fn(item_id, tuple(votes[item_id]), **dict(params)) for item_id in item_ids)
    return [_unanimous_only_if_all_valid(r, cast[r.item_id]) for r in results]


def _unanimous_only_if_all_valid(result: ItemResult, cast: int) -> ItemResult:
    """An aggregation sees the valid votes only; an item with an unscored or failed judgment beside them is
    not unanimous, whatever its valid votes say."""
    if result.confidence == UNANIMOUS and cast > len(result.verdicts):
        return replace(result, confidence=MAJORITY)
    return result
