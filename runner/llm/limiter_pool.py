"""The process's rate limiters, one per judge: every job and repeat of a judge in a process paces against one
quota (runner/llm/pacing.py paces a single one)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from runner.llm.pacing import RateLimiter

logger = logging.getLogger(__name__)


class LimiterPool:
    """The process's limiters, one per key (a judge's name, model and api_base), created on first use.

    Keep one pool for the whole process so every job and repeat of a judge paces against the same
    quota. If a key is asked for with different limits (its config changed between jobs), the old
    limiter is replaced by a fresh one with the new limits: its history belonged to other quotas.

    Args:
        clock: Clock handed to every limiter the pool creates.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._limiters: dict[str, RateLimiter] = {}

    def get(self, key: str, rpm: int | None, tpm: int | None) -> RateLimiter:
        """Return the limiter for ``key``, creating or replacing it as needed.

        Args:
            key: Identifies a quota, e.g. ``f"{judge.name}|{judge.model}|{judge.api_base}"``.
            rpm: Requests per minute, or None.
            tpm: Tokens per minute, or None.

        Returns:
            The same object for the same key and limits.
        """
        limiter = self._limiters.get(key)
        if limiter is not None and limiter.rpm == rpm and limiter.tpm == tpm:
            return limiter
        if limiter is not None:
            logger.info("limits for %s changed (rpm %s->%s, tpm %s->%s): new limiter",
                        key, limiter.rpm, rpm, limiter.tpm, tpm)
        limiter = RateLimiter(rpm, tpm, clock=self._clock)
        self._limiters[key] = limiter
        return limiter

    def items(self) -> list[tuple[str, RateLimiter]]:
        """Return (key, limiter) pairs, e.g. to report waits and penalties per judge."""
        return list(self._limiters.items())
