"""The append-only journal of a run's judge calls: written as each call completes, read back on resume.

The journal gets one line per judge call the moment the call completes, written and flushed to the
operating system before the call counts as done, so an answer that was paid for survives a crash or a
kill -9 of the process. Paid lines are also fsynced, by group commit on a thread of the journal's own:
the event loop never waits for the disk, and a paid line reaches the disk within ``GROUP_COMMIT_S`` plus
one fsync (a few ms; tens on a busy disk) of being written. So only a power cut or a kernel crash can
lose anything: the answers of those last milliseconds, paid again on resume. On resume the journal is
read back (a line torn by the crash is ignored and cut off) and its answers are reused.

A line that cannot be written (disk full, an I/O error) is cut off again, so the journal keeps whole lines only,
and :class:`runner.core.errors.WriteFailed` is raised: the stage sends nothing more, the answers that arrive are
written again while room may return (runner.judging.unwritten), and the resume pays only for the answers that
never reached the journal. A failed fsync is final: nothing is written after it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

from runner.core.errors import WriteFailed
from runner.core.types import JudgeResponse, Judgment

log = logging.getLogger(__name__)

GROUP_COMMIT_S = 0.01  # the fsync thread gathers the paid lines written within this long into one fsync

# Journal-only fields: how an answer was obtained. Results hold what was judged, so a resumed run and
# an uninterrupted one write the same results file.
OPERATIONAL_FIELDS = ("latency_s", "attempts", "rate_limited", "source")


def judgment_record(j: Judgment, operational: bool = True) -> dict[str, Any]:
    """Flatten one judgment into a JSON-serialisable row (journal line, or results row without
    the operational fields when ``operational`` is False)."""
    req, resp, verdict = j.request, j.response, j.verdict
    row = {
        "item_id": req.item_id,
        "repeat": req.repeat,
        "order": req.order.value if req.order else None,
        "stage": req.stage,
        "messages_sha256": req.messages_hash,
        "status": j.status.value,
        "winner": j.winner,
        "verdict_label": verdict.label,
        "score": j.score,
        "scores": dict(verdict.scores) or None,
        "judge_extras": dict(verdict.extras) or None,
        "parse_error": verdict.reason,
        "raw_response": resp.text,
        "finish_reason": resp.finish_reason,
        "prompt_tokens": resp.prompt_tokens,
        "completion_tokens": resp.completion_tokens,
        "cost_usd": resp.cost_usd,
        "error_type": resp.error_type,
        "error": resp.error,
        "latency_s": round(resp.latency_s, 6),
        "attempts": resp.attempts,
        "rate_limited": resp.rate_limited,
        "source": resp.source,
    }
    if not resp.tokens_known:  # the provider's usage was not a count: unknown, not 0
        row["prompt_tokens"] = row["completion_tokens"] = None
    if resp.notes:  # what was done to keep what the provider sent (a substitution, an unreadable usage or body)
        row["provider_notes"] = list(resp.notes)
    if not operational:
        for name in OPERATIONAL_FIELDS:
            del row[name]
    return row


def _cut_torn_tail(path: Path) -> None:
    """Drop a last line that a crash left without its newline, so appends start on a clean line."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    with path.open("rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return
        fh.seek(0)
        data = fh.read()
        keep = data.rfind(b"\n") + 1
        log.warning("journal %s: ignoring a torn last line (%d bytes) left by an interrupted run",
                    path, len(data) - keep)
        fh.truncate(keep)


class Journal:
    """Append-only JSONL journal of judge calls (see the module docstring for what reaches the disk when).

    Args:
        path: The journal file; created if missing, appended to otherwise (a torn last line is cut).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _cut_torn_tail(path)
            self._fh = path.open("ab", buffering=0)  # unbuffered: a failed write leaves nothing to retry later
        except OSError as exc:
            raise WriteFailed(path, exc) from None
        self._offset = self._fh.seek(0, os.SEEK_END)  # where the next line starts
        self._failed: WriteFailed | None = None  # an fsync that failed: nothing is written after it
        self._cond = threading.Condition()
        self._written = 0  # paid lines written so far ...
        self._synced = 0  # ... and how many of them an fsync has covered
        self._closing = False
        self.fsyncs = 0
        self._syncer = threading.Thread(target=self._sync_loop, name=f"fsync {path.name}", daemon=True)
        self._syncer.start()

    def _sync_loop(self) -> None:
        """Group commit: wait for a paid line, let the lines of the next GROUP_COMMIT_S join it, fsync once."""
        while True:
            with self._cond:
                while self._synced == self._written and not self._closing:
                    self._cond.wait()
                if self._closing:
                    return  # close() fsyncs the rest
            time.sleep(GROUP_COMMIT_S)
            with self._cond:
                target = self._written
            try:
                os.fsync(self._fh.fileno())
            except OSError as exc:  # the next append raises it
                self._failed = WriteFailed(self.path, exc)
                return
            self.fsyncs += 1
            with self._cond:
                self._synced = target

    def append(self, judgment: Judgment) -> int | None:
        """Write one judgment (see append_row); returns the byte offset of its line, None if not written."""
        return self.append_row(judgment_record(judgment), judgment.response.source)

    def append_row(self, row: dict[str, Any], source: str) -> int | None:
        """Write one row that came from ``source`` (call | cache | journal); returns the byte offset of its line.

        Answers replayed from this journal on resume are not written again (None); cache hits are flushed
        but not fsynced (losing one only means reading it from the cache again).
        """
        if source == "journal":
            return None
        if self._failed is not None:
            raise self._failed
        try:
            line = (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate no answer should hold (runner.llm.responses replaces them)
            # \\u escapes are ASCII and read back as the same str: kept as received, never lost to the encoder
            log.warning("journal %s: a line with text UTF-8 cannot encode, written with \\u escapes", self.path)
            line = (json.dumps(row, ensure_ascii=True) + "\n").encode("ascii")
        at = self._offset
        try:
            self._write_all(line)
        except OSError as exc:  # the journal keeps whole lines only; a later line may fit (runner.judging.unwritten)
            with contextlib.suppress(OSError):
                os.ftruncate(self._fh.fileno(), at)
            raise WriteFailed(self.path, exc) from None
        self._offset += len(line)
        if source == "call":
            with self._cond:
                self._written += 1
                self._cond.notify()
        return at

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[self._fh.write(view) or 0:]

    def close(self) -> None:
        """Stop the fsync thread, fsync what it had not covered yet (unless a write failed), and close the file."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._syncer.join()
        if self._synced < self._written and not self._fh.closed and self._failed is None:
            try:
                os.fsync(self._fh.fileno())
            except OSError as exc:
                self._fh.close()
                raise WriteFailed(self.path, exc) from None
            self.fsyncs += 1
            self._synced = self._written
        self._fh.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def with_texts(judgments: Iterable[Judgment], journal: Path) -> Iterator[Judgment]:
    """The judgments with what the executor dropped from memory read back from ``journal``.

    A judgment with a ``journal_at`` offset gets the ``raw_response`` and ``messages_sha256`` of that journal
    line back when it no longer holds them; the others pass through unchanged. Reads one line at a time, so
    memory stays flat.
    """
    with journal.open("rb") as fh:
        for j in judgments:
            at = j.response.journal_at
            if at is not None and (j.response.text is None or not j.request.messages_hash):
                fh.seek(at)
                line = json.loads(fh.readline())
                j = replace(j, request=replace(j.request, messages_hash=line["messages_sha256"]),
                            response=replace(j.response, text=line["raw_response"]))
            yield j


def iter_journal(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete journal line, streamed; a line that does not parse (torn by a crash) is skipped with a warning;
    a missing file has none."""
    if not path.is_file():
        return
    with path.open(encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, start=1):
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                log.warning("journal %s:%d: unreadable line skipped (torn by an interrupted run?)", path, lineno)


def read_journal(path: Path) -> list[dict[str, Any]]:
    """Every complete journal line (:func:`iter_journal`), as a list."""
    return list(iter_journal(path))


class JournalTail:
    """Follows a journal another thread or process is writing: each :meth:`read` returns the complete lines
    added since the previous one (a line still being written waits for its newline; a missing file reads as
    empty), parsed, in file order. A complete line that does not parse is skipped with a warning."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._at = 0  # the offset of the first byte not yet returned

    def read(self) -> list[dict[str, Any]]:
        """The rows completed since the last call."""
        if not self.path.is_file():
            return []
        with self.path.open("rb") as fh:
            fh.seek(self._at)
            data = fh.read()
        end = data.rfind(b"\n") + 1
        rows = []
        for line in data[:end].splitlines():
            try:
                rows.append(json.loads(line))
            except (json.JSONDecodeError, UnicodeDecodeError):
                log.warning("journal %s: unreadable line skipped", self.path)
        self._at += end
        return rows


class JournalAnswers(Mapping[tuple, JudgeResponse]):
    """Answers an interrupted run already has in its journal, keyed like JudgeRequest.key; failed calls are
    left out so a resume tries them again.

    Only each answer's key and the byte offset of its journal line stay in memory, the key's strings shared
    between the lines that repeat them (an item's id, its prompt's hash); the answer is read back from its line
    when it is looked up. A JudgeResponse per answer took ~1.1 GB to resume a 1,000,000-judgment run. The
    answers carry ``journal_at``, so the executor drops their texts again once used, as it does for fresh ones.
    A line that does not parse (torn by a crash) is skipped.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offsets: dict[tuple, int] = {}
        self._fh: BinaryIO | None = None  # opened at the first lookup, closed with this object
        if not path.is_file():
            return
        shared: dict[Any, Any] = {}
        with path.open("rb") as fh:
            at = 0
            for lineno, line in enumerate(fh, start=1):
                start, at = at, at + len(line)
                try:
                    row = json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    log.warning("journal %s:%d: unreadable line skipped (torn by an interrupted run?)", path, lineno)
                    continue
                if row.get("error_type"):
                    continue
                key = tuple(shared.setdefault(v, v) for v in (row["item_id"], row["repeat"], row["order"],
                                                             row["stage"], row["messages_sha256"]))
                self._offsets[key] = start

    def __getitem__(self, key: tuple) -> JudgeResponse:
        at = self._offsets[key]
        if self._fh is None:  # one handle for every lookup: opening the file per answer was 3x slower at 100k
            self._fh = self.path.open("rb")
            weakref.finalize(self, self._fh.close)
        self._fh.seek(at)
        row = json.loads(self._fh.readline())
        return JudgeResponse(
            text=row["raw_response"], finish_reason=row["finish_reason"], prompt_tokens=row["prompt_tokens"] or 0,
            completion_tokens=row["completion_tokens"] or 0, cost_usd=row["cost_usd"], latency_s=row["latency_s"],
            attempts=0, rate_limited=0, source="journal", journal_at=at,
            notes=tuple(row.get("provider_notes") or ()), tokens_known=row["prompt_tokens"] is not None)

    def __contains__(self, key: object) -> bool:  # without reading the line, as Mapping's own would
        return key in self._offsets

    def __iter__(self) -> Iterator[tuple]:
        return iter(self._offsets)

    def __len__(self) -> int:
        return len(self._offsets)

