"""litellm custom providers for judges that answer from a file, not a server: ``replay/<recording>`` (the published
judges' recorded answers, :mod:`runner.llm.replay`) and ``recorded/<name>`` (a user's recorded judge outputs,
:mod:`runner.llm.recorded`). Their calls go through litellm like any other (registered by
:func:`runner.llm.client.configure`), so a replayed run takes the live path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import litellm
from litellm import CustomLLM
from litellm.types.utils import ModelResponse

from runner.core.types import Message
from runner.llm import recorded, replay

REPLAY_PROVIDER = "replay"
RECORDED_METADATA = "judgesweep_recorded"  # the metadata entry a recorded judge's call carries to its provider


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


class RecordedProvider(CustomLLM):
    """litellm custom provider serving a user's recorded judge outputs (model string ``recorded/<name>``).

    The file and the call's (item id, order, repeat) come in litellm's ``metadata`` (:meth:`JudgeClient._kwargs`),
    never in the messages. No usage is returned: the recording does not say how many tokens the judge used.
    """

    async def acompletion(self, *args: Any, **kwargs: Any) -> ModelResponse:  # noqa: D102
        return self.completion(*args, **kwargs)

    def completion(self, *args: Any, **kwargs: Any) -> ModelResponse:  # noqa: D102
        model = kwargs["model"]
        call = ((kwargs.get("litellm_params") or {}).get("metadata") or {}).get(RECORDED_METADATA) or {}
        try:
            if not call.get("key"):
                raise recorded.RecordingMiss(f"{model}: recorded judges answer first-round judge calls only "
                                             "(no synthesis round, no generation)")
            found = recorded.lookup(Path(call["path"]), tuple(call["key"]))  # type: ignore[arg-type]
        except (recorded.RecordingMiss, recorded.RecordingsError) as exc:
            raise litellm.BadRequestError(message=str(exc), model=model, llm_provider=recorded.RECORDED_PROVIDER
                                          ) from None
        failed = found.failure_message()
        if failed is not None or found.output is None:  # a call that failed when recorded fails again, once
            raise litellm.BadRequestError(message=failed or "recorded failure", model=model,
                                          llm_provider=recorded.RECORDED_PROVIDER)
        return ModelResponse(
            model=f"{recorded.RECORDED_PROVIDER}/{model}",
            choices=[{"index": 0, "finish_reason": found.finish_reason,
                      "message": {"role": "assistant", "content": found.output}}],
        )


def custom_provider_map() -> list[dict[str, Any]]:
    """litellm's ``custom_provider_map`` entries for both providers."""
    return [{"provider": REPLAY_PROVIDER, "custom_handler": ReplayProvider()},
            {"provider": recorded.RECORDED_PROVIDER, "custom_handler": RecordedProvider()}]
