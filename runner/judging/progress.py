"""Progress of a paid stage: a live bar on a terminal, through which log records are printed while it is drawn;
without a terminal (piped output, CI), a one-line record through logging every ``interval_s`` seconds. The steps
after the paid stages (:class:`Phases`): a spinner naming the step, or a log record per step."""

from __future__ import annotations

import contextlib
import datetime
import io
import logging
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, TextIO

from rich.ansi import AnsiDecoder
from rich.console import Console
from rich.live import Live
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.spinner import Spinner
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


class _Above(io.TextIOBase):
    """sys.stdout while a spinner is drawn on the terminal stdout writes to: each complete line printed through the
    spinner's console, above it, unwrapped (as print_line prints it). rich's own redirection
    (``Live(redirect_stdout=True)``) is skipped by every Console made while it is on, as console.print_line makes one:
    such a Console writes to the file rich's proxy names, beside the spinner's frame ("⠋ writing
    report.htmlmax_items=5"). This one names none."""

    def __init__(self, console: Console, file: TextIO) -> None:
        super().__init__()
        self._console, self._file, self._open = console, file, ""
        self._decoder = AnsiDecoder()

    def write(self, text: str) -> int:  # noqa: D102 - io's
        *lines, self._open = (self._open + text).split("\n")
        if lines:
            self._print(lines)
        return len(text)

    def flush(self) -> None:  # noqa: D102 - io's: an unfinished line is printed as it is
        if self._open:
            self._print([self._open])
            self._open = ""

    def _print(self, lines: list[str]) -> None:
        self._console.print(Text("\n").join(self._decoder.decode_line(line) for line in lines), soft_wrap=True)

    def isatty(self) -> bool:  # noqa: D102 - io's
        return self._file.isatty()

    def fileno(self) -> int:  # noqa: D102 - io's
        return self._file.fileno()


@contextlib.contextmanager
def stdout_above(console: Console) -> Iterator[None]:
    """While the block runs, what is printed to stdout goes through ``console`` (above its live display); the last
    unfinished line is printed when it ends. Restored afterwards."""
    kept = sys.stdout
    proxy = _Above(console, kept)
    sys.stdout = proxy
    try:
        yield
    finally:
        proxy.flush()
        sys.stdout = kept


class CallEvents(Protocol):
    """What a stage's client tells the bar as it happens, before any call finishes (runner.llm.client.JudgeClient):
    its 429s and retries so far, and its waits for a Retry-After."""

    long_waits: LongWaits
    rate_limited: int  # 429s answered so far
    resent: int  # attempts after a call's first so far (retries, 429s sent again)


class StatusColumn(ProgressColumn):
    """The bar's counts (:meth:`ProgressBar.status`), read at every redraw: a 429, a retry or a pause shows at once,
    not when the next judgment completes."""

    def __init__(self, bar: ProgressBar) -> None:
        super().__init__()
        self.bar = bar

    def render(self, task: Task) -> Text:  # noqa: D102 - rich's
        del task
        return Text(self.bar.status())


def eta(remaining: int, rate: float) -> str:
    """``H:MM:SS`` for ``remaining`` calls at ``rate`` calls/s; ``-`` when the rate says nothing (no call yet)."""
    if remaining <= 0:
        return "0:00:00"
    if not rate > 0:
        return "-"
    return str(datetime.timedelta(seconds=round(remaining / rate)))


class ProgressBar:
    """Counts judgments as they arrive and the watched clients' events as they happen: done/total, calls/s, ETA,
    cost, errors, 429s, retries and a Retry-After pause with its end.

    On a terminal a live bar (log records printed above it), redrawn ten times a second from these counts, and one
    line with the final counts left in the terminal when it stops; otherwise a progress record logged every
    ``options.interval_s`` seconds and once at the end.

    Args:
        total: Planned first-round calls (synthesis rounds are added as they happen).
        options: Whether to show progress at all, and how often to log it without a terminal.
        console: Where to draw (default: stderr).
        label: What is counted ("judging", "generating").
        now: The wall clock (``time.time``; a test's simulated one).
    """

    def __init__(self, total: int, options: ProgressOptions = ProgressOptions(), console: Console | None = None,
                 label: str = "judging", now: Callable[[], float] = time.time) -> None:
        self.console = console or Console(stderr=True)
        self.enabled = options.enabled and self.console.is_terminal
        self.label = label
        self.total = total
        self.cost = 0.0
        self.errors = 0
        self.rate_limited = 0
        self.done = 0
        self._now = now
        self._started = now()
        self._interval = options.interval_s if options.enabled and not self.console.is_terminal else 0.0
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._routed = contextlib.ExitStack()
        self._progress: Progress | None = None
        self._clients: list[CallEvents] = []
        if self.enabled:
            self._progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(),
                                      StatusColumn(self), console=self.console, transient=True)
            self._task = self._progress.add_task(label, total=total)

    def watch(self, client: CallEvents) -> None:
        """Count ``client``'s 429s and retries as they happen and show its Retry-After pauses."""
        self._clients.append(client)

    def paused(self) -> str:
        """``paused: Retry-After, 42 s left (until 22:31:05)`` (the latest end) while a watched client waits out a
        Retry-After (:class:`runner.llm.retry.LongWaits`), else ""."""
        ends = [end for end in (c.long_waits.until() for c in self._clients) if end is not None]
        if not ends:
            return ""
        end = max(ends)
        return f"paused: Retry-After, {math.ceil(end - self._now()):.0f} s left (until {clock(end)})"

    def paused_s(self, now: float) -> float:
        """Seconds since the bar started that a watched client spent waiting out a Retry-After (the union of their
        shown waits, up to ``now``)."""
        total, reach = 0.0, self._started
        for start, end in sorted(span for c in self._clients for span in c.long_waits.spans()):
            low, high = max(start, reach), min(end, now)
            if high > low:
                total += high - low
            reach = max(reach, high)
        return total

    def status(self) -> str:
        """``12.3 calls/s  eta 0:00:07  $0.0123  errors 0  429s 2  retries 2``, and the pause while one lasts (then
        ``eta -``: the rate says nothing of when the pause ends). The rate leaves the Retry-After pauses out: after
        one, the ETA is the remaining calls at the pace the calls go, not at the pace the pause held them to."""
        now = self._now()
        active = now - self._started - self.paused_s(now)
        rate = self.done / active if active > 0 else 0.0
        paused = self.paused()
        limited = sum(c.rate_limited for c in self._clients) if self._clients else self.rate_limited
        resent = sum(c.resent for c in self._clients)
        line = (f"{rate:.1f} calls/s  eta {'-' if paused else eta(self.total - self.done, rate)}  ${self.cost:.4f}  "
                f"errors {self.errors}  429s {limited}  retries {resent}")
        return f"{line}  {paused}" if paused else line

    def __enter__(self) -> ProgressBar:
        self._started = self._now()
        if self._progress is not None:
            self._routed.enter_context(records_through(self.console))
            self._progress.start()
        elif self._interval > 0:
            self._beat = threading.Thread(target=self._heartbeat, name=f"progress-{self.label}", daemon=True)
            self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._routed.close()
            self.console.print(Text(self.record()), soft_wrap=True, highlight=False)  # the bar's last line stays
        if self._beat is not None:
            self._stop.set()
            self._beat.join()
            log.info("%s", self.record())

    def _heartbeat(self) -> None:
        while not self._stop.wait(self._interval):
            log.info("%s", self.record())

    def record(self) -> str:
        """One line of progress: ``judging 120/200 (60%)  10 s  12.3 calls/s  eta 0:00:07  $0.0123  errors 0  429s 2
        retries 2``, and ``paused: Retry-After, 42 s left (until 22:31:05)`` while a judge waits out a Retry-After."""
        elapsed = self._now() - self._started
        share = f" ({self.done / self.total:.0%})" if self.total else ""
        return f"{self.label} {self.done}/{self.total}{share}  {elapsed:.0f} s  {self.status()}"

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
        if self._progress is not None:
            self._progress.update(self._task, completed=self.done, total=self.total)


class Phases:
    """The steps after the paid stages (``writing summary``, ``writing report.html``, ``publishing to MLflow``), each
    shown as it starts (:meth:`now`): a spinner naming it on a terminal while the block runs (log records printed
    above it), one log record per step when piped (none with ``progress=false`` or ``progress_interval_s=0``, nor
    outside the block).

    Args:
        options: The run's progress options (default: off).
        console: Where to draw (default: stderr).
    """

    def __init__(self, options: ProgressOptions = ProgressOptions(enabled=False), console: Console | None = None
                 ) -> None:
        self.console = console or Console(stderr=True)
        self._options = options
        self._status: Spinner | None = None
        self._spinning: Live | None = None
        self._routed = contextlib.ExitStack()
        self._live = False
        self.current: str | None = None  # the step under way (the last :meth:`now`)

    def __enter__(self) -> Phases:
        self._live = self._options.enabled
        if self._live and self.console.is_terminal:
            self._status = Spinner("dots", text="finishing")
            self._routed.enter_context(records_through(self.console))
            self._spinning = self._routed.enter_context(Live(self._status, console=self.console, transient=True,
                                                            redirect_stdout=False))
            # the console summary printed meanwhile goes above the spinner when stdout is the same terminal, and
            # straight to stdout when it is piped (not into the spinner's stream); closed first, before the spinner
            if Console().is_terminal:
                self._routed.enter_context(stdout_above(self.console))
        return self

    def __exit__(self, *exc: object) -> None:
        self._live = False
        self._status = self._spinning = None
        self._routed.close()

    def now(self, step: str) -> None:
        """``step`` has started: the spinner names it, or it is logged."""
        self.current = step
        if self._status is not None:
            self._status.update(text=step)
            if self._spinning is not None:
                self._spinning.refresh()  # drawn now: a short step would otherwise be done before the next redraw
        elif self._live and self._options.interval_s > 0:
            log.info("%s", step)


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
