"""An OpenAI-compatible fake chat-completions server for tests and benchmarks.

Stdlib only; binds 127.0.0.1; serves ``POST /v1/chat/completions`` (non-streaming) and ``GET /v1/models``
from a FIFO of scripted replies, then a reply policy; simulates latency, error statuses and an rpm limit
over a sliding window (60 s by default; ``window_s=1`` is how providers that enforce rpm per second behave).
It also speaks the OpenAI Files and Batches protocol (:mod:`tests.fakes.batch_api`, its knobs on ``batches``),
a batch's rows answered by the same reply logic as a live call. For benchmarks it also serves ``GET /v1/_stats``
(request counts and wall-clock stamps) and ``POST /v1/_reset``,
and can keep counters only (``record=False``), so a million-request run does not grow its memory.
Standalone: ``python -m tests.fakes.openai_server --port 8765 [--latency-ms 200] [--rpm 600] [--window-s 1]
[--no-record] [--reply X] [--sporadic-429 0.1 --sporadic-seed 0]``.
"""

from __future__ import annotations

import argparse
import collections
import copy
import hashlib
import json
import logging
import math
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from tests.fakes.batch_api import BatchAPI

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
DEFAULT_MODEL = "fake-judge"
RATE_WINDOW_S = 60.0
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "requests",
}


@dataclass(frozen=True)
class Reply:
    """One scripted answer of the fake server.

    Attributes:
        content: The assistant message content; None sends ``"content": null``.
        status: HTTP status; anything but 200 sends an OpenAI-style error body.
        delay_s: Seconds to sleep in the handler thread before answering.
        headers: Extra response headers, e.g. ``{"Retry-After": "1"}``.
        finish_reason: The ``finish_reason`` of every choice.
        prompt_tokens: Reported prompt tokens; None estimates ``len(prompt text) // 4 + 1``.
        completion_tokens: Reported completion tokens; None estimates from the content likewise.
        error_message: The ``error.message`` of the error body for non-200 statuses.
        no_choices: Send a 200 with ``"choices": []`` (and the usage), as providers do when a filter ate the answer.
        usage: Send this as the body's ``usage`` verbatim (e.g. ``{"prompt_tokens": -50}`` or ``"lots"``) instead of
            the counts above: a provider's malformed usage.
        body_bytes: Send these bytes as the body verbatim, whatever the status (invalid UTF-8, a 200,000-deep JSON
            array: :func:`nested_body`); ``content`` and the usage are not used.
        trickle_s: Send the body one byte at a time, this many seconds apart (a body that never seems to end).
    """

    content: str | None = ""
    status: int = 200
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error_message: str = ""
    no_choices: bool = False
    usage: Any = None
    body_bytes: bytes | None = None
    trickle_s: float = 0.0


def nested_body(depth: int = 200_000) -> bytes:
    """A body of ``depth`` nested JSON arrays: valid JSON no recursive parser can read."""
    return b"[" * depth + b"]" * depth


ReplyPolicy = Callable[[dict], "Reply | str"]


def _default_reply(_body: dict) -> Reply:
    return Reply(content="[[A]]")


def verdict_by_prompt(body: dict) -> Reply:
    """A pairwise verdict that depends only on the prompt: the same answer whatever the order of arrival, so a run
    killed and resumed can be compared byte for byte with one that was not."""
    digest = hashlib.sha256(body["messages"][-1]["content"].encode()).digest()
    return Reply(content=f"Verdict: {'[[A]]' if digest[0] % 3 else '[[B]]'}")


def slow_verdict_by_prompt(body: dict) -> Reply:
    """:func:`verdict_by_prompt` 0.15 s late: a run slow enough to be killed mid-way."""
    return replace(verdict_by_prompt(body), delay_s=0.15)


def _estimate_tokens(text: str) -> int:
    return len(text) // 4 + 1


def _prompt_text(body: dict) -> str:
    """Concatenates the text of all messages, including list-of-parts content."""
    parts: list[str] = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "\n".join(parts)


def _error_body(status: int, message: str) -> dict:
    """Builds ``{"error": {"message", "type", "param", "code"}}`` as OpenAI sends it."""
    error_type = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    code = "rate_limit_exceeded" if status == 429 else error_type
    return {
        "error": {
            "message": message or f"fake error {status}",
            "type": error_type,
            "param": None,
            "code": code,
        }
    }


def _completion_body(request: dict, reply: Reply) -> dict:
    """Builds a ``chat.completion`` answering ``request`` (model echoed, ``n`` choices) with ``reply``."""
    n = request.get("n") or 1
    prompt_tokens = reply.prompt_tokens
    if prompt_tokens is None:
        prompt_tokens = _estimate_tokens(_prompt_text(request))
    completion_tokens = reply.completion_tokens
    if completion_tokens is None:
        completion_tokens = _estimate_tokens(reply.content or "") * n
    choices = [
        {
            "index": i,
            "message": {"role": "assistant", "content": reply.content},
            "logprobs": None,
            "finish_reason": reply.finish_reason,
        }
        for i in range(0 if reply.no_choices else n)
    ]
    usage: Any = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model") or DEFAULT_MODEL,
        "choices": choices,
        "usage": reply.usage if reply.usage is not None else usage,
    }


class _Handler(BaseHTTPRequestHandler):
    """Routes requests to the owning FakeOpenAIServer; keep-alive with exact Content-Length."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, the body waits for the client's delayed ACK
    # (~40 ms per answer, measured in benchmarks/README.md). Real servers set TCP_NODELAY too.
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Stays quiet: the stdlib default writes every request to stderr."""

    def do_GET(self) -> None:
        """Serves ``/v1/models`` and ``/v1/_stats``; everything else is 404."""
        path = urlsplit(self.path).path.rstrip("/")
        if self._batch_api("GET", path, b""):
            return
        if path == "/v1/models":
            self._send_json(200, self.server.fake._models_body())
        elif path == "/v1/_stats":
            self._send_json(200, self.server.fake.stats())
        else:
            self._send_json(404, _error_body(404, f"unknown path {self.path}"))

    def do_POST(self) -> None:
        """Serves ``/v1/chat/completions`` and ``/v1/_reset``; everything else is 404."""
        arrived = time.time()
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = urlsplit(self.path).path.rstrip("/")
        if path == "/v1/_reset":
            self.server.fake.reset()
            self._send_json(200, {"reset": True})
            return
        if self._batch_api("POST", path, raw):
            return
        if path != "/v1/chat/completions":
            self._send_json(404, _error_body(404, f"unknown path {self.path}"))
            return
        try:
            body = json.loads(raw or b"null")
        except ValueError as exc:
            self._send_json(400, _error_body(400, f"request body is not JSON: {exc}"))
            return
        if not isinstance(body, dict):
            self._send_json(400, _error_body(400, "request body must be a JSON object"))
            return
        status, payload, headers = self.server.fake._answer(body, dict(self.headers))
        self._send_json(status, payload, headers)
        self.server.fake._stamp(arrived, status)

    def _batch_api(self, method: str, path: str, raw: bytes) -> bool:
        """Serve a Files/Batches request (tests.fakes.batch_api); False when ``path`` is not one."""
        served = self.server.fake.batches.handle(method, path, raw, self.headers.get("Content-Type") or "")
        if served is None:
            return False
        status, payload = served
        if isinstance(payload, bytes):  # a file's content
            payload = Reply(body_bytes=payload)
        self._send_json(status, payload)
        return True

    def _send_json(self, status: int, payload: dict | Reply, headers: dict[str, str] | None = None) -> None:
        trickle_s = 0.0
        if isinstance(payload, Reply):  # a scripted fault: the body's bytes, how fast they go out
            data, trickle_s = payload.body_bytes or b"", payload.trickle_s
        else:
            data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if trickle_s <= 0:
            self.wfile.write(data)
            return
        for i in range(len(data)):
            self.wfile.write(data[i:i + 1])
            self.wfile.flush()
            time.sleep(trickle_s)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # the stdlib default of 5 drops bursts of concurrent connects

    def __init__(self, port: int, fake: FakeOpenAIServer) -> None:
        super().__init__((HOST, port), _Handler)
        self.fake = fake

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Logs instead of printing a traceback, e.g. when a client hangs up during delay_s."""
        logger.debug("fake OpenAI server: error serving %s", client_address, exc_info=True)


class FakeOpenAIServer:
    """A scriptable OpenAI-compatible server on 127.0.0.1, run in a background thread.

    Use as a context manager (starts on enter, stops on exit) or via start()/stop().

    Args:
        reply: Called with each parsed request body once the scripted FIFO is empty; may return a
            Reply or a plain str (meaning ``Reply(content=str)``). None always answers "[[A]]".
        rpm_limit: Requests per minute; None means unlimited. The server admits
            ``window_limit(rpm_limit, window_s)`` requests per sliding ``window_s`` window; beyond it, it
            answers 429 with ``Retry-After`` (whole seconds, rounded up, at least 1) and ``retry-after-ms``
            (the milliseconds until the oldest admission leaves the window) and counts it in ``count_429``.
        window_s: Length of the sliding rate window in seconds (60 by default).
        record: Keep a copy of every request body and its headers (``requests``, ``headers_seen``). False
            keeps counters only, so memory stays flat however many requests arrive; ``stats()`` still works.
        port: Port to bind; 0 picks a free ephemeral port.
        sporadic_429: Share of chat requests answered 429 with ``Retry-After: 1`` whatever the rate (overload or a
            flaky gateway, not a rate limit), drawn from ``random.Random(sporadic_seed)``; counted in ``count_429``.
        sporadic_seed: Seed of those draws (the same seed rejects the same request numbers).
    """

    def __init__(
        self,
        reply: ReplyPolicy | None = None,
        *,
        rpm_limit: int | None = None,
        window_s: float = RATE_WINDOW_S,
        record: bool = True,
        port: int = 0,
        sporadic_429: float = 0.0,
        sporadic_seed: int = 0,
    ) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s must be > 0, got {window_s}")
        if not 0.0 <= sporadic_429 <= 1.0:
            raise ValueError(f"sporadic_429 must be in [0, 1], got {sporadic_429}")
        self._sporadic_429 = sporadic_429
        self._sporadic_seed = sporadic_seed
        self._policy = reply or _default_reply
        self._rpm_limit = rpm_limit
        self._window_s = float(window_s)
        self._window_limit = window_limit(rpm_limit, window_s) if rpm_limit is not None else None
        self._record_bodies = record
        self._port = port
        self._lock = threading.Lock()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.batches = BatchAPI(self._batch_answer)  # not cleared by reset(): a batch outlives the runs around it
        self.reset()

    @property
    def reply(self) -> ReplyPolicy:
        """The reply policy consulted once the scripted FIFO is empty; assignable while running."""
        return self._policy

    @reply.setter
    def reply(self, policy: ReplyPolicy | None) -> None:
        self._policy = policy or _default_reply

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> FakeOpenAIServer:
        """Binds the socket and serves in a daemon thread; returns self."""
        if self._httpd is None:
            self._httpd = _HTTPServer(self._port, self)
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="fake-openai-server",
                daemon=True,
            )
            self._thread.start()
            logger.debug("fake OpenAI server listening on %s", self.base_url)
        return self

    def stop(self) -> None:
        """Shuts the server down and joins its thread; safe to call twice."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()
        self._httpd, self._thread = None, None

    @property
    def base_url(self) -> str:
        """The API base, ``http://127.0.0.1:<port>/v1``, as litellm's ``api_base`` wants it."""
        if self._httpd is None:
            raise RuntimeError("FakeOpenAIServer is not started")
        return f"http://{HOST}:{self._httpd.server_address[1]}/v1"

    @property
    def requests(self) -> list[dict]:
        """Copies of every chat-completion request body received, rate-limited ones included.

        Raises:
            RuntimeError: If the server was made with ``record=False`` (use ``stats()["requests"]``).
        """
        self._require_recording()
        with self._lock:
            return copy.deepcopy(self._requests)

    @property
    def headers_seen(self) -> list[dict[str, str]]:
        """Request headers (names lower-cased), one dict per entry of ``requests``.

        Raises:
            RuntimeError: If the server was made with ``record=False``.
        """
        self._require_recording()
        with self._lock:
            return copy.deepcopy(self._headers)

    def _require_recording(self) -> None:
        if not self._record_bodies:
            raise RuntimeError("this FakeOpenAIServer keeps counters only (record=False); use stats()")

    @property
    def count_429(self) -> int:
        """How many requests the rpm limit rejected (scripted 429 replies are not counted)."""
        with self._lock:
            return self._count_429

    def enqueue(self, *replies: Reply | str) -> None:
        """Appends scripted replies, consumed in order before the reply policy is consulted."""
        with self._lock:
            self._queue.extend(replies)

    def reset(self) -> None:
        """Forgets scripted replies, recorded requests, seen models, the rate window and counters."""
        with self._lock:
            self._queue: collections.deque[Reply | str] = collections.deque()
            self._requests: list[dict] = []
            self._headers: list[dict[str, str]] = []
            self._received = 0
            self._admitted: collections.deque[float] = collections.deque()
            self._count_429 = 0
            self._sporadic_rng = random.Random(self._sporadic_seed)
            self._accepted = 0
            self._first_request_ts: float | None = None
            self._last_response_ts: float | None = None
            self._models: dict[str, None] = {DEFAULT_MODEL: None}

    def stats(self) -> dict:
        """Counters for benchmarks, as ``GET /v1/_stats`` serves them.

        ``requests``: chat-completion requests received (rate-limited ones included); ``accepted``: those
        answered 200; ``count_429``: those the rpm limit rejected; ``first_request_ts``: ``time.time()`` when
        the earliest answered request arrived; ``last_response_ts``: when the latest answer was written
        (both None before the first answer). Cleared by :meth:`reset`. ``batch_api_requests`` and
        ``batches_created``: the Files and Batches API's, since the server started (a batch outlives a reset).
        """
        with self._lock:
            return {
                "requests": self._received,
                "accepted": self._accepted,
                "count_429": self._count_429,
                "first_request_ts": self._first_request_ts,
                "last_response_ts": self._last_response_ts,
                "batch_api_requests": self.batches.requests,
                "batches_created": self.batches.created,
            }

    def _stamp(self, arrived: float, status: int) -> None:
        """Records one answered chat request: its arrival time and the time its answer was written."""
        done = time.time()
        with self._lock:
            self._accepted += status == 200
            if self._first_request_ts is None or arrived < self._first_request_ts:
                self._first_request_ts = arrived
            if self._last_response_ts is None or done > self._last_response_ts:
                self._last_response_ts = done

    def _models_body(self) -> dict:
        """The ``GET /v1/models`` list: "fake-judge" plus every model name seen in a request."""
        with self._lock:
            names = list(self._models)
        return {
            "object": "list",
            "data": [{"id": n, "object": "model", "created": 0, "owned_by": "fake"} for n in names],
        }

    def _answer(self, body: dict, headers: dict[str, str]) -> tuple[int, dict | Reply, dict[str, str]]:
        """Records a chat request; returns (status, body, extra headers) after sleeping delay_s; the body is the Reply
        itself when its bytes are scripted (``body_bytes``) or trickle (``trickle_s``)."""
        self._record(body, headers)
        if body.get("stream"):
            return 400, _error_body(400, "stream=true is not supported here; send stream=false"), {}
        if self._sporadic():
            headers = {"Retry-After": "1"}
            return 429, _error_body(429, "The server is overloaded; please try again in 1s."), headers
        wait_s = self._admit()
        if wait_s is not None:
            retry_after = max(1, math.ceil(wait_s))
            message = (
                f"Rate limit reached on requests per min (RPM): Limit {self._rpm_limit} "
                f"({self._window_limit} per {self._window_s:g} s). Please try again in {retry_after}s."
            )
            headers = {"Retry-After": str(retry_after), "retry-after-ms": str(max(1, math.ceil(wait_s * 1000)))}
            return 429, _error_body(429, message), headers
        try:
            reply = self._next_reply(body)
        except Exception as exc:  # a broken test policy must surface as a 500, not a dropped socket
            logger.exception("reply policy failed")
            return 500, _error_body(500, f"reply policy raised {exc!r}"), {}
        if reply.delay_s > 0:
            time.sleep(reply.delay_s)
        if reply.body_bytes is not None:
            return reply.status, reply, dict(reply.headers)
        if reply.trickle_s > 0:
            payload = _error_body(reply.status, reply.error_message) if reply.status != 200 else _completion_body(
                body, reply)
            return reply.status, replace(reply, body_bytes=json.dumps(payload).encode()), dict(reply.headers)
        if reply.status != 200:
            return reply.status, _error_body(reply.status, reply.error_message), dict(reply.headers)
        return 200, _completion_body(body, reply), dict(reply.headers)

    def _batch_answer(self, body: dict) -> tuple[int, dict]:
        """A batch row's (status, body): the reply logic of a live call, without its rate window or recording."""
        reply = self._next_reply(body)
        if reply.status != 200:
            return reply.status, _error_body(reply.status, reply.error_message)
        return 200, _completion_body(body, reply)

    def _record(self, body: dict, headers: dict[str, str]) -> None:
        with self._lock:
            self._received += 1
            if self._record_bodies:
                self._requests.append(copy.deepcopy(body))
                self._headers.append({k.lower(): v for k, v in headers.items()})
            if isinstance(body.get("model"), str):
                self._models.setdefault(body["model"], None)

    def _sporadic(self) -> bool:
        """Whether this request draws a sporadic 429 (``sporadic_429``), counted in ``count_429``."""
        if self._sporadic_429 <= 0.0:
            return False
        with self._lock:
            if self._sporadic_rng.random() >= self._sporadic_429:
                return False
            self._count_429 += 1
            return True

    def _admit(self) -> float | None:
        """Admits a request into the rate window; if it is over the limit, returns the seconds until the
        oldest admission leaves the window (always > 0)."""
        if self._window_limit is None:
            return None
        now = time.monotonic()
        with self._lock:
            while self._admitted and now - self._admitted[0] >= self._window_s:
                self._admitted.popleft()
            if len(self._admitted) < self._window_limit:
                self._admitted.append(now)
                return None
            self._count_429 += 1
            return self._window_s - (now - self._admitted[0]) if self._admitted else self._window_s

    def _next_reply(self, body: dict) -> Reply:
        with self._lock:
            scripted = self._queue.popleft() if self._queue else None
        reply = scripted if scripted is not None else self._policy(body)
        return Reply(content=reply) if isinstance(reply, str) else reply


def window_limit(rpm: int, window_s: float) -> int:
    """Requests admitted per sliding window of ``window_s`` seconds at ``rpm``: ``rpm * window_s / 60``
    rounded down, at least 1 for any positive rpm (600 rpm over a 1 s window is 10); 0 rpm admits none."""
    if rpm <= 0:
        return 0
    # the epsilon keeps 7.000000000000001 and 6.999999999999999 both at 7
    return max(1, math.floor(rpm * window_s / 60.0 + 1e-9))


def main(argv: list[str] | None = None) -> None:
    """Runs the fake server until SIGINT or SIGTERM (for benchmarks)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay before every reply")
    parser.add_argument("--rpm", type=int, default=None, help="requests per minute before 429")
    parser.add_argument("--window-s", type=float, default=RATE_WINDOW_S,
                        help="sliding rate window in seconds: at most rpm * window_s / 60 requests in any window")
    parser.add_argument("--no-record", action="store_true",
                        help="keep counters only, not every request body (flat memory for long runs)")
    parser.add_argument("--reply", default="[[A]]", help="content of every reply")
    parser.add_argument("--sporadic-429", type=float, default=0.0,
                        help="share of requests answered 429 (Retry-After: 1) whatever the rate")
    parser.add_argument("--sporadic-seed", type=int, default=0, help="seed of the sporadic 429 draws")
    args = parser.parse_args(argv)
    reply = Reply(content=args.reply, delay_s=args.latency_ms / 1000.0)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with FakeOpenAIServer(lambda _body: reply, rpm_limit=args.rpm, window_s=args.window_s,
                          record=not args.no_record, port=args.port, sporadic_429=args.sporadic_429,
                          sporadic_seed=args.sporadic_seed) as server:
        print(f"listening on {server.base_url}", flush=True)
        while not stop.wait(0.5):
            pass


if __name__ == "__main__":
    main()
