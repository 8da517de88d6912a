"""A live progress bar for a terminal; silent when the output is not a TTY (CI logs stay readable)."""

from __future__ import annotations

import threading

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from runner.core.types import Judgment, Status


class ProgressBar:
    """Counts judgments as they arrive: done/total, calls/s, ETA, cost, errors and 429s so far.

    Args:
        total: Planned first-round calls (synthesis rounds are added as they happen).
        enabled: False turns every method into a no-op; it is also off when stderr is not a terminal.
        console: Where to draw (default: stderr).
        label: What is counted ("judging", "generating").
    """

    def __init__(self, total: int, enabled: bool = True, console: Console | None = None,
                 label: str = "judging") -> None:
        console = console or Console(stderr=True)
        self.enabled = enabled and console.is_terminal
        self.total = total
        self.cost = 0.0
        self.errors = 0
        self.rate_limited = 0
        self.done = 0
        self._progress: Progress | None = None
        if self.enabled:
            self._progress = Progress(
                TextColumn(label), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[rate]:.1f} calls/s"), TimeElapsedColumn(), TextColumn("eta"),
                TimeRemainingColumn(), TextColumn("${task.fields[cost]:.4f}  errors {task.fields[errors]}"
                                                  "  429s {task.fields[limited]}"),
                console=console, transient=True)
            self._task = self._progress.add_task("judging", total=total, rate=0.0, cost=0.0, errors=0, limited=0)

    def __enter__(self) -> ProgressBar:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

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
        if self._progress is None:
            return
        if self.done > self.total:  # synthesis rounds were not planned
            self.total = self.done
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
