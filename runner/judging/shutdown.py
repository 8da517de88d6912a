"""Stopping a stage's paid calls at SIGINT or SIGTERM without throwing away what was paid for.

At the first signal no new call is sent; the calls in flight get ``shutdown_grace_s`` seconds to answer, and each
answer is journaled as usual; then the stage ends with :class:`Interrupted` (exit 130 for SIGINT, 143 for
SIGTERM, with the resume command, see runner.app.cli). A second signal, or the end of the grace period, cancels
what is still in flight. The stage's executor reads the request through :data:`SHUTDOWN` (a context variable: the
tasks of the stage inherit it), so no signal state is global.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable
from contextvars import ContextVar
from typing import TypeVar

R = TypeVar("R")
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(RuntimeError):
    """A signal stopped the paid calls; every answer that arrived is in the journal.

    Attributes:
        signum: The signal (SIGINT or SIGTERM).
        exit_code: 128 + the signal's number, as a shell reports a process its signal ended (130, 143).
        resume: The ``resume=`` value that continues the run, once the run says it (runner.run.pipeline).
        unwritten: What the run had yet to write when the signal came after its calls (runner.run.publication).
    """

    def __init__(self, signum: int, resume: str | None = None, unwritten: tuple[str, ...] = ()) -> None:
        self.signum = signum
        self.exit_code = 128 + signum
        self.resume = resume
        self.unwritten = unwritten
        name = signal.Signals(signum).name if signum in {s.value for s in signal.Signals} else f"signal {signum}"
        missing = f" (not written: {', '.join(unwritten)})" if unwritten else ""
        super().__init__(f"interrupted by {name}{missing}" + (f": every answer that arrived is in the journal; "
                                                              f"continue with resume={resume}" if resume else ""))


class Signalled(BaseException):
    """SIGINT or SIGTERM after the paid calls, raised by the handler of runner.run.publication.signals_raise and
    turned into :class:`Interrupted` there. A BaseException, as KeyboardInterrupt is: a step that catches its own
    failures (``except Exception``: a report that could not be drawn is a warning) does not take it for one of them
    and go on, and the run does not call it a failure of its summary.

    Attributes:
        signum: The signal.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class Shutdown:
    """One stage's stop request: set by the first signal; the second (or the grace period's end) cuts at once.

    Args:
        grace_s: Seconds the calls in flight get to answer after the first signal.
    """

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.signum: int | None = None
        self.cut = False
        self._deadline = 0.0
        self._task: asyncio.Task | None = None
        self._timer: asyncio.TimerHandle | None = None

    @property
    def requested(self) -> bool:
        """Whether a signal asked the stage to stop (no new call may be sent)."""
        return self.signum is not None

    def install(self, task: asyncio.Task) -> bool:
        """Handle SIGINT and SIGTERM in ``task``'s loop; False where the loop cannot (not the main thread, as in a
        launcher's worker thread): there a signal keeps its default effect."""
        loop = task.get_loop()
        try:
            for sig in SIGNALS:
                loop.add_signal_handler(sig, self._on_signal, sig)
        except (ValueError, RuntimeError, NotImplementedError):
            return False
        self._task = task
        return True

    def uninstall(self) -> None:
        """Give the signals back their default handlers."""
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            for sig in SIGNALS:
                self._task.get_loop().remove_signal_handler(sig)
            self._task = None

    def _on_signal(self, signum: int) -> None:
        if self.signum is not None:  # the second signal: stop at once
            self._cut()
            return
        self.signum = signum
        assert self._task is not None
        loop = self._task.get_loop()
        self._deadline = loop.time() + self.grace_s
        self._timer = loop.call_at(self._deadline, self._cut)

    def _cut(self) -> None:
        self.cut = True
        if self._task is not None:
            self._task.cancel()

    async def drain(self) -> None:
        """Wait, until the grace period ends or a second signal, for calls still in flight outside the stage's
        window (a pair's other order, an ensemble's other members), so their answers are journaled too."""
        me = asyncio.current_task()
        others = {t for t in asyncio.all_tasks() if t is not me}
        if not others or self.cut:
            return
        remaining = max(0.0, self._deadline - asyncio.get_running_loop().time())
        try:
            await asyncio.wait(others, timeout=remaining)
        except asyncio.CancelledError:  # cut while waiting
            _uncancel(me)


def _uncancel(task: asyncio.Task | None) -> None:
    """Forget a cancellation the task handled (Python 3.11+ counts them; 3.10 does not)."""
    uncancel = getattr(task, "uncancel", None)
    if uncancel is not None:
        uncancel()


SHUTDOWN: ContextVar[Shutdown | None] = ContextVar("judgesweep_shutdown", default=None)


async def run_stage(main: Awaitable[R], grace_s: float) -> R:
    """Await a stage's ``main`` with SIGINT/SIGTERM handled as the module docstring says (in the main thread).

    Raises:
        Interrupted: A signal arrived; every answer that came within the grace period is journaled.
    """
    shutdown = Shutdown(grace_s)
    me = asyncio.current_task()
    assert me is not None
    shutdown.install(me)
    token = SHUTDOWN.set(shutdown)
    try:
        result = await main
    except asyncio.CancelledError:
        if shutdown.signum is None:
            raise
        _uncancel(me)  # our own cut: reported as Interrupted below
    except Interrupted:
        pass
    finally:
        SHUTDOWN.reset(token)
    if shutdown.signum is None:
        shutdown.uninstall()
        return result
    await shutdown.drain()
    shutdown.uninstall()
    raise Interrupted(shutdown.signum)
