"""A :class:`~runner.core.types.JudgeResponse` from what one judge call came back with: the provider's answer,
or the error it raised with every key scrubbed from its message.

Read by attribute from litellm's response object (``choices``, ``usage``, ``_hidden_params``), so this module
needs no litellm import: :mod:`runner.llm.client`, the only module that talks to litellm, hands the objects over.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import Any

from runner.core.types import JudgeResponse, Secret

ERROR_CHARS = 2000  # an error message is cut to this many characters


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
