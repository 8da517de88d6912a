"""Reading a dataset file row by row: JSONL (one object a line) or JSON (a list, or ``{"examples": [...]}``),
each row with where it came from.

A file that is missing or not a list of rows raises :class:`~runner.core.errors.DatasetError`; one unreadable
row (bad UTF-8, bad JSON) is yielded as a :class:`RowError` in its place, for the loader to stop at or skip
(:mod:`runner.inputs.datasets`).
"""

from __future__ import annotations

import json
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
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not valid UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    rows = data.get("examples") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise DatasetError(f"{path}: expected a JSON list of rows or an object with an 'examples' list")
    for index, row in enumerate(rows):
        yield f"{path}[row {index}]", row


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
        row: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        row = RowError(f"not valid JSON ({exc.msg}, column {exc.colno})")
    yield where, row
