"""The generation stage: a model writes each item's candidate output before the judge scores it.

Generation calls go through their own JudgeClient (own model, concurrency, rate limits, retries), are
journaled to ``generations.jsonl`` as they complete (fsynced like judge calls, so a paid output is
never lost), are found again on resume and in the response cache, and get their own metrics. A
failed generation leaves its item unjudged and counted; an empty output is judged like any other.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from runner.core.types import Candidate, Item, JudgeRequest, JudgeResponse, Message, hash_messages
from runner.inputs.prompts import Template
from runner.judging.calls import AnswerSource, CallClient, PaidCalls
from runner.stats.scores import percentile

GENERATIONS_NAME = "generations.jsonl"
STAGE_GENERATE = "generate"


@dataclass(frozen=True, slots=True)
class Generation:
    """One generation call and what came back."""

    request: JudgeRequest
    response: JudgeResponse

    @property
    def ok(self) -> bool:
        """True when the call returned an output (possibly empty or truncated)."""
        return self.response.error_type is None


def generation_record(g: Generation) -> dict[str, Any]:
    """One generations.jsonl row. Field names match the judge journal's, so the resume reader
    (runner.storage.store.JournalAnswers) reads both."""
    req, resp = g.request, g.response
    row = {
        "item_id": req.item_id, "repeat": req.repeat, "order": None, "stage": req.stage,
        "messages_sha256": req.messages_hash, "status": "ok" if g.ok else "error",
        "raw_response": resp.text, "finish_reason": resp.finish_reason, "prompt_tokens": resp.prompt_tokens,
        "completion_tokens": resp.completion_tokens, "cost_usd": resp.cost_usd, "error_type": resp.error_type,
        "error": resp.error, "latency_s": round(resp.latency_s, 6), "attempts": resp.attempts,
        "rate_limited": resp.rate_limited, "source": resp.source,
    }
    if not resp.tokens_known:  # as the judge journal writes them (runner.storage.journal.judgment_record)
        row["prompt_tokens"] = row["completion_tokens"] = None
    if resp.notes:
        row["provider_notes"] = list(resp.notes)
    return row


class RowSink(Protocol):
    """What the generator writes to (runner.storage.store.Journal provides it)."""

    def append_row(self, row: dict[str, Any], source: str) -> None:  # noqa: D102
        ...


class Generator:
    """Writes candidate outputs for items with bounded concurrency, journaling each as it completes.

    Args:
        template: The generation prompt (rendered from the item's variables).
        client: The generator's client.
        sink: The generations journal.
        sources: Known answers (the interrupted run's generations, the response cache), or None.
        concurrency: Generation calls in flight at once.
        max_error_rate: Abort once more than this share of generation calls failed (after ABORT_MIN_CALLS).
        neutralize: Defang the template's delimiters inside inserted text.
    """

    def __init__(self, template: Template, client: CallClient, sink: RowSink, sources: AnswerSource | None,
                 concurrency: int, max_error_rate: float = 1.0, neutralize: bool = True) -> None:
        self.template = template
        self.client = client
        self.sink = sink
        self.sources = sources
        self.neutralize = neutralize
        self._calls = PaidCalls(client, sources, concurrency, max_error_rate, "generation")

    async def _one(self, item: Item) -> Generation:
        messages: tuple[Message, ...] = self.template.render(dict(item.variables), neutralize=self.neutralize)
        request = JudgeRequest(item.id, 0, None, STAGE_GENERATE, hash_messages(messages))

        def journal(response: JudgeResponse) -> Generation:
            generation = Generation(request, response)
            self.sink.append_row(generation_record(generation), response.source)
            return generation

        return await self._calls.call(request, messages, journal)

    async def run(self, items: Iterable[Item]) -> dict[str, Generation]:
        """Generate one output per item; returns item id -> generation (failed ones included).

        Only a bounded number of items is in flight at once: prompts are rendered just before they are sent.
        """
        done: dict[str, Generation] = {}

        def keep(index: int, generation: Generation) -> None:
            done[generation.request.item_id] = generation

        await self._calls.run(items, self._one, keep)
        return done


def with_outputs(items: Iterable[Item], generations: dict[str, Generation], system: str) -> Iterable[Item]:
    """The items whose generation succeeded, each carrying its generated output as the one candidate."""
    for item in items:
        generation = generations.get(item.id)
        if generation is not None and generation.ok:
            yield replace(item, candidates=(Candidate(system=system, text=generation.response.text or ""),))


def generation_metrics(generations: Sequence[Generation]) -> dict[str, float | int | None]:
    """Calls, failures, tokens, cost and latency of the generation stage: ``generation/<name>``, its tokens as
    ``tokens/generation_*`` and its cost as ``cost/generation_usd`` (one family per kind, as the judge's)."""
    responses = [g.response for g in generations]
    fresh = [r for r in responses if r.source == "call"]
    latencies = [r.latency_s for r in fresh if r.error_type is None]
    return {
        "generation/calls": len(responses),
        "generation/errors": sum(not g.ok for g in generations),
        "generation/empty": sum(g.ok and not (g.response.text or "").strip() for g in generations),
        "generation/truncated": sum(r.finish_reason == "length" for r in responses),
        "generation/made": len(fresh),
        "generation/cache_hits": sum(r.source == "cache" for r in responses),
        "generation/resumed": sum(r.source == "journal" for r in responses),
        "generation/retries": sum(max(r.attempts - 1, 0) for r in fresh),
        "generation/rate_limited": sum(r.rate_limited for r in fresh),
        "tokens/generation_prompt": sum(r.prompt_tokens for r in responses),
        "tokens/generation_completion": sum(r.completion_tokens for r in responses),
        "cost/generation_usd": float(sum(r.cost_usd for r in responses if r.source != "cache" and r.cost_usd)),
        "generation/latency_p50_s": percentile(latencies, 50),
    }
