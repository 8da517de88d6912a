"""Client-side pacing of judge calls against a provider's requests/min (rpm) and tokens/min (tpm) quotas.

A :class:`RateLimiter` books each call a start time before it is sent, so a run stays under its quotas
instead of discovering them through 429s. Three choices shape it:

- Only plain time-based state (monotonic timestamps and floats). One limiter is shared by every job and
  repeat of a judge in the process, and each Hydra job runs its own ``asyncio.run()`` event loop, so
  nothing in here may bind to a loop (no ``asyncio.Lock``/``Event``). None is needed: asyncio runs one
  task at a time and :meth:`RateLimiter.reserve` computes and books a slot without awaiting.
- rpm: booked start times are spaced evenly, at least ``60 / rpm`` seconds apart, with no initial burst.
  Any 60 s window then holds at most rpm starts, and a provider that meters rpm as a continuously
  refilled bucket never runs dry, so pacing alone never provokes a 429.
- tpm: a token bucket refilled at ``tpm / 60`` per second holding ten seconds' worth (``tpm / 6``). A
  bucket of a whole minute would let a run open with a minute's quota in one burst; one of ten seconds
  lets the first calls of a run go at once yet keeps any burst small. A provider that meters tpm as a
  refilled bucket of a minute's capacity never runs dry; a strict 60 s window could, in the worst case,
  see 7/6 of tpm, which the 429 handling (:meth:`RateLimiter.penalize`) absorbs.

Starts are booked in call order (FIFO), tokens are charged at the booked start, and the wait is the
later of what each quota requires.

Two more behaviours come from providers that meter more tightly than the configured numbers say:

- No burst in any second: an rpm of 600 is also read as "10 in any sliding second", which some providers
  enforce; :meth:`RateLimiter.acquire` holds a send that would break it (:mod:`runner.llm.send_window`).
- A limit nobody configured is learned (AIMD, as TCP does): without an rpm, 429s teach the limiter a request
  rate (:mod:`runner.llm.learned_rate`) once their share is evidence of a limit; until then a 429 holds back only
  its own call for its Retry-After, its concurrency place lent to the others (:mod:`runner.llm.call_slot`).
  Retry-After pauses every new start, as with a configured limit, while cutting the rate lowers the 429s' share;
  when a cut did not, the rate before it is back and a 429 again holds back only its own call.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar

from runner.llm.call_slot import CURRENT_SLOT
from runner.llm.learned_rate import RAMP, Decision, LearnedRate
from runner.llm.send_window import SendWindow

logger = logging.getLogger(__name__)

BUCKET_SECONDS = 10.0  # the tpm bucket holds this many seconds of refill
SLOWDOWN = 0.8  # a 429 multiplies the effective rate by this
MIN_RATE_FACTOR = 0.25  # ... but never below this share of the configured rate
RECOVERY_STEP = 0.02  # each success gives back this share of the configured rate
# Per call (each asyncio task has its own copy), without an rpm: the number acquire() gave the request being sent,
# read back by penalize() or record_success(); and until when a sporadic 429 holds back this call alone.
_SENDING: ContextVar[int | None] = ContextVar("judgesweep_sending", default=None)
_OWN_HOLD: ContextVar[float] = ContextVar("judgesweep_own_hold", default=-math.inf)


class RateLimiter:
    """Paces calls to one judge deployment under its rpm and tpm quotas.

    Args:
        rpm: Requests per minute, or None for no request limit.
        tpm: Tokens per minute (prompt plus ``max_tokens``), or None for no token limit.
        clock: Monotonic clock in seconds; injectable for tests.
        sleep: Coroutine function used by :meth:`acquire` to wait; injectable for tests.

    Raises:
        ValueError: If rpm or tpm is not positive.
    """

    def __init__(self, rpm: int | None, tpm: int | None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[object]] = asyncio.sleep) -> None:
        for name, value in (("rpm", rpm), ("tpm", tpm)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive or None, got {value!r}")
        self._rpm = rpm
        self._tpm = tpm
        self._clock = clock
        self._sleep = sleep
        self._free = rpm is None and tpm is None  # the hot-path shortcut: nothing to pace
        self._capacity = tpm * BUCKET_SECONDS / 60.0 if tpm else 0.0
        self._set_factor(1.0)
        self._next_start = -math.inf  # earliest start of the next booking (last start + one interval)
        self._last_start = -math.inf
        self._level = self._capacity  # tokens in the bucket at _level_at; negative while in debt
        self._level_at = clock()
        self._blocked_until = -math.inf  # end of the current 429 episode
        self._shift_total = 0.0  # how far penalties have pushed back bookings not yet started
        self._waits = 0
        self._waited_s = 0.0
        self._penalties = 0
        self._learned = LearnedRate()  # without an rpm: the rate 429s taught (its starts are recorded from the first)
        self._last_success = -math.inf
        self._limited_since: float | None = None  # the first 429 since the last success (None: none since)
        self._epoch = 0  # bumped when a 429 lowers the learned rate: bookings made before are made again
        # actual sends of the last second: at most rpm / 60 of them in any second (see the module docstring)
        self._sent = SendWindow(max(1, rpm // 60), clock, sleep) if rpm else None

    @property
    def rpm(self) -> int | None:
        """The configured requests per minute (None: unlimited)."""
        return self._rpm

    @property
    def tpm(self) -> int | None:
        """The configured tokens per minute (None: unlimited)."""
        return self._tpm

    @property
    def rate_factor(self) -> float:
        """The share of the configured rates currently used (1.0 until a 429 slows it down)."""
        return self._factor

    @property
    def learned_rate(self) -> float | None:
        """Requests per second learned from 429s when no rpm is configured (None before the first 429)."""
        return self._learned.at(self._clock()) if self._learned.known else None

    @property
    def waits(self) -> int:
        """How many reservations had to wait."""
        return self._waits

    @property
    def waited_s(self) -> float:
        """Total seconds callers were told to wait."""
        return self._waited_s

    @property
    def penalties(self) -> int:
        """How many 429s were reported through :meth:`penalize`."""
        return self._penalties

    def reserve(self, tokens: int) -> float:
        """Book one request now and say how long the caller must wait before sending it.

        Never sleeps and never awaits, so concurrent tasks cannot interleave inside it.

        Args:
            tokens: The request's estimated token count (see :func:`estimate_tokens`); ignored without tpm.

        Returns:
            Seconds to wait before sending; 0.0 when the request may go at once.

        Raises:
            ValueError: If tokens is negative while a tpm limit applies.
        """
        now = self._clock()
        if self._rpm is None:  # what a first 429 learns the rate from
            self._learned.record_start(now)
        if self._free:
            return 0.0
        start = self._next_start if self._next_start > now else now
        if self._tpm is not None:
            start = self._book_tokens(start, tokens)
        interval = self._interval if not self._learned.known else 1.0 / self._learned.at(start)
        self._next_start = start + interval
        self._last_start = start
        wait = start - now
        if wait <= 0.0:
            return 0.0
        self._waits += 1
        self._waited_s += wait
        return wait

    def _book_tokens(self, start: float, tokens: int) -> float:
        if tokens < 0:
            raise ValueError(f"tokens must be >= 0, got {tokens}")
        level = min(self._capacity, self._level + (start - self._level_at) * self._refill)
        need = min(tokens, self._capacity)  # a request bigger than the bucket goes once it is full
        if level < need:
            start += (need - level) / self._refill
            level = need
        self._level = level - tokens
        self._level_at = start
        return start

    async def acquire(self, tokens: int) -> float:
        """Book one request and wait until it may be sent.

        A 429 reported (through :meth:`penalize`) while this call waits pushes it back with the rest of
        the queue, so requests booked before the 429 do not start inside the penalty.

        Args:
            tokens: The request's estimated token count.

        Returns:
            Seconds waited.
        """
        total = await self._own_hold()
        while True:
            epoch = self._epoch
            wait = self.reserve(tokens)
            if wait > 0.0:
                seen = self._shift_total
                await self._sleep(wait)
                while self._shift_total > seen:
                    extra = self._shift_total - seen
                    seen = self._shift_total
                    self._waited_s += extra
                    wait += extra
                    await self._sleep(extra)
            total += wait
            if self._epoch == epoch:
                total += await self._guard_window()
                if self._rpm is None:
                    _SENDING.set(self._learned.record_send(self._clock()))
                return total
            # a 429 lowered the learned rate while this call waited on a booking made at the old rate: book again

    async def _own_hold(self) -> float:
        """Wait out the Retry-After of this call's last 429 when it held back no other call (a sporadic 429), its
        place among the stage's concurrent calls lent to the others meanwhile (runner.llm.call_slot)."""
        wait = _OWN_HOLD.get() - self._clock()
        _OWN_HOLD.set(-math.inf)
        if not wait > 0.0:
            return 0.0
        self._waited_s += wait
        slot = CURRENT_SLOT.get()
        if slot is not None and slot.held:
            await slot.lend_during(self._sleep(wait))
        else:
            await self._sleep(wait)
        return wait

    async def _guard_window(self) -> float:
        """Hold a send until the one rpm/60 sends ago is over a second old; record the send (rpm only)."""
        if self._sent is None:
            return 0.0
        waited = await self._sent.hold()
        self._waited_s += waited
        return waited

    def settle(self, estimated: int, actual: int) -> None:
        """Correct the token bucket once the response reports the tokens really used.

        Args:
            estimated: The count the request was booked with.
            actual: The provider's count (prompt plus completion tokens); a shortfall is refunded, an
                excess charged.
        """
        if self._tpm is not None:
            self._level += estimated - actual

    def penalize(self, retry_after: float | None = None) -> None:
        """Back off after a 429: pause new starts and slow the rate down.

        No request starts before ``now + retry_after``; bookings not yet started move back together,
        keeping their spacing. The effective rate is multiplied by 0.8 (floor: 25% of the configured
        rate). 429s reported while an earlier penalty's pause is still running belong to the same episode:
        they may extend the pause but do not slow the rate again, so one burst of concurrent 429s does not
        throttle a judge to its floor at once.

        Args:
            retry_after: Seconds the server asked to wait; None (or invalid) means one rpm interval, or
                1 s without an rpm limit.
        """
        now = self._clock()
        self._penalties += 1
        if self._limited_since is None:
            self._limited_since = now
        self._free = False
        if retry_after is None or not 0.0 <= retry_after < math.inf:
            retry_after = 60.0 / self._rpm if self._rpm else 1.0
        until = now + retry_after
        if self._rpm is None:
            if not self._learn(now, until):
                _OWN_HOLD.set(max(_OWN_HOLD.get(), until))
                return  # a sporadic 429: only its own call waits (acquire); the others go on at the same rate
        elif now >= self._blocked_until:
            self._set_factor(max(MIN_RATE_FACTOR, self._factor * SLOWDOWN))
        if until <= self._blocked_until:
            return
        if self._last_start > now:  # bookings are waiting: move them all
            shift = until - max(self._blocked_until, now)
            self._next_start += shift
            self._last_start += shift
            self._level_at += shift
            self._shift_total += shift
        else:
            self._next_start = max(self._next_start, until)
        self._blocked_until = until
        logger.debug("429: no start before +%.2fs, rate factor %.2f", retry_after, self._factor)

    def _learn(self, now: float, resume_at: float) -> bool:
        """A 429 without an rpm: count it and let the learned rate decide (runner.llm.learned_rate). Returns whether
        every start pauses until ``resume_at`` (read as a rate limit); else only this call waits until then."""
        if self._learned.record_answer(now, _SENDING.get(), limited=True):
            self._rebook(now)
        _SENDING.set(None)
        decision = self._learned.decide(now, resume_at, paused=now < self._blocked_until)
        if decision is Decision.CUT:
            self._rebook(now)  # waiting calls book again at the new rate, from the pause's end
            logger.info("429 with no rpm configured: pacing at %.2f requests/s, then %.0f%% more per second",
                        self._learned.at(now), RAMP * 100)
        return decision is not Decision.OWN

    def _rebook(self, now: float) -> None:
        """The learned rate changed: calls waiting on a booking at the old rate book again."""
        self._epoch += 1
        self._next_start = self._last_start = now
        if self._learned.noise is not None:  # a cut was undone
            rate = f"{self._learned.at(now):.2f} requests/s" if self._learned.known else "no pacing"
            logger.info("429s with no rpm configured did not fall when the rate was cut: not a rate limit, back to %s; "
                        "a 429 now holds back only its own call (up to %.0f%% of answers)", rate,
                        100 * self._learned.noise)

    @property
    def last_success(self) -> float:
        """Clock time of the last :meth:`record_success` (-inf before the first)."""
        return self._last_success

    @property
    def limited_since(self) -> float:
        """Clock time of the first 429 (:meth:`penalize`) since the last :meth:`record_success` (now when none came
        since): how long the provider has let nothing through."""
        return self._limited_since if self._limited_since is not None else self._clock()

    def record_success(self) -> None:
        """Recover gradually after penalties: +2% of the configured rate per success, up to 100%; without an rpm,
        count the answer for the learned rate."""
        self._last_success = self._clock()
        self._limited_since = None
        if self._rpm is None:
            if self._learned.record_answer(self._last_success, _SENDING.get(), limited=False):
                self._rebook(self._last_success)
            _SENDING.set(None)
        if self._factor < 1.0:
            self._set_factor(min(1.0, round(self._factor + RECOVERY_STEP, 9)))

    def _set_factor(self, factor: float) -> None:
        self._factor = factor
        self._interval = 60.0 / (self._rpm * factor) if self._rpm else 0.0
        self._refill = self._tpm * factor / 60.0 if self._tpm else 0.0


def estimate_tokens(prompt_chars: int, max_tokens: int) -> int:
    """Estimate a call's tokens before sending it: about four characters a token, plus ``max_tokens``.

    Providers count ``max_tokens`` against tpm when the request arrives, so it is part of the estimate;
    :meth:`RateLimiter.settle` corrects the bucket once the real usage is known.

    Args:
        prompt_chars: Characters in all the prompt's messages.
        max_tokens: The completion budget sent with the request.

    Returns:
        ``ceil(prompt_chars / 4) + max_tokens``.

    Raises:
        ValueError: If either argument is negative.
    """
    if prompt_chars < 0 or max_tokens < 0:
        raise ValueError(f"counts must be >= 0, got prompt_chars={prompt_chars}, max_tokens={max_tokens}")
    return -(-prompt_chars // 4) + max_tokens
