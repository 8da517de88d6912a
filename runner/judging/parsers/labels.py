"""Read a verdict out of a judge's raw text.

Each parser is a pure function registered in :data:`PARSERS` (runner.judging.parsers.registry) under the name a
rubric YAML uses (``parser: mtbench_brackets``). A parser takes the judge text, the positional labels the rubric
offers (a subset of ``("A", "B", "tie")``) and its own keyword parameters, and returns a
:class:`~runner.core.types.Verdict`. It never raises on judge text and never guesses: when the text does
not state an offered label, the verdict has ``label=None`` and a short snake_case ``reason``.

Judges often restate the options before deciding ("Output (a) is concise ... Output (b) is better"),
so every parser reads the LAST match in the text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from runner.core.types import TIE, Verdict
from runner.judging.parsers.json_objects import json_objects
from runner.judging.parsers.registry import (
    EMPTY,
    INVALID_JSON,
    MISSING_KEY,
    NO_MATCH,
    PARSERS,
    clip,
    has_text,
    offered,
)
from runner.judging.parsers.registry import (
    LABEL_NOT_OFFERED as LABEL_NOT_OFFERED,  # a reason the callers of this module name
)

LLMBAR_DEFAULT_PATTERNS: tuple[str, ...] = (
    r"Output \(([ab])\) is better",
    r"(?:^|\n) ?Output \(([ab])\)",
)
_LLMBAR_SIDES = {"a": "A", "b": "B"}
_MTBENCH_VERDICT = re.compile(r"\[\[([ABC])\]\]")
_MTBENCH_SIDES = {"A": "A", "B": "B", "C": TIE}


def _build_json_aliases() -> dict[str, str]:
    """Map normalised winner values (see :func:`_normalise`) to positional labels."""
    aliases = {"tie": TIE, "c": TIE, "draw": TIE, "equal": TIE, "both": TIE}
    prefixes = ("output", "response", "assistant", "model", "answer", "candidate")
    for side, label in (("a", "A"), ("b", "B")):
        aliases[side] = label
        aliases.update({f"{prefix} {side}": label for prefix in prefixes})
    return aliases


_JSON_ALIASES = _build_json_aliases()


def parse_verdict(
    parser_name: str, text: str | None, labels: Sequence[str], params: Mapping[str, Any]
) -> Verdict:
    """Parse ``text`` with the parser registered as ``parser_name``.

    Args:
        parser_name: A name registered in :data:`PARSERS`.
        text: The judge's raw output; ``None`` when the response had no content.
        labels: The positional labels the rubric offers, e.g. ``("A", "B", "tie")``.
        params: The parser's keyword parameters from the rubric config.

    Returns:
        The verdict; ``label`` is one of ``labels`` or ``None`` with a ``reason``.

    Raises:
        runner.core.registry.UnknownNameError: If no parser has that name (a config error, not judge text).
    """
    return PARSERS.get(parser_name)(text, labels, **dict(params))


@lru_cache(maxsize=64)
def _compile_one_group(pattern: str) -> re.Pattern[str]:
    compiled = re.compile(pattern)
    if compiled.groups != 1:
        raise ValueError(f"pattern {pattern!r} must have exactly one capture group, has {compiled.groups}")
    return compiled


@PARSERS.register("llmbar_output")
def parse_llmbar_output(
    text: str | None, labels: Sequence[str], *, patterns: Sequence[str] | None = None
) -> Verdict:
    """Read LLMBar's ``Output (a)`` / ``Output (b)`` verdict.

    Patterns are tried in order; the first one that matches anywhere decides, using its last match.
    The captured group is ``a`` or ``b`` (case-insensitive), mapped to ``"A"`` or ``"B"``.

    Args:
        text: The judge's raw output.
        labels: The positional labels the rubric offers.
        patterns: Regexes with exactly one capture group; defaults to :data:`LLMBAR_DEFAULT_PATTERNS`.

    Returns:
        The verdict, or ``label=None`` with reason ``empty``, ``no_match`` or ``label_not_offered``.

    Raises:
        re.error: If a pattern is not a valid regex (a config error, not judge text).
        TypeError: If ``patterns`` is a single string rather than a list of them.
        ValueError: If a pattern does not have exactly one capture group.
    """
    if isinstance(patterns, str):
        raise TypeError("llmbar_output: patterns must be a list of regexes, not one string")
    compiled = [_compile_one_group(p) for p in (LLMBAR_DEFAULT_PATTERNS if patterns is None else patterns)]
    if not has_text(text):
        return Verdict(label=None, reason=EMPTY)
    text = text.strip()
    for pattern in compiled:
        matches = list(pattern.finditer(text))
        if not matches:
            continue
        said = matches[-1].group(1) or ""
        label = _LLMBAR_SIDES.get(said.strip().lower())
        if label is None:
            return Verdict(label=None, reason=f"{NO_MATCH}: {clip(said)}")
        return offered(label, labels)
    return Verdict(label=None, reason=NO_MATCH)


@PARSERS.register("mtbench_brackets")
def parse_mtbench_brackets(text: str | None, labels: Sequence[str]) -> Verdict:
    """Read MT-Bench's pairwise verdict: the last ``[[A]]``, ``[[B]]`` or ``[[C]]`` (C means a tie).

    Args:
        text: The judge's raw output.
        labels: The positional labels the rubric offers.

    Returns:
        The verdict, or ``label=None`` with reason ``empty``, ``no_match`` or ``label_not_offered``.
    """
    if not has_text(text):
        return Verdict(label=None, reason=EMPTY)
    matches = _MTBENCH_VERDICT.findall(text)
    if not matches:
        return Verdict(label=None, reason=NO_MATCH)
    return offered(_MTBENCH_SIDES[matches[-1]], labels)


def _normalise(value: str) -> str:
    """Lower-case and collapse punctuation: ``"Output (a)"`` -> ``"output a"``."""
    return " ".join(re.sub(r"[^0-9a-z]+", " ", value.lower()).split())


@PARSERS.register("json_winner")
def parse_json_winner(text: str | None, labels: Sequence[str], *, key: str = "winner") -> Verdict:
    """Read the winner from a JSON object such as ``{"reason": "...", "winner": "A"}``.

    The object may be bare or inside a fenced code block, with prose around it. The last top-level
    object that has ``key`` decides (see :func:`~runner.judging.parsers.json_objects.json_objects`: an object that
    does not decode is passed over, one nested in it is still read). Values are matched case-insensitively:
    ``A``, ``Output (a)``, ``Response A``, ``Assistant A``, ``model_a`` (likewise for B) and ``tie``,
    ``C``, ``draw``, ``equal``, ``both`` for a tie.

    Args:
        text: The judge's raw output.
        labels: The positional labels the rubric offers.
        key: The object key that holds the winner.

    Returns:
        The verdict, or ``label=None`` with reason ``empty``, ``invalid_json`` (no JSON object),
        ``missing_key`` (no object has ``key``), ``no_match`` (the value names no label; the reason
        includes it) or ``label_not_offered``.
    """
    if not has_text(text):
        return Verdict(label=None, reason=EMPTY)
    objects = json_objects(text)
    if not objects:
        return Verdict(label=None, reason=INVALID_JSON)
    with_key = [obj for obj in objects if key in obj]
    if not with_key:
        return Verdict(label=None, reason=MISSING_KEY)
    value = with_key[-1][key]
    label = _JSON_ALIASES.get(_normalise(value)) if isinstance(value, str) else None
    if label is None:
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return Verdict(label=None, reason=f"{NO_MATCH}: {clip(shown)}")
    return offered(label, labels)


def response_schema(parser_name: str, labels: Sequence[str], params: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a judge can be asked to follow for this parser, or None when the parser does
    not read JSON. Only ``json_winner`` reads JSON: an object with a short reason and the winner key,
    whose value must be one of the rubric's labels."""
    if parser_name != "json_winner":
        return None
    key = params.get("key", "winner")
    return {
        "type": "object",
        "properties": {"reason": {"type": "string"}, key: {"type": "string", "enum": list(labels)}},
        "required": ["reason", key],
        "additionalProperties": False,
    }

