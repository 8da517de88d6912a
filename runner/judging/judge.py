"""Judge execution: plan the calls for every item, run them concurrently, parse, journal.

Pointwise items get one call per repeat that scores their single candidate on the rubric's criteria.
Pairwise items are judged in the orders the order policy asks for; each order is its own judgment.
With the swap-and-synthesize strategy (LLMBar), a conflict between the two orders triggers a second
round that shows the judge both explanations. Before paying for a call the executor asks its answer
sources (an interrupted run's journal, the response cache) whether the answer is already known; the
calls, their window and error budget are :mod:`runner.judging.calls`, shared with generation.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from runner.core.choices import OrderPolicy, Strategy
from runner.core.config import ParserConfig
from runner.core.errors import WriteFailed
from runner.core.judgments import Judgments
from runner.core.types import (
    TIE,
    Item,
    JudgeRequest,
    JudgeResponse,
    Judgment,
    Message,
    Order,
    Status,
    Verdict,
    hash_messages,
)
from runner.inputs.prompts import Template
from runner.judging.calls import Admission, AnswerSource, CallClient, CallCounts, PaidCalls, RunAborted
from runner.judging.parsers.labels import parse_verdict
from runner.judging.parsers.scores import parse_scores
from runner.judging.scoring import Scoring
from runner.llm.responses import NO_ANSWER

log = logging.getLogger(__name__)

STAGE_JUDGE = "judge"
PARSER_ERROR = "parser_error"  # the reason of an answer whose parser raised: a parser bug, never the judge's
STAGE_SYNTHESIS = "synthesis"
# response_a / response_b: the users' own prompts' names for the same texts (a dataset variable of that name wins)
PAIRWISE_VARIABLES = frozenset({"output_a", "output_b", "response_a", "response_b"})
POINTWISE_VARIABLES = frozenset({"output", "criteria"})
SYNTHESIS_VARIABLES = PAIRWISE_VARIABLES | {"explanation_a", "explanation_b"}
TRUNCATED = "truncated"


class MessageSink(Protocol):
    """Where each judgment's rendered messages go just before its journal line (runner.storage.messages)."""

    def put(self, messages: tuple[Message, ...], sha256: str | None = None) -> str:  # noqa: D102
        ...


class JudgmentSink(Protocol):
    """Where each judgment goes the moment it exists (runner.storage.store.Journal provides it)."""

    def append(self, judgment: Judgment) -> int | None:  # noqa: D102  (the line's byte offset, if any)
        ...


@dataclass(frozen=True)
class JudgePlan:
    """Everything the executor needs besides the items, the client and the sink."""

    template: Template
    synthesis_template: Template | None
    strategy: Strategy
    labels: tuple[str, ...]
    parser: ParserConfig
    synthesis_parser: ParserConfig
    order_policy: OrderPolicy
    repeats: int
    seed: int
    concurrency: int
    neutralize: bool = True
    max_error_rate: float = 1.0  # abort once more than this share of calls failed (after ABORT_MIN_CALLS)
    scoring: Scoring | None = None  # pointwise: the rubric's criteria; None for pairwise plans
    score_truncated: bool = False  # rubric.score_truncated: read answers cut off at max_tokens (reproduction only)
    first_repeat: int = 0  # the run's sample x repeats: an independent repetition asks repeats of its own

    @property
    def repeat_indices(self) -> range:
        """The repeat index of each of the run's ``repeats`` samples of an item (its seed, coin and cache key)."""
        return range(self.first_repeat, self.first_repeat + self.repeats)


def plan_orders(policy: OrderPolicy, seed: int, item_id: str, repeat: int) -> tuple[Order, ...]:
    """The presentation orders for one (item, repeat); swap_random is a seeded, order-free coin."""
    if policy is OrderPolicy.both:
        return (Order.AB, Order.BA)
    if policy is OrderPolicy.fixed:
        return (Order.AB,)
    coin = random.Random(f"{seed}:{item_id}:{repeat}").random()
    return (Order.AB,) if coin < 0.5 else (Order.BA,)


def planned_calls(policy: OrderPolicy, repeats: int, n_items: int, pointwise: bool = False) -> int:
    """First-round calls a run plans (synthesis calls come on top and depend on the answers)."""
    return n_items * repeats * (2 if policy is OrderPolicy.both and not pointwise else 1)


def shown(item: Item, order: Order) -> tuple[str, str]:
    """System names in the order they are shown: (as A, as B)."""
    ours, baseline = item.candidates[0].system, item.candidates[1].system
    return (ours, baseline) if order is Order.AB else (baseline, ours)


def pair_variables(item: Item, order: Order) -> dict[str, str]:
    """Template variables for one order: the item's variables plus output_a / output_b (also as response_a /
    response_b, unless the dataset maps variables of those names)."""
    first, second = item.candidates if order is Order.AB else item.candidates[::-1]
    return {"response_a": first.text, "response_b": second.text, **item.variables,
            "output_a": first.text, "output_b": second.text}


def swap_output_refs(text: str) -> str:
    """Swap "Output (a)" and "Output (b)" (either case), as LLMBar does for a reused explanation."""
    return re.sub(r"([Oo]utput) \(([ab])\)", lambda m: f"{m[1]} ({'b' if m[2] == 'a' else 'a'})", text)


def _winner(label: str | None, item: Item, order: Order | None) -> str | None:
    if label is None or order is None:
        return None
    if label == TIE:
        return TIE
    first, second = shown(item, order)
    return first if label == "A" else second


def _unreadable(response: JudgeResponse, score_truncated: bool = False) -> Verdict | None:
    """Why a response cannot be read at all (a failed call, a 200 without an answer, an answer cut off at max_tokens),
    or None."""
    if response.error_type is not None:
        return Verdict(label=None, reason=f"call_failed: {response.error_type}")
    if response.finish_reason in NO_ANSWER:  # a 200 that held no answer, or none that could be read
        return Verdict(label=None, reason=response.finish_reason)
    if response.finish_reason == "length" and not score_truncated:
        return Verdict(label=None, reason=TRUNCATED)
    return None


def read_verdict(response: JudgeResponse, parser: ParserConfig, labels: tuple[str, ...],
                 score_truncated: bool = False) -> Verdict:
    """The pairwise verdict of one response: failed calls (and, unless ``score_truncated``, answers cut
    off at max_tokens) are never scored."""
    return _unreadable(response, score_truncated) or parse_verdict(parser.name, response.text, labels, parser.params)


def read_scores(response: JudgeResponse, parser: ParserConfig, criteria: tuple) -> Verdict:
    """The pointwise scores of one response: failed calls and truncated answers are never scored."""
    return _unreadable(response) or parse_scores(parser.name, response.text, criteria, parser.params)


def _without_texts(judgments: list[Judgment]) -> list[Judgment]:
    """A finished unit's judgments without the answer texts and messages hashes their journal lines hold (see
    JudgeResponse.journal_at): a run keeps what aggregation needs, not a million judge explanations."""
    return [j if j.response.journal_at is None else
            replace(j, request=replace(j.request, messages_hash=""), response=replace(j.response, text=None))
            for j in judgments]


class Executor:
    """Runs a plan over items with bounded concurrency, journaling every call as it completes."""

    def __init__(self, plan: JudgePlan, client: CallClient, sink: JudgmentSink,
                 sources: AnswerSource | None = None, messages: MessageSink | None = None,
                 admission: Admission | None = None) -> None:
        self.plan = plan
        self.completed: Judgments | None = None  # set when a run stops early: the units it completed
        self.messages = messages
        self.client = client
        self.sink = sink
        self.sources = sources
        self._calls = PaidCalls(client, sources, plan.concurrency, plan.max_error_rate, "judge", admission)

    @property
    def calls(self) -> CallCounts:
        """This executor's calls so far (runner.judging.calls.CallCounts): those finished, their failures, and the
        retries and 429s the client counts (runner.llm.client.JudgeClient), those of a call cut off by an abort
        included; a client that counts none (a test's) gives the finished calls' own."""
        counts = self._calls.budget.calls
        resent, limited = getattr(self.client, "resent", None), getattr(self.client, "rate_limited", None)
        if isinstance(resent, int) and isinstance(limited, int):
            counts = replace(counts, retries=resent, rate_limited=limited)
        return counts

    def _read(self, item: Item, request: JudgeRequest, response: JudgeResponse
              ) -> tuple[Verdict, str | None, float | None]:
        """(verdict, winner, overall score) of one response."""
        winner = score = None
        if self.plan.scoring is not None:
            criteria = self.plan.scoring.for_item(item)
            verdict = read_scores(response, self.plan.parser, criteria)
            if verdict.ok:
                score = self.plan.scoring.overall(verdict.scores, criteria)
        else:
            parser = self.plan.synthesis_parser if request.stage == STAGE_SYNTHESIS else self.plan.parser
            verdict = read_verdict(response, parser, self.plan.labels, self.plan.score_truncated)
            winner = _winner(verdict.label, item, request.order)
        return verdict, winner, score

    def _judgment(self, item: Item, request: JudgeRequest, response: JudgeResponse) -> Judgment:
        try:
            verdict, winner, score = self._read(item, request, response)
        except Exception as exc:  # a parser bug must not lose a paid answer: it is journaled, unscored, with why
            log.exception("item %s: reading the judge's answer failed; kept unscored with its raw text", item.id)
            reason = f"{PARSER_ERROR}: {type(exc).__name__}: {exc}"
            verdict, winner, score = Verdict(label=None, reason=reason), None, None
        if response.error_type is not None:
            status = Status.ERROR
        else:
            status = Status.SCORED if verdict.ok else Status.UNSCORED
        return Judgment(request, response, verdict, winner, status, score)

    async def _call(self, item: Item, repeat: int, order: Order | None, stage: str,
                    messages: tuple[Message, ...]) -> Judgment:
        request = JudgeRequest(item.id, repeat, order, stage, hash_messages(messages))

        def journal(response: JudgeResponse) -> Judgment:
            judgment = self._judgment(item, request, response)
            unstored = None
            if self.messages is not None:  # the input first, so a journaled answer always has it on disk
                try:
                    self.messages.put(messages, request.messages_hash)
                except WriteFailed as exc:  # the answer is still kept if it can be; a resume stores the input
                    unstored = exc
            at = self.sink.append(judgment)
            if unstored is not None:
                unstored.kept = True  # the answer is in the journal: never written again (runner.judging.unwritten)
                raise unstored
            return judgment if at is None else replace(judgment, response=replace(response, journal_at=at))

        return await self._calls.call(request, messages, journal)

    def _render(self, template: Template, variables: dict[str, Any]) -> tuple[Message, ...]:
        return template.render(variables, neutralize=self.plan.neutralize)

    async def _synthesize(self, item: Item, repeat: int, first: list[Judgment]) -> list[Judgment]:
        """The synthesis round of a conflict: each first-round answer (one per order) explains its winner."""
        by_winner = {j.winner: j for j in first}
        ours, baseline = item.candidates[0].system, item.candidates[1].system
        if set(by_winner) != {ours, baseline} or self.plan.synthesis_template is None:
            return []  # no conflict (or an unreadable first round): the first round is final
        calls = []
        for order in (Order.AB, Order.BA):
            explanations = {}
            for system, j in by_winner.items():
                text = (j.response.text or "").strip()  # the unit's own answers: their texts are not yet dropped
                explanations[system] = text if j.request.order is order else swap_output_refs(text)
            first_shown, second_shown = shown(item, order)
            variables = {**pair_variables(item, order), "explanation_a": explanations[first_shown],
                         "explanation_b": explanations[second_shown]}
            messages = self._render(self.plan.synthesis_template, variables)
            calls.append(self._call(item, repeat, order, STAGE_SYNTHESIS, messages))
        return list(await asyncio.gather(*calls))

    async def _judge_unit(self, item: Item, repeat: int) -> list[Judgment]:
        if self.plan.scoring is not None:
            variables = {**item.variables, "output": item.candidates[0].text,
                         "criteria": self.plan.scoring.for_item(item)}
            return [await self._call(item, repeat, None, STAGE_JUDGE, self._render(self.plan.template, variables))]
        orders = plan_orders(self.plan.order_policy, self.plan.seed, item.id, repeat)
        first = list(await asyncio.gather(*[
            self._call(item, repeat, o, STAGE_JUDGE, self._render(self.plan.template, pair_variables(item, o)))
            for o in orders]))
        if self.plan.strategy is Strategy.swap_synthesize:
            return first + await self._synthesize(item, repeat, first)
        return first

    def _units(self, items: Iterable[Item]) -> Iterator[tuple[Item, int]]:
        return ((item, r) for item in items for r in self.plan.repeat_indices)

    async def run(self, items: Iterable[Item]) -> Judgments:
        """Judge every item ``repeats`` times; judgments come back in plan order (item, repeat).

        Only a bounded number of (item, repeat) units is in flight at once, so prompts are rendered
        just before they are sent and a large dataset never sits rendered in memory.
        """
        done, units = Judgments(), array("q")  # judgments as their units finish, and each one's unit

        def keep(index: int, judgments: list[Judgment]) -> None:
            for judgment in _without_texts(judgments):
                done.append(judgment)
                units.append(index)

        try:
            await self._calls.run(self._units(items), lambda unit: self._judge_unit(*unit), keep)
        except RunAborted as exc:  # the units that completed go with the abort, so the run can summarize them
            done.reorder(np.argsort(np.frombuffer(units, dtype=np.int64), kind="stable"))
            exc.completed = self.completed = done
            exc.calls = self.calls
            raise
        except asyncio.CancelledError:  # another ensemble member aborted: what this one completed stays readable
            done.reorder(np.argsort(np.frombuffer(units, dtype=np.int64), kind="stable"))
            self.completed = done
            raise
        done.reorder(np.argsort(np.frombuffer(units, dtype=np.int64), kind="stable"))  # a unit's own order is kept
        return done
