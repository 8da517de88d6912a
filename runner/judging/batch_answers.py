"""A batched judge stage's two ends around the provider's batch (runner.judging.batching): the :class:`Planner`,
which renders every first-round call as a live run would and hands over those no source answers (the batch's rows),
and the :class:`BatchedClient`, which answers the stage's calls from the collected batches, live for the rest."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runner.core.types import (
    Item,
    JudgeRequest,
    JudgeResponse,
    Judgment,
    Message,
    Status,
    Verdict,
    hash_messages,
)
from runner.judging.calls import Admission, AnswerSource
from runner.judging.judge import Executor, JudgePlan
from runner.llm.client import JudgeClient

PLANNED = JudgeResponse(text=None, error_type="batched")  # a planned call's placeholder: never journaled
AnswerKey = tuple[str, int]  # (messages sha256, repeat): what a batch row answers


class _Unused:
    """The planner's client and sink: planning sends and journals nothing."""

    async def complete(self, messages: tuple[Message, ...], repeat: int = 0) -> JudgeResponse:
        raise AssertionError("a planner sends no call")

    def append(self, judgment: Judgment) -> int | None:
        raise AssertionError("a planner journals nothing")


class Planner(Executor):
    """The executor's rendering of every first-round call, each call no source answers handed to ``planned``."""

    def __init__(self, plan: JudgePlan, sources: AnswerSource | None,
                 planned: Callable[[JudgeRequest, tuple[Message, ...]], None]) -> None:
        super().__init__(plan, _Unused(), _Unused(), sources)
        self.planned = planned

    async def _call(self, item: Item, repeat: int, order: Any, stage: str,
                    messages: tuple[Message, ...]) -> Judgment:
        request = JudgeRequest(item.id, repeat, order, stage, hash_messages(messages))
        if self.sources is None or self.sources.get(request, messages) is None:
            self.planned(request, messages)
        # no winner: no synthesis round is planned (it depends on the answers)
        return Judgment(request, PLANNED, Verdict(label=None, reason="batched"), None, Status.ERROR, None)


@dataclass
class BatchedClient:
    """A judge client answering from a collected batch, live for what the batch did not answer."""

    live: JudgeClient
    answers: Mapping[AnswerKey, JudgeResponse]
    unanswered: frozenset[AnswerKey]  # the batch's rows the provider failed, expired or cancelled
    sent_again: int = 0  # rows of the batch sent live
    admission: Admission | None = None  # budget.max_usd: admits each live call (the batch was booked whole)

    async def complete(self, messages: tuple[Message, ...], repeat: int = 0) -> JudgeResponse:
        """The batch's answer to this call, else a live call (admitted by the budget first, if any).

        Raises:
            BudgetReached: The live call's worst case would take the run over ``budget.max_usd``.
        """
        key = (hash_messages(messages), repeat)
        found = self.answers.get(key)
        if found is not None:
            return found
        reserved = self.admission.admit(messages) if self.admission is not None else 0.0
        self.sent_again += key in self.unanswered
        response = None
        try:
            response = await self.live.complete(messages, repeat)
        finally:
            if self.admission is not None:
                self.admission.settle(reserved, response.cost_usd if response is not None else None)
        return response

    @property
    def resent(self) -> int:
        """Retries of the live calls."""
        return self.live.resent

    @property
    def rate_limited(self) -> int:
        """429s of the live calls."""
        return self.live.rate_limited

    @property
    def long_waits(self) -> Any:
        """The live client's long waits (the progress bar watches them)."""
        return self.live.long_waits


def key_of(custom_id: str) -> AnswerKey:
    """What a row answers, from its ``custom_id`` (a journal key: item, repeat, order, stage, messages sha256)."""
    _item, repeat, _order, _stage, sha = json.loads(custom_id)
    return sha, int(repeat)


def line_messages(line: str) -> tuple[Message, ...]:
    """The messages of a batch input line (what its call's worst case is counted on)."""
    return tuple(Message(m["role"], m["content"]) for m in json.loads(line)["body"]["messages"])
