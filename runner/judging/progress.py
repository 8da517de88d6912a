"""Progress of a paid stage: a live bar on a terminal, through which log records are printed while it is drawn;
without a terminal (piped output, CI), a one-line record through logging every ``interval_s`` seconds."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from runner.core.types import Judgment, Status
from runner.llm.retry import LongWaits, clock

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProgressOptions:
    """How a stage shows its progress (config: ``progress``, ``progress_interval_s``)."""

    enabled: bool = True
    interval_s: float = 10.0  # without a terminal: seconds between two progress records; 0 = none


class ConsoleHandler(logging.Handler):
    """Prints records, formatted by the handler it stands in for, through a rich console: above its live bar,
    which is redrawn once below them instead of leaving a stale copy at every record."""

    def __init__(self, console: Console, formatted_as: logging.Handler) -> None:
        super().__init__(formatted_as.level)
        self.console = console
        self.setFormatter(formatted_as.formatter or logging.Formatter())
        for kept in formatted_as.filters:
            self.addFilter(kept)

    def emit(self, record: logging.LogRecord) -> None:  # noqa: D102 - logging.Handler's
        try:
            self.console.print(Text(self.format(record)), soft_wrap=True, highlight=False)
        except Exception:  # noqa: BLE001 - logging's contract: a handler reports its own failure, never raises
            self.handleError(record)


def _on_terminal(handler: logging.Handler) -> bool:
    stream = getattr(handler, "stream", None)
    return (type(handler) is logging.StreamHandler and stream is not None
            and bool(getattr(stream, "isatty", lambda: False)()))


@contextlib.contextmanager
def records_through(console: Console) -> Iterator[None]:
    """While the block runs, the root logger's handlers that write to a terminal (Hydra's console handler) print
    through ``console``; files and other handlers are left alone. Restored afterwards."""
    root = logging.getLogger()
    swapped = [(h, ConsoleHandler(console, h)) for h in root.handlers if _on_terminal(h)]
    for old, new in swapped:
        root.removeHandler(old)
        root.addHandler(new)
    try:
        yield
    finally:
        for old, new in swapped:
            root.removeHandler(new)
            root.addHandler(old)


class WaitColumn(ProgressColumn):
    """``waiting until HH:MM:SS`` while a judge waits out a long Retry-After (:class:`runner.llm.retry.LongWaits`),
    read at every redraw: nothing else on the bar moves while every call waits."""

    def __init__(self, bar: ProgressBar) -> None:
        super().__init__()
        self.bar = bar

    def render(self, task: Task) -> Text:  # noqa: D102 - rich's
        del task
        return Text(self.bar.waiting())


class ProgressBar:
    """Counts judgments as they arrive: done/total, calls/s, ETA, cost, errors and 429s so far.

    On a terminal a live bar (log records printed above it); otherwise a progress record logged every
    ``options.interval_s`` seconds and once at the end.

    Args:
        total: Planned first-round calls (synthesis rounds are added as they happen).
        options: Whether to show progress at all, and how often to log it without a terminal.
        console: Where to draw (default: stderr).
        label: What is counted ("judging", "generating").
    """

    def __init__(self, total: int, options: ProgressOptions = ProgressOptions(), console: Console | None = None,
                 label: str = "judging") -> None:
        console = console or Console(stderr=True)
        self.enabled = options.enabled and console.is_terminal
        self.label = label
        self.total = total
        self.cost = 0.0
        self.errors = 0
        self.rate_limited = 0
        self.done = 0
        self._started = time.monotonic()
        self._interval = options.interval_s if options.enabled and not console.is_terminal else 0.0
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._routed = contextlib.ExitStack()
        self._progress: Progress | None = None
        self._waits: list[LongWaits] = []
        if self.enabled:
            self._progress = Progress(
                TextColumn(label), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[rate]:.1f} calls/s"), TimeElapsedColumn(), TextColumn("eta"),
                TimeRemainingColumn(), TextColumn("${task.fields[cost]:.4f}  errors {task.fields[errors]}"
                                                  "  429s {task.fields[limited]}"), WaitColumn(self),
                console=console, transient=True)
            self._task = self._progress.add_task("judging", total=total, rate=0.0, cost=0.0, errors=0, limited=0)

    def watch(self, waits: LongWaits) -> None:
        """Show the long Retry-After waits of ``waits`` (``waiting until HH:MM:SS``) on the bar and in the records."""
        self._waits.append(waits)

    def waiting(self) -> str:
        """``waiting until HH:MM:SS`` (the latest end) while a watched judge waits out a long Retry-After, else ""."""
        ends = [end for end in (w.until() for w in self._waits) if end is not None]
        return f"waiting until {clock(max(ends))}" if ends else ""

    def __enter__(self) -> ProgressBar:
        self._started = time.monotonic()
        if self._progress is not None:
            self._routed.enter_context(records_through(self._progress.console))
            self._progress.start()
        elif self._interval > 0:
            self._beat = threading.Thread(target=self._heartbeat, name=f"progress-{self.label}", daemon=True)
            self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._routed.close()
        if self._beat is not None:
            self._stop.set()
            self._beat.join()
            log.info("%s", self.record())

    def _heartbeat(self) -> None:
        while not self._stop.wait(self._interval):
            log.info("%s", self.record())

    def record(self) -> str:
        """One line of progress: ``judging 120/200 (60%) 12.3 calls/s 10 s $0.0123 errors 0 429s 2``, and
        ``waiting until 22:31:05`` while a judge waits out a long Retry-After."""
        elapsed = time.monotonic() - self._started
        share = f" ({self.done / self.total:.0%})" if self.total else ""
        rate = self.done / elapsed if elapsed > 0 else 0.0
        waiting = self.waiting()
        waiting = f"  {waiting}" if waiting else ""
        return (f"{self.label} {self.done}/{self.total}{share}  {rate:.1f} calls/s  {elapsed:.0f} s  "
                f"${self.cost:.4f}  errors {self.errors}  429s {self.rate_limited}{waiting}")

    def append(self, judgment: Judgment) -> None:
        """Count one judgment (the executor's sink interface)."""
        self._advance(judgment.response.cost_usd, judgment.status is Status.ERROR, judgment.response.rate_limited)

    def append_row(self, row: dict, source: str) -> None:
        """Count one generation (the generator's sink interface)."""
        del source
        self._advance(row.get("cost_usd"), row.get("status") == "error", row.get("rate_limited") or 0)

    def _advance(self, cost: float | None, error: bool, rate_limited: int) -> None:
        self.done += 1
        self.cost += cost or 0.0
        self.errors += error
        self.rate_limited += rate_limited
        if self.done > self.total:  # synthesis rounds were not planned
            self.total = self.done
        if self._progress is None:
            return
        elapsed = self._progress.tasks[0].elapsed or 0.0
        self._progress.update(self._task, completed=self.done, total=self.total,
                              rate=self.done / elapsed if elapsed > 0 else 0.0, cost=self.cost,
                              errors=self.errors, limited=self.rate_limited)


class Sinks:
    """Fans one judgment out to several sinks (journal first, so it is on disk before anything else)."""

    def __init__(self, *sinks: object) -> None:
        self._sinks = sinks

    def append(self, judgment: Judgment) -> int | None:
        """Hand the judgment to every sink in order; returns what the first (the journal) returned: the byte
        offset of the judgment's line."""
        first = None
        for n, sink in enumerate(self._sinks):
            written = sink.append(judgment)  # type: ignore[attr-defined]
            if n == 0:
                first = written
        return first

    def append_row(self, row: dict, source: str) -> None:
        """Hand a generation row to every sink in order."""
        for sink in self._sinks:
            sink.append_row(row, source)  # type: ignore[attr-defined]


class FirstAnswer:
    """Sets ``event`` when a stage's first answer arrives (paid, cached or from the journal): the run's calls
    are under way, so work kept off their start (creating the MLflow run) may begin. A sink like the others."""

    def __init__(self, event: threading.Event) -> None:
        self._event = event

    def append(self, judgment: Judgment) -> None:  # noqa: D102 - the executor's sink interface
        del judgment
        self._event.set()

    def append_row(self, row: dict, source: str) -> None:  # noqa: D102 - the generator's sink interface
        del row, source
        self._event.set()
