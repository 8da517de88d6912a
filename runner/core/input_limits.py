"""Caps on what a config or data file may hold, checked before the file is loaded (docs/bring-your-own-data.md).

A hostile or broken file must end in one line naming the file and line, before any call and within seconds, rather
than hang the loader (a YAML "billion laughs": aliases that expand to 10^9 nodes once OmegaConf copies them), exhaust
the interpreter's stack (20,000 nested YAML lists, a 100,000-deep JSON list), convert a 100,000-digit integer
(Python refuses beyond ``sys.get_int_max_str_digits()``), or read a 1 GB line whole. YAML is checked on PyYAML's
event stream (the parser Hydra and OmegaConf use, without building a node), JSON with a bracket scan that skips
strings, only when a text holds more brackets than the depth cap allows.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from runner.core.errors import ConfigurationError

MAX_DEPTH = 100  # nested lists/mappings (YAML) or arrays/objects (JSON); a config or a row needs a handful
MAX_ALIAS_NODES = 10_000  # nodes that the aliases (*name) of one YAML file expand to, counted as OmegaConf copies them
MAX_LINE_BYTES = 64 * 2**20  # one JSONL line (one dataset row): 64 MiB
PYTHON_TAG = "tag:yaml.org,2002:python/"  # !!python/object/apply and kin: never constructed by a safe loader


class UnsafeFile(ConfigurationError):
    """A config or data file over one of the caps, or holding what a safe loader refuses; the message is
    ``<file>:<line>: <what> (cap: ...)``."""


def int_digits_cap() -> int:
    """The most digits Python converts to an int (0: no limit)."""
    return sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0


# --- YAML ---------------------------------------------------------------------------------------------------------


@dataclass
class _Node:
    """A collection being walked: its expanded size so far and, for a mapping, the keys seen and what comes next."""

    mapping: bool
    anchor: str | None
    size: int = 1
    keys: set[str] = field(default_factory=set)
    expect_key: bool = True


def check_yaml(path: Path, text: str) -> None:
    """Refuse ``text`` (the content of ``path``) over a cap, with a ``!!python/...`` tag, a duplicate key or a YAML
    syntax error, naming the file and line.

    Raises:
        UnsafeFile: The first problem met.
    """
    try:
        _walk(path, yaml.parse(text, Loader=yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise UnsafeFile(f"{path}{line}: not valid YAML ({exc.problem or exc.context})") from None
    except yaml.YAMLError as exc:
        raise UnsafeFile(f"{path}: not valid YAML ({' '.join(str(exc).split())[:200]})") from None


def _walk(path: Path, events: Iterable[yaml.Event]) -> None:
    stack: list[_Node] = []
    sizes: dict[str, int] = {}  # anchor -> the nodes it stands for
    expanded = 0
    for event in events:
        where = f"{path}:{event.start_mark.line + 1}" if event.start_mark is not None else str(path)
        tag = getattr(event, "tag", None)
        if tag and tag.startswith(PYTHON_TAG):
            raise UnsafeFile(f"{where}: tag !!{tag[len('tag:yaml.org,2002:'):]} is not allowed (a safe loader "
                             "constructs no Python object)")
        if isinstance(event, yaml.CollectionStartEvent):
            _key(stack, where, None)
            stack.append(_Node(isinstance(event, yaml.MappingStartEvent), event.anchor))
            if len(stack) > MAX_DEPTH:
                raise UnsafeFile(f"{where}: nested deeper than {MAX_DEPTH} lists or mappings (cap: {MAX_DEPTH})")
        elif isinstance(event, yaml.CollectionEndEvent):
            done = stack.pop()
            _remember(sizes, done.anchor, done.size)
            _add(stack, done.size)
        elif isinstance(event, yaml.ScalarEvent):
            _key(stack, where, event.value)
            _check_scalar(where, event)
            _remember(sizes, event.anchor, 1)
            _add(stack, 1)
        elif isinstance(event, yaml.AliasEvent):
            _key(stack, where, None)
            size = sizes.get(event.anchor or "", 1)
            expanded += size
            if expanded > MAX_ALIAS_NODES:
                raise UnsafeFile(f"{where}: aliases expand to more than {MAX_ALIAS_NODES} nodes (a \"billion "
                                 f"laughs\"?) (cap: {MAX_ALIAS_NODES})")
            _add(stack, size)


def _key(stack: list[_Node], where: str, value: str | None) -> None:
    """A node starts: as a mapping's key, a repeated scalar key is refused."""
    if not stack or not stack[-1].mapping or not stack[-1].expect_key or value is None or value == "<<":
        return
    if value in stack[-1].keys:
        raise UnsafeFile(f"{where}: duplicate key {value!r}")
    stack[-1].keys.add(value)


def _add(stack: list[_Node], size: int) -> None:
    """A node ends: its parent grows by its size, and a mapping's next node is a value after a key, and so on."""
    if stack:
        stack[-1].size += size
        stack[-1].expect_key = not stack[-1].expect_key


def _remember(sizes: dict[str, int], anchor: str | None, size: int) -> None:
    if anchor is not None:
        sizes[anchor] = size


_PLAIN_INT = re.compile(r"[-+]?[0-9_]+")


def _check_scalar(where: str, event: yaml.ScalarEvent) -> None:
    cap = int_digits_cap()
    if cap and event.implicit[0] and len(event.value) > cap and _PLAIN_INT.fullmatch(event.value):
        raise UnsafeFile(f"{where}: an integer of {len(event.value)} digits (cap: {cap}, Python's "
                         "int_max_str_digits)")


# --- JSON ---------------------------------------------------------------------------------------------------------

_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def json_depth_problem(text: str) -> tuple[int, str] | None:
    """(the line within ``text``, what) when JSON ``text`` nests deeper than :data:`MAX_DEPTH`, else None. Cheap
    for a text with few brackets (counted, not scanned)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return None
    depth = 0
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return (text.count("\n", 0, match.start()) + 1,
                        f"nested deeper than {MAX_DEPTH} arrays or objects (cap: {MAX_DEPTH})")
        elif token in "]}":
            depth -= 1
    return None


def json_number_problem(exc: ValueError) -> str:
    """What a ValueError of ``json.loads`` other than a syntax error means: an integer over Python's digit cap."""
    return f"a number Python will not convert ({' '.join(str(exc).split())[:120]}) (cap: {int_digits_cap()} digits)"
