"""A call's place among a stage's concurrent calls, lent back while the call only waits out its own Retry-After.

A stage (:class:`runner.judging.calls.PaidCalls`) lets ``concurrency`` calls in flight at once. A call whose 429 is
read as sporadic (:mod:`runner.llm.learned_rate`) waits its Retry-After alone while the others go on; holding its
place meanwhile would stall the stage (10% of calls holding a place for 1 s each leave a third of the places idle),
so the limiter lends the place for that wait (:meth:`CallSlot.lend_during`) and takes it back before the call is
sent again. The stage also says when a call may not be sent again (:func:`before_resend`: its run directory can no
longer be written, so a retry's answer could not be kept). The stage sets :data:`CURRENT_SLOT` for the task of each
call holding a place; nothing else does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from types import TracebackType
from typing import TypeVar

T = TypeVar("T")


class CallSlot:
    """One call's hold on a stage's semaphore, released exactly once whatever is cancelled when.

    Args:
        places: The stage's semaphore (a BoundedSemaphore: a release too many raises instead of widening it).
        stop: Raises when the call may not be sent again (see :func:`before_resend`); None: it always may.
    """

    def __init__(self, places: asyncio.Semaphore, stop: Callable[[], None] | None = None) -> None:
        self._places = places
        self.stop = stop
        self.held = False

    async def __aenter__(self) -> CallSlot:
        await self._places.acquire()
        self.held = True
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._give_back()

    def _give_back(self) -> None:
        if self.held:
            self.held = False
            self._places.release()

    async def lend_during(self, wait: Awaitable[T]) -> T:
        """Await ``wait`` with the place released, then take it back (queued behind calls waiting for one).

        Whatever ``wait`` raises (a cancellation included) propagates with the place released, and a cancellation
        while the place is taken back takes none (asyncio's acquire): either way ``held`` is False and the stage's
        exit releases nothing more, so a place is never released twice nor leaked.
        """
        self._give_back()
        result = await wait
        await self._places.acquire()
        self.held = True
        return result

CURRENT_SLOT: ContextVar[CallSlot | None] = ContextVar("judgesweep_call_slot", default=None)


def before_resend() -> None:
    """Raise what the stage of the current call says stops it from being sent again (runner.judging.calls.PaidCalls:
    the run directory could not take an answer); nothing outside a stage."""
    slot = CURRENT_SLOT.get()
    if slot is not None and slot.stop is not None:
        slot.stop()
