"""A run's identity from its config schemas: which flattened config keys a resumed run may change.

A field marked ``metadata=OPERATIONAL`` (:mod:`runner.core.records`) is operational, with everything under it
(``tracking``, ``gate``: whole groups); any other field is identity, so a field added without the marker is
identity by default, and a resume refuses its change.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Iterator
from typing import Any

from runner.core.records import OPERATIONAL

_MARK = next(iter(OPERATIONAL))


def is_operational(schema: type, key: str) -> bool:
    """Whether the flattened key ``key`` (``judge.members.gpt.rpm``) of a config of ``schema`` lies under a field
    marked operational; a key the schema does not declare (a dict entry, an unknown key) is identity."""
    node: Any = schema
    within: list[type] = []
    parts = key.split(".")
    while parts:
        part = parts.pop(0)
        found = _fields(node).get(part)
        if found is None:
            return False
        if found.metadata.get(_MARK):
            return True
        within.append(node)
        node = _record_type(_hints(node)[part])
        if isinstance(node, tuple):  # dict[str, record]: the next part is the entry's name
            if not parts:
                return False
            parts.pop(0)
            node = node[0]
        if node in within[:-1]:  # a record within itself (an ensemble member's members): one key, as schema_keys
            return False
    return False


def operational_keys(schema: type) -> frozenset[str]:
    """Every flattened key the schema declares that :func:`is_operational` (a dict of records as ``<name>``)."""
    return frozenset(key for key in schema_keys(schema) if is_operational(schema, key))


def schema_keys(schema: type, prefix: str = "", within: tuple[type, ...] = ()) -> Iterator[str]:
    """The flattened keys of ``schema``: its fields, those of the records under it (a dict of records as
    ``<name>``, a list as one key, as a run's params flatten them; a record within itself, such as an ensemble
    member's members, as one key)."""
    for name in _fields(schema):
        key = f"{prefix}{name}"
        inner = _record_type(_hints(schema)[name])
        if isinstance(inner, tuple) and inner[0] not in within:
            yield from schema_keys(inner[0], f"{key}.<name>.", (*within, schema))
        elif inner is not None and not isinstance(inner, tuple) and inner not in within:
            yield from schema_keys(inner, f"{key}.", (*within, schema))
        else:
            yield key


@functools.cache
def _fields(schema: Any) -> dict[str, dataclasses.Field[Any]]:
    return {f.name: f for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else {}


@functools.cache
def _hints(schema: type) -> dict[str, Any]:
    return typing.get_type_hints(schema)


def _record_type(hint: Any) -> Any:
    """The config record a field holds (``X | None`` -> X), ``(X,)`` for ``dict[str, X]``, else None."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        records = [_record_type(arg) for arg in typing.get_args(hint) if arg is not type(None)]
        return records[0] if len(records) == 1 else None
    if typing.get_origin(hint) is dict:
        value = _record_type(typing.get_args(hint)[1])
        return (value,) if isinstance(value, type) else None
    return hint if isinstance(hint, type) and dataclasses.is_dataclass(hint) else None
