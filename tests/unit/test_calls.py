"""Unit tests for runner.judging.calls: the window, answer sources and error budget the judge and generation
stages share."""

from __future__ import annotations

import asyncio
import gc
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.core.types import JudgeRequest, JudgeResponse, Message
from runner.judging.calls import ABORT_MIN_CALLS, BudgetReached, PaidCalls, RunAborted, run_windowed
from runner.llm.call_slot import CallSlot
from runner.llm.pacing import RateLimiter
from tests.builders import VirtualTimeLoop

MESSAGES: tuple[Message, ...] = (Message(role="user", content="hi"),)


def request(n: int = 0) -> JudgeRequest:
    return JudgeRequest(f"i{n}", 0, None, "judge", f"hash{n}")


def test_every_unit_is_kept_with_its_index_and_the_window_bounds_what_is_in_flight() -> None:
    in_flight, most, finished, taken = 0, 0, 0, []

    def units() -> Iterator[int]:
        for n in range(12):
            taken.append(n - finished)  # units taken before this one and not finished yet
            yield n

    async def work(n: int) -> int:
        nonlocal in_flight, most, finished
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.001 * (n % 3))  # finish out of order
        in_flight -= 1
        finished += 1
        return n * n

    kept: dict[int, int] = {}
    asyncio.run(run_windowed(units(), work, 3, kept.__setitem__))
    assert kept == {n: n * n for n in range(12)}
    assert most == 3
    assert max(taken) == 3  # read lazily: one unit past a full window waits for room


def test_a_failing_unit_cancels_the_rest_and_leaves_no_exception_unretrieved(caplog: pytest.LogCaptureFixture) -> None:
    started: list[int] = []

    async def work(n: int) -> int:
        started.append(n)
        await asyncio.sleep(0 if n == 2 else 10)
        if n == 2:
            raise ValueError("unit 2 broke")
        return n

    kept: dict[int, int] = {}
    with pytest.raises(ValueError, match="unit 2 broke"):
        asyncio.run(run_windowed(range(100), work, 4, kept.__setitem__))
    assert kept == {} and started == [0, 1, 2, 3]  # nothing past the window was started
    gc.collect()
    assert not [r for r in caplog.records if "exception was never retrieved" in r.getMessage()]


def test_units_finished_behind_the_one_that_aborts_are_kept() -> None:
    """Unit 0 aborts the run after units 1-3 finished: they were queued behind it (results reach `keep` in submission
    order once the window is not full) and are kept all the same, so a partial run summarizes them."""
    async def work(n: int) -> int:
        await asyncio.sleep(0.05 if n == 0 else 0.0)
        if n == 0:
            raise RunAborted("1 of 4 judge calls failed")
        return n

    kept: dict[int, int] = {}
    with pytest.raises(RunAborted):
        asyncio.run(run_windowed(range(4), work, 8, kept.__setitem__))
    assert kept == {1: 1, 2: 2, 3: 3}


class Client:
    def __init__(self, response: JudgeResponse) -> None:
        self.response, self.calls = response, 0

    async def complete(self, messages: tuple[Message, ...], repeat: int = 0) -> JudgeResponse:
        self.calls += 1
        return self.response


class Known:
    def __init__(self, known: dict[str, JudgeResponse]) -> None:
        self.known, self.put_hashes = known, []

    def get(self, req: JudgeRequest, messages: tuple[Message, ...]) -> JudgeResponse | None:
        return self.known.get(req.messages_hash)

    def put(self, req: JudgeRequest, messages: tuple[Message, ...], response: JudgeResponse) -> None:
        self.put_hashes.append(req.messages_hash)


def test_known_answers_are_not_paid_for_and_paid_successes_are_kept() -> None:
    client = Client(JudgeResponse(text="paid"))
    sources = Known({"hash0": JudgeResponse(text="known", source="journal")})
    calls = PaidCalls(client, sources, concurrency=2, max_error_rate=1.0, what="judge")
    journaled: list[str | None] = []

    def journal(response: JudgeResponse) -> str | None:
        journaled.append(response.text)
        return response.text

    async def both() -> list[str | None]:
        return [await calls.call(request(0), MESSAGES, journal), await calls.call(request(1), MESSAGES, journal)]

    assert asyncio.run(both()) == ["known", "paid"]
    assert (client.calls, sources.put_hashes, journaled) == (1, ["hash1"], ["known", "paid"])
    assert (calls.window, calls.budget.done) == (4, 2)


def test_failed_calls_are_not_kept_and_the_call_that_crosses_the_budget_is_journaled_first() -> None:
    sources = Known({})
    calls = PaidCalls(Client(JudgeResponse(text=None, error_type="Timeout", error="t")), sources,
                      concurrency=1, max_error_rate=0.5, what="generation")
    journaled: list[int] = []

    async def run_all() -> None:
        for n in range(ABORT_MIN_CALLS + 5):
            await calls.call(request(n), MESSAGES, lambda _, n=n: journaled.append(n))

    with pytest.raises(RunAborted, match=f"^{ABORT_MIN_CALLS} of {ABORT_MIN_CALLS} generation calls failed"):
        asyncio.run(run_all())
    assert journaled == list(range(ABORT_MIN_CALLS)) and sources.put_hashes == []


# --- a place lent while a call waits out a sporadic 429 alone (runner.llm.call_slot) --------------------------------

def test_a_lent_place_serves_a_waiting_call_and_is_released_once_whatever_is_cancelled() -> None:
    async def scenario(cancel: str) -> tuple[list[str], int]:
        places = asyncio.BoundedSemaphore(1)  # a release too many raises ValueError
        order: list[str] = []
        b_holds = asyncio.Event()

        async def a() -> None:
            async with CallSlot(places) as slot:
                order.append("a sent")
                await slot.lend_during(asyncio.sleep(0.01))
                order.append("a sent again")

        async def b() -> None:
            async with CallSlot(places):
                order.append("b sent")
                b_holds.set()
                await asyncio.sleep(0.05)
                order.append("b done")

        task_a = asyncio.ensure_future(a())
        await asyncio.sleep(0)
        task_b = asyncio.ensure_future(b())
        await b_holds.wait()  # b got a's place while a waits
        if cancel == "while lent":
            task_a.cancel()
        elif cancel == "while taking it back":
            await asyncio.sleep(0.02)  # a's wait is over; it queues for its place behind b
            task_a.cancel()
        await asyncio.gather(task_a, task_b, return_exceptions=True)
        return order, places._value

    order, free = asyncio.run(scenario("none"))
    assert order == ["a sent", "b sent", "b done", "a sent again"] and free == 1
    for cancel in ("while lent", "while taking it back"):
        order, free = asyncio.run(scenario(cancel))
        assert order == ["a sent", "b sent", "b done"] and free == 1, cancel  # neither leaked nor released twice


def test_sporadic_429s_wait_alone_while_the_others_fill_every_place() -> None:
    """10% seeded 429s (Retry-After 1 s) whatever the rate, on the real limiter and stage: a 429'd call waits out its
    own Retry-After with its place lent, so `concurrency` requests stay in flight meanwhile (never more), and the
    limiter neither pauses the others nor learns a rate."""
    loop = VirtualTimeLoop()
    limiter = RateLimiter(rpm=None, tpm=None, clock=loop.clock, sleep=asyncio.sleep)
    draws = random.Random(29)
    state = {"in_flight": 0, "holding": 0, "most": 0, "full_while_holding": 0}

    class SporadicProvider:
        async def complete(self, messages: tuple[Message, ...], repeat: int = 0) -> JudgeResponse:
            limited = 0
            while True:
                if limited:
                    state["holding"] += 1
                await limiter.acquire(1)  # a 429'd call waits its Retry-After here
                state["holding"] -= bool(limited)
                if draws.random() >= 0.1:
                    break
                limited += 1
                limiter.penalize(1.0)
            state["in_flight"] += 1
            state["most"] = max(state["most"], state["in_flight"])
            state["full_while_holding"] += state["in_flight"] == 8 and state["holding"] > 0
            await asyncio.sleep(0.2)
            state["in_flight"] -= 1
            limiter.record_success()
            return JudgeResponse(text="[[A]]", rate_limited=limited, attempts=limited + 1)

    calls = PaidCalls(SporadicProvider(), None, concurrency=8, max_error_rate=0.0, what="judge")
    kept: dict[int, JudgeResponse] = {}
    try:
        loop.run_until_complete(calls.run(range(300), lambda n: calls.call(request(n), MESSAGES, lambda r: r),
                                          kept.__setitem__))
    finally:
        loop.close()
    assert len(kept) == 300 and sum(r.rate_limited for r in kept.values()) > 20
    assert state["most"] == 8 and state["full_while_holding"] > 0
    assert limiter.learned_rate is None and limiter.waits == 0  # no pause, no pacing: only the 429'd calls waited


def test_at_the_budget_no_call_is_sent_and_the_calls_in_flight_finish_and_are_kept() -> None:
    """budget.max_usd (runner.judging.budget): the call whose worst case does not fit is not sent, nor any after it;
    the calls already sent finish and reach the journal, and their cost replaces their reservation."""
    from runner.judging.budget import Budget  # the budget module imports litellm's pricing: only this test needs it

    sent: list[int] = []
    release = asyncio.Event()

    class Client:
        async def complete(self, messages: tuple[Message, ...], repeat: int = 0) -> JudgeResponse:
            sent.append(len(sent))
            await release.wait()  # in flight until the refused call has been refused
            return JudgeResponse(text="[[A]]", cost_usd=0.5)

    budget = Budget(2.5, lambda messages: 1.0)  # two calls' worst case (1.0 each) fit with room to spare, not three
    calls = PaidCalls(Client(), None, concurrency=4, max_error_rate=1.0, what="judge", admission=budget)
    journaled: list[str] = []

    async def unit(n: int) -> str:
        if n == 2:  # the third call is refused while the first two are in flight; they answer once the stop is seen
            try:
                return await calls.call(request(n), MESSAGES, lambda r: f"i{n}")
            finally:
                asyncio.get_running_loop().call_later(0.05, release.set)
        return await calls.call(request(n), MESSAGES, lambda r: journaled.append(f"i{n}") or f"i{n}")

    kept: list[str] = []
    with pytest.raises(BudgetReached) as raised:
        asyncio.run(run_windowed(range(6), unit, 3, lambda index, value: kept.append(value)))
    assert sent == [0, 1] and sorted(journaled) == sorted(kept) == ["i0", "i1"]  # the refused unit is seen first
    assert raised.value.worst == 1.0 and budget.spent == 1.0 and budget.reserved == 0.0


def test_the_budget_stop_line_gives_figures_that_add_up() -> None:
    """Issue 44 point 7: "spent $0.0018 of $0.002" beside "reached" read as a contradiction; the line says the spending
    is within the limit and the refused call would have passed it, with the sum (and docs/how-to/batch.md quotes it)."""
    line = str(BudgetReached(0.0018, 0.002, 0.0004, resume="outputs/runs/x"))
    assert line == ("budget.max_usd reached: spent $0.001800 of the $0.002000 limit, and the next call could cost up "
                    "to $0.000400 ($0.002200 in all, over the limit), so nothing more was sent. Every answer is kept: "
                    "continue with resume=outputs/runs/x budget.max_usd=<more>")
    page = " ".join((Path(__file__).resolve().parents[2] / "docs" / "how-to" / "batch.md").read_text().split())
    assert line.replace("outputs/runs/x", "<run dir>") in page
