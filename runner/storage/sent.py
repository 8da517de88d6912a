"""The calls a run has sent, so a resumed run can tell which of the calls it pays for were paid before.

An answer is journaled when it arrives; an answer still in flight when the process died (``kill -9``, a second
Ctrl-C, the end of the shutdown grace period) was most likely paid for but is not in the journal, so the resumed
run pays for it again. Each call's key is appended here just before it is sent (a JSON list), and again once its
outcome is journaled (``{"done": key}``), written through to the operating system, not fsynced (a power cut may
lose the last lines, and with them only a count). A resumed run counts a call it pays for that an earlier process
had sent without journaling its outcome in ``calls/repaid``; only those keys are kept in memory.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TextIO

from runner.core.errors import WriteFailed

log = logging.getLogger(__name__)

SENT_NAME = "sent.jsonl"


class SentLog:
    """Appends the key of every call sent and of every call whose outcome was journaled; knows the keys earlier
    processes sent without journaling an outcome.

    Args:
        path: The run's (or an ensemble member's) ``sent.jsonl``.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.earlier = frozenset(_unfinished(path))
        self._fh: TextIO | None = None
        self._failed: WriteFailed | None = None

    def record(self, key: tuple) -> bool:
        """Note that the call ``key`` is being sent; True when an earlier process had sent it and journaled nothing."""
        self._write(list(key))
        return key in self.earlier

    def finished(self, key: tuple) -> None:
        """Note that the outcome of the call ``key`` (an answer or an error) is in the journal."""
        self._write({"done": list(key)})

    def _write(self, entry: object) -> None:
        if self._failed is not None:  # nothing after a failed write: the stage is stopping
            raise self._failed
        try:
            if self._fh is None:  # opened at the first send: a run served from its journal and cache writes no file
                torn = _torn(self.path)
                self._fh = self.path.open("a", encoding="utf-8")
                if torn:  # a line torn by a crash: ours start on a line of their own
                    self._fh.write("\n")
            self._fh.write(json.dumps(entry) + "\n")
            self._fh.flush()  # to the operating system: a kill -9 keeps it
        except OSError as exc:  # disk full: the call is not sent (record) or its outcome is journaled (finished)
            self._failed = WriteFailed(self.path, exc)
            raise self._failed from None

    def close(self) -> None:
        """Close the file (if a call was sent)."""
        if self._fh is not None:
            fh, self._fh = self._fh, None
            try:
                fh.close()
            except OSError:  # what a failed write left in the buffer: only a count is lost (module docstring)
                log.debug("%s: its last lines were not written", self.path)

    def __enter__(self) -> SentLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _torn(path: Path) -> bool:
    """Whether ``path`` ends inside a line (a crash tore its last write)."""
    if not path.is_file() or path.stat().st_size == 0:
        return False
    with path.open("rb") as fh:
        fh.seek(-1, 2)
        return fh.read(1) != b"\n"


def _unfinished(path: Path) -> set[tuple]:
    """The keys sent in ``path`` whose outcome was not journaled (none when it does not exist); a line torn by a
    crash is skipped."""
    pending: set[tuple] = set()
    if not path.is_file():
        return pending
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                entry = json.loads(line)
                if isinstance(entry, dict):
                    pending.discard(tuple(entry["done"]))
                else:
                    pending.add(tuple(entry))
            except (ValueError, TypeError, KeyError):
                log.debug("%s: a torn line skipped", path)
    return pending
