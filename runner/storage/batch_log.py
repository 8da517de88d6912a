"""The batch journal of a run: what was uploaded and which batches were created, so any process may collect them.

``batches.jsonl`` in the run directory (an ensemble member's own directory for a member), beside the judge
journal, not in it: readers of ``journal.jsonl`` (results, reports, ``aggregate``) see judgments only. One JSON
object per line, each written and fsynced before the step it records is taken or right after it:

- ``{"event": "input", "n": N, "path": ..., "calls": C}``: the input file is written (before the upload);
- ``{"event": "file", "n": N, "file_id": ...}``: it is uploaded (before the batch is created);
- ``{"event": "batch", "n": N, "file_id": ..., "batch_id": ...}``: the batch exists;
- ``{"event": "ended", "n": N, "batch_id": ..., "status": ..., "answered": A, "unanswered": U}``: it ended and its
  output and error files are saved in the run directory;
- ``{"event": "collected", "n": N, "batch_id": ..., "status": ..., "answered": A, "resent": R}``: its answers are
  in the judge journal; R of its rows were sent again (in batch N+1 with ``batch.retry=batch``, else live).

A process killed between the upload and the ``batch`` line leaves a file without a batch: the next process asks
the provider for a batch over that file before it creates one, so the calls are never submitted twice.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.core.errors import WriteFailed

BATCHES_NAME = "batches.jsonl"


@dataclass(frozen=True)
class Submission:
    """One batch of a run as its batch journal tells it.

    Attributes:
        n: Its number in the run (0, 1, ...).
        input_path: The input file written for it.
        file_id: The uploaded input file, None before the upload.
        batch_id: The batch, None before it was created (or noted).
        collected: Whether its answers are in the judge journal.
    """

    n: int
    input_path: str
    file_id: str | None = None
    batch_id: str | None = None
    collected: bool = False


class BatchLog:
    """Append-only, fsynced batch journal of one run directory.

    Args:
        directory: The run's (or member's) directory.
    """

    def __init__(self, directory: Path) -> None:
        self.path = directory / BATCHES_NAME

    def append(self, **event: Any) -> None:
        """Write one event line and fsync it (a batch costs money: its id must survive a kill or a power cut)."""
        line = (json.dumps(event, ensure_ascii=False) + "\n").encode("utf-8")
        try:
            with self.path.open("ab") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise WriteFailed(self.path, exc) from None

    def resent(self) -> int:
        """Rows of the run's collected batches that the provider failed, expired or cancelled, sent again."""
        return sum(int(event.get("resent", 0)) for event in self.events("collected"))

    def submissions(self) -> list[Submission]:
        """Every batch the log knows, in the order they were started; a line torn by a crash is ignored."""
        found: dict[int, Submission] = {}
        if not self.path.is_file():
            return []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            n, kind = event.get("n"), event.get("event")
            if kind == "input":
                found[n] = Submission(n, event["path"])
            elif n in found and kind == "file":
                found[n] = Submission(n, found[n].input_path, event["file_id"])
            elif n in found and kind == "batch":
                found[n] = Submission(n, found[n].input_path, event["file_id"], event["batch_id"])
            elif n in found and kind == "collected":
                s = found[n]
                found[n] = Submission(n, s.input_path, s.file_id, s.batch_id, collected=True)
        return [found[n] for n in sorted(found)]

    def events(self, kind: str) -> list[dict[str, Any]]:
        """Every event of ``kind``, in order."""
        if not self.path.is_file():
            return []
        rows = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if event.get("event") == kind:
                rows.append(event)
        return rows
