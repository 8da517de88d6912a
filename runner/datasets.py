"""Dataset loading: JSONL or JSON rows mapped onto template variables, candidates and gold labels.

Every problem is reported with the file and line (JSONL) or row index (JSON) it came from, before any
judge call is made.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from runner.config import DatasetConfig
from runner.types import TIE, Candidate, Item

PKG_PREFIX = "pkg://"


class DatasetError(ValueError):
    """A dataset file or row is malformed; the message names the file and line."""


def resolve_path(path: str, root: Path) -> Path:
    """Resolve a dataset path: ``pkg://runner/...`` (shipped data) or relative to ``root``."""
    if path.startswith(PKG_PREFIX):
        package, _, rest = path[len(PKG_PREFIX) :].partition("/")
        return Path(str(resources.files(package).joinpath(rest)))
    candidate = Path(path)
    return candidate if candidate.is_absolute() else root / candidate


def _read_rows(path: Path) -> Iterator[tuple[str, Any]]:
    """Yield (location, row) pairs; location is ``file:line`` for JSONL, ``file[row i]`` for JSON."""
    if not path.is_file():
        raise DatasetError(f"dataset file {path} not found")
    if path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    yield f"{path}:{lineno}", json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DatasetError(f"{path}:{lineno}: not valid JSON ({exc.msg}, column {exc.colno})") from None
        return
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    rows = data.get("examples") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise DatasetError(f"{path}: expected a JSON list of rows or an object with an 'examples' list")
    for index, row in enumerate(rows):
        yield f"{path}[row {index}]", row


def _field(row: dict, name: str, where: str) -> Any:
    if name not in row:
        raise DatasetError(f"{where}: missing field {name!r} (fields present: {sorted(row)})")
    return row[name]


def _text(row: dict, name: str, where: str) -> str:
    value = _field(row, name, where)
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, indent=2)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise DatasetError(f"{where}: field {name!r} must be text, got {type(value).__name__}")


def _gold(row: dict, cfg: DatasetConfig, where: str) -> str | None:
    if cfg.gold_field is None:
        return None
    raw = str(_field(row, cfg.gold_field, where))
    if not cfg.gold_map:
        gold = raw
    elif raw in cfg.gold_map:
        gold = cfg.gold_map[raw]
    else:
        raise DatasetError(f"{where}: gold value {raw!r} is not in dataset.gold_map {sorted(cfg.gold_map)}")
    allowed = {cfg.ours.name, cfg.baseline.name, TIE}
    if gold not in allowed:
        raise DatasetError(f"{where}: gold {gold!r} is none of {sorted(allowed)}")
    return gold


def _to_item(row: Any, cfg: DatasetConfig, where: str, ordinal: int) -> Item:
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(row).__name__}")
    item_id = str(_field(row, cfg.id_field, where)) if cfg.id_field else str(ordinal)
    variables = {var: _text(row, fld, where) for var, fld in cfg.variables.items()}
    candidates = tuple(
        Candidate(system=s.name, text=_text(row, s.field, where)) for s in (cfg.ours, cfg.baseline)
    )
    return Item(
        id=item_id,
        variables=MappingProxyType(variables),
        candidates=candidates,
        gold=_gold(row, cfg, where),
        source=where,
    )


def load_items(cfg: DatasetConfig, path: Path, max_items: int | None = None) -> list[Item]:
    """Load and validate every row of a pairwise dataset.

    Args:
        cfg: The dataset config (field mapping, systems, gold).
        path: The resolved dataset file (``.jsonl``, or ``.json`` holding a list or {"examples": [...]}).
        max_items: Keep only the first N items.

    Raises:
        DatasetError: On the first malformed row, naming file and line, or on duplicate ids.
    """
    if cfg.ours.name == cfg.baseline.name or TIE in (cfg.ours.name, cfg.baseline.name):
        raise DatasetError(f"dataset {cfg.name}: system names must differ and not be {TIE!r}")
    items: list[Item] = []
    seen: dict[str, str] = {}
    if max_items is not None and max_items < 1:
        raise DatasetError(f"max_items must be >= 1 (got {max_items})")
    for ordinal, (where, row) in enumerate(_read_rows(path), start=1):
        item = _to_item(row, cfg, where, ordinal)
        if item.id in seen:
            raise DatasetError(f"{where}: duplicate id {item.id!r} (first at {seen[item.id]})")
        seen[item.id] = where
        items.append(item)
        if max_items is not None and len(items) >= max_items:
            break
    if not items:
        raise DatasetError(f"dataset file {path} holds no rows")
    return items
