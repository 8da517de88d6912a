"""What a pair judged in both orders counts for when one order has no verdict (the rubric's ``pair_error``).

With ``order=both`` each ``(item, repeat)`` is a pair of judgments, one per presentation order. When one of
them failed (the call errored or its verdict could not be read):

- ``keep`` (default): the other order's verdict counts as a vote and the failed one as a failure, as everywhere
  else in judgesweep.
- ``drop``: the whole pair is left out of the statistics (summary, gold accuracy, trust, bias), as FastChat's
  MT-Bench agreement does (``show_result``/``compute_agreement`` skip a row whose ``g1_winner`` or ``g2_winner``
  is ``"error"``), and the pairs left out are counted. Their answers stay in results.jsonl and in the judge
  metrics (calls, parse failures, cost): dropping is a choice of what the statistics count, not of what is kept.

This is the one place the policy acts: the pairwise report filters its judgments here before anything is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runner.core.choices import PairError
from runner.core.judgments import Judgments
from runner.core.types import Judgment, Status
from runner.judging.aggregation import final_judgments

__all__ = ["DroppedPairs", "apply_pair_error"]


@dataclass(frozen=True)
class DroppedPairs:
    """The pairs ``pair_error: drop`` left out: how many, how many judgments they held, and their items."""

    pairs: int
    judgments: int
    items: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The summary.json section ``pair_errors``."""
        return {"policy": PairError.drop.value, "dropped_pairs": self.pairs, "dropped_judgments": self.judgments,
                "dropped_items": list(self.items)}


def _failed_pairs(judgments: Sequence[Judgment]) -> set[tuple[str, int]]:
    """The ``(item, repeat)`` keys whose final judgment in some order is not scored."""
    return {(j.item_id, j.request.repeat) for j in final_judgments(judgments) if j.status is not Status.SCORED}


def apply_pair_error(policy: PairError, judgments: Sequence[Judgment]
                     ) -> tuple[Sequence[Judgment], DroppedPairs | None]:
    """The judgments the statistics count under ``policy``, and what was dropped (None under ``keep``).

    Args:
        policy: The rubric's ``pair_error``.
        judgments: All judgments of a single judge's pairwise run (every stage).

    Returns:
        ``judgments`` itself under ``keep`` or when no pair failed; otherwise the judgments of the other pairs
        (every stage of a dropped pair goes, its synthesis round included) and the count of what went.
    """
    if policy is PairError.keep:
        return judgments, None
    failed = _failed_pairs(judgments)
    if not failed:
        return judgments, DroppedPairs(0, 0, ())
    kept = Judgments(j for j in judgments if (j.item_id, j.request.repeat) not in failed)
    items = tuple(sorted({item_id for item_id, _ in failed}))
    return kept, DroppedPairs(len(failed), len(judgments) - len(kept), items)
