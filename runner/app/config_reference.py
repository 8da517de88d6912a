"""The config reference page (docs/reference/config.md), generated from the schemas in :mod:`runner.core.config`.

One section per config group and per nested record: each key with its type, default and the comment written
beside it (or above it) in the schema, so the page cannot drift from what Hydra validates.
``python -m runner.app.config_reference`` rewrites the page; ``--check`` exits 1 when the committed page differs
(tests/unit/test_docs.py asserts the same).
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import functools
import inspect
import io
import json
import sys
import tokenize
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import MISSING

from runner.core.config import GENERATOR_UNUSED, GeneratorConfig, RunConfig

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "config.md"
HEADER = """# Configuration reference

Generated from the schemas in `runner/core/config.py` and `runner/core/run_settings.py` by `python -m
runner.app.config_reference`; do not edit by hand. Every key below is checked when Hydra composes the config: a
misspelt key or a wrong type fails before anything runs. Set a key in a YAML file of its group
(`conf/judge/my_judge.yaml`) or on the command line (`judge.rpm=600`, `max_items=20`). *required*: the group's YAML
must set it.
"""


@functools.cache
def comments_by_line(cls: type) -> tuple[dict[int, str], dict[int, str], int]:
    """The class's comments: trailing ones by source line, whole-line ones by source line, and its first line."""
    lines, first = inspect.getsourcelines(cls)
    trailing: dict[int, str] = {}
    whole: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO("".join(lines)).readline):
        if tok.type == tokenize.COMMENT:
            text = tok.string.lstrip("#").strip()
            row = tok.start[0]
            (whole if not lines[row - 1][: tok.start[1]].strip() else trailing)[row] = text
    return trailing, whole, first


@functools.cache
def field_lines(cls: type) -> dict[str, int]:
    """Each field defined in the class's own body by the (1-based, relative) line it starts on."""
    lines, _ = inspect.getsourcelines(cls)
    found: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        name, sep, _ = line.strip().partition(":")
        if sep and name.isidentifier() and line.startswith("    ") and not line.startswith("     "):
            found.setdefault(name, number)
    return found


def field_comment(cls: type, name: str) -> str:
    """The comment above a field (its contiguous comment lines) and beside it, joined."""
    for klass in cls.__mro__:
        if not dataclasses.is_dataclass(klass) or name not in field_lines(klass):
            continue
        row = field_lines(klass)[name]
        trailing, whole, _ = comments_by_line(klass)
        above: list[str] = []
        r = row - 1
        while r in whole:
            above.insert(0, whole[r])
            r -= 1
        return " ".join([*above, *([trailing[row]] if row in trailing else [])])
    return ""


def type_text(hint: Any) -> str:
    """A type as a reader of the YAML sees it: enums as their values, None as null."""
    if hint is type(None):
        return "null"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return " \\| ".join(str(m.value) for m in hint)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(type_text(a) for a in typing.get_args(hint))
    if origin in (list, dict):
        return f"{origin.__name__}[{', '.join(type_text(a) for a in typing.get_args(hint))}]"
    if hint is Any:
        return "any"
    return getattr(hint, "__name__", str(hint))


def default_text(f: dataclasses.Field[Any]) -> str:
    """The field's default as YAML would spell it, or *required*."""
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "*required*"
    if value == MISSING:
        return "*required*"
    if dataclasses.is_dataclass(value):
        return "(below)"
    if isinstance(value, enum.Enum):
        value = value.value
    return f"`{json.dumps(value)}`" if not isinstance(value, str) else f"`{value}`"


def nested_record(hint: Any) -> tuple[type | None, str]:
    """The dataclass a field holds (directly, optionally, in a list or as dict values) and the path suffix."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return nested_record(inner[0]) if len(inner) == 1 else (None, "")
    if origin is list and args:
        record, suffix = nested_record(args[0])
        return record, "[]" + suffix
    if origin is dict and len(args) == 2:
        record, suffix = nested_record(args[1])
        return record, ".<name>" + suffix
    return (hint, "") if isinstance(hint, type) and dataclasses.is_dataclass(hint) else (None, "")


# Keys a record inherits but never reads, left out of its table.
UNUSED: dict[type, tuple[str, ...]] = {GeneratorConfig: GENERATOR_UNUSED}


def section(path: str, cls: type, seen: dict[type, str]) -> list[str]:
    """The Markdown of one record and, after it, of the records it holds (each record once)."""
    seen[cls] = path
    doc = inspect.cleandoc(cls.__doc__ or "")
    out = [f"## {path}", "", f"`{cls.__name__}`: {doc}", "", "| key | type | default | meaning |",
           "|---|---|---|---|"]
    hints = typing.get_type_hints(cls)
    later: dict[type, str] = {}
    for f in (f for f in dataclasses.fields(cls) if f.name not in UNUSED.get(cls, ())):
        record, suffix = nested_record(hints[f.name])
        meaning = str(f.metadata.get("doc", "")) or field_comment(cls, f.name)
        if record is not None:
            target = seen.get(record) or later.setdefault(record, f"{path}.{f.name}{suffix}".lstrip("."))
            stop = "" if not meaning or meaning.endswith((".", ":")) else "."
            meaning = f"{meaning}{stop} See [{target}](#{anchor(target)}).".strip()
        out.append(f"| `{f.name}` | {type_text(hints[f.name])} | {default_text(f)} | {meaning.replace('|', '/')} |")
    out.append("")
    for record, target in later.items():
        if record not in seen:
            out += section(target, record, seen)
    return out


def anchor(title: str) -> str:
    """The id Python-Markdown's toc gives a heading: lower case, word characters and dashes."""
    kept = "".join(c for c in title.lower() if c.isalnum() or c in " _-")
    return "-".join(kept.split())


def render() -> str:
    """The whole page."""
    top = section("", RunConfig, {})
    top[0] = "## Run knobs (conf/config.yaml)"
    return HEADER + "\n" + "\n".join(top).rstrip("\n") + "\n"


def write_page(page: Path, make: Callable[[], str], module: str, argv: list[str] | None = None) -> int:
    """Write a generated page, or with --check exit 1 when the committed one differs (``module`` remakes it)."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=f"write {page.name}")
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed page differs")
    args = parser.parse_args(argv)
    text = make()
    if args.check:
        if not page.is_file() or page.read_text(encoding="utf-8") != text:
            sys.stderr.write(f"{page} is out of date: python -m {module}\n")
            return 1
        return 0
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text, encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Write the page, or with --check exit 1 when it is out of date."""
    return write_page(PAGE, render, "runner.app.config_reference", argv)


if __name__ == "__main__":
    sys.exit(main())
