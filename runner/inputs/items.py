"""What one dataset row becomes: an :class:`~runner.core.types.Item`, its fields mapped onto template variables,
candidates, gold label, tags, category, human score and annotator labels by the dataset config.

A field that is missing or of the wrong kind raises :class:`~runner.inputs.rows.RowError` naming it; the loader
(:mod:`runner.inputs.datasets`) adds the file and line.
"""

from __future__ import annotations

import fnmatch
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from runner.core.choices import PromptMode
from runner.core.config import DatasetConfig, SystemConfig
from runner.core.types import TIE, Candidate, Item
from runner.inputs.rows import RowError


@dataclass(frozen=True)
class Shape:
    """What a row must provide besides the mapped variables.

    Attributes:
        mode: pairwise rows carry two candidates (ours, baseline); pointwise rows one.
        with_candidate: False when a generator writes the pointwise candidate, so the row needs none.
    """

    mode: PromptMode = PromptMode.pairwise
    with_candidate: bool = True


def _field(row: dict, name: str) -> Any:
    if name not in row:
        raise RowError(f"missing field {name!r} (fields present: {sorted(row)})")
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
    raise RowError(f"field {name!r} must be text, got {type(value).__name__}")


def annotator_labels(row: dict, cfg: DatasetConfig) -> tuple[str | None, ...]:
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
        raise RowError(f"gold value {raw!r} is not in dataset.gold_map {sorted(cfg.gold_map)}")
    allowed = {s.name for s in (cfg.ours, cfg.baseline) if s is not None} | {TIE}
    if gold not in allowed:
        raise RowError(f"gold {gold!r} is none of {sorted(allowed)}")
    return gold


def _tags(row: dict, cfg: DatasetConfig) -> tuple[str, ...]:
    if cfg.tags_field is None or row.get(cfg.tags_field) is None:
        return ()
    value = row[cfg.tags_field]
    values = [value] if isinstance(value, str) else value
    if isinstance(values, list) and all(isinstance(v, str) and v.strip() for v in values):
        return tuple(dict.fromkeys(v.strip() for v in values))
    raise RowError(f"field {cfg.tags_field!r} must be a non-empty string or a list of them")


def _category(row: dict, cfg: DatasetConfig) -> str | None:
    if cfg.category_field is None or row.get(cfg.category_field) is None:
        return None
    value = row[cfg.category_field]
    if not isinstance(value, str) or not value.strip():
        raise RowError(f"field {cfg.category_field!r} must be a non-empty string")
    return mapped_category(value.strip(), cfg.category_map)


def mapped_category(value: str, category_map: Mapping[str, str]) -> str:
    """The category ``value`` counts in: the first glob pattern of ``category_map`` (``dataset.category_map``, in the
    order written) that matches it names it (JudgeBench's ``mmlu-pro-law`` -> ``knowledge``); no match: itself."""
    return next((category for pattern, category in category_map.items() if fnmatch.fnmatchcase(value, pattern)),
                value)


def _human_score(row: dict, cfg: DatasetConfig) -> float | None:
    if cfg.human_score_field is None or row.get(cfg.human_score_field) is None:
        return None
    value = row[cfg.human_score_field]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RowError(f"field {cfg.human_score_field!r} must be a finite number, got {value!r}")
    return float(value)


def _candidates(row: dict, cfg: DatasetConfig, shape: Shape) -> tuple[Candidate, ...]:
    systems: tuple[SystemConfig | None, ...]
    if shape.mode is PromptMode.pairwise:
        systems = (cfg.ours, cfg.baseline)
    else:
        systems = (cfg.candidate,) if shape.with_candidate else ()
    return tuple(Candidate(system=s.name, text=_judged_text(row, _output_field(row, s))) for s in systems
                 if s is not None)


def _output_field(row: dict, system: SystemConfig) -> str:
    """The row's field holding ``system``'s output: ``field``, else the first of its ``aliases`` the row has."""
    if system.field in row or not system.aliases:
        return system.field
    found = next((name for name in system.aliases if name in row), None)
    if found is None:
        raise RowError(f"missing field {system.field!r} (or {' / '.join(map(repr, system.aliases))}; fields present: "
                       f"{sorted(row)})")
    return found


def _judged_text(row: dict, name: str) -> str:
    """A candidate output: a JSON string, or a JSON object or list (a structured answer, e.g. an agent's, shown to
    the judge as indented JSON). A number, boolean or null there is a wrong field or a broken export, not an answer
    to judge, so it is not converted."""
    value = _field(row, name)
    if not isinstance(value, (str, dict, list)):
        raise RowError(f"field {name!r} must be a JSON string (the judged text) or a JSON object or list, "
                       f"got {type(value).__name__}")
    return _text(row, name)


def to_item(row: Any, cfg: DatasetConfig, where: str, ordinal: int, shape: Shape) -> Item:
    """The item of one row, as :func:`runner.inputs.rows.read_rows` yields it from ``where``; its id is the
    row's ``dataset.id_field``, or else ``ordinal`` (its 1-based place in the file).

    Raises:
        RowError: The row did not parse, is not an object, or a field is missing or of the wrong kind.
    """
    if isinstance(row, RowError):
        raise row
    if not isinstance(row, dict):
        raise RowError(f"expected a JSON object, got {type(row).__name__}")
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
