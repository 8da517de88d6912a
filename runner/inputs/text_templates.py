"""The users' own prompt files, as they are: plain text with ``{placeholders}`` and Jinja files without blocks.

Both become the Jinja source of a one-message template (``{% block user %}...{% endblock %}``), so rendering,
the variable checks of :mod:`runner.inputs.prompts` and the delimiter neutralization of
:mod:`runner.inputs.delimiters` apply to them unchanged.

Plain text follows Python's ``str.format`` syntax (:class:`string.Formatter` parses it): ``{question}`` is a
variable, ``{{`` and ``}}`` are literal braces. Only plain names are fields: ``{0}``, ``{}``, ``{a.b}``,
``{a[0]}``, ``{a!r}`` and ``{a:>10}`` are refused, naming the file, line and field, because the judge would
otherwise get text the user did not write.

A ``.txt`` file is read as ``str.format`` text when it parses as such with at least one ``{name}`` placeholder;
one that does not but holds Jinja syntax (``{{ question }}``, ``{% if ... %}``, ``{# ... #}``) is read as Jinja
(:func:`txt_to_jinja`). A file that needs Jinja and also holds a ``{name}`` placeholder is refused, naming the line:
one of the two would reach the judge as literal text.
"""

from __future__ import annotations

import re
import string
from pathlib import Path

JINJA_SUFFIXES = (".j2", ".jinja", ".jinja2")
TEXT_SUFFIXES = (".txt",)
_TAG_START = "{%"
_TAG_START_EXPR = "{{ '{%' }}"
_JINJA_SYNTAX = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)  # an expression, a tag, a comment
_FORMAT_FIELD = re.compile(r"(?<!\{)\{[A-Za-z_]\w*\}(?!\})")  # {name}, not inside {{ name }}


class PlainTextError(ValueError):
    """A plain-text template does not parse as ``str.format`` text or uses a field that is not a plain name."""


def _line_of(text: str) -> int:
    """The first line that does not parse on its own (a field never spans lines)."""
    for number, line in enumerate(text.split("\n"), start=1):
        try:
            list(string.Formatter().parse(line))
        except ValueError:
            return number
    return 1


def _raw(literal: str) -> str:
    """``literal`` as Jinja source that renders to exactly ``literal``.

    A ``{% raw %}`` block holds any text but a tag (its own end among them), so each ``{%`` (from a ``{{%`` the
    user wrote) is emitted as an expression instead.
    """
    return _TAG_START_EXPR.join("{% raw %}" + piece + "{% endraw %}" if piece else ""
                                for piece in literal.split(_TAG_START))


def _field_line(text: str, field: str) -> int:
    position = text.find("{" + field)
    return text.count("\n", 0, position) + 1 if position >= 0 else 1


def plain_text_to_jinja(text: str, path: Path) -> str:
    """The Jinja source of one user message equal to ``text.format(**variables)``.

    Raises:
        PlainTextError: Naming ``path``, the line and the field: a stray brace, a positional or empty field, an
            attribute, index, conversion or format spec, or no field at all.
    """
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise PlainTextError(f"template {path}, line {_line_of(text)}: {exc} (a literal brace is written "
                             "{{ or }} in a plain-text template, as in Python's str.format)") from None
    pieces, fields = [], []
    for literal, field, spec, conversion in parsed:
        pieces.append(_raw(literal))
        if field is None:
            continue
        if not field.isidentifier() or spec or conversion:
            shown = field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            raise PlainTextError(f"template {path}, line {_field_line(text, field)}: field {{{shown}}} is not a plain "
                                 "variable name ({question}); literal braces are written {{ and }}")
        fields.append(field)
        pieces.append("{{ " + field + " }}")
    if not fields:
        raise PlainTextError(f"template {path} has no {{placeholder}}: a plain-text template names its variables "
                             "as {question} (str.format) or {{ question }} (Jinja)")
    return "{% block user %}" + "".join(pieces) + "{% endblock %}"


def wrap_blockless(source: str) -> str:
    """A Jinja source without any ``{% block %}`` as one user message (line numbers unchanged)."""
    return "{% block user %}" + source + "{% endblock %}"


def txt_to_jinja(text: str, path: Path) -> str:
    """The Jinja source of a ``.txt`` prompt: ``str.format`` text (:func:`plain_text_to_jinja`) when it is one, else
    the file itself when it holds Jinja syntax (rendered as Jinja, blocks or not, like a ``.j2`` file).

    Raises:
        PlainTextError: The text is neither (naming the file, line and field), or it holds Jinja syntax beside a
            ``{name}`` placeholder (naming the line of the placeholder).
    """
    try:
        return plain_text_to_jinja(text, path)
    except PlainTextError:
        jinja = _JINJA_SYNTAX.search(text)
        if jinja is None:
            raise
    field = _FORMAT_FIELD.search(text)
    if field is not None:
        line = text.count("\n", 0, field.start()) + 1
        raise PlainTextError(f"template {path}, line {line}: {field.group()} is a str.format placeholder in a file "
                             f"read as Jinja (it holds {jinja.group()[:40]!r}): write it "
                             f"{{{{ {field.group()[1:-1]} }}}}, or the file as plain str.format text") from None
    return text
