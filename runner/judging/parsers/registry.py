"""What every verdict parser shares: the :data:`PARSERS` registry, the reasons of an unscored verdict and the
helpers that read the judge's text.

A leaf of runner.judging.parsers: the parser modules (labels, tokens, scores) import it and it imports none of
them, so a parser registers itself here without a module importing another back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeGuard

from runner.core.registry import Registry
from runner.core.types import Verdict

EMPTY = "empty"
NO_MATCH = "no_match"
LABEL_NOT_OFFERED = "label_not_offered"
INVALID_JSON = "invalid_json"
MISSING_KEY = "missing_key"
REASON_VALUE_CHARS = 40  # a reason quotes at most this much of what the judge said

PARSERS: Registry[Callable[..., Verdict]] = Registry("parser")


def has_text(text: str | None) -> TypeGuard[str]:
    """Whether the judge's answer has any text (it is None when the response had no content)."""
    return text is not None and bool(text.strip())


def clip(value: str, limit: int = REASON_VALUE_CHARS) -> str:
    """``value`` cut to ``limit`` characters (ending in ``...``), for a reason that quotes the judge."""
    return value if len(value) <= limit else value[: limit - 3] + "..."


def offered(label: str, labels: Sequence[str]) -> Verdict:
    """Return ``label`` as a verdict if the rubric offers it, else an unscored verdict saying what it was."""
    if label in labels:
        return Verdict(label=label)
    return Verdict(label=None, reason=f"{LABEL_NOT_OFFERED}: {label}")
