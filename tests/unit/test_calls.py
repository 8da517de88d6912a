"""Unit tests for runner.judging.calls: the window, answer sources and error budget the judge and generation
stages share."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from runner.core.types import JudgeRequest, JudgeResponse, Message
from runner.judging.calls import ABORT_MIN_CALLS, PaidCalls, RunAborted, run_windowed

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
