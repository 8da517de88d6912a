"""The fake OpenAI server's rate window (``window_s``) and counters-only mode (``record=False``), over HTTP."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.fakes.openai_server import RATE_WINDOW_S, FakeOpenAIServer, window_limit

pytestmark = pytest.mark.integration

MESSAGES = [{"role": "user", "content": "A or B?"}]
REPO_ROOT = Path(__file__).resolve().parents[2]


def _burst(client: httpx.Client, url: str, n: int) -> list[httpx.Response]:
    return [client.post(url, json={"model": "m", "messages": MESSAGES}) for _ in range(n)]


@pytest.mark.parametrize(
    ("rpm", "window_s", "expected"),
    [(600, 1.0, 10), (600, 60.0, 600), (3, 60.0, 3), (30, 1.0, 1), (70, 6.0, 7), (600, 0.1, 1), (0, 1.0, 0)],
)
def test_window_limit_is_rpm_scaled_to_the_window_at_least_one(rpm: int, window_s: float, expected: int) -> None:
    assert window_limit(rpm, window_s) == expected


@pytest.mark.slow  # waits on the clock for its point (the server's rate window)
def test_short_window_admits_its_share_of_rpm_then_429_with_both_retry_headers() -> None:
    # 120 rpm over 1.5 s = 3. A burst of 3 on loopback takes milliseconds, so even a loaded CI machine sends it well
    # inside the window (an 11-request burst in a 2 s window once saw it slide; an 8 s window made this test wait 8 s)
    with FakeOpenAIServer(rpm_limit=120, window_s=1.5) as server, httpx.Client(trust_env=False) as client:
        url = f"{server.base_url}/chat/completions"
        started = time.monotonic()
        admitted = _burst(client, url, 3)
        limited = client.post(url, json={"messages": MESSAGES})
        elapsed = time.monotonic() - started
        assert [r.status_code for r in admitted] == [200] * 3
        assert limited.status_code == 429
        assert limited.json()["error"]["code"] == "rate_limit_exceeded"
        wait_ms = int(limited.headers["retry-after-ms"])
        # the oldest admission arrived after `started` and leaves the window 1.5 s after it arrived
        assert 1000 * (1.5 - elapsed) - 1 <= wait_ms <= 1500
        assert int(limited.headers["Retry-After"]) == max(1, math.ceil(wait_ms / 1000))  # whole seconds, rounded up
        assert server.count_429 == 1
        time.sleep(wait_ms / 1000 + 0.05)
        assert client.post(url, json={"messages": MESSAGES}).status_code == 200  # the window slid on
        # the server thread counts an admission after it has answered it: let the last count land
        deadline = time.monotonic() + 2.0
        while server.stats()["accepted"] < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.stats()["requests"] == 5 and server.stats()["accepted"] == 4


@pytest.mark.slow  # waits on the clock for its point (the server's rate window sliding)
def test_window_slides_rather_than_resetting() -> None:
    with FakeOpenAIServer(rpm_limit=60, window_s=2.0) as server, httpx.Client(trust_env=False) as client:
        url = f"{server.base_url}/chat/completions"
        started = time.monotonic()
        assert [r.status_code for r in _burst(client, url, 2)] == [200, 200]
        time.sleep(1.2)
        # both admissions are still inside the window: no room until the first is 2 s old
        third = client.post(url, json={"messages": MESSAGES})
        waited = time.monotonic() - started
        assert third.status_code == 429
        assert 1000 * (2.0 - waited) - 1 <= int(third.headers["retry-after-ms"]) <= 800
        time.sleep(int(third.headers["retry-after-ms"]) / 1000 + 0.05)
        assert client.post(url, json={"messages": MESSAGES}).status_code == 200
        assert server.count_429 == 1


def test_default_window_is_sixty_seconds_and_also_sends_retry_after_ms() -> None:
    with FakeOpenAIServer(rpm_limit=2) as server, httpx.Client(trust_env=False) as client:
        started = time.monotonic()
        responses = _burst(client, f"{server.base_url}/chat/completions", 3)
        elapsed = time.monotonic() - started
    assert [r.status_code for r in responses] == [200, 200, 429]
    wait_ms = int(responses[2].headers["retry-after-ms"])
    assert 1000 * (RATE_WINDOW_S - elapsed) - 1 <= wait_ms <= 1000 * RATE_WINDOW_S
    assert int(responses[2].headers["Retry-After"]) == math.ceil(wait_ms / 1000)


def test_window_s_must_be_positive() -> None:
    with pytest.raises(ValueError, match="window_s"):
        FakeOpenAIServer(rpm_limit=10, window_s=0)


def test_record_false_keeps_counters_only() -> None:
    with FakeOpenAIServer(rpm_limit=300, window_s=2.0, record=False) as server, \
            httpx.Client(trust_env=False) as client:
        url = f"{server.base_url}/chat/completions"
        statuses = [r.status_code for r in _burst(client, url, 12)]
        stats = server.stats()
        assert statuses == [200] * 10 + [429, 429]
        assert stats["requests"] == 12 and stats["accepted"] == 10 and stats["count_429"] == 2
        assert stats["first_request_ts"] <= stats["last_response_ts"]
        assert server._requests == [] and server._headers == []  # nothing per request is kept
        with pytest.raises(RuntimeError, match="record=False"):
            _ = server.requests
        with pytest.raises(RuntimeError, match="record=False"):
            _ = server.headers_seen
        models = client.get(f"{server.base_url}/models").json()
        assert [m["id"] for m in models["data"]] == ["fake-judge", "m"]
        server.reset()
        assert server.stats()["requests"] == 0


def test_record_true_still_keeps_every_body() -> None:
    with FakeOpenAIServer() as server, httpx.Client(trust_env=False) as client:
        _burst(client, f"{server.base_url}/chat/completions", 3)
        assert server.stats()["requests"] == 3
        assert len(server.requests) == 3 and len(server.headers_seen) == 3


@pytest.mark.slow  # the fake server as a python process
def test_standalone_script_takes_window_s_and_no_record() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.openai_server", "--port", "0", "--rpm", "300", "--window-s", "2",
         "--no-record"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on ")
        base_url = line.removeprefix("listening on ")
        with httpx.Client(trust_env=False) as client:
            statuses = [r.status_code for r in _burst(client, f"{base_url}/chat/completions", 11)]
            stats = json.loads(client.get(f"{base_url}/_stats").content)
        assert statuses == [200] * 10 + [429]
        assert stats["requests"] == 11 and stats["count_429"] == 1
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
