"""The module that makes a judge call through litellm: one judge call in, one JudgeResponse out.

Calls are paced by the judge's rpm/tpm limiter and retried with exponential backoff and jitter on
rate-limit, timeout, connection and 5xx errors, honouring Retry-After up to ``judge.max_retry_after_s`` (one beyond
``judge.retry_rate_limited_s`` fails its call at once; a wait over
10 s is logged with its end: :class:`runner.llm.retry.LongWaits`); ``judge.timeout_s`` is a deadline for the whole
call, connect to last byte. A 2xx is paid for: never retried (unless ``judge.retry_malformed`` and it holds no
answer), whatever its body holds (:func:`runner.llm.responses.malformed`). Authentication and bad-request
errors are not retried. Errors are classified by exception type (litellm's exceptions subclass
openai's), never by message text, and come back inside the JudgeResponse: one failed call never
stops the run. What comes back is read into a JudgeResponse by :mod:`runner.llm.responses`.


A judge with ``replicas`` sends its calls through a litellm Router (:mod:`runner.llm.failover`); the
replay and recorded judges are litellm custom providers (:mod:`runner.llm.providers`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import weakref
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from importlib import metadata
from typing import TYPE_CHECKING, Any, cast

import litellm
import openai

from runner.core.config import JudgeConfig
from runner.core.types import JudgeResponse, Message, Secret
from runner.llm import providers, recorded, replicas
from runner.llm.call_slot import before_resend
from runner.llm.failover import build_router, retryable, undecodable_body
from runner.llm.pacing import RateLimiter, estimate_tokens
from runner.llm.responses import CallTally, RawBody, answer, failure, malformed, served_by
from runner.llm.retry import LongWaits, RetryPolicy, retry_after_of
from runner.storage.keys import repeat_params

if TYPE_CHECKING:
    from litellm.types.llms.openai import AllMessageValues

log = logging.getLogger(__name__)

# litellm providers for an OpenAI-compatible server at api_base. hosted_vllm/ is litellm's path to one without the
# OpenAI SDK in between; `make bench`'s throughput scenario measures both (judge=local_openai vs local_vllm).
LOCAL_PREFIXES = ("openai/", "hosted_vllm/")


def configure() -> None:
    """Set litellm's process-wide settings once (called from the CLI entry point only)."""
    litellm.telemetry = False
    litellm.suppress_debug_info = True
    litellm.drop_params = True  # providers that lack e.g. `seed` get the call without it, not a 400
    litellm.custom_provider_map = providers.custom_provider_map()


async def release_loop_clients() -> None:
    """Close and forget the HTTP clients litellm cached for the running event loop, before it ends.

    litellm keys its cached clients by the id of the loop that made them (``LLMClientCache``); a stage's loop ends with
    its ``asyncio.run``, and a later loop (the next stage, a sweep's next job in this process) may get the same id and
    be handed a client whose connections belong to the closed one. Closed here, on their own loop, they are not.
    """
    cache = getattr(litellm, "in_memory_llm_clients_cache", None)
    entries = getattr(cache, "cache_dict", None)
    if cache is None or not isinstance(entries, dict):
        return
    suffix = f"-{id(asyncio.get_running_loop())}"
    for key in [k for k in entries if isinstance(k, str) and k.endswith(suffix)]:
        client = entries.get(key)
        cache.delete_cache(key)
        close = getattr(client, "aclose", None) or getattr(client, "close", None)
        try:
            closing = close() if callable(close) else None
            if asyncio.iscoroutine(closing):
                await closing
        except Exception:  # noqa: BLE001 - a client that fails to close is dropped all the same
            log.debug("closing litellm's cached client %s failed", type(client).__name__, exc_info=True)


def litellm_version() -> str:
    """The installed litellm version, recorded with every run."""
    return metadata.version("litellm")


def supports_json_schema(model: str) -> bool:
    """Whether litellm's model map says ``model`` accepts a JSON-schema response_format."""
    try:
        return bool(litellm.supports_response_schema(model=model))
    except litellm.exceptions.NotFoundError:
        return False


def count_tokens(model: str, messages: tuple[Message, ...]) -> int:
    """Prompt tokens of ``messages`` for ``model`` (litellm's tokenizer choice; for a model litellm cannot
    place, such as a replay recording, its default tiktoken encoding)."""
    payload = [{"role": m.role, "content": m.content} for m in messages]
    try:
        return litellm.token_counter(model=model, messages=payload)
    except litellm.BadRequestError:
        return litellm.token_counter(messages=payload)


def price(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Dollars for that many tokens from litellm's (local) cost map; None when the model is unpriced."""
    if model not in litellm.model_cost and model.split("/", 1)[-1] not in litellm.model_cost:
        return None
    try:
        prompt_usd, completion_usd = litellm.cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    except litellm.BadRequestError:  # a model litellm cannot place with a provider (e.g. replay/gpt-4)
        return None
    except Exception as exc:  # noqa: BLE001 - litellm raises a bare Exception for a model it places but cannot
        # price: replay/gpt-4 once the replay provider is registered in this process (an earlier run)
        if "isn't mapped yet" not in str(exc):
            raise
        return None
    return prompt_usd + completion_usd


class JudgeClient:
    """Sends rendered messages to one judge deployment, or through a Router to the judge's replicas.

    A client with replicas owns a Router, which hooks itself into litellm's callback lists; :meth:`close`
    (or the client being garbage-collected) unhooks it.

    Args:
        judge: The judge's config (model string, api_base, decoding parameters, limits, retries, replicas).
        api_keys: API-key variable name -> key, as the CLI read them; the judge uses ``judge.api_key_env``'s,
            each replica its own ``api_key_env``'s or else the judge's.
        limiter: The judge's rate limiter, shared by every job of this judge in the process.
        response_format: A response_format to request (JSON schema from the rubric), or None.
        seed: Seeds the backoff jitter, so a rerun waits the same way.
    """

    def __init__(self, judge: JudgeConfig, api_keys: Mapping[str, Secret], limiter: RateLimiter | None = None,
                 response_format: dict[str, Any] | None = None, seed: int = 0) -> None:
        self.judge = judge
        self._api_key = api_keys.get(judge.api_key_env) if judge.api_key_env else None
        self._secrets = replicas.judge_secrets(judge, api_keys)
        self._router = build_router(judge, api_keys) if judge.replicas else None
        self._discard = weakref.finalize(self, self._router.discard) if self._router is not None else None
        self.replica_calls: Counter[str] = Counter()  # api_base -> calls it answered (replicas only)
        self._limiter = limiter
        self._retry = RetryPolicy(max_retries=judge.max_retries, base_s=judge.retry_base_s, max_s=judge.retry_max_s)
        self._rng = random.Random(seed)
        self.long_waits = LongWaits(judge.name)
        self.note_kinds: Counter[str] = Counter()  # kind of a response's note -> how many were logged
        # every call's attempts after its first (retries, 429s sent again, retry_malformed) as each is decided (and
        # logged), and 429s answered, also those of a call that never finished (cancelled when the run aborted): what
        # a partial run's summary counts
        self.resent = self.rate_limited = 0
        self.beyond_patience = 0  # 429s given up at once: their Retry-After was beyond judge.retry_rate_limited_s
        self.decoding_params: dict[str, Any] = {"temperature": judge.temperature, "max_tokens": judge.max_tokens}
        if judge.seed is not None:
            self.decoding_params["seed"] = judge.seed
        if response_format is not None:
            self.decoding_params["response_format"] = response_format

    def close(self) -> None:
        """Unhook the Router (if any) from litellm's callback lists; the client must not be used after."""
        if self._discard is not None:
            self._discard()

    @property
    def replica_failures(self) -> Mapping[str, int]:
        """api_base -> connection, timeout, 429 and 5xx errors of that replica, each failed over to another
        replica when one was left untried in that attempt (replicas only)."""
        return self._router.failures if self._router is not None else {}

    async def _send(self, payload: list[dict[str, str]], repeat: int, body: RawBody) -> Any:
        params = {**repeat_params(self.decoding_params, repeat), "logger_fn": body}
        if self._router is None:
            return await litellm.acompletion(messages=payload, **self._kwargs(params))
        # the Router adds each replica's api_base and key; the model group is the judge's name. cast: litellm types
        # messages as one TypedDict per role; our role/content dicts are those messages.
        messages = cast("list[AllMessageValues]", payload)
        return await self._router.acompletion(model=self.judge.name, messages=messages, timeout=self.judge.timeout_s,
                                              num_retries=0, **params)

    def _kwargs(self, params: Mapping[str, Any]) -> dict[str, Any]:
        j = self.judge
        kwargs: dict[str, Any] = {"model": j.model, "timeout": j.timeout_s, "num_retries": 0, **params}
        if j.api_base:
            kwargs["api_base"] = j.api_base
        if recorded.is_recorded(j.model):
            # the recordings file and which call this is, for providers.RecordedProvider (litellm hands it metadata)
            kwargs["metadata"] = {providers.RECORDED_METADATA: {"path": j.path, "key": recorded.CURRENT_CALL.get()}}
        if self._api_key is not None:
            kwargs["api_key"] = self._api_key.reveal()
        elif j.model.startswith(LOCAL_PREFIXES) and j.api_base:
            # OpenAI-compatible local servers usually take no key, but the OpenAI SDK insists on one.
            kwargs["api_key"] = "no-key"
        return kwargs

    def _error(self, exc: Exception, started: float, attempts: int, limited: int) -> JudgeResponse:
        return failure(exc, self._secrets, started, attempts, limited)

    async def complete(self, messages: tuple[Message, ...], repeat: int = 0) -> JudgeResponse:
        """Make one judge call, with pacing and retries; never raises for provider errors.

        Repeat ``repeat`` of a request is sent with ``seed + repeat`` when the judge has a seed (see
        :func:`runner.storage.keys.repeat_params`), so repeats are independent samples. A 200 without a usable
        answer is paid for: it comes back unscored (``empty_choices``) with its tokens, or is sent again when
        ``judge.retry_malformed`` says so, its tokens and cost added to the call's.
        """
        payload = [{"role": m.role, "content": m.content} for m in messages]
        estimate = estimate_tokens(sum(len(m.content) for m in messages), self.judge.max_tokens)
        call = CallTally(started=time.perf_counter())
        while True:
            call.attempts += 1
            if self._limiter is not None:
                await self._limiter.acquire(estimate)
            if call.attempts > 1:
                stopped = self._stopped(call)  # the stage stopped sending (the run directory is full)
                if stopped is not None:
                    return stopped
            body = RawBody()
            try:
                resp = await self._within_deadline(self._send(payload, repeat, body))
            except openai.APIError as exc:
                final = await self._after_error(exc, body, call, estimate)
                if final is None:
                    continue
                return self._noted(final)
            return self._noted(call.total(self._response(resp, call.started, call.attempts, call.limited, estimate)))

    def _stopped(self, call: CallTally) -> JudgeResponse | None:
        """Before a retry: raises what stops the stage from sending (runner.llm.call_slot.before_resend) unless a
        malformed answer was paid on the way (retry_malformed), which is then the call's response, to be kept."""
        try:
            before_resend()
        except Exception:
            if not call.spent:
                raise
            return self._noted(call.total(call.spent.pop()))
        return None

    def _noted(self, response: JudgeResponse) -> JudgeResponse:
        """``response``, its notes logged: each kind's first as a warning, the rest at DEBUG (a provider that always
        sends a bad usage would otherwise log every call)."""
        for note in response.notes:
            kind = note.split(":", 1)[0]
            self.note_kinds[kind] += 1
            log.log(logging.WARNING if self.note_kinds[kind] == 1 else logging.DEBUG,
                    "%s: an answer kept with a note (journaled with it): %s", self.judge.name, note)
        return response

    async def _within_deadline(self, send: Any) -> Any:
        """``send`` awaited for at most ``judge.timeout_s`` from connect to last byte (litellm's timeout bounds each
        read only: a body trickling a byte at a time would never end); past it the call fails as a litellm Timeout,
        retried as one."""
        try:
            return await asyncio.wait_for(send, self.judge.timeout_s)
        except asyncio.TimeoutError:  # TimeoutError itself from Python 3.11 on
            raise litellm.Timeout(message=f"no complete answer within judge.timeout_s={self.judge.timeout_s:g} s "
                                          "(the deadline of the whole call)", model=self.judge.model,
                                  llm_provider="judgesweep") from None

    async def _after_error(self, exc: openai.APIError, body: RawBody, call: CallTally,
                           estimate: int) -> JudgeResponse | None:
        """The call's response when ``exc`` ends it, None once it is worth another attempt (after the backoff)."""
        undecodable = undecodable_body(exc)
        if body.text is not None or undecodable is not None:
            # the provider answered 2xx and litellm refused (or could not read) the body: paid all the same
            return self._malformed(body.text, call, estimate, undecodable)
        retry_after = None
        if isinstance(exc, litellm.RateLimitError):
            call.limited += 1
            self.rate_limited += 1
            retry_after = retry_after_of(exc)
            if retry_after is not None and retry_after > self.judge.retry_rate_limited_s:
                return call.total(self._beyond_patience(exc, retry_after, call))
            if retry_after is not None and retry_after > self.judge.max_retry_after_s:
                log.debug("%s: Retry-After %.0f s cut to judge.max_retry_after_s=%g", self.judge.name, retry_after,
                          self.judge.max_retry_after_s)
                retry_after = self.judge.max_retry_after_s
            if self._limiter is not None:
                if retry_after is not None:
                    self.long_waits.note(retry_after)  # the limiter holds every call back that long
                self._limiter.penalize(retry_after)
                if self._progressing():
                    self.resent += 1
                    return None  # the limiter now holds this call back (pause, learned rate): no own backoff
                return call.total(self._error(exc, call.started, call.attempts, call.limited))
        if not retryable(exc) or call.attempts - call.limited > self._retry.max_retries:
            return call.total(self._error(exc, call.started, call.attempts, call.limited))
        delay = self._retry.delay(call.attempts - call.limited, retry_after, self._rng)
        if retry_after is not None:
            self.long_waits.note(delay)  # this call's own wait, at least the Retry-After
        self.resent += 1
        log.info("%s: %s, retry %d/%d in %.1fs", self.judge.name, type(exc).__name__, call.attempts,
                 self._retry.max_retries, delay)
        await asyncio.sleep(delay)
        return None

    def _malformed(self, body: str | None, call: CallTally, estimate: int,
                   undecodable: BaseException | None) -> JudgeResponse | None:
        """A paid 2xx that litellm refused: the call's response (what the body holds, see
        :func:`runner.llm.responses.malformed`), or None when it is sent again (``judge.retry_malformed``)."""
        bad = malformed(body, call.started, call.attempts, call.limited, undecodable)
        if bad.tokens_known:
            bad = self._priced(replace(bad, cost_usd=price(self.judge.model, bad.prompt_tokens, bad.completion_tokens)))
        if self._limiter is not None:
            self._limiter.settle(estimate, bad.prompt_tokens + bad.completion_tokens)
        if (bad.text is not None or not self.judge.retry_malformed
                or call.attempts - call.limited > self._retry.max_retries):
            return call.total(bad)
        call.spent.append(bad)
        self.resent += 1
        log.info("%s: a 200 without an answer (%s), sent again (retry_malformed) %d/%d", self.judge.name,
                 bad.finish_reason, call.attempts, self._retry.max_retries)
        return None

    def _beyond_patience(self, exc: openai.APIError, retry_after: float, call: CallTally) -> JudgeResponse:
        """A 429 whose Retry-After is longer than ``judge.retry_rate_limited_s``: the provider lets this call through
        only after the judge would have given it up, so it fails now (the other calls go on unpaused; a resume sends
        it again), instead of a wait of ``judge.max_retry_after_s`` that pauses every call of the judge each time."""
        response = self._error(exc, call.started, call.attempts, call.limited)
        reason = (f"rate limited: retry-after {retry_after:.0f} s exceeds "
                  f"judge.retry_rate_limited_s={self.judge.retry_rate_limited_s:g}")
        log.log(logging.WARNING if self.beyond_patience == 0 else logging.DEBUG, "%s: %s (a resume sends it again)",
                self.judge.name, reason)
        self.beyond_patience += 1
        return replace(response, error=f"{reason}: {response.error}")

    def _progressing(self) -> bool:
        """Whether a 429 may be sent again: the judge's first 429 since its last success (runner.llm.pacing) came
        less than ``judge.retry_rate_limited_s`` ago (time.monotonic, the limiter's clock). The patience is the
        judge's, not each call's: a provider that lets nothing through fails every call of the judge within it, not
        each stage's ``concurrency`` calls one patience after another (issue 44: 200 such calls took ~3.3 h)."""
        assert self._limiter is not None
        return time.monotonic() - self._limiter.limited_since < self.judge.retry_rate_limited_s

    def _priced(self, response: JudgeResponse) -> JudgeResponse:
        """``response``, priced at ``judge.price_as``'s list price when litellm could not price it: a served copy of a
        listed model (a local server) costs what the listed model would. A replay or a recording is served by nobody
        and stays free (what it is worth is :func:`runner.judging.estimate.list_cost`'s ``cost/usd_list``), and so does
        a judge on a free tier (``judge.free_tier``), whatever litellm's cost map lists."""
        if self.judge.free_tier:
            return replace(response, cost_usd=0.0)
        served = not self.judge.model.startswith((f"{providers.REPLAY_PROVIDER}/", f"{recorded.RECORDED_PROVIDER}/"))
        if response.cost_usd is not None or not response.tokens_known or not served or not self.judge.price_as:
            return response
        return replace(response, cost_usd=price(self.judge.price_as, response.prompt_tokens,
                                                response.completion_tokens))

    def _response(self, resp: Any, started: float, attempts: int, limited: int, estimate: int) -> JudgeResponse:
        response = self._priced(answer(resp, started, attempts, limited))
        if self._limiter is not None:
            self._limiter.settle(estimate, response.prompt_tokens + response.completion_tokens)
            self._limiter.record_success()
        if self._router is not None:
            self.replica_calls[served_by(resp)] += 1
        return response
