"""Paid answers the run directory could not take (disk full), held in memory and written again while room may return.

Once a write of the run directory fails the stage sends nothing more (runner.judging.calls.PaidCalls), but the calls
already at the judge still answer, and each answer is paid for. One that cannot be written either was lost, and paid
again by the resume (issue 44: 11 answers). Now each is held by its call and written again every
:data:`RETRY_S` until it is kept, or until the stage's ``shutdown_grace_s`` (the time the answers in flight get at a
stop, runner.judging.shutdown) has passed since the first failed write, or a signal stops the stage: making room
meanwhile keeps them all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TypeVar

from runner.core.errors import WriteFailed
from runner.judging.shutdown import SHUTDOWN

log = logging.getLogger(__name__)

RETRY_S = 0.5
T = TypeVar("T")


class UnwrittenAnswers:
    """One stage's paid answers whose journaling failed: each written again until it fits or the time is up."""

    def __init__(self) -> None:
        self._until: float | None = None  # the event loop's time when the stage stops trying
        self.held = 0  # answers that could not be written at first ...
        self.kept = 0  # ... and those of them written later

    async def keep(self, write: Callable[[], T], failed: WriteFailed) -> T:
        """``write()``'s result once it succeeds (tried every RETRY_S); ``failed`` raised when the time is up.

        Raises:
            WriteFailed: ``failed``: the answer is not in the journal (a resume pays for it again).
        """
        loop = asyncio.get_running_loop()
        shutdown = SHUTDOWN.get()
        if self._until is None:
            self._until = loop.time() + (shutdown.grace_s if shutdown is not None else 0.0)
        self.held += 1
        if self.held == 1:
            log.warning("%s: the paid answers that arrive are held in memory and written again every %.1f s for "
                        "%.0f s (shutdown_grace_s): make room to keep them, else a resume pays for them again",
                        failed, RETRY_S, max(0.0, self._until - loop.time()))
        while loop.time() < self._until and not (shutdown is not None and shutdown.requested):
            await asyncio.sleep(min(RETRY_S, self._until - loop.time()))
            try:
                result = write()
            except WriteFailed as again:
                if not again.kept:
                    continue
                self.kept += 1  # in the journal, another file failed: raised as the first time it would have been
                raise
            self.kept += 1
            log.info("a paid answer held in memory is in the journal (%d of %d so far)", self.kept, self.held)
            return result
        raise failed
