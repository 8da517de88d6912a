"""Unit tests for runner.judging.generation: the generation stage with a scripted async client, no sockets.

The shipped agent_examples dataset and the real prompts/generate_agent.j2 template are used, so the
test also covers what reaches the generator: every item's variables rendered into the prompt.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Iterable
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from omegaconf import OmegaConf

from runner.core.choices import CacheMode, PromptMode
from runner.core.config import DatasetConfig
from runner.core.types import Candidate, Item, JudgeRequest, JudgeResponse, Message, hash_messages
from runner.inputs.datasets import load_items, resolve_path
from runner.inputs.items import Shape
from runner.inputs.prompts import Template, load_template
from runner.judging.calls import ABORT_MIN_CALLS, RunAborted
from runner.judging.generation import (
    STAGE_GENERATE,
    Generation,
    Generator,
    generation_metrics,
    generation_record,
    with_outputs,
)
from runner.storage.cache import ResponseCache
from runner.storage.sources import AnswerSources

PROJECT_ROOT = Path(__file__).resolve().parents[2]
GENERATOR = "gpt4o_mini"


class FakeClient:
    """Answers every call with ``generated: <hash of the messages>``, or fails for chosen hashes."""

    def __init__(self, fail: Callable[[str], bool] = lambda _: False) -> None:
        self.fail = fail
        self.calls: list[str] = []  # messages hash per call, in call order
        self.in_flight = 0
        self.max_in_flight = 0

    async def complete(self, messages: tuple[Message, ...], repeat: int = 0) -> JudgeResponse:
        digest = hash_messages(messages)
        self.calls.append(digest)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(0.001)  # let other calls start, as a real HTTP call would
        self.in_flight -= 1
        if self.fail(digest):
            return JudgeResponse(text=None, error_type="BadRequestError", error="x")
        return JudgeResponse(text=f"generated: {digest}", finish_reason="stop", prompt_tokens=100,
                             completion_tokens=20, cost_usd=0.001, latency_s=0.5)


class ListSink:
    """Keeps every journal row with its source, in write order."""

    def __init__(self) -> None:
        self.rows: list[tuple[dict[str, Any], str]] = []

    def append_row(self, row: dict[str, Any], source: str) -> None:
        self.rows.append((row, source))


@pytest.fixture(scope="module")
def template() -> Template:
    return load_template(PROJECT_ROOT / "prompts", "generate_agent")


@pytest.fixture(scope="module")
def items() -> list[Item]:
    """The shipped agent examples, loaded as conf/dataset/agent_examples.yaml composes them, without outputs."""
    schema = OmegaConf.structured(DatasetConfig)
    yaml = OmegaConf.load(PROJECT_ROOT / "conf" / "dataset" / "agent_examples.yaml")
    cfg = OmegaConf.to_object(OmegaConf.merge(schema, yaml))
    assert isinstance(cfg, DatasetConfig)
    loaded = load_items(cfg, resolve_path(cfg.path, PROJECT_ROOT),
                        shape=Shape(mode=PromptMode.pointwise, with_candidate=False))
    return loaded.items


def digest_of(template: Template, item: Item) -> str:
    return hash_messages(template.render(dict(item.variables)))


def synthetic(n: int) -> list[Item]:
    variables = {"description": "a test agent", "success_criteria": "- be right", "context": ""}
    return [Item(id=f"s{i:03d}", variables=MappingProxyType({**variables, "input": f"question {i}"}), candidates=())
            for i in range(n)]


def generate(template: Template, items: Iterable[Item], client: FakeClient, sink: ListSink,
             sources: AnswerSources | None = None, concurrency: int = 4,
             max_error_rate: float = 1.0) -> dict[str, Generation]:
    generator = Generator(template, client, sink, sources, concurrency, max_error_rate=max_error_rate)
    return asyncio.run(generator.run(items))


def no_sources(prior: dict[tuple, JudgeResponse] | None = None, cache: ResponseCache | None = None) -> AnswerSources:
    return AnswerSources(prior or {}, cache, "openai/gpt-4o-mini", None, {"temperature": 0.0})


# --- one generation per item -------------------------------------------------------------------------


def test_items_load_without_candidates(items: list[Item]) -> None:
    assert len(items) == 12
    assert all(item.candidates == () for item in items)


def test_one_generation_per_item_with_its_own_prompt(template: Template, items: list[Item]) -> None:
    client, sink = FakeClient(), ListSink()
    done = generate(template, items, client, sink)
    assert set(done) == {i.id for i in items}
    assert len(client.calls) == len(items) == len(set(client.calls))
    for item in items:
        generation = done[item.id]
        assert generation.ok
        assert generation.request == JudgeRequest(item.id, 0, None, STAGE_GENERATE, digest_of(template, item))
        assert generation.response.text == f"generated: {digest_of(template, item)}"


def test_rows_are_generation_records_of_stage_generate(template: Template, items: list[Item]) -> None:
    sink = ListSink()
    done = generate(template, items, FakeClient(), sink)
    assert len(sink.rows) == len(items)
    for row, source in sink.rows:
        assert row == generation_record(done[row["item_id"]])
        assert (row["stage"], row["order"], row["repeat"], row["status"], source) == ("generate", None, 0, "ok", "call")
    assert {row["item_id"] for row, _ in sink.rows} == {i.id for i in items}


def test_prompt_carries_the_item_fields(template: Template, items: list[Item]) -> None:
    first = items[0]
    system, user = template.render(dict(first.variables))
    assert (system.role, user.role) == ("system", "user")
    assert first.variables["input"] in user.content
    assert "- States the root cause" in system.content  # success_criteria: a list rendered as bullets
    assert "POSTMORTEM PM-2025-014" in user.content


def test_concurrency_is_bounded(template: Template, items: list[Item]) -> None:
    client = FakeClient()
    generate(template, items, client, ListSink(), concurrency=3)
    assert client.max_in_flight == 3


# --- failures ----------------------------------------------------------------------------------------


def test_failed_call_is_kept_and_with_outputs_skips_its_item(template: Template, items: list[Item]) -> None:
    bad = digest_of(template, items[2])
    sink = ListSink()
    done = generate(template, items, FakeClient(fail=lambda d: d == bad), sink)
    failed = done[items[2].id]
    assert failed.ok is False
    row = next(r for r, _ in sink.rows if r["item_id"] == items[2].id)
    assert (row["status"], row["error_type"], row["error"], row["raw_response"]) == (
        "error", "BadRequestError", "x", None)
    judged = list(with_outputs(items, done, GENERATOR))
    assert [i.id for i in judged] == [i.id for i in items if i.id != items[2].id]
    assert judged[0].candidates == (Candidate(GENERATOR, f"generated: {digest_of(template, items[0])}"),)
    assert judged[0].variables == items[0].variables


def test_empty_output_is_still_judged() -> None:
    req = JudgeRequest("e", 0, None, STAGE_GENERATE, "h")
    generations = {"e": Generation(req, JudgeResponse(text=None, finish_reason="stop"))}
    item = Item(id="e", variables=MappingProxyType({}), candidates=())
    [judged] = with_outputs([item, Item(id="missing", variables=MappingProxyType({}), candidates=())], generations,
                            "gen")
    assert judged.candidates == (Candidate("gen", ""),)


def test_run_aborts_after_min_calls_when_too_many_fail(template: Template) -> None:
    client, sink = FakeClient(fail=lambda _: True), ListSink()
    with pytest.raises(RunAborted, match=r"^20 of 20 generation calls failed \(100% > max_error_rate 5%\); "
                                         r"first: BadRequestError: x$"):
        generate(template, synthetic(60), client, sink, concurrency=2, max_error_rate=0.05)
    assert ABORT_MIN_CALLS == 20
    assert ABORT_MIN_CALLS <= len(sink.rows) < 60  # every completed call journaled; the rest never paid
    assert len(client.calls) < 30


def test_no_abort_before_min_calls(template: Template) -> None:
    done = generate(template, synthetic(ABORT_MIN_CALLS - 1), FakeClient(fail=lambda _: True), ListSink(),
                    max_error_rate=0.05)
    assert len(done) == ABORT_MIN_CALLS - 1
    assert not any(g.ok for g in done.values())


def test_error_rate_equal_to_the_maximum_does_not_abort(template: Template) -> None:
    batch = synthetic(20)
    bad = {digest_of(template, batch[0])}
    done = generate(template, batch, FakeClient(fail=lambda d: d in bad), ListSink(), max_error_rate=0.05)
    assert sum(not g.ok for g in done.values()) == 1  # 1 of 20 = 5%, not more than 5%
    bad.add(digest_of(template, batch[1]))
    with pytest.raises(RunAborted, match=r"^2 of 20 generation calls failed"):
        generate(template, batch, FakeClient(fail=lambda d: d in bad), ListSink(), max_error_rate=0.05)


# --- known answers -----------------------------------------------------------------------------------


def test_answers_from_the_journal_are_not_requested_again(template: Template, items: list[Item]) -> None:
    known = items[4]
    request = JudgeRequest(known.id, 0, None, STAGE_GENERATE, digest_of(template, known))
    prior = {request.key: JudgeResponse(text="remembered", attempts=0, source="journal")}
    client, sink = FakeClient(), ListSink()
    done = generate(template, items, client, sink, sources=no_sources(prior))
    assert len(client.calls) == len(items) - 1
    assert request.messages_hash not in client.calls
    assert done[known.id].response.text == "remembered"
    assert dict((r["item_id"], s) for r, s in sink.rows)[known.id] == "journal"
    assert generation_metrics(list(done.values()))["generation/resumed"] == 1


def test_cache_serves_successful_answers_and_retries_failed_ones(tmp_path: Path, template: Template,
                                                                 items: list[Item]) -> None:
    bad = digest_of(template, items[0])
    with ResponseCache(tmp_path / "cache.sqlite", CacheMode.read_write) as cache:
        generate(template, items, FakeClient(fail=lambda d: d == bad), ListSink(), sources=no_sources(cache=cache))
        client = FakeClient()
        done = generate(template, items, client, ListSink(), sources=no_sources(cache=cache))
    assert client.calls == [bad]  # only the failed generation is asked for again
    assert all(g.ok for g in done.values())
    metrics = generation_metrics(list(done.values()))
    assert (metrics["generation/cache_hits"], metrics["generation/made"]) == (len(items) - 1, 1)


# --- records and metrics -----------------------------------------------------------------------------


def test_generation_record_fields() -> None:
    response = JudgeResponse(text="out", finish_reason="length", prompt_tokens=7, completion_tokens=9, cost_usd=0.5,
                             latency_s=1.23456789, attempts=3, rate_limited=2)
    row = generation_record(Generation(JudgeRequest("a", 0, None, STAGE_GENERATE, "abc"), response))
    assert row == {
        "item_id": "a", "repeat": 0, "order": None, "stage": "generate", "messages_sha256": "abc", "status": "ok",
        "raw_response": "out", "finish_reason": "length", "prompt_tokens": 7, "completion_tokens": 9,
        "cost_usd": 0.5, "error_type": None, "error": None, "latency_s": 1.234568, "attempts": 3,
        "rate_limited": 2, "source": "call",
    }


def test_generation_metrics_count_every_kind_of_outcome() -> None:
    def gen(item_id: str, **fields: Any) -> Generation:
        return Generation(JudgeRequest(item_id, 0, None, STAGE_GENERATE, "h"), JudgeResponse(**fields))

    generations = [
        gen("ok1", text="fine", prompt_tokens=10, completion_tokens=5, cost_usd=0.01, latency_s=1.0, attempts=2),
        gen("blank", text="  \n", prompt_tokens=10, completion_tokens=1, cost_usd=0.02, latency_s=3.0),
        gen("cut", text="half an ans", finish_reason="length", prompt_tokens=10, completion_tokens=50,
            cost_usd=0.03, latency_s=2.0, rate_limited=1),
        gen("err", text=None, error_type="BadRequestError", error="x", attempts=1, latency_s=9.0),
        gen("hit", text="cached", prompt_tokens=10, completion_tokens=5, cost_usd=1.0, source="cache", attempts=0),
        gen("resumed", text="old", prompt_tokens=10, completion_tokens=5, cost_usd=0.04, source="journal", attempts=0),
    ]
    metrics = generation_metrics(generations)
    assert metrics == {
        "generation/calls": 6,
        "generation/errors": 1,
        "generation/empty": 1,
        "generation/truncated": 1,
        "generation/made": 4,
        "generation/cache_hits": 1,
        "generation/resumed": 1,
        "generation/retries": 1,
        "generation/rate_limited": 1,
        "tokens/generation_prompt": 50,
        "tokens/generation_completion": 66,
        "cost/generation_usd": pytest.approx(0.10),  # the cache hit was not paid by this run
        "generation/latency_p50_s": 2.0,  # fresh calls that returned: 1.0, 3.0, 2.0
    }


def test_generation_metrics_of_nothing() -> None:
    metrics = generation_metrics([])
    assert metrics["generation/calls"] == 0
    assert metrics["cost/generation_usd"] == 0.0
    assert metrics["generation/latency_p50_s"] is None


def test_abort_leaves_no_unretrieved_task_exception(template: Template, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(RunAborted):
        generate(template, synthetic(60), FakeClient(fail=lambda _: True), ListSink(), concurrency=8,
                 max_error_rate=0.05)
    gc.collect()
    assert not [r for r in caplog.records if "exception was never retrieved" in r.getMessage()]
