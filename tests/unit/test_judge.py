"""Unit tests for runner.judging.judge: order planning, explanation swapping and the Executor.

The Executor runs for real against real templates and parsers; only the network is replaced, by a
tiny fake client whose answer is a function of the messages it receives.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from runner.core.choices import OrderPolicy, Strategy
from runner.core.config import ParserConfig
from runner.core.types import TIE, Candidate, Item, JudgeResponse, Judgment, Message, Order, Status, hash_messages
from runner.data.llmbar.build_replay import prompt_to_chatml, reverse_output_ab, synthesis_prompt
from runner.inputs.prompts import load_template
from runner.judging import calls
from runner.judging import judge as judge_module
from runner.judging.judge import (
    PARSER_ERROR,
    STAGE_JUDGE,
    STAGE_SYNTHESIS,
    Executor,
    JudgePlan,
    plan_orders,
    read_verdict,
    swap_output_refs,
)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PROMPTS = PROJECT_ROOT / "prompts"
LLMBAR = PROJECT_ROOT / "runner" / "data" / "llmbar"
LLMBAR_PARSER = ParserConfig(
    name="llmbar_output",
    params={"patterns": [r"Output \(([ab])\) is better", r"(?:^|\n) ?Output \(([ab])\)"]},
)
OURS, BASE = "alpha", "beta"
OURS_TEXT, BASE_TEXT = "ALPHA-ANSWER", "BETA-ANSWER"

Reply = Callable[[tuple[Message, ...]], JudgeResponse]


class FakeClient:
    """Stands in for the network: answers with ``reply(messages)`` and records every call."""

    def __init__(self, reply: Reply, delay_s: float = 0.0) -> None:
        self.reply = reply
        self.delay_s = delay_s
        self.calls: list[tuple[Message, ...]] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def complete(self, messages: tuple[Message, ...], repeat: int = 0) -> JudgeResponse:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
            self.calls.append(messages)
            return self.reply(messages)
        finally:
            self.in_flight -= 1


class ListSink:
    """Collects judgments in arrival order."""

    def __init__(self) -> None:
        self.judgments: list[Judgment] = []

    def append(self, judgment: Judgment) -> None:
        self.judgments.append(judgment)


def make_plan(
    *,
    template: str = "llmbar_vanilla",
    strategy: Strategy = Strategy.single,
    order_policy: OrderPolicy = OrderPolicy.both,
    repeats: int = 1,
    seed: int = 0,
    concurrency: int = 8,
) -> JudgePlan:
    synthesize = strategy is Strategy.swap_synthesize
    return JudgePlan(
        template=load_template(PROMPTS, template),
        synthesis_template=load_template(PROMPTS, "llmbar_swap_synthesize") if synthesize else None,
        strategy=strategy,
        labels=("A", "B"),
        parser=LLMBAR_PARSER,
        synthesis_parser=LLMBAR_PARSER,
        order_policy=order_policy,
        repeats=repeats,
        seed=seed,
        concurrency=concurrency,
    )


def make_item(item_id: str = "i1", ours_text: str = OURS_TEXT, base_text: str = BASE_TEXT) -> Item:
    return Item(
        id=item_id,
        variables={"instruction": f"instruction of {item_id}"},
        candidates=(Candidate(OURS, ours_text), Candidate(BASE, base_text)),
    )


def run(plan: JudgePlan, client: FakeClient, items: list[Item]) -> tuple[list[Judgment], ListSink]:
    sink = ListSink()
    judgments = asyncio.run(Executor(plan, client, sink).run(items))
    return judgments, sink


def sent(client: FakeClient, judgment: Judgment) -> tuple[Message, ...]:
    """The messages the fake client received for this judgment (requests keep only their hash)."""
    return {hash_messages(m): m for m in client.calls}[judgment.request.messages_hash]


def user(messages: tuple[Message, ...]) -> str:
    return next(m.content for m in messages if m.role == "user")


def alpha_shown_first(messages: tuple[Message, ...]) -> bool:
    text = user(messages)
    return text.index(OURS_TEXT) < text.index(BASE_TEXT)


def answer(text: str | None) -> JudgeResponse:
    return JudgeResponse(text=text, finish_reason="stop", prompt_tokens=10, completion_tokens=2)


def prefers_alpha(messages: tuple[Message, ...]) -> JudgeResponse:
    return answer("Output (a)" if alpha_shown_first(messages) else "Output (b)")


def always_first(messages: tuple[Message, ...]) -> JudgeResponse:
    return answer("Output (a)")


# --- plan_orders -----------------------------------------------------------------------------------


def test_plan_orders_both_and_fixed() -> None:
    assert plan_orders(OrderPolicy.both, 0, "x", 0) == (Order.AB, Order.BA)
    assert plan_orders(OrderPolicy.fixed, 0, "x", 0) == (Order.AB,)
    assert plan_orders(OrderPolicy.fixed, 9, "y", 3) == (Order.AB,)


def test_swap_random_is_deterministic_per_seed_item_repeat() -> None:
    ids = [f"item-{i}" for i in range(1000)]
    first = [plan_orders(OrderPolicy.swap_random, 7, i, 0) for i in ids]
    again = [plan_orders(OrderPolicy.swap_random, 7, i, 0) for i in ids]
    assert first == again
    assert all(len(orders) == 1 for orders in first)
    assert first != [plan_orders(OrderPolicy.swap_random, 8, i, 0) for i in ids]
    assert first != [plan_orders(OrderPolicy.swap_random, 7, i, 1) for i in ids]


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_swap_random_is_roughly_balanced(seed: int) -> None:
    orders = [plan_orders(OrderPolicy.swap_random, seed, f"item-{i}", 0)[0] for i in range(1000)]
    assert 430 <= orders.count(Order.AB) <= 570


# --- swap_output_refs ------------------------------------------------------------------------------


def test_swap_output_refs_swaps_both_cases() -> None:
    text = "Output (a) is longer, but output (b) is precise. Output (b) wins over output (a)."
    assert swap_output_refs(text) == "Output (b) is longer, but output (a) is precise. Output (a) wins over output (b)."


def test_swap_output_refs_leaves_other_text_untouched() -> None:
    text = "Assistant (a), OUTPUT (a), Output(a), Output (c), outputs (a) and (b), Output (A)\n\n  x"
    assert swap_output_refs(text) == text


def test_swap_output_refs_is_an_involution_and_matches_llmbar() -> None:
    text = "Output (a) is concise.\nTherefore, output (b) is better than Output (a)?"
    assert swap_output_refs(swap_output_refs(text)) == text
    assert swap_output_refs(text) == reverse_output_ab(text)


# --- Executor: single strategy ---------------------------------------------------------------------


def test_both_orders_map_positional_verdicts_back_to_systems() -> None:
    judgments, _ = run(make_plan(), FakeClient(prefers_alpha), [make_item()])
    assert [(j.request.order, j.verdict.label, j.winner, j.status) for j in judgments] == [
        (Order.AB, "A", OURS, Status.SCORED),
        (Order.BA, "B", OURS, Status.SCORED),
    ]


def test_position_biased_judge_splits_winners_across_orders() -> None:
    client = FakeClient(always_first)
    judgments, _ = run(make_plan(), client, [make_item()])
    assert [(j.request.order, j.winner) for j in judgments] == [(Order.AB, OURS), (Order.BA, BASE)]
    assert [alpha_shown_first(sent(client, j)) for j in judgments] == [True, False]
    assert sorted(map(hash_messages, client.calls)) == sorted(j.request.messages_hash for j in judgments)


def test_request_carries_item_repeat_and_stage() -> None:
    judgments, _ = run(make_plan(repeats=2), FakeClient(prefers_alpha), [make_item("a"), make_item("b")])
    assert [(j.item_id, j.request.repeat, j.request.order, j.request.stage) for j in judgments] == [
        (item_id, repeat, order, STAGE_JUDGE)
        for item_id in ("a", "b")
        for repeat in (0, 1)
        for order in (Order.AB, Order.BA)
    ]


def test_swap_random_policy_judges_the_planned_order_only() -> None:
    items = [make_item(f"i{n}") for n in range(20)]
    judgments, _ = run(make_plan(order_policy=OrderPolicy.swap_random, seed=3), FakeClient(always_first), items)
    assert [(j.item_id, j.request.order) for j in judgments] == [
        (it.id, plan_orders(OrderPolicy.swap_random, 3, it.id, 0)[0]) for it in items
    ]
    assert all(j.winner == (OURS if j.request.order is Order.AB else BASE) for j in judgments)


def test_tie_label_maps_to_tie() -> None:
    plan = replace(
        make_plan(template="mtbench_pair", order_policy=OrderPolicy.fixed),
        labels=("A", "B", TIE),
        parser=ParserConfig(name="mtbench_brackets"),
    )
    judgments, _ = run(plan, FakeClient(lambda m: answer("About even. [[C]]")), [make_item()])
    assert [(j.verdict.label, j.winner, j.status) for j in judgments] == [(TIE, TIE, Status.SCORED)]


def test_unparsable_output_is_unscored_with_reason_and_raw_text() -> None:
    judgments, _ = run(make_plan(), FakeClient(lambda m: answer("Both are good.")), [make_item()])
    assert len(judgments) == 2
    for j in judgments:
        assert j.status is Status.UNSCORED
        assert j.winner is None
        assert j.verdict.label is None
        assert j.verdict.reason
        assert j.response.text == "Both are good."


def test_client_error_response_is_an_error_without_winner() -> None:
    failed = JudgeResponse(text=None, error_type="RateLimitError", error="429 slow down")
    judgments, _ = run(make_plan(), FakeClient(lambda m: failed), [make_item()])
    assert len(judgments) == 2
    for j in judgments:
        assert j.status is Status.ERROR
        assert j.winner is None
        assert j.verdict.label is None
        assert "RateLimitError" in (j.verdict.reason or "")
        assert j.response is failed


def test_error_with_parsable_text_is_still_an_error() -> None:
    failed = JudgeResponse(text="Output (a)", error_type="Timeout", error="partial")
    judgments, _ = run(make_plan(order_policy=OrderPolicy.fixed), FakeClient(lambda m: failed), [make_item()])
    assert [(j.status, j.winner) for j in judgments] == [(Status.ERROR, None)]


# --- Executor: swap and synthesize -----------------------------------------------------------------

COT_A = "Output (a) answers exactly what was asked; output (b) adds extras. Therefore, Output (a) is better."
COT_B = "Output (b) is accurate while Output (a) is wrong. Therefore, Output (b) is better."


def cot_then_verdict(round1: Callable[[tuple[Message, ...]], str], synthesis: str = "Output (b)") -> Reply:
    """Round 1 (CoT prompt) answers ``round1(messages)``; the synthesis prompt gets ``synthesis``."""

    def reply(messages: tuple[Message, ...]) -> JudgeResponse:
        if "Debate between Assistant (a) and Assistant (b)" in user(messages):
            return answer(synthesis)
        return answer(round1(messages))

    return reply


def test_swap_synthesize_without_conflict_makes_no_synthesis_call() -> None:
    client = FakeClient(cot_then_verdict(lambda m: COT_A if alpha_shown_first(m) else COT_B))
    judgments, sink = run(make_plan(template="llmbar_cot", strategy=Strategy.swap_synthesize), client, [make_item()])
    assert [(j.request.stage, j.winner) for j in judgments] == [(STAGE_JUDGE, OURS), (STAGE_JUDGE, OURS)]
    assert len(client.calls) == 2
    assert len(sink.judgments) == 2


def test_swap_synthesize_with_unreadable_round1_makes_no_synthesis_call() -> None:
    client = FakeClient(cot_then_verdict(lambda m: COT_A if alpha_shown_first(m) else "I cannot decide."))
    judgments, _ = run(make_plan(template="llmbar_cot", strategy=Strategy.swap_synthesize), client, [make_item()])
    assert [j.status for j in judgments] == [Status.SCORED, Status.UNSCORED]
    assert len(client.calls) == 2


def test_swap_synthesize_on_conflict_runs_synthesis_in_both_orders() -> None:
    # Position-biased round 1: "(a) is better" in both orders, i.e. alpha in AB and beta in BA.
    client = FakeClient(cot_then_verdict(lambda m: COT_A, synthesis="Output (b)"))
    judgments, sink = run(make_plan(template="llmbar_cot", strategy=Strategy.swap_synthesize), client, [make_item()])
    assert [(j.request.stage, j.request.order, j.winner) for j in judgments] == [
        (STAGE_JUDGE, Order.AB, OURS),
        (STAGE_JUDGE, Order.BA, BASE),
        (STAGE_SYNTHESIS, Order.AB, BASE),
        (STAGE_SYNTHESIS, Order.BA, OURS),
    ]
    assert len(client.calls) == 4
    assert [j.request.stage for j in sink.judgments].count(STAGE_SYNTHESIS) == 2


def test_synthesis_prompt_puts_the_first_shown_systems_explanation_under_assistant_a() -> None:
    explanation = {Order.AB: COT_A, Order.BA: COT_A.replace("answers exactly", "is shorter and answers")}
    client = FakeClient(cot_then_verdict(lambda m: explanation[Order.AB if alpha_shown_first(m) else Order.BA]))
    item = make_item()
    judgments, _ = run(make_plan(template="llmbar_cot", strategy=Strategy.swap_synthesize), client, [item])
    synthesis = {j.request.order: user(sent(client, j)) for j in judgments if j.request.stage == STAGE_SYNTHESIS}
    head_a = "## Evaluation given by Assistant (a), who thinks Output (a) is better:\n"
    head_b = "## Evaluation given by Assistant (b), who thinks Output (b) is better:\n"
    # AB: alpha shown as (a); alpha won in round-1 order AB, so its explanation is used verbatim, and
    # beta's (written in BA, where beta was (a)) has its (a)/(b) references swapped.
    debate_ab = f"{head_a}{explanation[Order.AB]}\n{head_b}{reverse_output_ab(explanation[Order.BA])}\n"
    assert debate_ab in synthesis[Order.AB]
    # BA: beta shown as (a); its explanation was written in BA, so verbatim; alpha's is swapped.
    debate_ba = f"{head_a}{explanation[Order.BA]}\n{head_b}{reverse_output_ab(explanation[Order.AB])}\n"
    assert debate_ba in synthesis[Order.BA]


def test_synthesis_messages_equal_llmbars_rebuilt_prompt() -> None:
    rows = [json.loads(line) for line in (LLMBAR / "natural.jsonl").read_text(encoding="utf-8").splitlines()]
    row = next(r for r in rows if r["id"] == "natural-009")  # edge whitespace in input and output_1
    item = Item(
        id=row["id"],
        variables={"instruction": row["input"]},
        candidates=(Candidate("output_1", row["output_1"]), Candidate("output_2", row["output_2"])),
    )
    texts = {Order.AB: "  " + COT_A + "\n", Order.BA: COT_A.replace("exactly", "closely")}

    def round1(messages: tuple[Message, ...]) -> str:
        ab = user(messages).index(row["output_1"].strip()) < user(messages).index(row["output_2"].strip())
        return texts[Order.AB if ab else Order.BA]

    client = FakeClient(cot_then_verdict(round1))
    judgments, _ = run(make_plan(template="llmbar_cot", strategy=Strategy.swap_synthesize), client, [item])
    recorded = {  # LLMBar's round-1 record: "swap = False" is order ab; winners in original numbering
        "swap = False": {"winner": "1", "completion": [texts[Order.AB].strip(), "stop"]},
        "swap = True": {"winner": "2", "completion": [texts[Order.BA].strip(), "stop"]},
    }
    swap_txt = (LLMBAR / "llmbar_prompts" / "Swap.txt").read_text(encoding="utf-8")
    synthesis = {j.request.order: sent(client, j) for j in judgments if j.request.stage == STAGE_SYNTHESIS}
    assert set(synthesis) == {Order.AB, Order.BA}
    for order in (Order.AB, Order.BA):
        assert synthesis[order] == prompt_to_chatml(synthesis_prompt(swap_txt, row, order.value, recorded))


def test_replayed_llmbar_conflicts_hit_every_recorded_synthesis_call() -> None:
    """GPT-4's recorded swap round: every request the Executor builds is one LLMBar actually sent."""
    replay = [json.loads(x) for x in (LLMBAR / "replay" / "gpt-4.jsonl").read_text(encoding="utf-8").splitlines()]
    replay = [rec for rec in replay if rec["item"].startswith("natural-")]  # Natural only: 7 conflicts
    answers = {rec["key"]: rec["text"] for rec in replay if rec["strategy"] == "swap"}
    conflict_ids = sorted({rec["item"] for rec in replay if rec["strategy"] == "swap" and rec["stage"] == "synthesis"})
    rows = {r["id"]: r for r in map(json.loads, (LLMBAR / "natural.jsonl").read_text(encoding="utf-8").splitlines())}
    items = [
        Item(
            id=i,
            variables={"instruction": rows[i]["input"]},
            candidates=(Candidate("output_1", rows[i]["output_1"]), Candidate("output_2", rows[i]["output_2"])),
        )
        for i in conflict_ids
    ]
    missing = JudgeResponse(text=None, error_type="KeyError", error="not recorded")
    client = FakeClient(lambda m: answer(answers[hash_messages(m)]) if hash_messages(m) in answers else missing)
    judgments, _ = run(make_plan(template="llmbar_cot", strategy=Strategy.swap_synthesize), client, items)
    assert len(items) == 7
    assert len(judgments) == 4 * len(items)
    assert [j.status for j in judgments] == [Status.SCORED] * len(judgments)


# --- Executor: sink and concurrency ----------------------------------------------------------------


def test_every_judgment_reaches_the_sink_exactly_once() -> None:
    def mixed(messages: tuple[Message, ...]) -> JudgeResponse:
        instruction = user(messages)
        if "instruction of err" in instruction:
            return JudgeResponse(text=None, error_type="APIConnectionError", error="down")
        if "instruction of junk" in instruction:
            return answer("no idea")
        if "Debate between" in instruction:
            return answer("Output (a)")
        return answer(COT_A)

    items = [make_item(name) for name in ("ok1", "err", "junk", "ok2")]
    plan = make_plan(template="llmbar_cot", strategy=Strategy.swap_synthesize, repeats=2)
    judgments, sink = run(plan, FakeClient(mixed), items)
    assert len(judgments) == 2 * (4 + 2 + 2 + 4)  # conflicts in ok1/ok2 add a synthesis round
    assert len({id(j) for j in sink.judgments}) == len(sink.judgments)
    assert sorted(map(id, sink.judgments)) == sorted(map(id, judgments))
    assert {j.status for j in sink.judgments} == {Status.SCORED, Status.UNSCORED, Status.ERROR}


@pytest.mark.parametrize("limit", [1, 3])
def test_concurrency_bound_is_respected(limit: int) -> None:
    client = FakeClient(prefers_alpha, delay_s=0.01)
    items = [make_item(f"i{n}") for n in range(10)]
    judgments, _ = run(make_plan(concurrency=limit), client, items)
    assert len(judgments) == 20
    assert client.max_in_flight == limit


def test_a_truncated_answer_is_unscored_unless_the_rubric_reads_truncated_answers() -> None:
    cut = JudgeResponse(text="Output (a) is better for several reasons: first", finish_reason="length")
    parser = ParserConfig(name="llmbar_output")
    assert read_verdict(cut, parser, ("A", "B")).reason == "truncated"
    assert read_verdict(cut, parser, ("A", "B"), score_truncated=True).label == "A"
    failed = JudgeResponse(text=None, finish_reason="length", error_type="Timeout")
    assert read_verdict(failed, parser, ("A", "B"), score_truncated=True).reason == "call_failed: Timeout"


def test_a_parser_that_raises_keeps_the_paid_answer_unscored_and_journaled(monkeypatch, caplog) -> None:
    def broken_parser(*args, **kwargs):
        raise IndexError("a parser bug")

    monkeypatch.setattr(judge_module, "parse_verdict", broken_parser)
    judgments, sink = run(make_plan(), FakeClient(always_first), [make_item()])
    assert sink.judgments == judgments and len(judgments) == 2  # both answers reached the journal
    for j in judgments:
        assert (j.status, j.winner, j.response.text) == (Status.UNSCORED, None, "Output (a)")
        assert j.verdict.reason == f"{PARSER_ERROR}: IndexError: a parser bug"
    assert "reading the judge's answer failed" in caplog.text


def test_judgments_kept_in_memory_leave_their_texts_in_the_journal(tmp_path: Path) -> None:
    # A million judge explanations must not sit in memory until the run ends: once a unit is done, each
    # journaled answer keeps only its line's offset, and store.with_texts reads the text back for the results.
    from runner.storage.journal import Journal, judgment_record, with_texts
    from runner.storage.store import write_results

    def explain(messages: tuple[Message, ...]) -> JudgeResponse:
        return answer(f"A long explanation of {len(user(messages))} characters.\nOutput (a) is better.")

    path = tmp_path / "journal.jsonl"
    items = [make_item(f"i{n}") for n in range(5)]
    client = FakeClient(explain)  # "Output (a)" in both orders: a conflict, so a synthesis round per item
    with Journal(path) as journal:
        plan = make_plan(strategy=Strategy.swap_synthesize)
        judgments = asyncio.run(Executor(plan, client, journal).run(items))
    assert len(judgments) == 20
    synthesis = [user(m) for m in client.calls if "A long explanation" in user(m)]
    assert len(synthesis) == 10  # the first round's texts reached the synthesis prompts before being dropped
    assert all(j.response.text is None and j.response.journal_at is not None for j in judgments)
    assert all(j.request.messages_hash == "" for j in judgments)  # 113 bytes a judgment, read back like the text
    journal_rows = {(r["item_id"], r["order"], r["stage"]): r for r in map(json.loads, path.read_text().splitlines())}
    for j in with_texts(judgments, path):
        assert judgment_record(j) == journal_rows[(j.item_id, j.request.order.value, j.request.stage)]
    write_results(tmp_path / "results.jsonl", with_texts(judgments, path))
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert all(r["raw_response"].endswith("Output (a) is better.") for r in rows)



def test_journaled_judgments_are_stored_column_by_column(tmp_path: Path) -> None:
    # a run's judgments come back as runner.core.judgments.Judgments, every journaled one in its columns (~100 bytes)
    from runner.core.judgments import Judgments
    from runner.storage.journal import Journal

    with Journal(tmp_path / "journal.jsonl") as journal:
        client = FakeClient(lambda messages: answer("[[A]]"))
        judgments = asyncio.run(Executor(make_plan(), client, journal).run([make_item(f"i{n}") for n in range(3)]))
    assert isinstance(judgments, Judgments) and len(judgments) == 6
    assert "0 kept whole" in repr(judgments)


# --- the error budget -------------------------------------------------------------------------------


def test_error_budget_aborts_once_with_the_count_that_crossed_it() -> None:
    """Calls finishing after the abort (concurrent ones were in flight) re-raise the first abort unchanged:
    CI once read a neighbour's '21 of 21' instead of the '20 of 20' that stopped the run."""
    budget = calls.ErrorBudget(0.05, "judge")
    failed = JudgeResponse(text=None, error_type="BadRequestError", error="x")
    for _ in range(calls.ABORT_MIN_CALLS - 1):
        budget.count(failed)
    with pytest.raises(calls.RunAborted) as first:
        budget.count(failed)
    assert str(first.value) == "20 of 20 judge calls failed (100% > max_error_rate 5%); first: BadRequestError: x"
    with pytest.raises(calls.RunAborted) as later:
        budget.count(JudgeResponse(text="ok"))
    assert later.value is first.value
    assert (budget.done, budget.failed) == (20, 20)


def test_error_budget_at_the_maximum_rate_does_not_abort() -> None:
    budget = calls.ErrorBudget(0.05, "generation")
    budget.count(JudgeResponse(text=None, error_type="Timeout", error="t"))
    for _ in range(19):
        budget.count(JudgeResponse(text="ok"))
    assert (budget.done, budget.failed) == (20, 1)  # 5% is not more than 5%
