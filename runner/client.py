"""The only module that talks to litellm: one judge call in, one JudgeResponse out.

Errors are classified by exception type (litellm's exceptions subclass openai's), never by message
text, and turned into a JudgeResponse carrying the error, so one failed call never stops the run.
"""

from __future__ import annotations

import logging
import time
from importlib import metadata
from typing import Any

import litellm
import openai
from litellm import CustomLLM
from litellm.types.utils import ModelResponse

from runner import replay
from runner.config import JudgeConfig
from runner.types import JudgeResponse, Message, Secret

log = logging.getLogger(__name__)

REPLAY_PROVIDER = "replay"


class ReplayProvider(CustomLLM):
    """litellm custom provider serving recorded answers (model string ``replay/<recording>``)."""

    async def acompletion(self, *args: Any, **kwargs: Any) -> ModelResponse:  # noqa: D102
        return self.completion(*args, **kwargs)

    def completion(self, *args: Any, **kwargs: Any) -> ModelResponse:  # noqa: D102
        model = kwargs["model"].removeprefix(f"{REPLAY_PROVIDER}/")
        messages = [Message(role=m["role"], content=m["content"]) for m in kwargs["messages"]]
        try:
            answer = replay.lookup(model, messages)
        except replay.ReplayMiss as exc:
            # A bad request: retrying cannot help, and the message says exactly what is missing.
            raise litellm.BadRequestError(message=str(exc), model=model, llm_provider=REPLAY_PROVIDER) from None
        prompt_tokens = litellm.token_counter(model="gpt-4", messages=kwargs["messages"])
        completion_tokens = litellm.token_counter(model="gpt-4", text=answer.text)
        return ModelResponse(
            model=f"{REPLAY_PROVIDER}/{model}",
            choices=[{"index": 0, "finish_reason": answer.finish_reason,
                      "message": {"role": "assistant", "content": answer.text}}],
            usage={"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                   "total_tokens": prompt_tokens + completion_tokens},
        )


def configure() -> None:
    """Set litellm's process-wide settings once (called from the CLI entry point only)."""
    litellm.telemetry = False
    litellm.suppress_debug_info = True
    litellm.drop_params = True  # providers that lack e.g. `seed` get the call without it, not a 400
    litellm.custom_provider_map = [{"provider": REPLAY_PROVIDER, "custom_handler": ReplayProvider()}]


def litellm_version() -> str:
    """The installed litellm version, recorded with every run."""
    return metadata.version("litellm")


def _scrub(text: str, api_key: Secret | None) -> str:
    if api_key is not None and api_key.reveal():
        text = text.replace(api_key.reveal(), "***")
    return text


class JudgeClient:
    """Sends rendered messages to one judge deployment.

    Args:
        judge: The judge's config (model string, api_base, decoding parameters).
        api_key: The key read from ``judge.api_key_env`` by the CLI, or None.
    """

    def __init__(self, judge: JudgeConfig, api_key: Secret | None) -> None:
        self.judge = judge
        self._api_key = api_key

    def _kwargs(self) -> dict[str, Any]:
        j = self.judge
        kwargs: dict[str, Any] = {
            "model": j.model,
            "temperature": j.temperature,
            "max_tokens": j.max_tokens,
            "timeout": j.timeout_s,
            "num_retries": 0,
        }
        if j.seed is not None:
            kwargs["seed"] = j.seed
        if j.api_base:
            kwargs["api_base"] = j.api_base
        if self._api_key is not None:
            kwargs["api_key"] = self._api_key.reveal()
        elif j.model.startswith("openai/") and j.api_base:
            # OpenAI-compatible local servers usually take no key, but the OpenAI SDK insists on one.
            kwargs["api_key"] = "no-key"
        return kwargs

    async def complete(self, messages: tuple[Message, ...]) -> JudgeResponse:
        """Make one call; never raises for provider errors (they come back in the response)."""
        payload = [{"role": m.role, "content": m.content} for m in messages]
        started = time.perf_counter()
        try:
            resp = await litellm.acompletion(messages=payload, **self._kwargs())
        except openai.APIError as exc:
            latency = time.perf_counter() - started
            return JudgeResponse(text=None, latency_s=latency, error_type=type(exc).__name__,
                                 error=_scrub(str(exc), self._api_key)[:2000])
        latency = time.perf_counter() - started
        choice = resp.choices[0]
        usage = getattr(resp, "usage", None)
        cost = (getattr(resp, "_hidden_params", None) or {}).get("response_cost")
        return JudgeResponse(
            text=choice.message.content,
            finish_reason=choice.finish_reason,
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            cost_usd=float(cost) if cost is not None else None,
            latency_s=latency,
        )
