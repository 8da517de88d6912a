"""A :class:`~runner.core.types.JudgeResponse` from what one judge call came back with: the provider's answer,
or the error it raised with every key scrubbed from its message.

Read by attribute from litellm's response object (``choices``, ``usage``, ``_hidden_params``), so this module
needs no litellm import: :mod:`runner.llm.client`, the only module that talks to litellm, hands the objects over.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from runner.core.types import JudgeResponse, Secret

ERROR_CHARS = 2000  # an error message is cut to this many characters
# the finish_reason (and unscored reason) of a 200 that held no answer: journaled like an answer, so a resumed run
# reads it back the same way
EMPTY_CHOICES = "empty_choices"


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
    return JudgeResponse(
        text=choice.message.content,
        # interned: a million answers share the one "stop" instead of holding a million copies
        finish_reason=sys.intern(choice.finish_reason) if isinstance(choice.finish_reason, str) else None,
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        cost_usd=float(cost) if cost is not None else None,
        latency_s=time.perf_counter() - started,
        attempts=attempts,
        rate_limited=limited,
    )


def malformed(body: str, started: float, attempts: int, limited: int) -> JudgeResponse:
    """A 200 whose body held no usable answer (litellm refused it, e.g. ``choices: []``): paid for, so its usage is
    kept; ``finish_reason`` is :data:`EMPTY_CHOICES`, the text None. The cost is priced by the caller.

    Args:
        body: The raw body litellm received (JSON text), as its per-call ``logger_fn`` hook saw it.
        started: ``time.perf_counter()`` when the call's first attempt began.
        attempts: HTTP attempts made, retries included.
        limited: How many of those attempts were answered 429.
    """
    try:
        usage = json.loads(body).get("usage") or {}
    except (ValueError, AttributeError):  # not a JSON object: nothing says what it cost
        usage = {}
    return JudgeResponse(text=None, finish_reason=EMPTY_CHOICES, prompt_tokens=_count(usage, "prompt_tokens"),
                         completion_tokens=_count(usage, "completion_tokens"), latency_s=time.perf_counter() - started,
                         attempts=attempts, rate_limited=limited)


def _count(usage: object, name: str) -> int:
    """A token count from a body's usage, 0 when absent or not a non-negative whole number."""
    value = usage.get(name) if isinstance(usage, dict) else None
    return value if type(value) is int and value >= 0 else 0


def served_by(resp: Any) -> str:
    """The api_base of the replica that answered (a litellm Router records it with the response)."""
    return str(_hidden_params(resp).get("api_base"))


def failure(exc: Exception, secrets: Iterable[Secret], started: float, attempts: int, limited: int) -> JudgeResponse:
    """A call that failed: the error's type and message (no key in it: each of ``secrets`` becomes ``***``)."""
    text = str(exc)
    for secret in secrets:
        text = text.replace(secret.reveal(), "***")
    return JudgeResponse(text=None, latency_s=time.perf_counter() - started, error_type=type(exc).__name__,
                         error=text[:ERROR_CHARS], attempts=attempts, rate_limited=limited)


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
    first_attempt: float  # time.monotonic() at the first attempt
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
                       cost_usd=None if not costs or None in costs else sum(c for c in costs if c is not None))

