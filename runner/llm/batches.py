"""A provider's batch API through litellm's Files and Batches calls: upload, create, retrieve, download, cancel.

One of the modules allowed to import litellm (beside :mod:`runner.llm.client`): the live path stays in the client,
this one speaks the OpenAI batch protocol (``litellm.acreate_file``, ``acreate_batch``, ``aretrieve_batch``,
``alist_batches``, ``afile_content``, ``acancel_batch``). litellm 1.100 sends those for ``openai`` (any
OpenAI-compatible server at ``api_base``), ``hosted_vllm`` and ``litellm_proxy`` through one code path
(``OPENAI_COMPATIBLE_BATCH_AND_FILES_PROVIDERS``): those are the providers a judge may batch with, and the
OpenAI-compatible protocol is tested end to end. Azure, Vertex AI and Bedrock have batch calls in litellm too, but
each wants its own input (Azure a deployment name per line, Vertex a GCS bucket, Bedrock an S3 bucket and a role)
that no judge config carries yet; Anthropic has retrieve only. They are refused before any call.

A batch answer is read into a JudgeResponse as a live answer is (:mod:`runner.llm.responses`), and priced at the
cost map's batch prices (``input_cost_per_token_batches`` / ``output_cost_per_token_batches``, else half the live
price: litellm's ``batch_cost_calculator``); a model the cost map does not list has no price (None), as live.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import litellm
from litellm.cost_calculator import batch_cost_calculator
from litellm.types.utils import OPENAI_COMPATIBLE_BATCH_AND_FILES_PROVIDERS, ModelResponse, Usage

from runner.core.config import JudgeConfig
from runner.core.errors import BatchFailed, ConfigurationError
from runner.core.types import JudgeResponse, Message, Secret
from runner.llm.client import LOCAL_PREFIXES, release_loop_clients
from runner.llm.responses import answer, malformed
from runner.storage.keys import repeat_params

ENDPOINT = "/v1/chat/completions"
WINDOW = "24h"
FINAL = frozenset({"completed", "expired", "cancelled", "failed"})  # a batch in one of these changes no more


def provider_of(model: str) -> str | None:
    """The litellm provider of ``model``, None when litellm cannot place it (a replay or recorded judge)."""
    try:
        return str(litellm.get_llm_provider(model=model)[1])
    except (litellm.BadRequestError, ValueError):
        return None


def supports_batches(model: str) -> bool:
    """Whether judgesweep can send ``model``'s calls through a batch API (see the module docstring)."""
    return provider_of(model) in OPENAI_COMPATIBLE_BATCH_AND_FILES_PROVIDERS


async def release_clients() -> None:
    """Close the HTTP clients of this event loop's batch calls before the loop ends (and litellm's cached ones).

    litellm's Files and Batches calls to an OpenAI-compatible server each build an ``AsyncOpenAI`` of their own and
    never close it; the SDK closes one when it is garbage-collected, by scheduling its ``aclose`` on whatever loop runs
    then. Collected while a later stage's loop runs, that close fails on the connections of this closed loop ("Task
    exception was never retrieved ... RuntimeError('Event loop is closed')"). Collected here, their closes run and
    finish on the loop their connections belong to.
    """
    gc.collect()
    me = asyncio.current_task()
    closing = [task for task in asyncio.all_tasks()
               if task is not me and getattr(task.get_coro(), "__qualname__", "").endswith(".aclose")]
    await asyncio.gather(*closing, return_exceptions=True)
    await release_loop_clients()


def batch_price(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Dollars for that many tokens at the cost map's batch prices; None when the model is unpriced."""
    if model not in litellm.model_cost and model.split("/", 1)[-1] not in litellm.model_cost:
        return None
    prompt_usd, completion_usd = batch_cost_calculator(
        Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
              total_tokens=prompt_tokens + completion_tokens), model)
    return prompt_usd + completion_usd


@dataclass(frozen=True)
class BatchState:
    """What the provider says of a batch: its status, row counts and result files."""

    batch_id: str
    status: str
    total: int
    completed: int
    failed: int
    output_file_id: str | None
    error_file_id: str | None

    @property
    def final(self) -> bool:
        """Whether the batch has ended (completed, expired, cancelled or failed)."""
        return self.status in FINAL


class BatchTransport:
    """The batch calls of one judge deployment (model, api_base and key as its live calls use them).

    Args:
        judge: The judge's config.
        api_keys: API-key variable name -> key, as the CLI read them.

    Raises:
        ConfigurationError: The judge's provider has no batch API judgesweep can use.
    """

    def __init__(self, judge: JudgeConfig, api_keys: Mapping[str, Secret]) -> None:
        provider = provider_of(judge.model)
        if provider not in OPENAI_COMPATIBLE_BATCH_AND_FILES_PROVIDERS:
            known = sorted(OPENAI_COMPATIBLE_BATCH_AND_FILES_PROVIDERS)
            raise ConfigurationError(f"judge.batch: judge {judge.name} ({judge.model}) has no batch API judgesweep "
                                     f"can use; batched providers: {known}")
        self.judge = judge
        self.provider = provider
        self.model_name = str(litellm.get_llm_provider(model=judge.model)[0])
        key = api_keys.get(judge.api_key_env) if judge.api_key_env else None
        self._secret = key
        self._kwargs: dict[str, Any] = {"custom_llm_provider": provider, "timeout": judge.timeout_s}
        if judge.api_base:
            self._kwargs["api_base"] = judge.api_base
        if key is not None:
            self._kwargs["api_key"] = key.reveal()
        elif judge.model.startswith(LOCAL_PREFIXES) and judge.api_base:
            self._kwargs["api_key"] = "no-key"  # as a live call to a local server (runner.llm.client)

    def request_line(self, custom_id: str, messages: tuple[Message, ...], params: Mapping[str, Any],
                     repeat: int) -> str:
        """One line of a batch input file: the chat request a live call of repeat ``repeat`` would send."""
        body = {"model": self.model_name, "messages": [{"role": m.role, "content": m.content} for m in messages],
                **repeat_params(params, repeat)}
        return json.dumps({"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body},
                          ensure_ascii=False) + "\n"

    def _scrubbed(self, what: str, exc: Exception) -> BatchFailed:
        text = str(exc)
        if self._secret is not None:
            text = text.replace(self._secret.reveal(), "***")
        return BatchFailed(f"{what}: {type(exc).__name__}: {text[:500]}")

    async def upload(self, name: str, data: bytes) -> str:
        """Upload a batch input file; returns its file id."""
        try:
            created = await litellm.acreate_file(file=(name, data, "application/jsonl"), purpose="batch",
                                                 **self._kwargs)
        except Exception as exc:  # noqa: BLE001 - litellm raises openai's errors and its own: one line, no key
            raise self._scrubbed("uploading the batch input file", exc) from None
        return str(created.id)

    async def create(self, file_id: str, metadata: Mapping[str, str]) -> BatchState:
        """Create a batch over an uploaded input file."""
        try:
            batch = await litellm.acreate_batch(completion_window=WINDOW, endpoint=ENDPOINT, input_file_id=file_id,
                                                metadata=dict(metadata), **self._kwargs)
        except Exception as exc:  # noqa: BLE001
            raise self._scrubbed("creating the batch", exc) from None
        return _state(batch)

    async def find(self, file_id: str) -> BatchState | None:
        """The batch an earlier process created over ``file_id`` (it died before noting the batch id), if any."""
        try:
            listed = await litellm.alist_batches(limit=100, **self._kwargs)
        except Exception as exc:  # noqa: BLE001
            raise self._scrubbed("listing the batches", exc) from None
        for batch in getattr(listed, "data", None) or []:
            if getattr(batch, "input_file_id", None) == file_id:
                return _state(batch)
        return None

    async def retrieve(self, batch_id: str) -> BatchState:
        """The batch's current state."""
        try:
            return _state(await litellm.aretrieve_batch(batch_id=batch_id, **self._kwargs))
        except Exception as exc:  # noqa: BLE001
            raise self._scrubbed(f"retrieving batch {batch_id}", exc) from None

    async def content(self, file_id: str) -> bytes:
        """A file's bytes (a batch's output or error file)."""
        try:
            got = await litellm.afile_content(file_id=file_id, **self._kwargs)
        except Exception as exc:  # noqa: BLE001
            raise self._scrubbed(f"downloading file {file_id}", exc) from None
        return bytes(got.content)

    async def cancel(self, batch_id: str) -> BatchState:
        """Ask the provider to cancel a batch."""
        try:
            return _state(await litellm.acancel_batch(batch_id=batch_id, **self._kwargs))
        except Exception as exc:  # noqa: BLE001
            raise self._scrubbed(f"cancelling batch {batch_id}", exc) from None

    def read_answer(self, body: Mapping[str, Any]) -> JudgeResponse:
        """A JudgeResponse from one output row's response body, read as a live answer is, at the batch price (at
        ``judge.price_as``'s when the cost map has none for the judge's model)."""
        started = time.perf_counter()
        choices = body.get("choices")
        if isinstance(choices, list) and choices:
            response = answer(ModelResponse(**body), started, 1, 0)
        else:  # a 200 without an answer: paid, kept as a live one is (runner.llm.responses.malformed)
            response = malformed(json.dumps(body), started, 1, 0)
        cost = 0.0 if self.judge.free_tier else None  # a free tier's answers cost nothing
        if response.tokens_known and cost is None:  # a served copy of a listed model (judge.price_as): its batch price
            cost = batch_price(self.judge.model, response.prompt_tokens, response.completion_tokens)
            if cost is None and self.judge.price_as:
                cost = batch_price(self.judge.price_as, response.prompt_tokens, response.completion_tokens)
        return replace(response, cost_usd=cost, latency_s=0.0)


def _state(batch: Any) -> BatchState:
    counts = getattr(batch, "request_counts", None)
    return BatchState(batch_id=str(batch.id), status=str(batch.status), total=int(getattr(counts, "total", 0) or 0),
                      completed=int(getattr(counts, "completed", 0) or 0),
                      failed=int(getattr(counts, "failed", 0) or 0),
                      output_file_id=getattr(batch, "output_file_id", None),
                      error_file_id=getattr(batch, "error_file_id", None))
