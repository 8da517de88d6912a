"""Retry timing: exponential backoff with full jitter, and reading a server's Retry-After.

Which errors are retried is decided by the caller (by exception type); this module only says how long
to wait before the next attempt.
"""

from __future__ import annotations

import logging
import math
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

log = logging.getLogger(__name__)

LONG_WAIT_S = 10.0  # a wait for a Retry-After longer than this is logged
SHOWN_WAIT_S = 2.0  # a wait for a Retry-After at least this long is shown in the progress bar as a pause
RETRY_AFTER_JITTER = 0.1  # a Retry-After wait is stretched by up to this share, so retries do not align
_MAX_EXPONENT = 60  # 2**60 seconds is beyond any cap; keeps huge attempt numbers from overflowing

_SECONDS = re.compile(r"\d+(?:\.\d*)?|\.\d+")
_DURATION_PART = r"(\d+(?:\.\d*)?|\.\d+)(ms|us|µs|ns|h|m|s)"
_DURATION = re.compile(f"(?:{_DURATION_PART})+")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_RESET_HEADERS = ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to back off before retrying a failed call.

    Attributes:
        max_retries: Retries after the first attempt (0: never retry).
        base_s: Backoff ceiling of the first retry; it doubles with each further retry.
        max_s: Upper bound of the backoff ceiling (a longer Retry-After is still honoured).
    """

    max_retries: int = 4
    base_s: float = 1.0
    max_s: float = 60.0

    def __post_init__(self) -> None:
        """Reject settings that cannot describe a backoff.

        Raises:
            ValueError: If a field is negative.
        """
        if self.max_retries < 0 or not self.base_s >= 0.0 or not self.max_s >= 0.0:
            raise ValueError(f"retry settings must be >= 0, got {self}")

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before retry number ``attempt``.

        Full jitter: uniform(0, min(max_s, base_s * 2**(attempt - 1))). When the server sent a Retry-After,
        the wait is at least that plus up to 10% of it, so many concurrent calls do not retry in the
        same instant; the result is capped at max(max_s, retry_after).

        Args:
            attempt: 1 for the first retry, 2 for the second, ...
            retry_after: Seconds the server asked for (see :func:`parse_retry_after`), or None.
            rng: Source of the jitter; seed it for reproducible schedules.

        Returns:
            A delay in seconds, never negative.

        Raises:
            ValueError: If attempt is below 1.
        """
        if attempt < 1:
            raise ValueError(f"attempt counts retries from 1, got {attempt}")
        ceiling = min(self.max_s, self.base_s * 2.0 ** min(attempt - 1, _MAX_EXPONENT))
        backoff = rng.uniform(0.0, ceiling)
        if retry_after is None or not 0.0 < retry_after < math.inf:
            return backoff
        floor = retry_after + rng.uniform(0.0, RETRY_AFTER_JITTER * retry_after)
        return min(max(backoff, floor), max(self.max_s, retry_after))


def parse_retry_after(headers: Mapping[str, str] | None, *, now: datetime | None = None) -> float | None:
    """Read how long the server asked the client to wait from a response's headers.

    Looked up case-insensitively, first match wins: ``retry-after-ms`` (milliseconds); ``retry-after``
    as delta-seconds or an HTTP-date (relative to now, never negative); as a last resort
    ``x-ratelimit-reset-requests`` then ``x-ratelimit-reset-tokens`` as durations such as ``1s``,
    ``6m0s`` or ``250ms``. A header whose value cannot be read is skipped.

    Args:
        headers: Response headers, or None.
        now: The current time for HTTP-dates; defaults to the system clock (injectable for tests).

    Returns:
        Seconds to wait, or None when no header says.
    """
    if not headers:
        return None
    lowered = {str(key).lower(): str(value).strip() for key, value in headers.items()}
    if "retry-after-ms" in lowered:
        millis = _parse_seconds(lowered["retry-after-ms"])
        if millis is not None:
            return millis / 1000.0
    if "retry-after" in lowered:
        value = lowered["retry-after"]
        seconds = _parse_seconds(value)
        if seconds is None:
            seconds = _parse_http_date(value, now)
        if seconds is not None:
            return seconds
    for name in _RESET_HEADERS:
        if name in lowered:
            seconds = _parse_duration(lowered[name])
            if seconds is not None:
                return seconds
    return None


def retry_after_of(exc: Exception) -> float | None:
    """The Retry-After of a provider's error (see :func:`parse_retry_after`), None when it sent none: litellm
    keeps the response's headers on the exception."""
    headers = getattr(exc, "litellm_response_headers", None)
    return parse_retry_after(dict(headers.items())) if headers is not None else None


def _parse_seconds(value: str) -> float | None:
    """A non-negative decimal number (no sign, exponent, inf or nan), else None."""
    return float(value) if _SECONDS.fullmatch(value) else None


def _parse_http_date(value: str, now: datetime | None) -> float | None:
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # "-0000" and other zone-less dates: HTTP-dates are always GMT
        when = when.replace(tzinfo=timezone.utc)
    current = now if now is not None else datetime.now(timezone.utc)
    if current.tzinfo is None:
        current = current.replace(tzinfo=timezone.utc)
    return max(0.0, (when - current).total_seconds())


def _parse_duration(value: str) -> float | None:
    """A Go-style duration ("1s", "6m0s", "250ms", "1h2m3.5s") or bare seconds, else None."""
    seconds = _parse_seconds(value)
    if seconds is not None:
        return seconds
    if not _DURATION.fullmatch(value):
        return None
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in re.findall(_DURATION_PART, value))


class LongWaits:
    """The waits for a Retry-After of one judge: each at least :data:`SHOWN_WAIT_S` long is shown by the progress bar
    as a pause (the latest end), each longer than :data:`LONG_WAIT_S` is also logged once, with its end
    (``waiting 45 s for Retry-After (until 22:31:05)``).

    Written from the event loop, read from the progress bar's thread.

    Args:
        name: The judge's name, for the log line.
        now: The wall clock (``time.time``; a test's simulated one).
    """

    def __init__(self, name: str, now: Callable[[], float] = time.time) -> None:
        self.name = name
        self._now = now
        self._until: float | None = None  # time.time() when the latest shown wait ends
        self._logged: float | None = None  # time.time() when the latest logged wait ends
        self._spans: list[tuple[float, float]] = []  # each shown wait's (start, end), overlapping ones merged
        self._lock = threading.Lock()

    def note(self, wait_s: float) -> None:
        """A call is about to wait ``wait_s`` seconds for a Retry-After; shown when it is at least
        :data:`SHOWN_WAIT_S`, logged when it is long and ends later than the wait already logged (the calls that got
        the same Retry-After share one line)."""
        if not wait_s >= SHOWN_WAIT_S:
            return
        start = self._now()
        end = start + wait_s
        with self._lock:
            self._until = end if self._until is None else max(self._until, end)
            if self._spans and start <= self._spans[-1][1]:  # waits noted in time order: only the last can overlap
                self._spans[-1] = (self._spans[-1][0], max(self._spans[-1][1], end))
            else:
                self._spans.append((start, end))
            if not wait_s > LONG_WAIT_S or (self._logged is not None and end <= self._logged + 1.0):
                return
            self._logged = end
        log.warning("%s: waiting %.0f s for Retry-After (until %s)", self.name, wait_s, clock(end))

    def until(self) -> float | None:
        """``time.time()`` when the latest shown wait ends, None when no such wait is under way."""
        with self._lock:
            return self._until if self._until is not None and self._until > self._now() else None

    def spans(self) -> list[tuple[float, float]]:
        """Every shown wait so far as ``(start, end)`` in ``time.time()`` seconds, overlapping ones merged, oldest
        first: the time the judge stood still, which the progress bar's rate leaves out."""
        with self._lock:
            return list(self._spans)


def clock(when: float) -> str:
    """``when`` (``time.time()``) as local HH:MM:SS."""
    return time.strftime("%H:%M:%S", time.localtime(when))
