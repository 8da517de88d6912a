"""Micro-benchmarks of single per-call costs, in one process, min-of-repeats (robust to a busy machine).

Each number is the cost of one step of one judge call, measured by calling that step in a loop:

- openai SDK: ``async_maybe_transform`` of the chat request body (what ``AsyncCompletions.create``
  does before sending; litellm's ``openai/`` provider goes through it, ``hosted_vllm/`` does not).
- litellm: ``completion_cost`` of a response for an unpriced model (raises after trying several model
  names; litellm catches it on every call) and for the same model registered at $0.
- runner/storage/store.py ``Journal.append`` of a real judgment with and without ``os.fsync`` (on $TMPDIR's
  file system, where the benchmark runs write their journals).
- judgesweep's own per-call steps: render, hash, cache key, parse, journal record.
- Python's garbage collector: one full collection after ``import runner.run.pipeline``, and after ``gc.freeze()``.

Writes benchmarks/micro.json. Standalone: ``python -m benchmarks.micro``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from benchmarks.harness import REPO  # noqa: E402
from benchmarks.request import build_messages  # noqa: E402

OUT = REPO / "benchmarks" / "micro.json"


def best_us(fn: Callable[[], Any], number: int, repeat: int = 5) -> float:
    """Microseconds per call: the fastest of ``repeat`` loops of ``number`` calls."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - started) / number)
    return round(best * 1e6, 1)


def openai_transform(messages: list[dict]) -> float:
    """The openai SDK's request-body transform, as AsyncCompletions.create calls it."""
    from openai._types import omit
    from openai._utils import async_maybe_transform
    from openai.types.chat import completion_create_params

    keys = ["audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
            "max_completion_tokens", "metadata", "modalities", "moderation", "n", "parallel_tool_calls",
            "prediction", "presence_penalty", "prompt_cache_key", "prompt_cache_options", "prompt_cache_retention",
            "reasoning_effort", "response_format", "safety_identifier", "service_tier", "stop", "store", "stream",
            "stream_options", "tool_choice", "tools", "top_logprobs", "top_p", "user", "verbosity",
            "web_search_options"]
    body = {k: omit for k in keys}
    body.update({"messages": messages, "model": "fake-judge", "temperature": 0.0, "max_tokens": 512, "seed": 0})
    target = completion_create_params.CompletionCreateParamsNonStreaming
    loop = asyncio.new_event_loop()
    try:
        return best_us(lambda: loop.run_until_complete(async_maybe_transform(body, target)), 300)
    finally:
        loop.close()


def litellm_cost() -> dict[str, float]:
    """litellm.completion_cost for an unpriced model (exception path) and for one registered at $0."""
    import litellm
    from litellm.types.utils import ModelResponse

    def response(model: str) -> ModelResponse:
        return ModelResponse(model=model, choices=[{"index": 0, "finish_reason": "stop",
                                                    "message": {"role": "assistant", "content": "[[A]]"}}],
                             usage={"prompt_tokens": 1090, "completion_tokens": 2, "total_tokens": 1092})

    def cost(model: str) -> None:
        try:
            litellm.completion_cost(completion_response=response(model), model=model)
        except Exception:  # litellm's own caller swallows this on every call, as here
            pass

    unpriced = best_us(lambda: cost("openai/bench-unpriced"), 300)
    entry = {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0, "litellm_provider": "openai", "mode": "chat"}
    litellm.register_model({"openai/bench-priced": entry, "bench-priced": entry})
    priced = best_us(lambda: cost("openai/bench-priced"), 300)
    build = best_us(lambda: response("openai/bench-priced"), 300)
    return {"completion_cost_unpriced_model_us": round(unpriced - build, 1),
            "completion_cost_model_at_0_usd_us": round(priced - build, 1)}


def journal(judgment: Any) -> dict[str, float]:
    """runner.storage.journal.Journal.append with and without fsync: mean, p50 and p99 microseconds."""
    import runner.storage.journal as journal_module

    out = {}
    real_os = journal_module.os
    for label, fsync in (("with_fsync", True), ("without_fsync", False)):
        with tempfile.TemporaryDirectory() as tmp:
            if not fsync:
                journal_module.os = type("NoFsync", (), {**{k: getattr(real_os, k) for k in ("SEEK_END",)},
                                                         "fsync": staticmethod(lambda fd: None)})
            try:
                j = journal_module.Journal(Path(tmp) / "journal.jsonl")
                times = []
                for _ in range(2000):
                    started = time.perf_counter()
                    j.append(judgment)
                    times.append(time.perf_counter() - started)
                j.close()
            finally:
                journal_module.os = real_os
        times.sort()
        out[label] = {"mean_us": round(statistics.mean(times) * 1e6, 1), "p50_us": round(times[1000] * 1e6, 1),
                      "p99_us": round(times[1980] * 1e6, 1)}
    return out


def runner_steps(row: dict) -> tuple[dict[str, float], Any]:
    """judgesweep's own per-call work outside litellm; returns the timings and a real judgment."""
    from runner.core.types import JudgeRequest, JudgeResponse, Judgment, Order, Status, hash_messages
    from runner.inputs.prompts import load_template
    from runner.judging.parsers.labels import parse_verdict
    from runner.storage.journal import judgment_record
    from runner.storage.keys import cache_key

    template = load_template(REPO / "prompts", "mtbench_pair")
    variables = {"instruction": row["prompt"], "output_a": row["chat"], "output_b": row["simple_chat"]}
    messages = template.render(variables)
    params = {"temperature": 0.0, "max_tokens": 512, "seed": 0}
    labels = ("A", "B", "tie")
    verdict = parse_verdict("mtbench_brackets", "[[A]]", labels, {})
    judgment = Judgment(JudgeRequest("item-000001", 0, Order.AB, "judge", hash_messages(messages)),
                        JudgeResponse(text="[[A]]", finish_reason="stop", prompt_tokens=1090, completion_tokens=2,
                                      latency_s=0.2), verdict, "chat", Status.SCORED)
    return {
        "render_us": best_us(lambda: template.render(variables), 2000),
        "hash_messages_us": best_us(lambda: hash_messages(messages), 2000),
        "cache_key_us": best_us(lambda: cache_key("openai/fake-judge", "http://x/v1", messages, params, 0), 2000),
        "parse_verdict_us": best_us(lambda: parse_verdict("mtbench_brackets", "[[A]]", labels, {}), 2000),
        "journal_record_json_us": best_us(lambda: json.dumps(judgment_record(judgment), ensure_ascii=False), 2000),
    }, judgment


def full_gc() -> dict[str, Any]:
    """One full collection after importing a run's modules, before and after gc.freeze()."""
    import runner.outputs.tracking  # noqa: F401
    import runner.run.pipeline  # noqa: F401  (runner.app.cli imports the run's modules only when a job starts)

    gc.collect()
    tracked = len(gc.get_objects())
    before = best_us(lambda: gc.collect(2), 3, repeat=3) / 1000
    gc.freeze()
    after = best_us(lambda: gc.collect(2), 3, repeat=3) / 1000
    gc.unfreeze()
    return {"tracked_objects_after_imports": tracked, "full_collection_ms": round(before, 1),
            "full_collection_after_freeze_ms": round(after, 1)}


def main() -> None:
    """Run every micro-benchmark; print and write benchmarks/micro.json."""
    from benchmarks.data import write_dataset

    data = write_dataset(Path(tempfile.gettempdir()) / "judgesweep-bench-data" / "chat_vs_simple_1000.jsonl", 1000)
    row = json.loads(data.read_text(encoding="utf-8").splitlines()[1])
    result: dict[str, Any] = {"gc": full_gc()}
    result["openai_sdk_request_transform_us"] = openai_transform(build_messages(row))
    result["litellm"] = litellm_cost()
    result["runner"], judgment = runner_steps(row)
    result["journal_append"] = journal(judgment)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
