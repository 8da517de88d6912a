"""Deterministic checks on candidate outputs, dispatched by name through :data:`CHECKS`.

A check is a pure function ``(text, **params) -> list[str]`` returning the violations it found; an
empty list means the text is clean. Checks cost nothing and need no judge, so they run on every
candidate and their parameters are validated at start-up like any other registered name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runner.core.registry import Registry

Check = Callable[..., list[str]]

CHECKS: Registry[Check] = Registry("check")

DEFAULT_AI_PHRASES: tuple[str, ...] = (
    "I understand",
    "I'd be happy to",
    "I would be happy to",  # the users' own example; the contraction's pattern does not cover it
    "Let me know",
    "Is there anything else",
    "As an AI",
    "I hope this helps",
    "Feel free to",
    "Great question",
    "Certainly!",
    "I apologize for any confusion",
)

# Straight, right/left single quotes and the modifier-letter apostrophe: models and editors swap them
# freely, and "I’d be happy to" is the same phrase as "I'd be happy to".
_APOSTROPHES = "'\u2019\u2018\u02bc"
_APOSTROPHE_CLASS = "[" + _APOSTROPHES + "]"
_WHITESPACE_RUN = re.compile(r"\s+")


@CHECKS.register("ai_phrases")
def ai_phrases(text: str, *, phrases: Sequence[str] = DEFAULT_AI_PHRASES, case_sensitive: bool = False) -> list[str]:
    """Find stock assistant phrases ("I hope this helps", "As an AI") in a candidate output.

    Matching respects word boundaries where the phrase starts or ends with a word character, so
    "I understand" matches "I understand." but not "I understanding", while "Certainly!" still matches
    before any following character. Any apostrophe variant matches any other, and a space in the phrase
    matches any run of whitespace (line breaks included) in the text.

    Args:
        text: The candidate output.
        phrases: Phrases to look for; duplicates are reported once.
        case_sensitive: Match case exactly; by default case is ignored.

    Returns:
        The configured phrases found in ``text``, each once, in the order of ``phrases``.

    Raises:
        TypeError: If ``phrases`` is a single string rather than a sequence of strings.
        ValueError: If a phrase is empty or only whitespace.
    """
    if isinstance(phrases, str):
        # A bare string would be iterated character by character and match almost any text.
        raise TypeError(f"phrases must be a list of strings, not the string {phrases!r}")
    flags = 0 if case_sensitive else re.IGNORECASE
    return [phrase for phrase in dict.fromkeys(phrases) if _phrase_pattern(phrase, flags).search(text)]


def run_checks(text: str, checks: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, list[str]]:
    """Run named checks on one text.

    Args:
        text: The candidate output.
        checks: ``(name, params)`` pairs; each name must be registered in :data:`CHECKS`.

    Returns:
        Check name -> its violations, in the order of ``checks``.

    Raises:
        UnknownNameError: If a check name is not registered.
        ValueError: If a name appears twice (its results would overwrite each other).
    """
    results: dict[str, list[str]] = {}
    for name, params in checks:
        if name in results:
            raise ValueError(f"check {name!r} is listed twice; results are keyed by name")
        results[name] = CHECKS.get(name)(text, **params)
    return results


def check_params(name: str, params: Mapping[str, Any]) -> None:
    """Validate a check's name and parameters at start-up, before any paid call.

    Args:
        name: The registered check name.
        params: Keyword parameters from config.

    Raises:
        UnknownNameError: If ``name`` is not registered.
        ParamsError: If a parameter is unknown, a required one is missing, or the check refuses a value.
    """
    CHECKS.dry_run(name, dict(params), "")


def _phrase_pattern(phrase: str, flags: int) -> re.Pattern[str]:
    """Compile ``phrase`` into a regex tolerant of apostrophe variants and whitespace runs."""
    words = _WHITESPACE_RUN.split(phrase.strip())
    if words == [""]:
        raise ValueError(f"empty phrase {phrase!r} would match every text")
    body = r"\s+".join(_escape_word(word) for word in words)
    # Lookarounds rather than \b: a boundary is only wanted where the phrase edge is a word character,
    # so "Certainly!" must not demand a word character or boundary after its "!".
    start = r"(?<!\w)" if re.match(r"\w", words[0]) else ""
    end = r"(?!\w)" if re.search(r"\w$", words[-1]) else ""
    return re.compile(start + body + end, flags)


def _escape_word(word: str) -> str:
    """Escape one whitespace-free chunk of a phrase, letting every apostrophe match every variant."""
    return "".join(_APOSTROPHE_CLASS if char in _APOSTROPHES else re.escape(char) for char in word)
