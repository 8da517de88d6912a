"""Prompt templates: loading, checking and rendering them into chat messages.

A template is a Jinja2 file in prompts/ whose ``system`` and ``user`` blocks become chat messages (a Jinja file
without blocks, or a plain-text ``.txt`` file with ``{placeholders}``, is one user message).
Dataset fields and candidate outputs are passed as variables, so their text reaches the judge
verbatim: Jinja never renders a variable's value as a template. What Jinja cannot stop is a value
that contains the template's own framing lines (``</response_a>``, ``# Output (b):``) and so closes
its block and speaks as the instructions; :func:`neutralize` defangs those inside inserted values.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import jinja2
from jinja2 import meta, nodes

from runner.core.types import Message
from runner.inputs import text_templates as texts
from runner.inputs.text_templates import JINJA_SUFFIXES, TEXT_SUFFIXES

logger = logging.getLogger(__name__)

ROLES = ("system", "user")
TEMPLATE_SUFFIX = ".j2"
ZERO_WIDTH_SPACE = "\u200b"
MIN_DELIMITER_CHARS = 3  # shorter framing ("Q:", "A") would alter ordinary words in candidate text
_TAG_LINE = re.compile(r"</?[A-Za-z][\w.:-]*>")
_SLOT = object()  # marks where a ``{{ ... }}`` output sits in the template's literal text
_BOUNDARY = object()  # a block edge: framing never reaches across messages


class TemplateError(ValueError):
    """A template is missing, malformed, or needs variables nobody provides."""


@dataclass(frozen=True)
class Template:
    """A loaded prompt template.

    Attributes:
        name: The file stem (equals the conf/prompt ``template`` value).
        path: Where it was read from.
        source: The file's text.
        sha256: Hash of the file's bytes, recorded with every run.
        variables: Every variable the template reads.
        delimiters: The template's framing lines (stripped), derived from its text at load time; any
            occurrence inside an inserted value is neutralized by :meth:`render`.
    """

    name: str
    path: Path
    source: str
    sha256: str
    variables: frozenset[str]
    delimiters: frozenset[str]
    _compiled: jinja2.Template

    def find_delimiters_in(self, value: str) -> list[str]:
        """Return, sorted, each of this template's delimiters that occurs in ``value`` (or a lookalike of it, see
        :func:`neutralize`).

        Lets a caller count how many inserted values :meth:`render` neutralized.
        """
        return sorted(d for d in self.delimiters if neutralize(value, (d,)) != value)

    def render(self, variables: Mapping[str, object], neutralize: bool = True) -> tuple[Message, ...]:
        """Render each role block into one message with stripped content.

        Args:
            variables: Values for every variable the template reads; text is inserted verbatim (other
                values, such as the rubric's criteria, are runner-built and used by the template's logic).
            neutralize: Defang this template's delimiters inside each value (see :func:`neutralize`).
                A value that holds no delimiter is inserted byte-identical either way.

        Raises:
            TemplateError: If a variable the template reads is missing.
        """
        missing = self.variables - set(variables)
        if missing:
            raise TemplateError(f"template {self.path}: missing variable(s) {sorted(missing)}")
        values = _neutralize_values(variables, self.delimiters) if neutralize else dict(variables)
        context = self._compiled.new_context(values)
        messages = []
        for role in ROLES:
            block = self._compiled.blocks.get(role)
            if block is None:
                continue
            messages.append(Message(role=role, content="".join(block(context)).strip()))
        return tuple(messages)


def neutralize(value: str, delimiters: Iterable[str]) -> str:
    """Defang every occurrence of each delimiter in ``value``, and of every lookalike of it.

    A lookalike is the same text up to case, whitespace, quote style and Unicode compatibility forms
    (``[the start of assistant b's answer]``, ``Assistant A’s``, ``#  OUTPUT (B):``): both sides are compared
    folded (see :func:`fold`). A ZERO WIDTH SPACE goes after the first character of each occurrence
    ("</response_a>" becomes "<\\u200b/response_a>"), so the judge still reads the text but no delimiter
    survives, including overlapping ones. A value without any delimiter is returned unchanged (the same bytes).

    Args:
        value: Text to be inserted into a template.
        delimiters: The template's framing lines; entries that fold to fewer than two characters are ignored.
    """
    keys = _delimiter_keys(frozenset(delimiters))
    if value.isascii() and not any(char in value for char in _ascii_starts(keys)):
        return value  # most text: no character any delimiter can start with, found at C speed
    quick = _quick_fold(value, keys) if keys else ""
    if not any(key in quick for key in keys):
        return value
    folded, origin = _fold_with_origin(value)
    cuts: set[int] = set()  # a ZERO WIDTH SPACE goes before value[cut]
    spread: set[int] = set()  # a character whose fold alone holds a whole delimiter ("…" for "...")
    for key in keys:
        start = folded.find(key)
        while start != -1:
            first, last = origin[start], origin[start + len(key) - 1]
            if last > first:
                cuts.add(first + 1)
            else:
                spread.add(first)
            start = folded.find(key, start + 1)
    pieces, previous = [], 0
    for index in sorted(cuts | spread):
        pieces.append(value[previous:index])
        if index in cuts:
            pieces.append(ZERO_WIDTH_SPACE)
        previous = index
        if index in spread:  # one character cannot take a space inside: it is written out, folded and spaced
            pieces.append(ZERO_WIDTH_SPACE.join(fold(value[index])))
            previous = index + 1
    pieces.append(value[previous:])
    return "".join(pieces)


_QUOTES = str.maketrans({**dict.fromkeys("\u2018\u2019\u201a\u201b\u2032\u2035`\u00b4", "'"),
                         **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033\u2036\u00ab\u00bb", '"')})


@functools.lru_cache(maxsize=4096)
def fold(char: str) -> str:
    """What one character counts as when delimiters are matched: its compatibility decomposition (NFKD: "ﬁ" is
    "fi", a full-width "Ａ" is "A"), case-folded, curly quotes and apostrophes as straight ones, whitespace dropped.

    Decomposition rather than NFKC's composition: it is defined character by character, so every folded character
    maps back to the one it came from, and "é" and "e" + U+0301 fold alike.
    """
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", char).casefold())
    return "".join(c for c in decomposed.translate(_QUOTES) if not c.isspace())


def _fold_with_origin(value: str) -> tuple[str, list[int]]:
    """``value`` folded character by character, and for each folded character the index it came from."""
    chars: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(value):
        folded = fold(char)
        chars.append(folded)
        origin.extend([index] * len(folded))
    return "".join(chars), origin


def _quick_fold(value: str, keys: tuple[str, ...]) -> str:
    """``value`` folded without a loop in Python where that finds the same keys as :func:`_fold_with_origin`."""
    if value.isascii():  # most candidates: the same result as _fold_with_origin's
        return "".join(value.lower().translate(_QUOTES).split())
    if all(key.isascii() for key in keys):
        # NFKD of the whole text differs from the per-character one only in the order of adjacent combining marks,
        # which never stand inside an ASCII key: the same keys are found
        decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", value).casefold())
        return "".join(decomposed.translate(_QUOTES).split())
    return _fold_with_origin(value)[0]


@functools.lru_cache(maxsize=256)
def _ascii_starts(keys: tuple[str, ...]) -> frozenset[str]:
    """The ASCII characters that fold to the first character of one of ``keys``."""
    firsts = {key[0] for key in keys}
    return frozenset(c for c in map(chr, range(128)) if fold(c)[:1] in firsts)


@functools.lru_cache(maxsize=256)
def _delimiter_keys(delimiters: frozenset[str]) -> tuple[str, ...]:
    # a zero width space in a delimiter would let the cut re-create the match: such a delimiter cannot be defanged
    keys = {"".join(fold(c) for c in d) for d in delimiters}
    return tuple(sorted(k for k in keys if len(k) >= 2 and ZERO_WIDTH_SPACE not in k))


def _neutralize_values(variables: Mapping[str, object], delimiters: frozenset[str]) -> dict[str, object]:
    # Only text is data from outside; runner-built values (the rubric's criteria list) pass through.
    return {name: neutralize(value, delimiters) if isinstance(value, str) else value
            for name, value in variables.items()}


def _segments(node: nodes.Node) -> Iterator[object]:
    """Yield the template in document order: literal strings, _SLOT per output, _BOUNDARY per block edge."""
    if isinstance(node, nodes.TemplateData):
        yield node.data
    elif isinstance(node, nodes.Output):
        for expr in node.nodes:
            if isinstance(expr, nodes.TemplateData):
                yield expr.data
            else:
                yield _SLOT
    elif isinstance(node, nodes.Block):
        yield _BOUNDARY
        for child in node.body:
            yield from _segments(child)
        yield _BOUNDARY
    else:
        for child in node.iter_child_nodes():
            yield from _segments(child)


def _is_delimiter(line: str) -> bool:
    return len("".join(line.split())) >= MIN_DELIMITER_CHARS


def _nearest_line(text: str, last: bool) -> str | None:
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    if not lines:
        return None
    return lines[-1] if last else lines[0]


def derive_delimiters(ast: nodes.Template) -> frozenset[str]:
    """Find a template's framing lines from its parsed AST.

    For every ``{{ ... }}`` output: the nearest non-empty literal line before and after it, within
    its block. Plus every literal line of the form ``<tag>`` or ``</tag>``. Lines with fewer than
    MIN_DELIMITER_CHARS non-space characters are left out so ordinary words are never altered.
    """
    runs: list[object] = []  # literal text merged between slots and boundaries
    for segment in _segments(ast):
        if isinstance(segment, str) and runs and isinstance(runs[-1], str):
            runs[-1] += segment
        else:
            runs.append(segment)
    found: set[str] = set()
    for index, run in enumerate(runs):
        if isinstance(run, str):
            found.update(ln.strip() for ln in run.split("\n") if _TAG_LINE.fullmatch(ln.strip()))
        if run is not _SLOT:
            continue
        before = runs[index - 1] if index > 0 else None
        after = runs[index + 1] if index + 1 < len(runs) else None
        for text, last in ((before, True), (after, False)):
            line = _nearest_line(text, last) if isinstance(text, str) else None
            if line is not None:
                found.add(line)
    return frozenset(d for d in found if _is_delimiter(d))


def _environment(directories: Sequence[Path]) -> jinja2.Environment:
    # autoescape off: prompts are plain text, and escaping would change what the judge reads.
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in directories]),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )


def _find(dirs: Sequence[Path], name: str) -> Path:
    """The template file ``name`` stands for: ``<name>.j2`` or ``<name>.txt`` (or ``name`` itself when it has one
    of the suffixes) in the first directory that holds one."""
    suffixes = JINJA_SUFFIXES + TEXT_SUFFIXES
    names = [name] if name.endswith(suffixes) else [f"{name}{suffix}" for suffix in suffixes]
    for directory in dirs:
        found = [directory / n for n in names if (directory / n).is_file()]
        if len(found) > 1:
            raise TemplateError(f"prompt template {name!r} is ambiguous: {[str(p) for p in found]}; "
                                "keep one of them, or name the file with its suffix")
        if found:
            return found[0]
    known = sorted({p.name if p.suffix != TEMPLATE_SUFFIX else p.stem for directory in dirs
                    for suffix in suffixes for p in directory.glob(f"*{suffix}")})
    where = ", ".join(str(d) for d in dirs)
    raise TemplateError(f"prompt template {dirs[0] / names[0]} not found; templates in {where}: {known}")


def _jinja_source(path: Path, source: str) -> str:
    """The Jinja source of the file: itself, or a plain-text file's translation (one user message)."""
    if path.suffix not in TEXT_SUFFIXES:
        return source
    try:
        return texts.txt_to_jinja(source, path)
    except texts.PlainTextError as exc:
        raise TemplateError(str(exc)) from None


def load_template(directories: Path | Sequence[Path], name: str) -> Template:
    """Load the template ``name`` from the first of ``directories`` that holds it (a user's prompts/ before the
    packaged one), check it has a ``user`` block and derive its delimiters. ``{% extends %}`` and ``{% include %}``
    look in every directory, in the same order.

    ``<name>.j2`` is Jinja with ``system`` and ``user`` blocks; a Jinja file without any block is one user message;
    ``<name>.txt`` is plain text with ``str.format`` placeholders (``{question}``), one user message, or, when it
    has none but holds Jinja syntax, Jinja (runner.inputs.text_templates.txt_to_jinja).

    Raises:
        TemplateError: If no directory holds the file, or it does not parse, or has no user block.
    """
    dirs = [directories] if isinstance(directories, Path) else list(directories)
    path = _find(dirs, name)
    source = path.read_text(encoding="utf-8")
    env = _environment(dirs)
    jinja_source = _jinja_source(path, source)
    try:
        ast = env.parse(jinja_source)
        if next(ast.find_all((nodes.Block, nodes.Extends)), None) is None:  # the users' own Jinja prompt: one message
            jinja_source = texts.wrap_blockless(jinja_source)
            ast = env.parse(jinja_source)
        compiled = env.from_string(jinja_source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"template {path}, line {exc.lineno}: {exc.message}") from None
    if "user" not in compiled.blocks:
        raise TemplateError(f"template {path} has no {{% block user %}}")
    delimiters = derive_delimiters(ast)
    logger.debug("template %s: delimiters %s", path, sorted(delimiters))
    return Template(
        name=name,
        path=path,
        source=source,
        sha256=hashlib.sha256(source.encode("utf-8")).hexdigest(),
        variables=frozenset(meta.find_undeclared_variables(ast)),
        delimiters=delimiters,
        _compiled=compiled,
    )


def check_variables(template: Template, provided: set[str], where: str) -> None:
    """Fail before any call when the template reads a variable nobody provides.

    Args:
        template: The loaded template.
        provided: Variable names the dataset mapping and the runner will supply.
        where: What provides them (named in the error, e.g. the dataset config).

    Raises:
        TemplateError: Naming the template file and each missing variable.
    """
    missing = template.variables - provided
    if missing:
        raise TemplateError(
            f"template {template.path} uses variable(s) {sorted(missing)} that {where} does not provide "
            f"(provided: {sorted(provided)})"
        )
