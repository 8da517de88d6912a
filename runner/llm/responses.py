"""A :class:`~runner.core.types.JudgeResponse` from what one judge call came back with: the provider's answer,
or the error it raised with every key scrubbed from its message. Whatever a paid 2xx holds is kept: what no UTF-8
file can hold is replaced and noted (``JudgeResponse.notes``), a usage that is not a token count leaves the tokens
unknown, a body that cannot be read is :data:`UNDECODABLE_BODY` with the decoder's error.

Read by attribute from litellm's response object (``choices``, ``usage``, ``_hidden_params``), so this module
needs no litellm import: :mod:`runner.llm.client`, which makes the call, hands the objects over.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from runner.core.types import SUBSTITUTED, JudgeResponse, Secret

ERROR_CHARS = 2000  # an error message is cut to this many characters
# the finish_reason (and unscored reason) of a 200 that held no answer: journaled like an answer, so a resumed run
# reads it back the same way
EMPTY_CHOICES = "empty_choices"
# the finish_reason (and unscored reason) of a 200 whose body could not be read at all (not UTF-8, not JSON, nested
# too deep): paid, kept like an empty answer, with the decoder's error in its notes
UNDECODABLE_BODY = "undecodable_body"
NO_ANSWER = (EMPTY_CHOICES, UNDECODABLE_BODY)
# a note (JudgeResponse.notes) starts with SUBSTITUTED (runner.core.types), UNDECODABLE_BODY or this
USAGE_UNKNOWN = "usage_unknown"  # the body's usage was not a token count: tokens unknown (tokens/unknown_calls)
MAX_TOKENS_PER_CALL = 10**9  # a usage count above this is not a count (no context window comes near it)
_SURROGATES = re.compile("[\ud800-\udfff]")  # in a str, any surrogate code point is a lone one: not UTF-8


def clean_text(text: str | None, what: str) -> tuple[str | None, tuple[str, ...]]:
    """``text`` with every lone surrogate (a JSON ``\\ud800`` escape decodes to one; no UTF-8 file or sqlite text can
    hold it) replaced by U+FFFD, and the note recording that substitution (none when nothing was replaced).

    Args:
        text: What the provider sent, or None.
        what: Which part of the response it is (``text``, ``error``), for the note.
    """
    if text is None:
        return None, ()
    cleaned, n = _SURROGATES.subn("\ufffd", text)
    return cleaned, ((f"{SUBSTITUTED}: {n} lone surrogate(s) in the {what} replaced by U+FFFD",) if n else ())


def answer(resp: Any, started: float, attempts: int, limited: int) -> JudgeResponse:
    """The judge's answer from litellm's response to a call that succeeded.

    Args:
        resp: litellm's response (a ``ModelResponse``): its first choice is the answer.
        started: ``time.perf_counter()`` when the call's first attempt began (the latency is measured from it).
        attempts: HTTP attempts made, retries included.
        limited: How many of those attempts were answered 429.
    """
    choice = resp.choices[0]
    usage = getattr(resp, "usage", None)
    cost = _hidden_params(resp).get("response_cost")
    text, notes = clean_text(choice.message.content, "text")
    finish, finish_notes = clean_text(choice.finish_reason if isinstance(choice.finish_reason, str) else None,
                                      "finish_reason")
    prompt, completion, usage_notes = _usage({"prompt_tokens": getattr(usage, "prompt_tokens", 0),
                                              "completion_tokens": getattr(usage, "completion_tokens", 0)})
    return JudgeResponse(
        text=text,
        # interned: a million answers share the one "stop" instead of holding a million copies
        finish_reason=sys.intern(finish) if finish is not None else None,
        prompt_tokens=prompt or 0,
        completion_tokens=completion or 0,
        cost_usd=float(cost) if cost is not None and not usage_notes else None,
        latency_s=time.perf_counter() - started,
        attempts=attempts,
        rate_limited=limited,
        notes=(*notes, *finish_notes, *usage_notes),
        tokens_known=not usage_notes,
    )


def malformed(body: str | None, started: float, attempts: int, limited: int,
              undecodable: BaseException | None = None) -> JudgeResponse:
    """A 2xx whose body litellm refused: paid for, so whatever it holds is kept. An answer in it (its first choice's
    text, e.g. beside a usage litellm cannot read) is the response's text, its usage the tokens (unknown, with a note,
    when they are not counts); a body without choices is :data:`EMPTY_CHOICES`; one that cannot be read at all (not
    UTF-8, not JSON, nested too deep) is :data:`UNDECODABLE_BODY`, the decoder's error in its notes. The cost is
    priced by the caller.

    Args:
        body: The raw body litellm received (JSON text), as its per-call ``logger_fn`` hook saw it; None when litellm
            failed to decode it before the hook saw it.
        started: ``time.perf_counter()`` when the call's first attempt began.
        attempts: HTTP attempts made, retries included.
        limited: How many of those attempts were answered 429.
        undecodable: The decoding error litellm raised (UnicodeDecodeError, RecursionError, ValueError), if any.
    """
    parsed, error = _decode(body)
    error = error or undecodable
    if not isinstance(parsed, dict):
        reason = (f"{type(error).__name__}: {error}" if error is not None
                  else f"a {type(parsed).__name__}, not an object")
        note, _ = clean_text(f"{UNDECODABLE_BODY}: {reason}"[:ERROR_CHARS], "note")
        return JudgeResponse(text=None, finish_reason=UNDECODABLE_BODY, latency_s=time.perf_counter() - started,
                             attempts=attempts, rate_limited=limited, notes=(note or "",), tokens_known=False)
    prompt, completion, notes = _usage(parsed.get("usage"))
    if error is not None:  # litellm replaced what it could not decode, then refused the body for another reason
        notes = (f"{SUBSTITUTED}: the body was not UTF-8 ({type(error).__name__}); undecodable bytes are U+FFFD",
                 *notes)
    text, finish = _first_choice(parsed.get("choices"))
    text, text_notes = clean_text(text, "text")
    finish, finish_notes = clean_text(finish, "finish_reason")
    return JudgeResponse(text=text, finish_reason=finish if text is not None else EMPTY_CHOICES,
                         prompt_tokens=prompt or 0, completion_tokens=completion or 0,
                         latency_s=time.perf_counter() - started, attempts=attempts, rate_limited=limited,
                         notes=(*notes, *text_notes, *finish_notes), tokens_known=prompt is not None)


def _decode(body: str | None) -> tuple[object, BaseException | None]:
    """The JSON value of ``body`` and None, or None and why it cannot be read (a 200,000-deep array exhausts the
    parser's recursion: RecursionError)."""
    if body is None:
        return None, None
    try:
        return json.loads(body), None
    except (ValueError, RecursionError) as exc:
        return None, exc


def _first_choice(choices: object) -> tuple[str | None, str | None]:
    """The text and finish_reason of the first choice of a body's ``choices``, (None, None) when there is none."""
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    finish = first.get("finish_reason") if isinstance(first, dict) else None
    return (content if isinstance(content, str) else None), (finish if isinstance(finish, str) else None)


def _usage(usage: object) -> tuple[int | None, int | None, tuple[str, ...]]:
    """Prompt and completion tokens of a body's ``usage``; both None, with a note saying why, when either is not a
    count (negative, fractional, a string, absurdly large) or the usage is not an object. A missing count is 0."""
    if usage is None:
        return 0, 0, ()
    counts = []
    for name in ("prompt_tokens", "completion_tokens"):
        value = usage.get(name, 0) if isinstance(usage, dict) else usage
        if value is None:
            value = 0
        if type(value) is not int or not 0 <= value <= MAX_TOKENS_PER_CALL:
            shown, _ = clean_text(repr(value)[:80], "note")
            return None, None, (f"{USAGE_UNKNOWN}: usage.{name} is {shown}, not a token count",)
        counts.append(value)
    return counts[0], counts[1], ()


def served_by(resp: Any) -> str:
    """The api_base of the replica that answered (a litellm Router records it with the response)."""
    return str(_hidden_params(resp).get("api_base"))


def failure(exc: Exception, secrets: Iterable[Secret], started: float, attempts: int, limited: int) -> JudgeResponse:
    """A call that failed: the error's type and message (no key in it: each of ``secrets`` becomes ``***``)."""
    text = str(exc)
    for secret in secrets:
        text = text.replace(secret.reveal(), "***")
    error, notes = clean_text(text[:ERROR_CHARS], "error")
    return JudgeResponse(text=None, latency_s=time.perf_counter() - started, error_type=type(exc).__name__,
                         error=error, attempts=attempts, rate_limited=limited, notes=notes)


def _hidden_params(resp: Any) -> dict[str, Any]:
    """litellm's ``_hidden_params`` of a response (cost, the api_base that answered), empty when it has none."""
    return getattr(resp, "_hidden_params", None) or {}


class RawBody:
    """litellm's per-call ``logger_fn`` hook: keeps the raw body of a 2xx answer, which litellm hands over after the
    HTTP call and before it reads the body, so a body it then refuses (``choices: []``) is still known to be paid."""

    def __init__(self) -> None:
        self.text: str | None = None

    def __call__(self, details: dict[str, Any]) -> None:
        """Called by litellm before and after the HTTP call; after it, ``details`` holds the body."""
        if details.get("log_event_type") == "post_api_call":
            self.text = str(details.get("original_response"))


@dataclass
class CallTally:
    """One call's attempts so far, and the malformed answers paid for on the way (``judge.retry_malformed``)."""

    started: float  # time.perf_counter() at the first attempt
    attempts: int = 0
    limited: int = 0
    spent: list[JudgeResponse] = field(default_factory=list)

    def total(self, last: JudgeResponse) -> JudgeResponse:
        """``last`` with the malformed answers paid before it added: tokens, cost and ``paid`` (answers paid for;
        a failed attempt is not paid)."""
        answered = [*self.spent, *([last] if last.error_type is None else [])]
        costs = [r.cost_usd for r in answered]
        return replace(last, paid=len(answered), prompt_tokens=sum(r.prompt_tokens for r in answered),
                       completion_tokens=sum(r.completion_tokens for r in answered),
                       cost_usd=None if not costs or None in costs else sum(c for c in costs if c is not None),
                       notes=tuple(dict.fromkeys(n for r in [*self.spent, last] for n in r.notes)),
                       tokens_known=all(r.tokens_known for r in answered))

