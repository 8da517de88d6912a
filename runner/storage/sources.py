"""Where an answer can come from before paying for it: the interrupted run's journal (on resume)
and the response cache shared across runs and sweeps."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from runner.core.types import JudgeRequest, JudgeResponse, Message
from runner.storage.cache import CacheError, ResponseCache
from runner.storage.keys import cache_key, repeat_params
from runner.storage.sent import SentLog

log = logging.getLogger(__name__)


class AnswerSources:
    """Looks an answer up in the journal of the run being resumed, then in the cache.

    Args:
        prior: Answers from the interrupted run's journal, keyed like :attr:`JudgeRequest.key`.
        cache: The response cache, or None.
        model: The judge's litellm model string (part of the cache key).
        api_base: The judge's api_base (part of the cache key).
        params: Decoding parameters sent with every call (part of the cache key).
        sent: Where the calls sent are noted (runner.storage.sent), or None.
    """

    def __init__(self, prior: Mapping[tuple, JudgeResponse], cache: ResponseCache | None, model: str,
                 api_base: str | None, params: Mapping[str, Any], sent: SentLog | None = None) -> None:
        self._prior = prior
        self._cache = cache
        self._sent = sent
        self._identity = (model, api_base, dict(params))

    def _key(self, request: JudgeRequest, messages: tuple[Message, ...]) -> str:
        model, api_base, params = self._identity
        # the parameters as sent for this repeat (its own seed): an answer is looked up as it was asked
        return cache_key(model, api_base, messages, repeat_params(params, request.repeat), request.repeat)

    def get(self, request: JudgeRequest, messages: tuple[Message, ...]) -> JudgeResponse | None:
        """The known answer to this request, marked with where it came from, or None."""
        known = self._prior.get(request.key)
        if known is not None:
            return known
        if self._cache is None:
            return None
        cached = self._cache.get(self._key(request, messages))
        if cached is None:
            return None
        return replace(cached, source="cache", attempts=0, rate_limited=0)

    def sending(self, request: JudgeRequest) -> bool:
        """Note that ``request`` is being sent; True when an earlier process of the run had sent it too (its answer
        did not reach the journal, so it is paid for again)."""
        return self._sent is not None and self._sent.record(request.key)

    def journaled(self, request: JudgeRequest) -> None:
        """Note that the outcome of the call ``request`` that was sent is in the journal."""
        if self._sent is not None:
            self._sent.finished(request.key)

    def put(self, request: JudgeRequest, messages: tuple[Message, ...], response: JudgeResponse) -> None:
        """Remember a fresh, successful answer in the cache (the cache decides by its mode). A cache that cannot be
        written (disk full) is said once and not used again in this stage: the answer still goes to the journal, the
        run's record."""
        if self._cache is None:
            return
        try:
            self._cache.put(self._key(request, messages), response)
        except CacheError as exc:
            log.warning("the response cache is not used for the rest of this stage: %s", exc)
            self._cache = None
