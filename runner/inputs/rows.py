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
from typing import Any, BinaryIO

from runner.core import input_limits
from runner.core.errors import DatasetError
from runner.core.input_limits import MAX_LINE_BYTES


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
            for lineno, raw in enumerate(_lines(fh), start=1):
                where = f"{path}:{lineno}"
                if raw is None:
                    yield where, RowError(f"a line longer than {MAX_LINE_BYTES} bytes (cap: {MAX_LINE_BYTES} bytes, "
                                          "runner.core.input_limits.MAX_LINE_BYTES)")
                else:
                    yield from _parse_line(raw, where)
        return
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not valid UTF-8 (byte {exc.start})") from None
    data = _load_json(text, str(path))
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


def _lines(fh: BinaryIO) -> Iterator[bytes | None]:
    """The file's lines, each read at most MAX_LINE_BYTES at a time: None for a line over the cap, whose rest is
    read past in bounded pieces (never held whole)."""
    while raw := fh.readline(MAX_LINE_BYTES + 1):
        if len(raw) <= MAX_LINE_BYTES or raw.endswith(b"\n"):
            yield raw
            continue
        yield None  # first: a load that stops at this row reads no further
        while (rest := fh.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
            pass


def _load_json(text: str, where: str) -> Any:
    """``json.loads(text)``, its refusals (syntax, nesting past the cap, an integer past Python's digit cap) as a
    DatasetError naming ``where`` and the line."""
    if problem := input_limits.json_depth_problem(text):
        raise DatasetError(f"{where}:{problem[0]}: {problem[1]}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{where}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except ValueError as exc:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise DatasetError(f"{where}: {input_limits.json_number_problem(exc)}") from None


def _parse_line(raw: bytes, where: str) -> Iterator[tuple[str, Any]]:
    """Yield nothing for a blank line, else (where, row) with a RowError as the row if it does not parse."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        yield where, RowError(f"not valid UTF-8 (byte {exc.start})")
        return
    if not line.strip():
        return
    if problem := input_limits.json_depth_problem(line):
        yield where, RowError(problem[1])
        return
    try:
        row: Any = _sendable(json.loads(line), line)
    except json.JSONDecodeError as exc:
        row = RowError(f"not valid JSON ({exc.msg}, column {exc.colno})")
    except ValueError as exc:  # an integer past Python's digit cap
        row = RowError(input_limits.json_number_problem(exc))
    yield where, row
