"""``@config_record``: the config schemas' dataclass decorator, frozen for their users and mutable for Hydra.

A ``@dataclass(frozen=True)`` schema cannot be composed: OmegaConf marks every node built from a frozen dataclass
read-only (``omegaconf.dictconfig``: ``is_structured_config_frozen``), so Hydra can merge no YAML file or
command-line override into it (``ReadonlyConfigError: Cannot set value of read-only config node``, checked in
tests/unit/test_config_records.py). So the class stays a plain dataclass for OmegaConf, and its instances refuse
attribute assignment once built, as a frozen dataclass's do (``dataclasses.FrozenInstanceError``).
``dataclass_transform(frozen_default=True)`` tells mypy the same, so an assignment fails type checking too;
``dataclasses.replace`` makes a changed copy.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # pragma: no cover - Python 3.10
    from typing_extensions import dataclass_transform

_Record = TypeVar("_Record")

# Field metadata of a setting that does not change what is asked or how answers are read (pacing, retries,
# where things are written, tracking, gates): a resumed run may change it. A field without it is part of the
# run's identity, which a resume must match (runner/core/identity.py).
OPERATIONAL: dict[str, bool] = {"operational": True}

_SEALED = "_config_record_sealed"  # set on an instance once its __init__ has run


def _refuse_assignment(self: object, name: str, value: Any) -> None:
    if self.__dict__.get(_SEALED):
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r} of a {type(self).__name__}: a "
                                              f"config record is frozen; make a copy with dataclasses.replace")
    object.__setattr__(self, name, value)


def _sealing(init: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(init)
    def __init__(self: object, *args: Any, **kwargs: Any) -> None:  # noqa: N807 - replaces the class's __init__
        init(self, *args, **kwargs)
        object.__setattr__(self, _SEALED, True)

    return __init__


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def config_record(cls: type[_Record]) -> type[_Record]:
    """A dataclass whose instances are frozen once built, while OmegaConf still composes into its schema.

    Equality and ``repr`` are the dataclass's (the seal is no field); instances are not hashable, as before.
    """
    made: Any = dataclasses.dataclass(cls)
    made.__init__ = _sealing(made.__init__)
    made.__setattr__ = _refuse_assignment
    made.__delattr__ = _refuse_deletion
    return made  # type: ignore[no-any-return]


def _refuse_deletion(self: object, name: str) -> None:
    if self.__dict__.get(_SEALED):
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r} of a {type(self).__name__}: a config "
                                              f"record is frozen")
    object.__delattr__(self, name)
