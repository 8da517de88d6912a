"""The progress of a batch while a run waits for it (runner.judging.batching): on a terminal, a live bar of the rows
the provider says are done out of the batch's rows, the time waited and the provider's status and failed rows, as its
last retrieve said; its last line stays in the terminal. Without a terminal nothing is drawn: the batch's poll log
lines say the same."""

from __future__ import annotations

from rich.console import Console

from runner.judging.progress import ProgressBar, ProgressOptions
from runner.llm.batches import BatchState


class BatchBar(ProgressBar):
    """A batch's live bar: ``batch <id> 340/1000 0:01:12 in_progress  failed 2`` (label, bar, rows done of the
    batch's rows, time waited, then the provider's status and failed rows).

    Args:
        judge: The judge whose batch it is (named in the bar until the batch id is known).
        options: The run's progress options (``progress=false`` or None: no bar).
        console: Where to draw (default: stderr).
    """

    def __init__(self, judge: str, options: ProgressOptions | None = None, console: Console | None = None) -> None:
        # no heartbeat records without a terminal: the batch's poll lines are its progress records there
        enabled = options.enabled if options is not None else False
        super().__init__(0, ProgressOptions(enabled, 0.0), console, label=f"batch ({judge})")
        self.provider_status = "submitting"
        self.failed = 0

    def start(self, state: BatchState) -> None:
        """The batch exists: name it in the bar."""
        self.label = f"batch {state.batch_id}"
        if self._progress is not None:
            self._progress.update(self._task, description=self.label)
        self.update(state)

    def update(self, state: BatchState) -> None:
        """Show what the provider's last retrieve said of the batch."""
        self.provider_status, self.failed = state.status, state.failed
        self.done, self.total = state.completed, state.total
        if self._progress is not None:
            self._progress.update(self._task, completed=state.completed, total=state.total or None)

    def status(self) -> str:
        """``in_progress  failed 2``: the provider's status and failed rows."""
        return f"{self.provider_status}  failed {self.failed}"
