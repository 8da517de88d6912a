"""A request rate nobody configured, learned from a provider's 429s (AIMD, as TCP does).

Without an rpm, :class:`runner.llm.pacing.RateLimiter` sends as fast as it is asked to until a 429. The first
429 of an episode sets the request rate to ``DECREASE`` times the lower of the current rate and the starts of
the last second (:meth:`LearnedRate.decrease`), and the rate then grows linearly by ``RAMP`` of that value per
second until the next 429 (``rate = r0 * (1 + RAMP * t)``); a 429 within ``OBSERVE_S`` of the last pause's end
does not lower it again (:meth:`LearnedRate.may_decrease`). Plain floats and monotonic timestamps only, like
the limiter that owns it.
"""

from __future__ import annotations

import math
from collections import deque

OBSERVE_S = 1.0  # a learned rate starts from the starts of this many seconds before the 429
DECREASE = 0.8  # a 429 without a configured rpm multiplies the learned request rate by this
RAMP = 0.05  # ... which then grows by this share of itself per second until the next 429
MIN_LEARNED_RATE = 0.1  # requests per second: a learned rate never falls below one call in ten seconds


class LearnedRate:
    """The requests per second a limiter without an rpm paces at once a 429 taught it one."""

    def __init__(self) -> None:
        self._starts: deque[float] = deque()  # booked starts of the last OBSERVE_S seconds
        self._learned: tuple[float, float] | None = None  # (requests/s, since when) once a 429 taught a rate

    @property
    def known(self) -> bool:
        """Whether a 429 has taught a rate yet."""
        return self._learned is not None

    def record_start(self, now: float) -> None:
        """Remember a booked start, forgetting those more than ``OBSERVE_S`` before it."""
        self._starts.append(now)
        while now - self._starts[0] > OBSERVE_S:
            self._starts.popleft()

    def at(self, when: float) -> float:
        """The learned requests per second at clock time ``when`` (the ramp since the last decrease included).

        Raises:
            RuntimeError: If no rate has been learned yet (see :attr:`known`).
        """
        if self._learned is None:
            raise RuntimeError("no request rate has been learned yet")
        rate, since = self._learned
        return rate * (1.0 + RAMP * max(0.0, when - since))

    def may_decrease(self, now: float) -> bool:
        """Whether a 429 at ``now`` may lower the rate: at most once per ``OBSERVE_S`` after a pause, since
        the 429s of calls booked before the last decrease say nothing about the new rate."""
        return self._learned is None or now >= self._learned[1] + OBSERVE_S

    def decrease(self, now: float, resume_at: float) -> float:
        """Multiplicative decrease at the first 429 of an episode; the additive ramp starts at ``resume_at``
        (when the pause ends). Returns the new rate in requests per second."""
        observed = max(1, sum(1 for t in self._starts if now - t <= OBSERVE_S)) / OBSERVE_S
        current = self.at(now) if self._learned is not None else math.inf
        rate = max(MIN_LEARNED_RATE, DECREASE * min(current, observed))
        self._learned = (rate, max(now, resume_at))
        return rate
