"""The fake OpenAI server, over real HTTP: plain httpx/urllib and the real litellm client."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import httpx
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map from the internet

import litellm  # noqa: E402

from tests.fakes.openai_server import RATE_WINDOW_S, FakeOpenAIServer, Reply  # noqa: E402

pytestmark = pytest.mark.integration

API_KEY = "sk-test-not-real"
MESSAGES = [{"role": "system", "content": "You are a judge."}, {"role": "user", "content": "A or B?"}]
REPO_ROOT = Path(__file__).resolve().parents[2]


def _post(url: str, body: dict) -> tuple[int, dict, dict[str, str]]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read()), dict(err.headers)


def _acompletion(server: FakeOpenAIServer, **kwargs: object) -> litellm.ModelResponse:
    return asyncio.run(
        litellm.acompletion(
            model="openai/fake-judge",
            api_base=server.base_url,
            api_key=API_KEY,
            messages=MESSAGES,
            num_retries=0,
            **kwargs,
        )
    )


def test_plain_http_round_trip_returns_a_chat_completion() -> None:
    with FakeOpenAIServer() as server:
        status, body, headers = _post(
            f"{server.base_url}/chat/completions",
            {"model": "judge-x", "messages": MESSAGES, "temperature": 0},
        )
        assert status == 200
        assert headers["Content-Type"] == "application/json"
        assert body["object"] == "chat.completion"
        assert body["id"].startswith("chatcmpl-")
        assert body["model"] == "judge-x"
        assert body["choices"][0]["message"] == {"role": "assistant", "content": "[[A]]"}
        assert body["choices"][0]["finish_reason"] == "stop"
        usage = body["usage"]
        assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert server.requests == [{"model": "judge-x", "messages": MESSAGES, "temperature": 0}]
        models = httpx.get(f"{server.base_url}/models", trust_env=False).json()
        assert [m["id"] for m in models["data"]] == ["fake-judge", "judge-x"]
        assert httpx.get(f"{server.base_url}/nope", trust_env=False).status_code == 404


def test_scripted_reply_fields_are_sent() -> None:
    with FakeOpenAIServer() as server:
        server.enqueue(
            Reply(
                content=None,
                finish_reason="length",
                prompt_tokens=7,
                completion_tokens=3,
                headers={"X-Fake": "yes"},
            )
        )
        status, body, headers = _post(f"{server.base_url}/chat/completions", {"messages": MESSAGES})
    assert status == 200
    assert headers["X-Fake"] == "yes"
    assert body["choices"][0]["message"]["content"] is None
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}


def test_stream_and_bad_json_are_rejected_with_400() -> None:
    with FakeOpenAIServer() as server:
        status, body, _ = _post(f"{server.base_url}/chat/completions", {"messages": MESSAGES, "stream": True})
        assert status == 400
        assert "stream" in body["error"]["message"]
        response = httpx.post(f"{server.base_url}/chat/completions", content=b"{not json", trust_env=False)
        assert response.status_code == 400
        assert response.json()["error"]["type"] == "invalid_request_error"


def test_litellm_round_trip_sends_messages_and_params() -> None:
    with FakeOpenAIServer() as server:
        server.enqueue("[[B]]")
        response = _acompletion(server, temperature=0.0, max_tokens=16)
        seen, headers = server.requests, server.headers_seen
    assert response.choices[0].message.content == "[[B]]"
    assert response.usage.total_tokens > 0
    assert len(seen) == 1
    assert seen[0]["messages"] == MESSAGES
    assert seen[0]["temperature"] == 0.0
    assert seen[0]["max_tokens"] == 16
    assert seen[0]["model"] == "fake-judge"
    assert headers[0]["authorization"] == f"Bearer {API_KEY}"


def test_reply_policy_sees_the_request_body() -> None:
    def echo_last_message(body: dict) -> str:
        return body["messages"][-1]["content"].upper()

    with FakeOpenAIServer(echo_last_message) as server:
        response = _acompletion(server)
    assert response.choices[0].message.content == "A OR B?"


@pytest.mark.parametrize(
    ("status", "exc_type"),
    [
        (500, litellm.InternalServerError),
        (429, litellm.RateLimitError),
        (401, litellm.AuthenticationError),
        (400, litellm.BadRequestError),
    ],
)
def test_scripted_error_status_maps_to_litellm_exception(status: int, exc_type: type) -> None:
    with FakeOpenAIServer() as server:
        server.enqueue(Reply(status=status, error_message="scripted failure"))
        with pytest.raises(exc_type) as info:
            _acompletion(server)
        assert len(server.requests) == 1  # num_retries=0: no hidden retries anywhere in the stack
    assert info.value.status_code == status


def test_rpm_limit_answers_429_with_retry_after() -> None:
    with FakeOpenAIServer(rpm_limit=3) as server, httpx.Client(trust_env=False) as client:
        url = f"{server.base_url}/chat/completions"
        started = time.monotonic()
        statuses = [client.post(url, json={"messages": MESSAGES}).status_code for _ in range(3)]
        limited = client.post(url, json={"messages": MESSAGES})
        elapsed = time.monotonic() - started
        assert statuses == [200, 200, 200]
        assert limited.status_code == 429
        # the wait until the first request leaves the 60 s window, in whole seconds rounded up
        assert math.ceil(RATE_WINDOW_S - elapsed) <= int(limited.headers["Retry-After"]) <= RATE_WINDOW_S
        assert limited.json()["error"]["code"] == "rate_limit_exceeded"
        assert server.count_429 == 1
        assert len(server.requests) == 4
        server.reset()
        assert client.post(url, json={"messages": MESSAGES}).status_code == 200
        assert server.count_429 == 0


def test_rpm_limit_surfaces_as_litellm_rate_limit_error() -> None:
    with FakeOpenAIServer(rpm_limit=1) as server:
        _acompletion(server)
        with pytest.raises(litellm.RateLimitError):
            _acompletion(server)
        assert server.count_429 == 1


def test_delay_is_honoured() -> None:
    delay = 0.3
    with FakeOpenAIServer(lambda _body: Reply(content="[[A]]", delay_s=delay)) as server:
        started = time.monotonic()
        response = _acompletion(server)
        elapsed = time.monotonic() - started
    assert response.choices[0].message.content == "[[A]]"
    assert elapsed >= delay


def test_many_concurrent_litellm_calls_each_get_their_own_answer() -> None:
    def echo(body: dict) -> Reply:
        return Reply(content=body["messages"][-1]["content"], delay_s=0.05)

    async def run_all(server: FakeOpenAIServer, n: int) -> list[str]:
        calls = [
            litellm.acompletion(
                model="openai/fake-judge",
                api_base=server.base_url,
                api_key=API_KEY,
                messages=[{"role": "user", "content": f"item-{i}"}],
                num_retries=0,
            )
            for i in range(n)
        ]
        return [r.choices[0].message.content for r in await asyncio.gather(*calls)]

    with FakeOpenAIServer(echo) as server:
        contents = asyncio.run(run_all(server, 64))
        assert len(server.requests) == 64
    assert contents == [f"item-{i}" for i in range(64)]


def test_stop_releases_the_port_and_is_idempotent() -> None:
    server = FakeOpenAIServer().start()
    url = server.base_url
    server.stop()
    server.stop()
    with pytest.raises(RuntimeError):
        _ = server.base_url
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{url}/models", trust_env=False, timeout=2)


@pytest.mark.slow  # the fake server as a python process, sent SIGTERM
def test_standalone_script_serves_until_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.openai_server", "--port", "0", "--reply", "[[B]]"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on http://127.0.0.1:") and line.endswith("/v1")
        base_url = line.removeprefix("listening on ")
        status, body, _ = _post(f"{base_url}/chat/completions", {"model": "m", "messages": MESSAGES})
        assert status == 200
        assert body["choices"][0]["message"]["content"] == "[[B]]"
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sporadic_429s_are_a_seeded_share_whatever_the_rate() -> None:
    def statuses(seed: int) -> list[int]:
        with FakeOpenAIServer(sporadic_429=0.1, sporadic_seed=seed) as server, \
                httpx.Client(trust_env=False) as client:
            url = f"{server.base_url}/chat/completions"
            answers = [client.post(url, json={"messages": MESSAGES}) for _ in range(200)]
            assert server.count_429 == sum(a.status_code == 429 for a in answers)
            assert all(a.headers["Retry-After"] == "1" for a in answers if a.status_code == 429)
            return [a.status_code for a in answers]

    first = statuses(7)
    assert set(first) == {200, 429} and 5 <= first.count(429) <= 40  # ~10% of 200, one at a time: no rate limit
    assert statuses(7) == first  # seeded: the same requests are refused again
