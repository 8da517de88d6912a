"""Typed report sections: a :class:`Record` is read from its JSON strictly and written back exactly.

A record is a frozen dataclass whose fields are its JSON keys, in the order the builders write them. The builders
construct records directly (runner.modes.summary.verdict_report, runner.modes.scorecard.scorecard, ...); a
constructor refuses an unknown field (TypeError), an instance refuses assignment (FrozenInstanceError), and a record
class that is not a frozen dataclass is refused the first time it is read or written (TypeError).
:meth:`Record.from_json` refuses a document that lacks a key the builder always writes, has a key the record does
not know, or has its keys in another order, naming the section and the key (:class:`ReportFormatError`): a renamed
key fails loudly instead of silently dropping a console line or an HTML section. :meth:`Record.to_json` gives back
the same keys, in the same order, with the same values, so a document that reads writes back byte for byte.

A field's type says how its value is read: a Record (a JSON object), ``X | None``, ``tuple[X, ...]`` (a JSON
list), ``Mapping[str, X]`` (a JSON object), ``str``, ``int`` / ``float`` (a number), ``bool``, or ``Any`` (kept as
it is: the free-form parts, e.g. a fit's parameters). A field made with :func:`optional` is a key the builder writes
only sometimes (absent: None, and None is left out again); one made with :func:`rest` holds every key after the
named ones (e.g. one entry per aggregation method), and comes last.

Why not pydantic v2 (``BaseModel``, ``frozen=True``, ``extra="forbid"``, installed): measured on 2026-12-06 with
100,000 per-item ``aggregated_results`` entries (tracemalloc, item ids included), a slots record with the shared
values of runner.modes.shared_values holds 171 bytes an item, a frozen pydantic model 817 (``model_validate``) to
833 (``model_construct``): +65 MB at the run's peak, undoing issue 12's savings; and its ``model_dump`` writes a
None the builder writes (``final_verdict: null``) and one it leaves out (an absent optional key) alike, so every
optional key would need its own serializer to keep summary.json byte-identical. A record's few rules (key order,
optional and rest keys, lenient reading for the HTML views) are this module's instead.

``from_json(doc, lenient=True)`` reads what a document has, for the HTML views only (a report is a view of files
already written, and draws the sections it finds): a missing key reads as its type's empty value (``{}``, ``()``,
a record with every key missing) or else None, whatever the field's type says; unknown keys and their order are
not checked. Every other reader is strict, and a run's report is read strictly when the run builds it, so a key a
builder renamed fails that run.
"""

from __future__ import annotations

import dataclasses
import numbers
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, Union

from runner.modes.shared_values import frozen_mapping as _frozen_mapping
from runner.modes.shared_values import frozen_tuple as _frozen_tuple

R = TypeVar("R", bound="Record")

_OPTIONAL, _REST = "record.optional", "record.rest"


class ReportFormatError(ValueError):
    """A document that does not have the shape its record describes; the message names the section and the key."""


def optional() -> Any:
    """A field for a key the builder writes only sometimes: None when absent, left out of ``to_json`` when None."""
    return dataclasses.field(default=None, metadata={_OPTIONAL: True})


def rest() -> Any:
    """A field (``Mapping[str, X]``, the last one) holding every key after the named ones, in their order."""
    return dataclasses.field(default_factory=dict, metadata={_REST: True})


Reader = Callable[[Any, str, bool], Any]  # (JSON value, where it is, lenient) -> the field's value
Writer = Callable[[Any], Any]  # a field's value -> JSON


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    type: Any
    read: Reader
    write: Writer | None  # None: the value is its own JSON
    optional: bool
    rest: bool


_FIELDS: dict[type, tuple[_Field, ...]] = {}
_INDEX: dict[type, dict[str, tuple[int, _Field]]] = {}  # a record's fields by name, with their position
_READERS: dict[Any, Reader] = {}
_WRITERS: dict[Any, Writer | None] = {}


def _fields(cls: type[Record]) -> tuple[_Field, ...]:
    """A record's fields with their resolved types and readers (worked out once per class)."""
    if cls not in _FIELDS:
        params = getattr(cls, "__dataclass_params__", None)
        if params is None or not params.frozen or "__dataclass_fields__" not in cls.__dict__:
            raise TypeError(f"{cls.__name__}: a Record must be declared a frozen dataclass "
                            "(@dataclass(frozen=True, ...))")
        hints = typing.get_type_hints(cls)
        out = tuple(_Field(f.name, hints[f.name], _reader(hints[f.name]), _writer(hints[f.name]),
                           bool(f.metadata.get(_OPTIONAL)), bool(f.metadata.get(_REST)))
                    for f in dataclasses.fields(typing.cast(Any, cls)))  # every Record subclass is a dataclass
        if any(f.rest for f in out[:-1]):
            raise TypeError(f"{cls.__name__}: a rest() field must be the last one")
        _FIELDS[cls] = out
        _INDEX[cls] = {f.name: (i, f) for i, f in enumerate(out)}
    return _FIELDS[cls]


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _reader(tp: Any) -> Reader:
    """The function that reads (and checks) a JSON value as the type ``tp`` describes (made once per type)."""
    if tp not in _READERS:
        _READERS[tp] = _compile(tp)
    return _READERS[tp]


def _as_is(value: Any, where: str, lenient: bool) -> Any:
    return value


def _checked(ok: Callable[[Any], bool], expected: str) -> Reader:
    def read(value: Any, where: str, lenient: bool) -> Any:
        if not ok(value):
            raise ReportFormatError(f"{where}: expected {expected}, got {_kind(value)}")
        return value

    return read


def _compile(tp: Any) -> Reader:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Union or origin is types.UnionType:
        if len(args) != 2 or type(None) not in args:
            raise TypeError(f"only X | None unions are supported, got {tp}")
        inner = _reader(next(a for a in args if a is not type(None)))
        return lambda value, where, lenient: None if value is None else inner(value, where, lenient)
    if isinstance(tp, type) and issubclass(tp, Record):
        record: type[Record] = tp
        return lambda value, where, lenient: record.from_json(value, where, lenient=lenient)
    if origin is tuple:
        return _tuple_reader(args)
    if origin is Mapping or origin is dict:
        values = _reader(args[1])

        def read_mapping(value: Any, where: str, lenient: bool) -> Any:
            if type(value) is not dict and not isinstance(value, Mapping):
                raise ReportFormatError(f"{where}: expected an object, got {_kind(value)}")
            if values is _as_is:
                return _frozen_mapping(value)
            return _frozen_mapping({k: values(v, f"{where}.{k}", lenient) for k, v in value.items()}, fresh=True)

        return read_mapping
    if tp is str:
        return _checked(lambda v: type(v) is str or isinstance(v, str), "a string")
    if tp is int or tp is float:
        return _checked(lambda v: type(v) in (float, int) or (isinstance(v, numbers.Real) and not isinstance(v, bool)),
                        "a number")
    if tp is bool:
        return _checked(lambda v: v is True or v is False, "true or false")
    return _as_is


def _tuple_reader(args: tuple[Any, ...]) -> Reader:
    """``tuple[X, ...]``: a JSON list."""
    if len(args) != 2 or args[1] is not Ellipsis:
        raise TypeError(f"only tuple[X, ...] is supported, got tuple{list(args)}")
    element = _reader(args[0])

    def read(value: Any, where: str, lenient: bool) -> Any:
        if type(value) is not list and not isinstance(value, (list, tuple)):
            raise ReportFormatError(f"{where}: expected a list, got {_kind(value)}")
        return _frozen_tuple(tuple(element(v, f"{where}[{i}]", lenient) for i, v in enumerate(value)))

    return read


def _empty(tp: Any, where: str) -> Any:
    """What a missing key reads as when reading leniently: an empty list, object or record (its keys all missing),
    else None."""
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, Record):
        return tp.from_json({}, where, lenient=True)
    return () if origin is tuple else types.MappingProxyType({}) if origin in (Mapping, dict) else None


def _writer(tp: Any) -> Writer | None:
    """The function that writes a value of the type ``tp`` as JSON (records as objects, tuples as lists), or None
    when the value is its own JSON (made once per type)."""
    if tp not in _WRITERS:
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        write: Writer | None = None
        if origin is Union or origin is types.UnionType:
            inner = _writer(next(a for a in args if a is not type(None)))
            if inner is not None:
                write = _none_or(inner)
        elif isinstance(tp, type) and issubclass(tp, Record):
            write = _record_json
        elif origin is tuple:
            element = _writer(args[0])
            write = list if element is None else _list_of(element)
        elif origin is Mapping or origin is dict:
            values = _writer(args[1])
            write = dict if values is None else _dict_of(values)
        _WRITERS[tp] = write
    return _WRITERS[tp]


def _record_json(value: Record) -> dict[str, Any]:
    return value.to_json()


def _none_or(write: Writer) -> Writer:
    return lambda value: None if value is None else write(value)


def _list_of(write: Writer) -> Writer:
    return lambda value: [write(v) for v in value]


def _dict_of(write: Writer) -> Writer:
    return lambda value: {k: write(v) for k, v in value.items()}


def _refuse(fields: tuple[_Field, ...], doc: Mapping[str, Any], where: str) -> ReportFormatError:
    """What is wrong with a document's keys: a missing key first (a renamed one shows as missing and unknown),
    then unknown keys, a null where the builder leaves the key out, keys out of order."""
    names = [f.name for f in fields]
    unknown = [] if fields and fields[-1].rest else [k for k in doc if k not in names]
    missing = [f.name for f in fields if not f.optional and not f.rest and f.name not in doc]
    if missing:
        return ReportFormatError(f"{where}: missing key {missing[0]!r}"
                                 + (f" (unknown key(s): {unknown})" if unknown else ""))
    if unknown:
        return ReportFormatError(f"{where}: unknown key(s) {unknown}")
    nulls = [f.name for f in fields if f.optional and f.name in doc and doc[f.name] is None]
    if nulls:
        return ReportFormatError(f"{where}.{nulls[0]}: null where the builder leaves the key out")
    return ReportFormatError(f"{where}: keys {list(doc)} are not in the order {[n for n in names if n in doc]}")


def _read_with_rest(fields: tuple[_Field, ...], doc: Mapping[str, Any], where: str, lenient: bool) -> dict[str, Any]:
    """The values of a record whose last field holds every key after the named ones."""
    named, rest_field = fields[:-1], fields[-1]
    names = [f.name for f in named]
    values: dict[str, Any] = {}
    for f in named:
        if f.name in doc and (lenient or not (f.optional and doc[f.name] is None)):
            values[f.name] = f.read(doc[f.name], f"{where}.{f.name}", lenient)
        elif lenient:
            values[f.name] = None if f.optional else _empty(f.type, f"{where}.{f.name}")
        elif not f.optional or f.name in doc:
            raise _refuse(fields, doc, where)
    others = {k: v for k, v in doc.items() if k not in names}
    expected = [n for n in names if n in doc] + list(others)
    if not lenient and list(doc) != expected:
        raise ReportFormatError(f"{where}: keys {list(doc)} are not in the order {expected}")
    values[rest_field.name] = rest_field.read(others, where, lenient)
    return values


class Record:
    """Base of the typed report sections; each subclass is a frozen dataclass (see the module's docstring)."""

    __slots__ = ()  # so that a per-item record declared with slots=True has no __dict__ (~100 bytes an item)

    @classmethod
    def from_json(cls: type[R], doc: Any, where: str | None = None, *, lenient: bool = False) -> R:
        """The record of ``doc`` (a JSON object as a builder wrote it); ``lenient``: see the module's docstring.

        Raises:
            ReportFormatError: A key the builder always writes is missing, a key is unknown or out of order, or
                a value has the wrong kind; the message names the section (``where``) and the key.
        """
        where = where or cls.__name__
        if type(doc) is not dict and not isinstance(doc, Mapping):
            raise ReportFormatError(f"{where}: expected an object, got {_kind(doc)}")
        fields = _fields(cls)
        if fields and fields[-1].rest:
            return cls(**_read_with_rest(fields, doc, where, lenient))
        index = _INDEX[cls]
        values: dict[str, Any] = {}
        last = -1
        for key, value in doc.items():  # one pass in the document's order; any doubt: _refuse says what is wrong
            entry = index.get(key)
            if entry is None:
                if lenient:
                    continue
                raise _refuse(fields, doc, where)
            position, f = entry
            if not lenient and (position < last or (value is None and f.optional)):
                raise _refuse(fields, doc, where)
            last = position
            values[key] = f.read(value, f"{where}.{key}", lenient)
        if len(values) < len(fields):
            for f in fields:
                if f.name in values:
                    continue
                if lenient:
                    values[f.name] = None if f.optional else _empty(f.type, f"{where}.{f.name}")
                elif not f.optional:
                    raise _refuse(fields, doc, where)
        return cls(**values)

    @classmethod
    def of(cls: type[R], value: R | Mapping[str, Any], where: str | None = None) -> R:
        """``value`` itself when it is already this record, else :meth:`from_json` of it."""
        return value if isinstance(value, cls) else cls.from_json(value, where)

    def to_json(self) -> dict[str, Any]:
        """The record's JSON: the keys it was read from, in the same order, with the same values."""
        out: dict[str, Any] = {}
        for f in _fields(type(self)):
            value = getattr(self, f.name)
            if f.optional and value is None:
                continue
            value = value if f.write is None else f.write(value)
            if f.rest:
                out.update(value)
            else:
                out[f.name] = value
        return out
