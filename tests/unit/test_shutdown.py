"""A stage's calls at SIGINT/SIGTERM (runner.judging.shutdown, run_windowed): nothing new starts, what is in flight
finishes within the grace period and is kept, a second signal cuts at once; no sockets (the signal is sent to this
process, whose event loop handles it)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest

from runner.judging.calls import run_windowed
from runner.judging.shutdown import SHUTDOWN, Interrupted, run_stage


def stage(units: int, window: int, answer_s: float, signal_after: int, grace_s: float = 5.0,
          second_signal: bool = False) -> tuple[list[int], list[int], BaseException | None]:
    """Run ``units`` units of ``answer_s`` each; SIGINT once ``signal_after`` are started. Returns (started, kept,
    the exception)."""
    started: list[int] = []
    kept: list[int] = []

    async def work(unit: int) -> int:
        shutdown = SHUTDOWN.get()
        assert shutdown is not None
        if shutdown.requested:
            raise Interrupted(shutdown.signum or 0)
        started.append(unit)
        if len(started) == signal_after:
            os.kill(os.getpid(), signal.SIGINT)
            if second_signal:
                asyncio.get_running_loop().call_later(0.1, os.kill, os.getpid(), signal.SIGINT)
        await asyncio.sleep(answer_s)
        return unit

    async def main() -> None:
        await run_windowed(range(units), work, window, lambda _i, unit: kept.append(unit))

    try:
        asyncio.run(run_stage(main(), grace_s))
    except (Interrupted, asyncio.CancelledError) as exc:
        return started, kept, exc
    return started, kept, None


def test_the_first_signal_starts_nothing_new_and_keeps_every_unit_in_flight() -> None:
    started, kept, exc = stage(units=20, window=4, answer_s=0.2, signal_after=4)
    assert isinstance(exc, Interrupted) and exc.exit_code == 130 and str(exc) == "interrupted by SIGINT"
    assert started == [0, 1, 2, 3] and sorted(kept) == started


def test_the_grace_period_ends_the_wait() -> None:
    began = time.monotonic()
    started, kept, exc = stage(units=4, window=4, answer_s=30.0, signal_after=2, grace_s=0.2)
    assert isinstance(exc, Interrupted) and kept == [] and time.monotonic() - began < 5


def test_a_second_signal_stops_at_once() -> None:
    began = time.monotonic()
    _, kept, exc = stage(units=4, window=4, answer_s=30.0, signal_after=2, grace_s=60.0, second_signal=True)
    assert isinstance(exc, Interrupted) and kept == [] and time.monotonic() - began < 5


def test_a_call_in_flight_outside_the_window_is_waited_for() -> None:
    """A pair's other order still at the judge when its sibling was stopped unsent: its answer is kept."""
    answered: list[str] = []

    async def in_flight() -> None:
        await asyncio.sleep(0.3)
        answered.append("ab")

    async def unsent() -> None:
        await asyncio.sleep(0.05)
        shutdown = SHUTDOWN.get()
        assert shutdown is not None and shutdown.requested
        raise Interrupted(signal.SIGINT)

    async def unit(_n: int) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.gather(in_flight(), unsent())

    async def main() -> None:
        await run_windowed(range(1), unit, 2, lambda _i, _r: None)

    with pytest.raises(Interrupted):
        asyncio.run(run_stage(main(), 5.0))
    assert answered == ["ab"]


def test_outside_the_main_thread_the_stage_runs_without_handlers() -> None:
    result: list[int] = []

    async def main() -> int:
        return 7

    thread = threading.Thread(target=lambda: result.append(asyncio.run(run_stage(main(), 1.0))))
    thread.start()
    thread.join()
    assert result == [7]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the main thread's handler is untouched
