"""Find the JSON objects a judge embedded in its answer: bare or fenced, with prose around them.

The one extractor behind the label parsers (:mod:`runner.judging.parsers.labels`, :func:`json_objects`) and the
score parsers (:mod:`runner.judging.parsers.scores`, :func:`scan_objects`). They differ only in what an
object that does not decode hides: a label parser still reads an object nested in it (``{"winner": "B",
oops {"winner": "A"}`` reads A), a score parser does not (the inner scores of a broken answer are not its
answer).

Each candidate is decoded from its own slice, the object its brace opens up to the matching brace: json's
error message counts lines from the start of the string it was given, which made many failed starts in
one long text quadratic. A brace that nothing matches opens no object, so it is not decoded at all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

MALFORMED = None  # marks, in a scan, an object that starts like JSON but does not decode

# A JSON object opens with a key or closes at once (every start that decodes matches); single quotes are
# let in so that a Python-style dict is seen as a malformed object (and refused) instead of as prose.
_OBJECT_START = re.compile(r"\{\s*[\"'}]")
# A double-quoted string (to the end of the text if unterminated: it always matches, so it never
# backtracks) or a brace; what is inside a string is skipped when matching braces.
_BRACE_OR_STRING = re.compile(r'"(?:[^"\\]+|\\[\s\S]?)*(?:"|\Z)|[{}]')


def json_objects(text: str) -> list[dict[str, Any]]:
    """The top-level JSON objects in ``text`` that decode, in order of appearance (the label parsers' view).

    Decoding is attempted at every candidate start; after a success the scan resumes past the decoded
    object, so objects nested inside one already found are not returned again. A start that does not
    decode is passed over, so an object nested in a malformed one is still found.
    """
    return [obj for obj in _scan(text, into_malformed=True) if obj is not MALFORMED]


def scan_objects(text: str) -> Iterator[dict[str, Any] | None]:
    """Yield the top-level objects in ``text`` in order, :data:`MALFORMED` for one that does not decode
    (the score parsers' view).

    A malformed object is skipped as a whole (to its matching brace, or the end of a truncated text),
    so an object nested inside it (often the scores of a broken answer) is not taken for an answer;
    after an object that decodes the scan resumes past it, so objects nested in it are not yielded again.
    """
    return _scan(text, into_malformed=False)


def _scan(text: str, *, into_malformed: bool) -> Iterator[dict[str, Any] | None]:
    """Every candidate object in order, decoded or MALFORMED; after a malformed one the scan goes on inside
    it (``into_malformed``) or past its matching brace.

    Decoding ``text[start:end]`` gives what decoding ``text`` at ``start`` would: an object that decodes
    ends at its matching brace, so one without a matching brace never decodes.
    """
    decoder = json.JSONDecoder()
    regions = _Regions(text)
    match = _OBJECT_START.search(text)
    while match is not None:
        start = match.start()
        end = regions.end(start)
        obj: dict[str, Any] | None = MALFORMED
        if end is not None:
            try:
                obj, _ = decoder.raw_decode(text[start:end])
            except (ValueError, RecursionError):
                obj = MALFORMED
        yield obj
        if obj is MALFORMED and into_malformed:
            resume = start + 1
        else:
            resume = len(text) if end is None else end
        match = _OBJECT_START.search(text, resume)


class _Regions:
    """Where the object opened by a brace would end: just past its matching brace (braces inside JSON
    strings do not count), or None when nothing matches it before the end of the text.

    For valid JSON this is exactly where the decoder stops, so the region is the object itself. Matching
    one brace also matches every brace met inside its region (read from one of those, the matcher would
    meet the same strings and braces), so nested candidates, many unclosed braces say, are looked up
    rather than matched again.
    """

    def __init__(self, text: str) -> None:
        self._text = text
        self._ends: dict[int, int | None] = {}

    def end(self, start: int) -> int | None:
        """The end of the region opened by the brace at ``start``."""
        if start not in self._ends:
            opened: list[int] = []
            for token in _BRACE_OR_STRING.finditer(self._text, start):
                if token.group() == "{":
                    opened.append(token.start())
                elif token.group() == "}":
                    self._ends[opened.pop()] = token.end()
                    if not opened:
                        break
            self._ends.update(dict.fromkeys(opened))
        return self._ends[start]
