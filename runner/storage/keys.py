"""The cache key of one judge request: what makes two requests the same answer to look up.

A sha256 of the canonical JSON of the model, its api_base, the rendered messages, the decoding parameters and
the repeat index; never of a credential. :mod:`runner.storage.cache` stores answers under it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from runner.core.types import Message


def _jsonable(value: Any) -> Any:
    """``json.dumps`` fallback: mappings and enums become plain JSON; anything else is refused."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Enum):
        return value.value
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def repeat_params(params: Mapping[str, Any], repeat: int) -> dict[str, Any]:
    """The decoding parameters sent for repeat ``repeat`` of a request: ``seed + repeat`` when a seed is set.

    The same seed on every repeat makes a deterministic judge answer k times alike, one vote counted k times; a
    seed per repeat makes them k samples. Repeat 0 keeps the configured seed (and its cache key).
    """
    seed = params.get("seed")
    if repeat and seed is not None:
        return {**params, "seed": seed + repeat}
    return dict(params)


def cache_key(
    model: str,
    api_base: str | None,
    messages: Sequence[Message],
    params: Mapping[str, Any],
    repeat: int,
) -> str:
    """Return the cache key of one judge request: a sha256 hex digest.

    The digest is taken over the canonical JSON (sorted keys, compact separators, UTF-8) of the
    model string, the api_base (a trailing ``/`` removed, empty meaning none), the messages as a
    role/content list, the decoding parameters and the repeat index. The repeat index is part of the
    key so that the k repeats of an item stay independent samples rather than one answer replayed
    k times. Credentials are never part of the key: callers pass decoding parameters only, and an
    ``api_key`` entry or any non-JSON value (such as a :class:`runner.core.types.Secret`) is refused.

    Args:
        model: The litellm model string, e.g. ``openai/gpt-4o-mini``.
        api_base: The server base URL for OpenAI-compatible servers, else None.
        messages: The fully rendered request messages.
        params: Decoding parameters (temperature, max_tokens, seed, response_format, ...).
        repeat: The repeat index of this sample of the item.

    Returns:
        64 lowercase hex characters.

    Raises:
        ValueError: ``params`` holds an ``api_key``.
        TypeError: A parameter value is not JSON-serialisable.
    """
    if "api_key" in params:
        raise ValueError("cache_key: params must not contain api_key; credentials are never part of the key")
    payload = {
        "model": model,
        "api_base": (api_base or "").rstrip("/") or None,
        "messages": [{"role": m.role, "content": m.content} for m in messages],
        "params": dict(params),
        "repeat": repeat,
    }
    try:
        blob = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=_jsonable)
    except TypeError as exc:
        raise TypeError(f"cache_key: params must be JSON-serialisable: {exc}") from exc
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
