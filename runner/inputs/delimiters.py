"""A template's framing lines (delimiters): found in its text when it is loaded (:func:`derive_delimiters`), and
defanged inside every value inserted into it (:func:`neutralize`), lookalikes included, so a candidate's text cannot
close its block and speak as the instructions (runner.inputs.prompts renders with them)."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Iterator

from jinja2 import nodes

ZERO_WIDTH_SPACE = "\u200b"
MIN_DELIMITER_CHARS = 3  # shorter framing ("Q:", "A") would alter ordinary words in candidate text
_TAG_LINE = re.compile(r"</?[A-Za-z][\w.:-]*>")
_SLOT = object()  # marks where a ``{{ ... }}`` output sits in the template's literal text
_BOUNDARY = object()  # a block edge: framing never reaches across messages


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
