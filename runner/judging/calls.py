"""Paid calls, shared by the judge stage (:class:`runner.judging.judge.Executor`) and the generation stage
(:class:`runner.judging.generation.Generator`).

A stage's calls look their answer up in the known sources (an interrupted run's journal, the response
cache) before paying, hold one of ``concurrency`` slots while the client works, are journaled the moment
they finish and then counted against the stage's error budget, so a call that aborts the run is on disk
first. A stage runs its units (an item, or an item's repeat) through a bounded window: only
``2 * concurrency`` are in flight at once, so prompts are rendered just before they are sent and a large
dataset never sits rendered in memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from runner.core.errors import WriteFailed
from runner.core.types import JudgeRequest, JudgeResponse, Message
from runner.judging.shutdown import SHUTDOWN, Interrupted
from runner.judging.unwritten import UnwrittenAnswers
from runner.llm import recorded
from runner.llm.call_slot import CURRENT_SLOT, CallSlot

ABORT_MIN_CALLS = 20  # judge this many calls before an error rate can abort the run

U = TypeVar("U")  # a unit of work
R = TypeVar("R")  # what a unit's task returns
T = TypeVar("T")  # what journaling a call returns


@dataclass(frozen=True)
class CallCounts:
    """What a stage's calls did, every finished call counted (also those of a unit an abort left unfinished, which no
    summarized judgment holds): calls made (sent, not known from the journal or the cache), failed, retries, 429s."""

    made: int = 0
    failed: int = 0
    retries: int = 0
    rate_limited: int = 0

    def __add__(self, other: CallCounts) -> CallCounts:
        return CallCounts(self.made + other.made, self.failed + other.failed, self.retries + other.retries,
                          self.rate_limited + other.rate_limited)

    def metrics(self) -> dict[str, int]:
        """As ``calls/*`` metrics (the keys runner.modes.summary.judge_metrics counts from judgments)."""
        return {"calls/made": self.made, "calls/failed": self.failed, "calls/retries": self.retries,
                "calls/rate_limited": self.rate_limited}


class RunAborted(RuntimeError):
    """Too many judge calls failed: the run stops instead of paying for more failures.

    ``completed`` is what the judge stage finished before it stopped (a ``Judgments`` of the units that completed,
    set by the stage on its way out; None when nothing was collected), so the run can summarize it; an ensemble's
    stage also sets ``completed_by_member`` (member name -> its completed judgments). ``calls`` counts the judge
    stage's calls (:class:`CallCounts`, set by the stage): every call it finished, also those of the units it did not
    complete, and every retry its client decided, also those of a call the abort cut off.
    """

    def __init__(self, message: str, completed: Sequence[Any] | None = None) -> None:
        super().__init__(message)
        self.completed = completed
        self.completed_by_member: dict[str, Any] | None = None
        self.calls: CallCounts | None = None


class BudgetReached(RunAborted):
    """The next call's worst case would take the run's spending over ``budget.max_usd`` (runner.judging.budget):
    nothing more is sent, but unlike a plain RunAborted the calls in flight finish and are kept (:func:`run_windowed`).

    Attributes:
        spent: Dollars the run's answers cost so far (with the reservations of the calls in flight at the stop, until
            the run re-raises it with what they cost once finished).
        limit: ``budget.max_usd``.
        worst: The worst case of the call that was refused.
    """

    def __init__(self, spent: float, limit: float, worst: float, resume: str | None = None,
                 what: str = "the next call") -> None:
        # three figures that add up: what was spent is within the limit, the refused call's worst case would pass it
        line = (f"budget.max_usd reached: spent ${spent:.6f} of the ${limit:.6f} limit, and {what} could cost up to "
                f"${worst:.6f} (${spent + worst:.6f} in all, over the limit), so nothing more was sent")
        if resume is not None:
            line += f". Every answer is kept: continue with resume={resume} budget.max_usd=<more>"
        super().__init__(line)
        self.what = what
        self.spent = spent
        self.limit = limit
        self.worst = worst


class ErrorBudget:
    """Counts finished calls and aborts once more than ``max_error_rate`` of them failed (after ABORT_MIN_CALLS).

    The first abort is final: calls still finishing afterwards re-raise the same RunAborted, so the message
    names the count that crossed the budget whichever concurrent call is read first.
    """

    def __init__(self, max_error_rate: float, what: str) -> None:
        self.max_error_rate = max_error_rate
        self.what = what  # "judge" or "generation"
        self.done = 0
        self.failed = 0
        self.calls = CallCounts()  # the calls made, a call finishing after the abort included
        self._first: JudgeResponse | None = None
        self._aborted: RunAborted | None = None

    def count(self, response: JudgeResponse) -> None:
        """Count one finished call; raises RunAborted when the budget is (or was already) exceeded."""
        if response.source == "call":
            self.calls += CallCounts(1, int(response.error_type is not None), max(response.attempts - 1, 0),
                                     response.rate_limited)
        if self._aborted is not None:
            raise self._aborted
        self.done += 1
        if response.error_type is not None:
            self.failed += 1
            self._first = self._first or response
        rate = self.failed / self.done
        if self.done >= ABORT_MIN_CALLS and rate > self.max_error_rate:
            first = self._first
            assert first is not None  # rate > max_error_rate >= 0 means a call failed
            self._aborted = RunAborted(
                f"{self.failed} of {self.done} {self.what} calls failed ({rate:.0%} > max_error_rate "
                f"{self.max_error_rate:.0%}); first: {first.error_type}: {first.error}")
            raise self._aborted


class CallClient(Protocol):
    """What a stage needs from a client (runner.llm.client.JudgeClient provides it)."""

    async def complete(self, messages: tuple[Message, ...], repeat: int = 0) -> JudgeResponse:  # noqa: D102
        ...


class AnswerSource(Protocol):
    """Answers known without paying: an interrupted run's journal, the response cache."""

    def get(self, request: JudgeRequest, messages: tuple[Message, ...]) -> JudgeResponse | None:  # noqa: D102
        ...

    def put(self, request: JudgeRequest, messages: tuple[Message, ...], response: JudgeResponse) -> None:  # noqa: D102
        ...


class Admission(Protocol):
    """Whether a call may be sent (runner.judging.budget.Budget): reserve its worst case, then settle its cost."""

    def admit(self, messages: tuple[Message, ...]) -> float:  # noqa: D102  (raises BudgetReached)
        ...

    def book(self, worst: float, what: str = "the next call") -> float:  # noqa: D102  (a whole batch)
        ...

    def settle(self, reserved: float, cost: float | None) -> None:  # noqa: D102
        ...


class PaidCalls:
    """One stage's calls: known answers first, then the client within ``concurrency`` slots; each finished
    call is journaled, then counted against the stage's error budget.

    Args:
        client: The stage's client.
        sources: Known answers, or None.
        concurrency: Calls in flight at once (units in flight: twice that, see :attr:`window`).
        max_error_rate: Abort once more than this share of calls failed (after ABORT_MIN_CALLS).
        what: What the calls are, for the abort message ("judge", "generation").
        admission: The run's spending limit, or None: each call sent is admitted by it first, and settled.
    """

    def __init__(self, client: CallClient, sources: AnswerSource | None, concurrency: int,
                 max_error_rate: float, what: str, admission: Admission | None = None) -> None:
        self.client = client
        self.admission = admission
        self.sources = sources
        self.window = 2 * concurrency
        self._slots = asyncio.BoundedSemaphore(concurrency)
        self.budget = ErrorBudget(max_error_rate, what)
        self.write_failed: WriteFailed | None = None  # the first answer the run directory could not take
        self.unwritten = UnwrittenAnswers()  # the paid answers that arrived after it

    async def call(self, request: JudgeRequest, messages: tuple[Message, ...],
                   journal: Callable[[JudgeResponse], T]) -> T:
        """Answer one request, hand the response to ``journal`` and count it; returns what ``journal`` returned.

        Raises:
            RunAborted: Once the error budget is exceeded (the response is journaled first).
            WriteFailed: The answer could not be journaled, or an earlier one could not (then it is not sent).
        """
        response = await self._answer(request, messages)
        try:
            journaled = await self._journaled(journal, response)
            finished = getattr(self.sources, "journaled", None)  # see _answer's "sending"
            if response.source == "call" and finished is not None:
                finished(request)
        except WriteFailed as exc:  # the run directory cannot be written: no call is sent after this one
            self.write_failed = self.write_failed or exc
            raise
        self.budget.count(response)
        return journaled

    async def _journaled(self, journal: Callable[[JudgeResponse], T], response: JudgeResponse) -> T:
        """``journal(response)``; a paid answer it could not write is held and written again (runner.judging.unwritten)
        while nothing more is sent."""
        try:
            return journal(response)
        except WriteFailed as exc:
            self.write_failed = self.write_failed or exc  # nothing is sent from now on, retries included
            if exc.kept or response.source != "call" or not response.paid:
                raise
            return await self.unwritten.keep(lambda: journal(response), exc)

    async def _answer(self, request: JudgeRequest, messages: tuple[Message, ...]) -> JudgeResponse:
        known = self.sources.get(request, messages) if self.sources is not None else None
        if known is not None:
            return known
        # the place is lent while the call waits out a sporadic 429 alone (pacing); no retry is sent once an answer
        # could not be written (_stop_resending)
        async with CallSlot(self._slots, stop=self._stop_resending) as slot:
            shutdown = SHUTDOWN.get()
            if shutdown is not None and shutdown.requested:  # not sent: the resumed run sends it
                raise Interrupted(shutdown.signum or 0)
            if self.write_failed is not None:  # its answer could not be kept: not sent, the resumed run sends it
                raise self.write_failed
            # sources that note what is sent (runner.storage.sources.AnswerSources.sending) say whether an earlier
            # process of the run had sent this call already
            sending = getattr(self.sources, "sending", None)
            again = bool(sending(request)) if sending is not None else False
            reserved = self.admission.admit(messages) if self.admission is not None else 0.0  # not sent when over
            token = recorded.CURRENT_CALL.set(_recorded_key(request))
            held = CURRENT_SLOT.set(slot)
            response = None
            try:
                response = await self.client.complete(messages, repeat=request.repeat)
            finally:
                CURRENT_SLOT.reset(held)
                recorded.CURRENT_CALL.reset(token)
                if self.admission is not None:  # a call cut off may have been paid: its worst case stays booked
                    self.admission.settle(reserved, response.cost_usd if response is not None else None)
        if again and response.paid:  # an earlier process sent it and lost the answer: this one is paid again
            response = replace(response, repaid=1)
        if self.sources is not None and response.error_type is None:
            self.sources.put(request, messages, response)
        return response

    def _stop_resending(self) -> None:
        """Raise the first WriteFailed, if any: a retry of a call in flight is not sent once the run directory could
        not take an answer (the resumed run sends it)."""
        if self.write_failed is not None:
            raise self.write_failed

    async def run(self, units: Iterable[U], work: Callable[[U], Awaitable[R]],
                  keep: Callable[[int, R], None]) -> None:
        """Run ``work`` on every unit with at most :attr:`window` units in flight, as :func:`run_windowed` does."""
        await run_windowed(units, work, self.window, keep)


def _recorded_key(request: JudgeRequest) -> recorded.Key | None:
    """Which recorded answer a recorded judge serves to this call: first-round judge calls only (a synthesis round
    or a generation has no (item, order, repeat) of its own in a recordings file)."""
    if request.stage != "judge":
        return None
    return request.item_id, request.order.value if request.order else None, request.repeat


async def run_windowed(units: Iterable[U], work: Callable[[U], Awaitable[R]], window: int,
                       keep: Callable[[int, R], None]) -> None:
    """Run ``work`` on every unit, at most ``window`` at once, and hand each result to ``keep`` with its unit's index.

    ``units`` is read lazily: the unit after a full window is taken, then waits for a place. Results reach
    ``keep`` as tasks finish while the window is full, then in submission order. When a unit raises (a
    RunAborted, say) the exception propagates, the units still in flight are cancelled (what completed is
    already in the journal), every unit that had finished still reaches ``keep`` (those queued behind the one that
    raised too) and every other task's outcome is collected, so none is left unretrieved. After a
    signal (runner.judging.shutdown) or a :class:`BudgetReached` (the spending limit) no unit is started; the units
    in flight finish (their calls not yet sent
    raise Interrupted, their answers arriving are kept) and then Interrupted is raised. A unit whose answer the run
    directory could not take (WriteFailed: disk full) stops the run the same way, and WriteFailed is raised; after a
    BudgetReached, the first one is raised once the units in flight are kept.
    """
    pending: dict[asyncio.Future[R], int] = {}
    shutdown = SHUTDOWN.get()
    stopped = False
    unwritable: WriteFailed | None = None
    over: BudgetReached | None = None

    def collect(task: asyncio.Future[R]) -> None:
        nonlocal stopped, unwritable, over
        try:
            keep(pending[task], task.result())
        except Interrupted:  # the unit was stopped before (some of) its calls were sent: the resumed run sends them
            stopped = True
        except WriteFailed as exc:  # as at a signal: no unit starts, those in flight keep what they can
            unwritable = unwritable or exc
        except BudgetReached as exc:  # as at a signal; the unit's answers so far are journaled
            over = over or exc
        del pending[task]  # a task leaves `pending` only once its result is kept: on an abort the others' errors
        # are collected below

    try:
        for index, unit in enumerate(units):
            if (shutdown is not None and shutdown.requested) or unwritable is not None or over is not None:
                break
            if len(pending) >= window:
                finished, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in finished:
                    collect(task)
                if (shutdown is not None and shutdown.requested) or unwritable is not None or over is not None:
                    break
            pending[asyncio.ensure_future(work(unit))] = index
        for task in list(pending):
            await asyncio.wait([task])
            collect(task)
    finally:  # on abort: stop paying; what completed is already in the journal
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for task, index in pending.items():  # units that had finished, queued behind the one that aborted: kept, so a
            if not task.cancelled() and task.exception() is None:  # partial run summarizes every unit that finished
                keep(index, task.result())
    if unwritable is not None:
        raise unwritable
    if over is not None:
        raise over
    if stopped or (shutdown is not None and shutdown.requested):
        raise Interrupted(shutdown.signum or 0 if shutdown is not None else 0)
