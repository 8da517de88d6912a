"""Recorded judge outputs: a user's JSONL file of raw judge answers, looked up by (item id, order, repeat).

Where a replay recording (:mod:`runner.llm.replay`) answers a request by the hash of its messages, a recordings
file answers it by which call it is, so outputs recorded elsewhere (a user's own judge, a benchmark's released
judgments) are scored by judgesweep's parsers, aggregations and reports exactly as live answers are. One line:

    {"id": "17", "order": "ab", "repeat": 0, "output": "<the judge's raw text>"}

- ``id`` (required): the item's id, as judgesweep names it (the dataset's ``id_field``, else the 1-based row
  number); a JSON number or string, compared as text.
- ``order``: ``"ab"`` (the dataset's first system shown as A) or ``"ba"``; missing or null for pointwise runs.
  A pairwise call shown in order ab that has no ``"ab"`` line takes the line without an order (order=fixed).
- ``repeat``: 0-based; missing means 0.
- ``output`` (required unless ``error`` is given): the judge's raw text.
- ``finish_reason``: optional, default ``"stop"``; ``"length"`` counts as cut off, as a live answer would.
- ``error`` (instead of ``output``): the call failed, with this message; ``error_type`` (optional) names the error
  it failed with. It replays as a failed call (not retried), its error reading
  ``recorded failure: <error_type>: <error>``, so a run's own export (:mod:`runner.llm.recordings_export`) covers
  every call it made and replays with the same failed items.

Any other key is ignored (provenance, say). A line that does not parse, or a key recorded twice, is an error
naming the file and line(s).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from runner.core.errors import ConfigurationError

RECORDED_PROVIDER = "recorded"  # model strings ``recorded/<anything>`` are served from judge.path
ORDERS = ("ab", "ba")
# The key of one recording: (item id, order or None, repeat).
Key = tuple[str, str | None, int]


# The call being made, as (item id, order, repeat): set by the judge stage around each call (runner.judging.calls)
# and read by runner.llm.client to tell a recorded judge's provider which answer to serve. A context variable
# because a client is asked for messages only, and the call's identity must not enter the messages the judge
# sees; each asyncio task has its own value, so concurrent calls never see each other's.
CURRENT_CALL: ContextVar[Key | None] = ContextVar("recorded_call", default=None)


class RecordingsError(ConfigurationError):
    """A recordings file cannot be read, a line of it is malformed, or it lacks an answer a run needs."""


class RecordingMiss(LookupError):
    """The recordings file holds no answer for this call."""


@dataclass(frozen=True)
class Recording:
    """One recorded answer and the line of the file it came from."""

    output: str | None  # None: a recorded failure (``error``)
    finish_reason: str
    line: int
    error: str | None = None  # ``error_type: message`` of a recorded failure

    def failure_message(self) -> str | None:
        """What a replayed failure's error says, None for an answer."""
        return None if self.error is None else f"recorded failure: {self.error}"


def is_recorded(model: str) -> bool:
    """Whether a litellm model string names a recorded judge (``recorded/<name>``)."""
    return model.startswith(f"{RECORDED_PROVIDER}/")


def describe(key: Key) -> str:
    """A key as a person reads it: ``id 17, order ab, repeat 0``."""
    item_id, order, repeat = key
    return f"id {item_id}, order {order or 'none'}, repeat {repeat}"


def _field(row: dict[str, Any], where: str) -> Key:
    item_id, order, repeat = row.get("id"), row.get("order"), row.get("repeat", 0)
    if isinstance(item_id, bool) or not isinstance(item_id, (str, int)):
        raise RecordingsError(f"{where}: 'id' must be a string or an integer (the item's id), got {item_id!r}")
    if order is not None and order not in ORDERS:
        raise RecordingsError(f"{where}: 'order' must be one of {list(ORDERS)} or null, got {order!r}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 0:
        raise RecordingsError(f"{where}: 'repeat' must be an integer >= 0, got {repeat!r}")
    return str(item_id), order, repeat


def _failure(row: dict[str, Any], where: str, line: int) -> Recording:
    error, kind = row.get("error"), row.get("error_type")
    if not isinstance(error, str) or (kind is not None and not isinstance(kind, str)):
        raise RecordingsError(f"{where}: 'error' (a failed call's message) and 'error_type' must be strings, got "
                              f"{error!r} and {kind!r}")
    return Recording(output=None, finish_reason="error", line=line, error=f"{kind}: {error}" if kind else error)


def _recording(row: dict[str, Any], where: str, line: int) -> Recording:
    output, finish = row.get("output"), row.get("finish_reason")
    if output is None and row.get("error") is not None:
        return _failure(row, where, line)
    if not isinstance(output, str):
        raise RecordingsError(f"{where}: 'output' (the judge's raw text) must be a string, got {output!r}")
    if finish is not None and not isinstance(finish, str):
        raise RecordingsError(f"{where}: 'finish_reason' must be a string or null, got {finish!r}")
    # interned: thousands of recordings share the one "stop"
    return Recording(output=output, finish_reason=sys.intern(finish or "stop"), line=line)


def _read(path: Path) -> dict[Key, Recording]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordingsError(f"recordings file {path}: cannot be read ({exc})") from None
    recordings: dict[Key, Recording] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise RecordingsError(f"{where}: not a JSON object ({exc.msg})") from None
        if not isinstance(row, dict):
            raise RecordingsError(f"{where}: not a JSON object")
        key = _field(row, where)
        if key in recordings:
            raise RecordingsError(f"{path}: lines {recordings[key].line} and {number} both record "
                                  f"{describe(key)}; keep one")
        recordings[key] = _recording(row, where, number)
    return recordings


@lru_cache(maxsize=8)
def _cached(path: Path, mtime_ns: int, size: int) -> dict[Key, Recording]:
    return _read(path)


def load(path: Path) -> dict[Key, Recording]:
    """Read and check a recordings file (cached while the file is unchanged).

    Raises:
        RecordingsError: The file is missing or unreadable, a line is not a JSON object with the fields above
            (naming the file and line), or two lines record the same key (naming both lines).
    """
    try:
        stat = path.stat()
    except OSError:
        raise RecordingsError(f"recordings file {path} does not exist (judge.path)") from None
    return _cached(path, stat.st_mtime_ns, stat.st_size)


def find(recordings: dict[Key, Recording], key: Key) -> Recording | None:
    """The recording answering ``key``: its own line, or for order ab the line recorded without an order."""
    found = recordings.get(key)
    if found is None and key[1] == "ab":
        found = recordings.get((key[0], None, key[2]))
    return found


def lookup(path: Path, key: Key) -> Recording:
    """The recorded answer to one call.

    Raises:
        RecordingsError: The file cannot be read (see :func:`load`).
        RecordingMiss: The file holds no answer for ``key`` (prepare's coverage check makes this rare).
    """
    found = find(load(path), key)
    if found is None:
        raise RecordingMiss(f"{path}: no recorded output for {describe(key)}")
    return found


def check_coverage(path: Path, keys: Iterable[Key], shown: int = 5) -> int:
    """Check that ``path`` answers every planned call; returns how many recordings it holds.

    Raises:
        RecordingsError: Naming the file, the first ``shown`` missing calls and how many are missing.
    """
    recordings = load(path)
    missing = [key for key in keys if find(recordings, key) is None]
    if missing:
        first = "; ".join(describe(key) for key in missing[:shown])
        more = f" (and {len(missing) - shown} more)" if len(missing) > shown else ""
        raise RecordingsError(f"recordings file {path} has no output for {len(missing)} planned judge call(s): "
                              f"{first}{more}. Each needs a line {{\"id\", \"order\", \"repeat\", \"output\"}}")
    return len(recordings)
