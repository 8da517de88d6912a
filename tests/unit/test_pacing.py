"""Unit tests for runner.llm.pacing: rpm spacing, the tpm bucket, 429 penalties and the limiter pool.

Everything runs on an injected fake clock; only the cross-event-loop test sleeps for real (a few ms).
"""

from __future__ import annotations

import asyncio
import contextvars
import random

import pytest

from runner.llm.limiter_pool import LimiterPool
from runner.llm.pacing import RateLimiter, estimate_tokens
from tests.builders import FakeClock, VirtualTimeLoop


def booked_starts(limiter: RateLimiter, clock: FakeClock, requests: list[tuple[float, int]]) -> list[float]:
    """Start times of requests (gap since the previous arrival, tokens) booked on the fake clock."""
    starts = []
    for gap, tokens in requests:
        clock.advance(gap)
        starts.append(clock() + limiter.reserve(tokens))
    return starts


def random_arrivals(rng: random.Random, n: int, mean_gap: float, max_tokens: int) -> list[tuple[float, int]]:
    """Bursts (many arrivals at the same instant) mixed with quiet stretches."""
    out = []
    for _ in range(n):
        kind = rng.random()
        gap = 0.0 if kind < 0.5 else rng.expovariate(1.0 / mean_gap) * (20.0 if kind > 0.95 else 1.0)
        out.append((gap, rng.randint(1, max_tokens)))
    return out


def penalize(limiter: RateLimiter, retry_after: float | None, times: int = 1) -> None:
    """``times`` 429s, each reported from a call of its own (a context of its own, as each call is an asyncio task),
    so the hold of a sporadic 429 never leaks into the test's context."""
    for _ in range(times):
        contextvars.copy_context().run(limiter.penalize, retry_after)


# --- rpm ---------------------------------------------------------------------------------------------

def test_rpm_spaces_requests_booked_at_once_evenly() -> None:
    limiter = RateLimiter(rpm=600, tpm=None, clock=FakeClock())
    waits = [limiter.reserve(100) for _ in range(10)]
    assert waits == pytest.approx([i * 0.1 for i in range(10)])
    assert limiter.waits == 9
    assert limiter.waited_s == pytest.approx(sum(waits))


def test_rpm_300_requests_at_600_rpm_start_over_29_9_seconds() -> None:
    limiter = RateLimiter(rpm=600, tpm=None, clock=FakeClock())
    waits = [limiter.reserve(1) for _ in range(300)]
    assert waits[-1] == pytest.approx(29.9)


def test_idle_time_does_not_bank_a_burst() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm=60, tpm=None, clock=clock)
    limiter.reserve(1)
    clock.advance(3600.0)
    assert [limiter.reserve(1) for _ in range(3)] == pytest.approx([0.0, 1.0, 2.0])


@pytest.mark.parametrize("rpm", [7, 60, 600])
def test_no_60_second_window_holds_more_than_rpm_starts(rpm: int) -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm=rpm, tpm=None, clock=clock)
    starts = booked_starts(limiter, clock, random_arrivals(random.Random(rpm), 2000, 30.0 / rpm, 10))
    assert starts == sorted(starts)  # booked in call order
    for i in range(len(starts) - rpm):  # any rpm + 1 consecutive starts span >= 60 s
        assert starts[i + rpm] - starts[i] >= 60.0 - 1e-6
    # a provider metering rpm as a bucket of rpm requests, refilled continuously, never runs dry
    level, previous = float(rpm), starts[0]
    for start in starts:
        level = min(float(rpm), level + (start - previous) * rpm / 60.0) - 1.0
        previous = start
        assert level >= -1e-6


# --- tpm ---------------------------------------------------------------------------------------------

def test_tpm_bucket_waits_for_refill_in_call_order() -> None:
    limiter = RateLimiter(rpm=None, tpm=600, clock=FakeClock())  # 10 tokens/s, bucket of 100
    assert limiter.reserve(60) == 0.0
    assert limiter.reserve(60) == pytest.approx(2.0)  # 40 left, 20 more take 2 s
    assert limiter.reserve(50) == pytest.approx(7.0)  # empty at 2 s, 50 more take 5 s


def test_tpm_bucket_refills_only_up_to_ten_seconds_worth() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm=None, tpm=600, clock=clock)
    limiter.reserve(100)
    clock.advance(1000.0)
    assert limiter.reserve(100) == 0.0
    assert limiter.reserve(10) == pytest.approx(1.0)


def test_settle_refunds_overestimates_and_charges_underestimates() -> None:
    refunded = RateLimiter(rpm=None, tpm=600, clock=FakeClock())
    refunded.reserve(100)
    refunded.settle(estimated=100, actual=30)
    assert refunded.reserve(70) == 0.0  # without the refund this would wait 7 s

    charged = RateLimiter(rpm=None, tpm=600, clock=FakeClock())
    charged.reserve(50)
    charged.settle(estimated=50, actual=100)
    assert charged.reserve(10) == pytest.approx(1.0)


def test_oversized_request_goes_once_the_bucket_is_full() -> None:
    full = RateLimiter(rpm=None, tpm=600, clock=FakeClock())
    assert full.reserve(500) == 0.0  # bigger than the bucket (100), which is full
    assert full.reserve(10) == pytest.approx(41.0)  # the 400-token debt is paid back first

    partly = RateLimiter(rpm=None, tpm=600, clock=FakeClock())
    partly.reserve(50)
    assert partly.reserve(500) == pytest.approx(5.0)  # waits until the bucket is full again


def test_both_limits_apply_and_the_wait_is_the_larger() -> None:
    limiter = RateLimiter(rpm=60, tpm=600, clock=FakeClock())
    assert limiter.reserve(100) == 0.0
    assert limiter.reserve(30) == pytest.approx(3.0)  # tpm-bound: rpm alone would allow 1 s
    assert limiter.reserve(1) == pytest.approx(4.0)  # rpm-bound: tpm alone would allow 3.1 s


def test_tpm_pacing_never_overdraws_a_provider_bucket() -> None:
    tpm = 6000
    clock = FakeClock()
    limiter = RateLimiter(rpm=None, tpm=tpm, clock=clock)
    requests = random_arrivals(random.Random(7), 2000, 0.5, tpm // 6)
    starts = booked_starts(limiter, clock, requests)
    assert starts == sorted(starts)
    level, previous = float(tpm), starts[0]  # a provider bucket of one minute, refilled continuously
    for start, (_, tokens) in zip(starts, requests, strict=True):
        level = min(float(tpm), level + (start - previous) * tpm / 60.0) - tokens
        previous = start
        assert level >= -1e-6
    j, window = 0, 0
    for i, (start, (_, tokens)) in enumerate(zip(starts, requests, strict=True)):  # the documented worst case: 7/6 tpm
        window += tokens
        while starts[j] <= start - 60.0:
            window -= requests[j][1]
            j += 1
        assert window <= tpm * 7 / 6 + 1e-6, i


# --- penalties ---------------------------------------------------------------------------------------

def test_penalize_pauses_new_starts_and_slows_the_rate() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm=60, tpm=None, clock=clock)
    limiter.reserve(1)
    clock.advance(0.5)
    limiter.penalize(5.0)
    assert limiter.penalties == 1
    assert limiter.rate_factor == pytest.approx(0.8)
    assert limiter.reserve(1) == pytest.approx(5.0)
    assert limiter.reserve(1) == pytest.approx(5.0 + 1.25)  # spacing 60 / (60 * 0.8)


def test_penalize_defaults_to_one_interval_or_one_second() -> None:
    paced = RateLimiter(rpm=30, tpm=None, clock=FakeClock())
    paced.penalize(None)
    assert paced.reserve(1) == pytest.approx(2.0)

    clock = FakeClock()
    unlimited = RateLimiter(rpm=None, tpm=None, clock=clock)
    penalize(unlimited, None, 2)
    assert unlimited.reserve(1) == 0.0  # two answers are no evidence of a rate limit: each 429 holds back its own call
    penalize(unlimited, None)  # three 429s in three answers are
    assert unlimited.reserve(1) == pytest.approx(1.0)


def test_sporadic_429s_never_pause_the_others() -> None:
    """429s within MAX_NOISE of the answers (here 1 in 10, as an overloaded provider sends whatever the rate) hold back
    only their own call: no pause of every start, no learned rate."""
    clock = FakeClock()
    limiter = RateLimiter(rpm=None, tpm=None, clock=clock)
    for n in range(300):
        assert limiter.reserve(1) == 0.0, n
        clock.advance(0.01)
        if n % 10 == 9:
            penalize(limiter, 1.0)
        else:
            limiter.record_success()
    assert limiter.learned_rate is None and limiter.penalties == 30


# --- a limit nobody configured (AIMD) ----------------------------------------------------------------

def test_429s_that_come_back_first_are_weighed_against_the_calls_still_unanswered() -> None:
    """32 requests sent at once, the first three answers 429s (a 429 comes back long before a 200): 3 in 32, no
    evidence of a rate limit, so nothing pauses."""
    limiter = RateLimiter(rpm=None, tpm=None, clock=FakeClock())

    async def call(n: int) -> None:
        await limiter.acquire(1)
        await asyncio.sleep(0)  # every request is sent before any answer comes back
        if n < 3:
            limiter.penalize(1.0)

    async def burst() -> None:
        await asyncio.gather(*(call(n) for n in range(32)))

    asyncio.run(burst())
    assert limiter.penalties == 3 and limiter.reserve(1) == 0.0 and limiter.learned_rate is None


def test_a_429_without_rpm_learns_a_rate_below_what_was_sent() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm=None, tpm=None, clock=clock)
    assert [limiter.reserve(1) for _ in range(32)] == [0.0] * 32  # a burst of 32 in one instant
    assert limiter.learned_rate is None
    penalize(limiter, 1.0, 3)  # the first three answers all 429s: a rate limit
    assert limiter.learned_rate == pytest.approx(0.8 * 32)
    waits = [limiter.reserve(1) for _ in range(3)]
    assert waits == pytest.approx([1.0, 1.0 + 1 / 25.6, 1.0 + 2 / 25.6], rel=1e-3)
    clock.advance(21.0)  # 20 s after the pause: the rate has grown by 20 * 5%
    assert limiter.learned_rate == pytest.approx(0.8 * 32 * 2.0)


def test_each_429_episode_lowers_the_learned_rate_again() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm=None, tpm=None, clock=clock)
    for _ in range(10):
        limiter.reserve(1)
    penalize(limiter, 0.0, 3)
    first = limiter.learned_rate
    clock.advance(0.5)
    limiter.penalize(0.0)  # within a second of the last decrease: a call booked at the old rate, same episode
    assert limiter.learned_rate == pytest.approx(first * 1.025)  # half a second of the 5%/s ramp
    clock.advance(0.5)
    limiter.penalize(0.0)  # a second after it: a new episode
    assert limiter.learned_rate == pytest.approx(0.8 * first * 1.05)
    for _ in range(40):
        clock.advance(1.0)
        limiter.penalize(0.0)
    assert limiter.learned_rate == pytest.approx(0.1)  # the floor


def test_a_cut_never_goes_below_what_the_last_minute_answered_without_a_429() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm=None, tpm=None, clock=clock)
    for _ in range(600):  # a minute of 10 answers a second, none a 429
        limiter.reserve(1)
        clock.advance(0.1)
        limiter.record_success()
    for _ in range(10):  # then ten 429 episodes in ten seconds: each cuts the rate by 20%, down to 0.1 without a floor
        clock.advance(1.0)
        penalize(limiter, 0.0, 40)  # enough of the last 100 answers for a rate limit
    assert limiter.learned_rate is not None and limiter.learned_rate >= 500 / 60  # the answers of the last 60 s


def one_second_window_run(limiter_for, limit_per_s: int, calls: int = 300, concurrency: int = 32,
                          latency_s: float = 0.2) -> tuple[int, int, float]:
    """``calls`` calls, ``concurrency`` at a time, through a limiter's real acquire(), against a provider that
    admits ``limit_per_s`` in any sliding second and answers 429 + Retry-After beyond it; a 429 is reported
    with penalize() and the call goes back through acquire(), as runner.llm.client does. Returns (done, 429s, wall)."""
    loop = VirtualTimeLoop()
    limiter = limiter_for(loop.clock)
    admitted: list[float] = []
    counts = {"left": calls, "done": 0, "rejected": 0}

    async def worker() -> None:
        while counts["left"]:
            counts["left"] -= 1
            while True:
                await limiter.acquire(1)
                now = loop.clock()
                recent = [t for t in admitted if now - t < 1.0]
                if len(recent) < limit_per_s:
                    admitted.append(now)
                    break
                counts["rejected"] += 1
                limiter.penalize(recent[0] + 1.0 - now)
            await asyncio.sleep(latency_s)
            limiter.record_success()
            counts["done"] += 1

    async def main() -> None:
        await asyncio.gather(*(worker() for _ in range(concurrency)))

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return counts["done"], counts["rejected"], loop.clock()


@pytest.mark.parametrize("limit_per_s", [2, 10, 50])
def test_an_unknown_one_second_window_is_found_without_losing_a_call(limit_per_s: int) -> None:
    limiter_for = lambda clock: RateLimiter(rpm=None, tpm=None, clock=clock, sleep=asyncio.sleep)  # noqa: E731
    done, rejected, wall = one_second_window_run(limiter_for, limit_per_s)
    assert done == 300
    assert wall <= 1.3 * 300 / limit_per_s
    assert rejected <= 0.15 * 300  # each one sent again: a 429 costs a request, never a judgment


@pytest.mark.parametrize("rpm", [120, 600, 3000])
def test_a_configured_rpm_never_bursts_within_a_second(rpm: int) -> None:
    limiter_for = lambda clock: RateLimiter(rpm=rpm, tpm=None, clock=clock, sleep=asyncio.sleep)  # noqa: E731
    done, rejected, wall = one_second_window_run(limiter_for, rpm // 60)
    assert (done, rejected) == (300, 0)
    assert wall <= 1.05 * 300 / (rpm / 60) + 0.2


# --- unlimited, validation, pool, estimates ----------------------------------------------------------

def test_unlimited_limiter_never_waits() -> None:
    limiter = RateLimiter(rpm=None, tpm=None, clock=FakeClock())
    assert all(limiter.reserve(10**6) == 0.0 for _ in range(10_000))
    assert (limiter.waits, limiter.waited_s, limiter.penalties) == (0, 0.0, 0)


@pytest.mark.parametrize(("rpm", "tpm"), [(0, None), (None, 0), (-5, 100)])
def test_non_positive_limits_are_rejected(rpm: int | None, tpm: int | None) -> None:
    with pytest.raises(ValueError):
        RateLimiter(rpm=rpm, tpm=tpm)


def test_pool_returns_one_limiter_per_key_and_replaces_it_when_limits_change() -> None:
    pool = LimiterPool(clock=FakeClock())
    judge = pool.get("gpt/openai/gpt-4o-mini", rpm=60, tpm=None)
    assert pool.get("gpt/openai/gpt-4o-mini", rpm=60, tpm=None) is judge
    assert pool.get("other/openai/gpt-4o", rpm=60, tpm=None) is not judge
    changed = pool.get("gpt/openai/gpt-4o-mini", rpm=120, tpm=None)
    assert changed is not judge and changed.rpm == 120
    assert pool.get("gpt/openai/gpt-4o-mini", rpm=120, tpm=None) is changed
    assert [key for key, _ in pool.items()] == ["gpt/openai/gpt-4o-mini", "other/openai/gpt-4o"]
    assert [changed.reserve(1) for _ in range(2)] == pytest.approx([0.0, 0.5])  # the pool's fake clock


@pytest.mark.parametrize(("chars", "max_tokens", "expected"), [(0, 512, 512), (1, 0, 1), (8, 10, 12), (9, 10, 13)])
def test_estimate_tokens_rounds_prompt_up_and_adds_max_tokens(chars: int, max_tokens: int, expected: int) -> None:
    assert estimate_tokens(chars, max_tokens) == expected


def test_estimate_tokens_rejects_negative_counts() -> None:
    with pytest.raises(ValueError):
        estimate_tokens(-1, 10)
