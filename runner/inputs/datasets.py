"""Dataset loading: JSONL or JSON rows mapped onto template variables, candidates and gold labels.

Every problem is reported with the file and line (JSONL) or row index (JSON) it came from, before any
judge call is made. A bad row either stops the load (``on_bad_row: error``) or is left out and listed
(``on_bad_row: skip``); a file that is missing or not a list of rows always stops it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from runner.core.config import DatasetConfig, OnBadRow, PromptMode
from runner.core.errors import DatasetError
from runner.core.types import TIE, Candidate, Item
from runner.inputs.splits import check_split, split_of

__all__ = ["DatasetError", "ItemRef", "LoadedDataset", "Shape", "SkippedRow", "load_items", "resolve_path"]

PKG_PREFIX = "pkg://"


class _RowError(Exception):
    """One row is unusable; load_items turns it into a DatasetError or a SkippedRow."""


@dataclass(frozen=True)
class SkippedRow:
    """A row left out under ``on_bad_row: skip``.

    Attributes:
        where: ``file:line`` (JSONL) or ``file[row i]`` (JSON).
        reason: Why it was left out, e.g. "missing field 'input' (fields present: [...])".
    """

    where: str
    reason: str


@dataclass(frozen=True)
class ItemRef:
    """What a run keeps of every item while it streams the texts: id, labels and location."""

    id: str
    gold: str | None
    source: str
    tags: tuple[str, ...] = ()
    category: str | None = None
    human_score: float | None = None
    lengths: tuple[int, ...] = ()  # characters of each candidate as loaded (length-bias statistics)
    annotations: tuple[str | None, ...] = ()  # each human annotator's label (dataset.annotator_fields)


@dataclass(frozen=True)
class Shape:
    """What a row must provide besides the mapped variables.

    Attributes:
        mode: pairwise rows carry two candidates (ours, baseline); pointwise rows one.
        with_candidate: False when a generator writes the pointwise candidate, so the row needs none.
    """

    mode: PromptMode = PromptMode.pairwise
    with_candidate: bool = True


@dataclass(frozen=True)
class LoadedDataset:
    """A validated dataset. Texts are not kept: :meth:`iter_items` reads them again, one row at a time,
    so a dataset of any size costs memory only for its ids.

    Attributes:
        refs: The rows that loaded, in file order (at most max_items).
        skipped: Bad rows left out (always empty with ``on_bad_row: error``), in file order.
    """

    refs: tuple[ItemRef, ...]
    skipped: tuple[SkippedRow, ...]
    cfg: DatasetConfig
    path: Path
    _ordinals: frozenset[int]
    shape: Shape = Shape()

    def iter_items(self) -> Iterator[Item]:
        """Yield the loaded items in file order, reading the file again."""
        last = max(self._ordinals)
        for ordinal, (where, row) in enumerate(_read_rows(self.path), start=1):
            if ordinal in self._ordinals:
                yield _to_item(row, self.cfg, where, ordinal, self.shape)
            if ordinal >= last:
                return

    @property
    def items(self) -> list[Item]:
        """Every loaded item in memory (convenient for small datasets and tests)."""
        return list(self.iter_items())


def resolve_path(path: str, root: Path) -> Path:
    """Resolve a dataset path: ``pkg://runner/...`` (shipped data) or relative to ``root``."""
    if path.startswith(PKG_PREFIX):
        package, _, rest = path[len(PKG_PREFIX) :].partition("/")
        return Path(str(resources.files(package).joinpath(rest)))
    candidate = Path(path)
    return candidate if candidate.is_absolute() else root / candidate


def _read_rows(path: Path) -> Iterator[tuple[str, Any]]:
    """Yield (location, row) pairs; location is ``file:line`` for JSONL, ``file[row i]`` for JSON.

    A JSONL line that is not valid JSON is yielded as a _RowError in place of the row.
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
    """Yield nothing for a blank line, else (where, row) with a _RowError as the row if it does not parse."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        yield where, _RowError(f"not valid UTF-8 (byte {exc.start})")
        return
    if not line.strip():
        return
    try:
        row: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        row = _RowError(f"not valid JSON ({exc.msg}, column {exc.colno})")
    yield where, row


def _field(row: dict, name: str) -> Any:
    if name not in row:
        raise _RowError(f"missing field {name!r} (fields present: {sorted(row)})")
    return row[name]


def _is_turn(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("role"), str) and isinstance(value.get("content"), str)


def _text(row: dict, name: str, optional: bool = False) -> str:
    if optional and row.get(name) is None:
        return ""
    value = _field(row, name)
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return "\n".join(f"- {v}" for v in value)  # e.g. success criteria: one bullet per line
    if isinstance(value, list) and value and all(_is_turn(v) for v in value):
        return "\n".join(f"{v['role']}: {v['content']}" for v in value)  # a chat transcript, one turn per line
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, indent=2) if value or not optional else ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise _RowError(f"field {name!r} must be text, got {type(value).__name__}")


def _annotations(row: dict, cfg: DatasetConfig) -> tuple[str | None, ...]:
    """Every annotator's label mapped like gold; a missing or null label is None (that annotator abstained)."""
    return tuple(None if row.get(name) is None else _label(str(row[name]), cfg) for name in cfg.annotator_fields)


def _gold(row: dict, cfg: DatasetConfig) -> str | None:
    if cfg.gold_field is None:
        return None
    return _label(str(_field(row, cfg.gold_field)), cfg)


def _label(raw: str, cfg: DatasetConfig) -> str:
    if not cfg.gold_map:
        gold = raw
    elif raw in cfg.gold_map:
        gold = cfg.gold_map[raw]
    else:
        raise _RowError(f"gold value {raw!r} is not in dataset.gold_map {sorted(cfg.gold_map)}")
    allowed = {s.name for s in (cfg.ours, cfg.baseline) if s is not None} | {TIE}
    if gold not in allowed:
        raise _RowError(f"gold {gold!r} is none of {sorted(allowed)}")
    return gold


def _tags(row: dict, cfg: DatasetConfig) -> tuple[str, ...]:
    if cfg.tags_field is None or row.get(cfg.tags_field) is None:
        return ()
    value = row[cfg.tags_field]
    values = [value] if isinstance(value, str) else value
    if isinstance(values, list) and all(isinstance(v, str) and v.strip() for v in values):
        return tuple(dict.fromkeys(v.strip() for v in values))
    raise _RowError(f"field {cfg.tags_field!r} must be a non-empty string or a list of them")


def _category(row: dict, cfg: DatasetConfig) -> str | None:
    if cfg.category_field is None or row.get(cfg.category_field) is None:
        return None
    value = row[cfg.category_field]
    if not isinstance(value, str) or not value.strip():
        raise _RowError(f"field {cfg.category_field!r} must be a non-empty string")
    return value.strip()


def _human_score(row: dict, cfg: DatasetConfig) -> float | None:
    if cfg.human_score_field is None or row.get(cfg.human_score_field) is None:
        return None
    value = row[cfg.human_score_field]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _RowError(f"field {cfg.human_score_field!r} must be a finite number, got {value!r}")
    return float(value)


def _candidates(row: dict, cfg: DatasetConfig, shape: Shape) -> tuple[Candidate, ...]:
    if shape.mode is PromptMode.pairwise:
        systems = (cfg.ours, cfg.baseline)
    else:
        systems = (cfg.candidate,) if shape.with_candidate else ()
    return tuple(Candidate(system=s.name, text=_text(row, s.field)) for s in systems if s is not None)


def _to_item(row: Any, cfg: DatasetConfig, where: str, ordinal: int, shape: Shape) -> Item:
    if isinstance(row, _RowError):
        raise row
    if not isinstance(row, dict):
        raise _RowError(f"expected a JSON object, got {type(row).__name__}")
    item_id = str(_field(row, cfg.id_field)) if cfg.id_field else str(ordinal)
    variables = {var: _text(row, fld) for var, fld in cfg.variables.items()}
    variables.update({var: _text(row, fld, optional=True) for var, fld in cfg.optional_variables.items()})
    return Item(
        id=item_id,
        variables=MappingProxyType(variables),
        candidates=_candidates(row, cfg, shape),
        gold=_gold(row, cfg),
        source=where,
        tags=_tags(row, cfg),
        category=_category(row, cfg),
        human_score=_human_score(row, cfg),
    )


def check_systems(cfg: DatasetConfig, shape: Shape) -> None:
    """The dataset config names the systems its mode needs.

    Raises:
        DatasetError: Pairwise without two distinct systems (neither called "tie"), or pointwise
            without a candidate while no generator makes one.
    """
    if shape.mode is PromptMode.pairwise:
        if cfg.ours is None or cfg.baseline is None:
            raise DatasetError(f"dataset {cfg.name}: a pairwise prompt needs dataset.ours and dataset.baseline")
        if cfg.ours.name == cfg.baseline.name or TIE in (cfg.ours.name, cfg.baseline.name):
            raise DatasetError(f"dataset {cfg.name}: system names must differ and not be {TIE!r}")
    elif shape.with_candidate and cfg.candidate is None:
        raise DatasetError(f"dataset {cfg.name}: a pointwise prompt needs dataset.candidate (the output to judge) "
                           "or a generator to write it")


def load_items(
    cfg: DatasetConfig,
    path: Path,
    max_items: int | None = None,
    *,
    on_bad_row: OnBadRow = OnBadRow.error,
    shape: Shape = Shape(),
) -> LoadedDataset:
    """Load and validate every row of a dataset.

    Args:
        cfg: The dataset config (field mapping, systems, gold, tags, category, human score).
        path: The resolved dataset file (``.jsonl``, or ``.json`` holding a list or {"examples": [...]}).
        max_items: Keep only the first N items that load (skipped rows do not count).
        on_bad_row: ``error`` stops at the first bad row; ``skip`` leaves out rows that are not valid
            JSON, miss a field, hold a wrong type or an unknown gold value, or repeat an id, and lists them.
        shape: The mode (pairwise or pointwise) and whether rows carry the candidate output.

    Raises:
        DatasetError: Naming file and line: on the first bad row (``error``), when the file is missing or
            not a list of rows, or when no row loads.
    """
    skip = OnBadRow(on_bad_row) is OnBadRow.skip
    check_systems(cfg, shape)
    check_split(cfg)
    if max_items is not None and max_items < 1:
        raise DatasetError(f"max_items must be >= 1 (got {max_items})")
    refs: list[ItemRef] = []
    ordinals: set[int] = set()
    skipped: list[SkippedRow] = []
    seen: dict[str, str] = {}
    for ordinal, (where, row) in enumerate(_read_rows(path), start=1):
        try:
            item = _to_item(row, cfg, where, ordinal, shape)
            annotations = _annotations(row, cfg)
            if item.id in seen:
                raise _RowError(f"duplicate id {item.id!r} (first at {seen[item.id]})")
        except _RowError as exc:
            if not skip:
                raise DatasetError(f"{where}: {exc}") from None
            skipped.append(SkippedRow(where=where, reason=str(exc)))
            continue
        seen[item.id] = where
        if cfg.split is not None and split_of(item.id, cfg) != cfg.split:
            continue
        refs.append(ItemRef(id=item.id, gold=item.gold, source=where, tags=item.tags, category=item.category,
                            human_score=item.human_score, lengths=tuple(len(c.text) for c in item.candidates),
                            annotations=annotations))
        ordinals.add(ordinal)
        if max_items is not None and len(refs) >= max_items:
            break
    if not refs:
        if skipped:
            first = skipped[0]
            raise DatasetError(
                f"dataset file {path}: every row is bad ({len(skipped)} skipped; first {first.where}: {first.reason})"
            )
        raise DatasetError(f"dataset file {path} holds no rows")
    return LoadedDataset(refs=tuple(refs), skipped=tuple(skipped), cfg=cfg, path=path, _ordinals=frozenset(ordinals),
                         shape=shape)
