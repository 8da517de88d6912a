"""The pairs of a pairwise run's final judgments, for its position bias: each ``(item, repeat)`` judged in both
orders and the outcome of each order, found by sorting integer columns.

A dict of ``(item, repeat) -> [AB outcome, BA outcome]`` and the list of the pairs judged in both orders held
~150 bytes per judgment at the peak of a 1,000,000-judgment run (500,000 key tuples, lists and pair tuples); here a
judgment is ~13 bytes of columns while they are read, and the pairs are grouped by their *kind* (the two orders'
outcomes), of which a run has a handful.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from runner.core.types import Judgment, Order, Status

__all__ = ["NOT_SCORED", "Outcome", "OrderPairs", "order_pairs"]

Outcome = tuple[str | None, str | None]  # (verdict label, winner) of a scored judgment
NOT_SCORED = -1  # the outcome code of a judgment that was not scored
_SLOT = {Order.AB: 0, Order.BA: 1}


@dataclass(frozen=True)
class OrderPairs:
    """The scored final judgments' outcomes, and the pairs judged in both orders grouped by kind.

    Attributes:
        judged: Each outcome and how many final judgments had it (scored ones only).
        kinds: The ``(AB outcome, BA outcome)`` of each kind of pair that occurs; None: that order was not scored.
        counts: The number of pairs of each kind (aligned with ``kinds``).
        items: The item code of every pair judged in both orders (codes count items from 0).
        kind: The index in ``kinds`` of every such pair (aligned with ``items``).
    """

    judged: dict[Outcome, int]
    kinds: tuple[tuple[Outcome | None, Outcome | None], ...]
    counts: tuple[int, ...]
    items: np.ndarray
    kind: np.ndarray

    def item_sums(self, per_kind: Sequence[int]) -> np.ndarray:
        """Per item code, the sum over its pairs of their kind's value in ``per_kind`` (0 for an item without one)."""
        values = np.asarray(per_kind, dtype=np.int64)[self.kind] if len(self.kind) else np.zeros(0, dtype=np.int64)
        sums = np.zeros(int(self.items.max()) + 1 if len(self.items) else 0, dtype=np.int64)
        np.add.at(sums, self.items, values)
        return sums


def order_pairs(finals: Iterable[Judgment]) -> OrderPairs:
    """The pairs of ``finals`` (one final judgment per ``(item, repeat, order)``; of two for the same key, the later
    one counts, as a dict assignment would)."""
    items: dict[str, int] = {}
    outcomes: dict[Outcome, int] = {}
    item, repeat, slot, outcome = array("i"), array("i"), array("b"), array("i")
    for j in finals:
        item.append(items.setdefault(j.item_id, len(items)))
        repeat.append(j.request.repeat)
        slot.append(_SLOT[Order(j.request.order)])
        scored = j.status == Status.SCORED
        outcome.append(outcomes.setdefault((j.verdict.label, j.winner), len(outcomes)) if scored else NOT_SCORED)
    codes = np.frombuffer(outcome, dtype=np.int32) if outcome else np.zeros(0, dtype=np.int32)
    counted = np.bincount(codes[codes != NOT_SCORED], minlength=len(outcomes))
    judged = {o: int(counted[code]) for o, code in outcomes.items()}
    pair_items, ab, ba = _both_orders(item, repeat, slot, codes)
    del item, repeat, slot, codes
    names = list(outcomes)
    width = len(names) + 1  # an outcome code and NOT_SCORED, shifted to 0..len(names)
    found, kind, counts = np.unique((ab + 1) * width + (ba + 1), return_inverse=True, return_counts=True)
    kinds = tuple((_named(names, int(k) // width - 1), _named(names, int(k) % width - 1)) for k in found)
    return OrderPairs(judged, kinds, tuple(int(c) for c in counts), pair_items, kind.astype(np.int64))


def _named(names: Sequence[Outcome], code: int) -> Outcome | None:
    return None if code == NOT_SCORED else names[code]


def _both_orders(item: array[int], repeat: array[int], slot: array[int], outcome: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(item code, AB outcome code, BA outcome code) of every ``(item, repeat)`` with a judgment in each order, the
    last judgment of each ``(item, repeat, order)`` counting; one sort of one integer key per judgment."""
    if not item:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    repeats = np.frombuffer(repeat, dtype=np.int32).astype(np.int64)
    low = int(repeats.min())
    key = np.frombuffer(item, dtype=np.int32).astype(np.int64) * (int(repeats.max()) - low + 1)
    key += repeats - low
    del repeats
    key *= 2
    key += np.frombuffer(slot, dtype=np.int8)
    order = np.argsort(key, kind="stable")
    key = key[order]
    last = np.flatnonzero(np.append(key[1:] != key[:-1], True))  # the last judgment of each (item, repeat, order)
    order, key = order[last], key[last] // 2  # ... and its (item, repeat): AB before BA where both are there
    first = np.flatnonzero(key[1:] == key[:-1])  # a pair's AB; its BA is next
    items = np.frombuffer(item, dtype=np.int32)[order[first]].astype(np.int64)
    return items, outcome[order[first]].astype(np.int64), outcome[order[first + 1]].astype(np.int64)
