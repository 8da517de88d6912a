"""Reading a dataset file row by row: JSONL (one object a line) or JSON (a list, or ``{"examples": [...]}``),
each row with where it came from.

A file that is missing or not a list of rows raises :class:`~runner.core.errors.DatasetError`; one unreadable
row (bad UTF-8, bad JSON, a string with a lone surrogate) is yielded as a :class:`RowError` in its place, for the
loader to stop at or skip (:mod:`runner.inputs.datasets`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from runner.core.errors import DatasetError


class RowError(Exception):
    """One row is unusable; load_items turns it into a DatasetError or a SkippedRow."""


def read_rows(path: Path) -> Iterator[tuple[str, Any]]:
    """Yield (location, row) pairs; location is ``file:line`` for JSONL, ``file[row i]`` for JSON.

    A JSONL line that is not valid JSON is yielded as a RowError in place of the row.
    """
    if not path.is_file():
        raise DatasetError(f"dataset file {path} not found")
    if path.suffix == ".jsonl":
        # bytes per line, so one badly encoded line is one bad row rather than a failed file
        with path.open("rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                yield from _parse_line(raw, f"{path}:{lineno}")
        return
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not valid UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    rows = data.get("examples") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise DatasetError(f"{path}: expected a JSON list of rows or an object with an 'examples' list")
    escaped = bool(_SURROGATE_ESCAPE.search(text))
    for index, row in enumerate(rows):
        yield f"{path}[row {index}]", _sendable(row) if escaped else row


# A JSON escape of a UTF-16 surrogate: json.loads turns a lone one into a str that cannot be encoded (and sent).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _lone_surrogate(node: Any, field: str | None = None) -> str | None:
    """The field (top-level key) holding a string with a lone surrogate, or None when every string encodes."""
    if isinstance(node, str):
        try:
            node.encode("utf-8")
        except UnicodeEncodeError:
            return field or "(the row)"
        return None
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in children:
        found = _lone_surrogate(value, field or (key if isinstance(key, str) else None))
        if found is not None:
            return found
    return None


def _sendable(row: Any, text: str | None = None) -> Any:
    """The row, or a RowError when one of its strings holds a lone surrogate (``"\\ud800"``), which loads but
    cannot be encoded to send. Only a row whose text has such an escape is walked (``text``, when given)."""
    if text is not None and not _SURROGATE_ESCAPE.search(text):
        return row
    field = _lone_surrogate(row)
    if field is None:
        return row
    return RowError(f"field {field!r} is not valid Unicode (a lone surrogate escape such as \\ud800)")


def _parse_line(raw: bytes, where: str) -> Iterator[tuple[str, Any]]:
    """Yield nothing for a blank line, else (where, row) with a RowError as the row if it does not parse."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        yield where, RowError(f"not valid UTF-8 (byte {exc.start})")
        return
    if not line.strip():
        return
    try:
        row: Any = _sendable(json.loads(line), line)
    except json.JSONDecodeError as exc:
        row = RowError(f"not valid JSON ({exc.msg}, column {exc.colno})")
    yield where, row
