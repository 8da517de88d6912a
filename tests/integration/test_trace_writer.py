"""The run's trace writer follows its journal while the calls go on (runner.run.genai.write_traces), against a
real sqlite MLflow store: a journaled judgment becomes a trace before the run says it is finished, a line still
being written waits for its newline, and a failed call's trace waits for the end, where a retry of it wins."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import mlflow
import pytest

from runner.core.config import TrackingConfig
from runner.core.types import Message
from runner.outputs import tracking
from runner.run.genai import Source, TraceJob, write_traces
from runner.storage.journal import JournalTail
from runner.storage.messages import MessageStore

pytestmark = pytest.mark.integration


def _row(item: str, *, failed: bool = False, sha: str = "") -> dict:
    return {"item_id": item, "repeat": 0, "order": "ab", "stage": "judge", "messages_sha256": sha,
            "status": "failed" if failed else "scored", "winner": None if failed else "ours",
            "verdict_label": None if failed else "A", "score": None, "scores": None, "judge_extras": None,
            "parse_error": None, "raw_response": None if failed else "Output (a)", "finish_reason": "stop",
            "prompt_tokens": 10, "completion_tokens": 2, "cost_usd": 0.0,
            "error_type": "server_error" if failed else None, "error": "HTTP 500" if failed else None,
            "latency_s": 0.1, "attempts": 3 if failed else 1, "rate_limited": 0, "source": "call"}


def _append(journal: Path, text: str) -> None:
    with journal.open("a", encoding="utf-8") as fh:
        fh.write(text)


def _lines(*rows: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _traces(cfg: TrackingConfig, run_id: str) -> dict[str, object]:
    mlflow.set_tracking_uri(cfg.uri)
    experiment = mlflow.MlflowClient(cfg.uri).get_run(run_id).info.experiment_id
    found = mlflow.search_traces(locations=[experiment], run_id=run_id, return_type="list")
    return {t.info.trace_metadata["judgesweep.item_id"]: t for t in found}


def _wait_for(count: int, cfg: TrackingConfig, run_id: str) -> dict[str, object]:
    deadline = time.monotonic() + 60  # a bound on a hang, not a speed claim
    while len(found := _traces(cfg, run_id)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def test_traces_follow_the_journal_and_a_retry_replaces_a_failure(tmp_path, empty_mlflow_store):
    store = tmp_path / "mlflow.db"
    store.write_bytes(empty_mlflow_store().read_bytes())
    cfg = TrackingConfig(uri=f"sqlite:///{store}", experiment="writer")
    client = tracking._client(cfg)
    run_id = client.create_run(tracking._experiment_id(client, cfg)).info.run_id
    journal, messages = tmp_path / "journal.jsonl", tmp_path / "messages.sqlite"
    with MessageStore(messages) as put:
        sha = put.put((Message("user", "Which output is better?"),))
    job = TraceJob(tracking=cfg, run_id=run_id, sources=(Source(journal, messages, "openai/judge"),),
                   labels={"a": {"gold": "ours"}}, prompts=(("my_prompt", "Judge {{ x }}", "s1"),),
                   dataset=("data", str(tmp_path / "data.jsonl"), [{"item_id": "a", "gold": "ours"}]))
    finished, written = threading.Event(), []
    writer = threading.Thread(target=lambda: written.append(write_traces(job, finished.is_set, poll_s=0.01)))
    writer.start()
    try:
        c = json.dumps(_row("c"))
        _append(journal, _lines(_row("a", sha=sha), _row("b", failed=True)) + c[:40])  # c still being written
        seen = _wait_for(1, cfg, run_id)
        assert set(seen) == {"a"}  # while the run goes on; the failure is held back, the torn line not read
        request = json.loads(seen["a"].data.request)
        assert request["messages"] == [{"role": "user", "content": "Which output is better?"}]
        _append(journal, c[40:] + "\n" + _lines(_row("b")))  # c's line ends, then a resume's retry of b succeeds
    finally:
        finished.set()
        writer.join()
    final = _traces(cfg, run_id)
    assert written == [3] and set(final) == {"a", "b", "c"}
    assert str(final["b"].info.state) == "OK"  # the retry, not the failure it replaced
    # the prompt registered, the dataset logged, at the writer's start
    tracked = client.get_run(run_id)
    assert [d.dataset.name for d in tracked.inputs.dataset_inputs] == ["data"]
    assert json.loads(tracked.data.tags["mlflow.linkedPrompts"]) == [{"name": "my_prompt", "version": "1"}]


def test_the_tail_reads_complete_lines_only(tmp_path):
    journal = tmp_path / "journal.jsonl"
    tail = JournalTail(journal)
    assert tail.read() == []  # no file yet
    x = json.dumps(_row("x", failed=True))
    _append(journal, x[:30])
    assert tail.read() == []
    _append(journal, x[30:] + "\n" + _lines(_row("y")))
    assert [r["item_id"] for r in tail.read()] == ["x", "y"] and tail.read() == []
