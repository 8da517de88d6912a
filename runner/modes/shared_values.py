"""Immutable values read from a report document, shared across items (:mod:`runner.modes.record`'s readers).

A run's per-item results repeat a handful of vote tuples and count mappings (("ours", "tie"), {"ours": 1,
"baseline": 0, "tie": 1}) thousands of times, and one shared copy of each is ~300 bytes an item less at the run's
peak (issue 12: 15 MB at 50,000 items). Only values whose equality is identity of content are shared: strings,
ints, bools and None (not floats: -0.0 == 0.0), keyed with their types (True == 1). The table is bounded; past it
a value is read unshared.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = ["frozen_mapping", "frozen_tuple"]

T = TypeVar("T")

_SHARED_MAX = 4096
_SHARED: dict[tuple[Any, ...], Any] = {}
_EXACT = frozenset({str, int, bool, type(None)})


def _shared(key: tuple[Any, ...], make: Callable[[], T]) -> T:
    value: T | None = _SHARED.get(key)
    if value is None:
        value = make()
        if len(_SHARED) < _SHARED_MAX:
            _SHARED[key] = value
    return value


def frozen_mapping(value: Mapping[str, Any], *, fresh: bool = False) -> Mapping[str, Any]:
    """``value`` as a read-only mapping, the shared one for small mappings of exact scalars; ``fresh``: ``value`` is
    a dict nobody else holds, to wrap rather than copy."""
    own = value if fresh and type(value) is dict else dict(value)
    if len(own) <= 16 and all(type(k) is str and type(v) in _EXACT for k, v in own.items()):
        return _shared(("map", *((k, type(v), v) for k, v in own.items())), lambda: types.MappingProxyType(own))
    return types.MappingProxyType(own)


def frozen_tuple(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """``values``, the shared tuple for short tuples of strings."""
    if len(values) <= 16 and all(type(v) is str for v in values):
        return _shared(("tuple", *values), lambda: values)
    return values
