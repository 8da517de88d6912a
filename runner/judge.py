"""Judge execution: plan the calls for every item, run them concurrently, parse, journal.

Pairwise items are judged in the orders the order policy asks for; each order is its own judgment.
With the swap-and-synthesize strategy (LLMBar), a conflict between the two orders triggers a second
round that shows the judge both explanations.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from runner.config import OrderPolicy, ParserConfig, Strategy
from runner.parsing import parse_verdict
from runner.prompts import Template
from runner.types import TIE, Item, JudgeRequest, JudgeResponse, Judgment, Message, Order, Status, Verdict

STAGE_JUDGE = "judge"
STAGE_SYNTHESIS = "synthesis"
PAIRWISE_VARIABLES = frozenset({"output_a", "output_b"})
SYNTHESIS_VARIABLES = PAIRWISE_VARIABLES | {"explanation_a", "explanation_b"}


class CallClient(Protocol):
    """What the executor needs from a client (runner.client.JudgeClient provides it)."""

    async def complete(self, messages: tuple[Message, ...]) -> JudgeResponse:  # noqa: D102
        ...


class JudgmentSink(Protocol):
    """Where each judgment goes the moment it exists (runner.store.Journal provides it)."""

    def append(self, judgment: Judgment) -> None:  # noqa: D102
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


def plan_orders(policy: OrderPolicy, seed: int, item_id: str, repeat: int) -> tuple[Order, ...]:
    """The presentation orders for one (item, repeat); swap_random is a seeded, order-free coin."""
    if policy is OrderPolicy.both:
        return (Order.AB, Order.BA)
    if policy is OrderPolicy.fixed:
        return (Order.AB,)
    coin = random.Random(f"{seed}:{item_id}:{repeat}").random()
    return (Order.AB,) if coin < 0.5 else (Order.BA,)


def shown(item: Item, order: Order) -> tuple[str, str]:
    """System names in the order they are shown: (as A, as B)."""
    ours, baseline = item.candidates[0].system, item.candidates[1].system
    return (ours, baseline) if order is Order.AB else (baseline, ours)


def pair_variables(item: Item, order: Order) -> dict[str, str]:
    """Template variables for one order: the item's variables plus output_a / output_b."""
    first, second = item.candidates if order is Order.AB else item.candidates[::-1]
    return {**item.variables, "output_a": first.text, "output_b": second.text}


def swap_output_refs(text: str) -> str:
    """Swap "Output (a)" and "Output (b)" (either case), as LLMBar does for a reused explanation."""
    return re.sub(r"([Oo]utput) \(([ab])\)", lambda m: f"{m[1]} ({'b' if m[2] == 'a' else 'a'})", text)


def _winner(label: str | None, item: Item, order: Order) -> str | None:
    if label is None:
        return None
    if label == TIE:
        return TIE
    first, second = shown(item, order)
    return first if label == "A" else second


class Executor:
    """Runs a plan over items with bounded concurrency, journaling every call as it completes."""

    def __init__(self, plan: JudgePlan, client: CallClient, sink: JudgmentSink) -> None:
        self.plan = plan
        self.client = client
        self.sink = sink
        self._slots = asyncio.Semaphore(plan.concurrency)

    async def _call(self, item: Item, repeat: int, order: Order, stage: str,
                    messages: tuple[Message, ...]) -> Judgment:
        request = JudgeRequest(item_id=item.id, repeat=repeat, order=order, stage=stage, messages=messages)
        async with self._slots:
            response = await self.client.complete(messages)
        if response.error_type is not None:
            judgment = Judgment(request, response, parse_verdict_error(response), None, Status.ERROR)
        else:
            parser = self.plan.synthesis_parser if stage == STAGE_SYNTHESIS else self.plan.parser
            verdict = parse_verdict(parser.name, response.text, self.plan.labels, parser.params)
            status = Status.SCORED if verdict.ok else Status.UNSCORED
            judgment = Judgment(request, response, verdict, _winner(verdict.label, item, order), status)
        self.sink.append(judgment)
        return judgment

    async def _judge_orders(self, item: Item, repeat: int, orders: tuple[Order, ...]) -> list[Judgment]:
        calls = [self._call(item, repeat, o, STAGE_JUDGE, self.plan.template.render(pair_variables(item, o)))
                 for o in orders]
        return list(await asyncio.gather(*calls))

    async def _synthesize(self, item: Item, repeat: int, first: list[Judgment]) -> list[Judgment]:
        by_winner = {j.winner: j for j in first}
        ours, baseline = item.candidates[0].system, item.candidates[1].system
        if set(by_winner) != {ours, baseline}:
            return []  # no conflict (or an unreadable first round): the first round is final
        calls = []
        for order in (Order.AB, Order.BA):
            explanations: Mapping[str, str] = {}
            for system, j in by_winner.items():
                text = (j.response.text or "").strip()
                explanations[system] = text if j.request.order is order else swap_output_refs(text)
            first_shown, second_shown = shown(item, order)
            variables = {**pair_variables(item, order), "explanation_a": explanations[first_shown],
                         "explanation_b": explanations[second_shown]}
            assert self.plan.synthesis_template is not None  # checked in pipeline validation
            messages = self.plan.synthesis_template.render(variables)
            calls.append(self._call(item, repeat, order, STAGE_SYNTHESIS, messages))
        return list(await asyncio.gather(*calls))

    async def _judge_unit(self, item: Item, repeat: int) -> list[Judgment]:
        orders = plan_orders(self.plan.order_policy, self.plan.seed, item.id, repeat)
        first = await self._judge_orders(item, repeat, orders)
        if self.plan.strategy is Strategy.swap_synthesize:
            return first + await self._synthesize(item, repeat, first)
        return first

    async def run(self, items: list[Item]) -> list[Judgment]:
        """Judge every item ``repeats`` times; returns judgments in (item, repeat, order, stage) order."""
        units = [self._judge_unit(item, r) for item in items for r in range(self.plan.repeats)]
        results = await asyncio.gather(*units)
        return [j for unit in results for j in unit]


def parse_verdict_error(response: JudgeResponse) -> Verdict:
    """The verdict recorded for a failed call: no label, the error type as the reason."""
    return Verdict(label=None, reason=f"call_failed: {response.error_type}")

