"""Verdict formats read by configuration only: a token table, an optional regex, and a rule.

The ``verdict_tokens`` parser (registered in :data:`runner.judging.parsers.registry.PARSERS`) reads any verdict
format whose answer states one of a fixed set of tokens: Arena-Hard's ``[[A>>B]]`` .. ``[[B>>A]]``,
PRD's bare ``1`` / ``2`` / ``3`` line, FastChat's ``[[A]]`` / ``[[B]]`` / ``[[C]]``. A rubric YAML names
the tokens, the label each one means and, optionally, its strength::

    parser:
      name: verdict_tokens
      params:
        pattern: '\\[\\[([AB<>=]+)\\]\\]'   # one capture group; default: the tokens themselves
        rule: unanimous                     # last | first | priority | unanimous
        tokens:
          "A>>B": {label: A, strength: 2}
          "A>B": {label: A, strength: 1}
          "A=B": {label: tie, strength: 0}

Which match decides is the ``rule``, because published judges differ exactly there:

- ``last`` (default): the last match, judgesweep's rule (a judge restates the options before deciding).
- ``first``: the first match.
- ``priority``: the first token of the TABLE that occurs anywhere, whatever its position in the text
  (FastChat's MT-Bench: ``[[A]]`` if present, else ``[[B]]``, else ``[[C]]``).
- ``unanimous``: every match must be the same token, else the verdict is unscored (``ambiguous``);
  Arena-Hard's ``get_score`` (one distinct match, or none).

A token's strength goes to the verdict's ``extras`` as ``strength`` (results.jsonl ``judge_extras``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from runner.core.types import TIE, Verdict
from runner.judging.parsers.registry import EMPTY, NO_MATCH, PARSERS, clip, has_text, offered

AMBIGUOUS = "ambiguous"
RULES = ("last", "first", "priority", "unanimous")
_LABELS = ("A", "B", TIE)


@dataclass(frozen=True)
class _Token:
    label: str
    strength: float | None


@dataclass(frozen=True)
class _Format:
    pattern: re.Pattern[str]
    tokens: Mapping[str, _Token]


def _token(key: str, value: Any) -> _Token:
    """One table entry: a bare label, or ``{label: ..., strength: ...}``."""
    spec = {"label": value} if isinstance(value, str) else value
    if not isinstance(spec, Mapping) or set(spec) - {"label", "strength"} or "label" not in spec:
        raise ValueError(f"tokens[{key!r}] must be a label or {{label, strength}}, got {value!r}")
    if spec["label"] not in _LABELS:
        raise ValueError(f"tokens[{key!r}]: label must be one of {list(_LABELS)}, got {spec['label']!r}")
    strength = spec.get("strength")
    if strength is not None and (isinstance(strength, bool) or not isinstance(strength, int | float)):
        raise ValueError(f"tokens[{key!r}]: strength must be a number, got {strength!r}")
    return _Token(spec["label"], strength)


@lru_cache(maxsize=64)
def _compile(pattern: str | None, table_json: str) -> _Format:
    """Check and compile a rubric's format once (the parser runs on every answer); the table comes as JSON
    (a list of [token, spec] pairs) so that it can be a cache key."""
    table = json.loads(table_json)
    if not table:
        raise ValueError("tokens must map at least one token to a label")
    tokens = {key: _token(key, value) for key, value in table}
    if pattern is None:  # the tokens themselves, longest first so "A>>B" is not read as "A>B"
        pattern = "(" + "|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True)) + ")"
    compiled = re.compile(pattern)
    if compiled.groups != 1:
        raise ValueError(f"pattern {pattern!r} must have exactly one capture group, has {compiled.groups}")
    return _Format(compiled, MappingProxyType(tokens))


def _decide(said: Sequence[str], tokens: Mapping[str, _Token], rule: str) -> str | None:
    """The captured text that decides under ``rule`` (None: the matches disagree under ``unanimous``)."""
    if rule == "first":
        return said[0]
    if rule == "priority":
        known = set(said)
        return next((t for t in tokens if t in known), said[-1])  # an unknown capture is reported as read
    if rule == "unanimous":
        return said[0] if len(set(said)) == 1 else None
    return said[-1]


@PARSERS.register("verdict_tokens")
def parse_verdict_tokens(
    text: str | None,
    labels: Sequence[str],
    *,
    tokens: Mapping[str, Any],
    pattern: str | None = None,
    rule: str = "last",
) -> Verdict:
    """Read a verdict stated as one of the rubric's tokens (see the module docstring).

    Args:
        text: The judge's raw output.
        labels: The positional labels the rubric offers.
        tokens: Token -> label (``A``, ``B`` or ``tie``) or ``{label, strength}``; the order matters for
            ``rule: priority``. A token is compared with the pattern's capture, stripped of surrounding space.
        pattern: A regex with exactly one capture group; default: any of the tokens, verbatim.
        rule: ``last``, ``first``, ``priority`` or ``unanimous``.

    Returns:
        The verdict (``extras["strength"]`` when its token has one), or ``label=None`` with reason ``empty``,
        ``no_match`` (no match, or the capture is no token: the reason shows it), ``ambiguous`` (matches
        disagree under ``unanimous``) or ``label_not_offered``.

    Raises:
        ValueError: If the table, the pattern or the rule is malformed (a config error, found at start-up).
        re.error: If the pattern is not a valid regex.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {list(RULES)}, got {rule!r}")
    if not isinstance(tokens, Mapping):
        raise ValueError(f"tokens must be a mapping of token -> label, got {tokens!r}")
    fmt = _compile(pattern, json.dumps([[str(k), v] for k, v in tokens.items()], default=repr))
    if not has_text(text):
        return Verdict(label=None, reason=EMPTY)
    said = [(m.group(1) or "").strip() for m in fmt.pattern.finditer(text)]
    if not said:
        return Verdict(label=None, reason=NO_MATCH)
    decided = _decide(said, fmt.tokens, rule)
    if decided is None:
        return Verdict(label=None, reason=f"{AMBIGUOUS}: {clip(', '.join(dict.fromkeys(said)))}")
    token = fmt.tokens.get(decided)
    if token is None:
        return Verdict(label=None, reason=f"{NO_MATCH}: {clip(decided)}")
    verdict = offered(token.label, labels)
    if token.strength is None or not verdict.ok:
        return verdict
    return Verdict(label=verdict.label, extras=MappingProxyType({"strength": token.strength}))


__all__ = ["AMBIGUOUS", "RULES", "parse_verdict_tokens"]
