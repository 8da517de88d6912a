"""Unit tests for runner.llm.retry: backoff bounds and jitter, and every Retry-After format."""

from __future__ import annotations

import random
import statistics
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

from runner.llm.retry import RetryPolicy, parse_retry_after

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


def samples(policy: RetryPolicy, attempt: int, retry_after: float | None = None, n: int = 2000) -> list[float]:
    """Delays drawn from a seeded generator."""
    rng = random.Random(attempt)
    return [policy.delay(attempt, retry_after, rng) for _ in range(n)]


# --- RetryPolicy -------------------------------------------------------------------------------------

def test_defaults_match_the_judge_config() -> None:
    assert RetryPolicy() == RetryPolicy(max_retries=4, base_s=1.0, max_s=60.0)


@pytest.mark.parametrize("attempt", [1, 2, 3, 5, 7, 10, 1000])
def test_backoff_stays_between_zero_and_the_capped_ceiling(attempt: int) -> None:
    policy = RetryPolicy(base_s=0.5, max_s=20.0)
    ceiling = min(20.0, 0.5 * 2.0 ** min(attempt - 1, 100))
    delays = samples(policy, attempt)
    assert all(0.0 <= d <= ceiling for d in delays)
    assert max(delays) > 0.9 * ceiling  # full jitter spans the whole range


def test_backoff_grows_with_the_attempt_on_average() -> None:
    policy = RetryPolicy(base_s=1.0, max_s=60.0)
    means = [statistics.mean(samples(policy, attempt)) for attempt in (1, 2, 3, 4)]
    assert means == sorted(means)
    assert means[0] == pytest.approx(0.5, rel=0.1)
    assert means[3] == pytest.approx(4.0, rel=0.1)


def test_retry_after_is_a_floor_with_up_to_ten_percent_jitter() -> None:
    delays = samples(RetryPolicy(base_s=1.0, max_s=60.0), 1, retry_after=5.0)
    assert all(5.0 <= d <= 5.5 for d in delays)
    assert len(set(delays)) > 1000  # concurrent retries do not land in the same instant


def test_retry_after_beyond_max_is_honoured_exactly() -> None:
    assert set(samples(RetryPolicy(max_s=60.0), 3, retry_after=100.0, n=50)) == {100.0}


def test_later_attempts_with_retry_after_stay_under_the_cap() -> None:
    delays = samples(RetryPolicy(base_s=1.0, max_s=10.0), 8, retry_after=2.0)
    assert all(2.0 <= d <= 10.0 for d in delays)


@pytest.mark.parametrize("retry_after", [None, 0.0, -3.0, float("nan"), float("inf")])
def test_missing_or_invalid_retry_after_falls_back_to_backoff(retry_after: float | None) -> None:
    assert all(0.0 <= d <= 1.0 for d in samples(RetryPolicy(base_s=1.0), 1, retry_after=retry_after, n=200))


def test_delay_is_reproducible_with_a_seeded_rng() -> None:
    policy = RetryPolicy()
    assert samples(policy, 3, 1.0, n=20) == samples(policy, 3, 1.0, n=20)


def test_attempt_counts_from_one() -> None:
    with pytest.raises(ValueError):
        RetryPolicy().delay(0, None, random.Random(0))


@pytest.mark.parametrize("fields", [{"max_retries": -1}, {"base_s": -1.0}, {"max_s": float("nan")}])
def test_negative_settings_are_rejected(fields: dict) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**fields)


# --- parse_retry_after -------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"RETRY-AFTER": " 0 "}, 0.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"Retry-After-Ms": "1500.5", "Retry-After": "9"}, 1.5005),  # milliseconds win
        ({"retry-after-ms": "soon", "retry-after": "3"}, 3.0),  # an unreadable header is skipped
        ({"x-ratelimit-reset-requests": "1s"}, 1.0),
        ({"x-ratelimit-reset-requests": "6m0s"}, 360.0),
        ({"x-ratelimit-reset-requests": "250ms"}, 0.25),
        ({"X-RateLimit-Reset-Tokens": "1h2m3.5s"}, 3723.5),
        ({"x-ratelimit-reset-tokens": "2"}, 2.0),
        ({"x-ratelimit-reset-requests": "20ms", "x-ratelimit-reset-tokens": "6m0s"}, 0.02),
        ({"retry-after": "4", "x-ratelimit-reset-requests": "6m0s"}, 4.0),  # resets are a last resort
    ],
)
def test_parse_retry_after_reads_each_format(headers: dict[str, str], expected: float) -> None:
    assert parse_retry_after(headers, now=NOW) == pytest.approx(expected)


def test_parse_retry_after_reads_http_dates_relative_to_now() -> None:
    later = format_datetime(NOW + timedelta(seconds=30), usegmt=True)  # "Sat, 01 Mar 2025 12:00:30 GMT"
    assert parse_retry_after({"Retry-After": later}, now=NOW) == pytest.approx(30.0)
    earlier = format_datetime(NOW - timedelta(seconds=30), usegmt=True)
    assert parse_retry_after({"Retry-After": earlier}, now=NOW) == 0.0  # never negative
    zoneless = "Sat, 01 Mar 2025 12:00:10 -0000"
    assert parse_retry_after({"Retry-After": zoneless}, now=NOW.replace(tzinfo=None)) == pytest.approx(10.0)


def test_parse_retry_after_accepts_case_insensitive_header_objects() -> None:
    httpx = pytest.importorskip("httpx")
    assert parse_retry_after(httpx.Headers({"Retry-After": "12"})) == 12.0


@pytest.mark.parametrize(
    "headers",
    [
        None,
        {},
        {"content-type": "application/json"},
        {"retry-after": "soon"},
        {"retry-after": "-3"},
        {"retry-after": "nan"},
        {"retry-after": "inf"},
        {"retry-after": "1e3"},
        {"retry-after": ""},
        {"retry-after-ms": "-5"},
        {"x-ratelimit-reset-requests": "5 minutes"},
        {"x-ratelimit-reset-requests": "1d"},
        {"x-ratelimit-reset-requests": "ms"},
    ],
)
def test_parse_retry_after_returns_none_for_garbage(headers: dict[str, str] | None) -> None:
    assert parse_retry_after(headers, now=NOW) is None
