"""The users' robust pairwise workflow against a live (loopback) judge through litellm over HTTP."""

from __future__ import annotations

import json
import re
import threading
from collections import defaultdict
from datetime import datetime, timedelta

import litellm
import pytest
from mlflow.tracking import MlflowClient

from tests.fakes.openai_server import Reply
from tests.integration.conftest import live_judge

# Per item (keyed by the question text): the verdicts the judge gives on its 1st, 2nd, 3rd call.
SCRIPT = {
    "q-unanimous": ["[[A]]", "[[A]]", "[[A]]"],
    "q-majority": ["[[B]]", "[[A]]", "[[B]]"],
    "q-split": ["[[A]]", "[[B]]", "[[C]]"],
    "q-unreadable": ["I cannot decide.", "Both are fine", "[[D]]"],
}


def write_dataset(path) -> None:
    """Four items; 'chat' is ours, 'simple-chat' the baseline."""
    with path.open("w") as fh:
        for qid in SCRIPT:
            fh.write(json.dumps({"id": qid, "prompt": qid, "chat": f"chat answer to {qid}",
                                 "simple_chat": f"simple answer to {qid}"}) + "\n")


def scripted_judge():
    """A reply function giving each item its scripted verdicts in call order (thread-safe)."""
    calls: dict[str, int] = defaultdict(int)
    lock = threading.Lock()

    def reply(body: dict) -> Reply:
        user = body["messages"][-1]["content"]
        qid = re.search(r"\[User Question\]\n(\S+)", user).group(1)
        with lock:
            n = calls[qid]
            calls[qid] += 1
        return Reply(content=f"Comparing the two answers... {SCRIPT[qid][n % 3]}")

    return reply


def robust_overrides(server, dataset) -> list[str]:
    # q-unreadable (1 of 4 items, 25%) has no valid verdict on purpose: above the default max_unscored_rate (20%),
    # which would fail the run (issue 15, tests/integration/test_failure_semantics.py)
    return [*live_judge(server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
            f"dataset.path={dataset}", "repeats=3", "order=fixed", "concurrency=1", "max_unscored_rate=0.25"]


def test_robust_pairwise_summary_in_the_users_format(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    fake_server.reply = scripted_judge()
    result = run_cli(*robust_overrides(fake_server, dataset))
    assert result.proc.returncode == 0, result.output
    doc = result.summary()
    s, agg = doc["summary"], doc["aggregated_results"]
    assert datetime.fromisoformat(s["evaluation_completed"]).utcoffset() == timedelta(0)  # issue 15: a timestamp
    assert s["num_evaluation_runs"] == 3 and s["total_subsets"] == 4 and s["successful_evaluations"] == 3
    assert s["final_verdict_distribution"] == {"chat": 1, "simple-chat": 1, "tie": 1}
    assert s["confidence_distribution"] == {"unanimous": 1, "majority": 1, "no_consensus": 1}
    assert s["ours_win_rate"] == s["baseline_win_rate"] == s["tie_rate"] == 1 / 3
    assert agg["q-unanimous"]["final_verdict"] == "chat" and agg["q-unanimous"]["confidence"] == "unanimous"
    assert agg["q-majority"]["final_verdict"] == "simple-chat"
    assert agg["q-majority"]["verdict_counts"] == {"simple-chat": 2, "chat": 1}
    assert agg["q-split"] == {"verdicts": ["chat", "simple-chat", "tie"],
                              "verdict_counts": {"chat": 1, "simple-chat": 1, "tie": 1},
                              "final_verdict": "tie", "confidence": "no_consensus"}
    # No valid vote is a failure, not a tie.
    assert agg["q-unreadable"]["final_verdict"] is None and s["failed_items"] == ["q-unreadable"]


def test_every_call_is_journaled_and_unparsable_output_is_unscored_not_a_vote(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    fake_server.reply = scripted_judge()
    result = run_cli(*robust_overrides(fake_server, dataset))
    journal = result.journal()
    assert len(journal) == 12 == len(fake_server.requests)
    unscored = [row for row in journal if row["status"] == "unscored"]
    assert len(unscored) == 3 and all(row["item_id"] == "q-unreadable" for row in unscored)
    assert all(row["raw_response"] and row["parse_error"] and row["winner"] is None for row in unscored)
    assert {"messages_sha256", "repeat", "order", "prompt_tokens", "cost_usd", "latency_s"} <= set(journal[0])
    body = fake_server.requests[0]
    assert body["temperature"] == 0.0 and body["seed"] == 0 and body["max_tokens"] == 512
    client = MlflowClient(tracking_uri=result.mlflow_uri)
    run = client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id])[0]
    assert run.data.metrics["judge/parse_failure_rate"] == 0.25
    assert run.data.metrics["judge/unscored"] == 3
    assert run.data.params["choice.judge"] == "local_openai"


def test_a_failed_call_is_recorded_and_the_run_goes_on(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    script = scripted_judge()
    fake_server.enqueue(Reply(status=500, error_message="upstream exploded"))
    fake_server.reply = script
    tolerant = run_cli(*robust_overrides(fake_server, dataset), "max_error_rate=0.5", "judge.max_retries=0",
                       "tracking=off")
    assert tolerant.proc.returncode == 0, tolerant.output
    errors = [row for row in tolerant.journal() if row["status"] == "error"]
    assert len(errors) == 1 and errors[0]["error_type"] == "InternalServerError"
    assert len(tolerant.journal()) == 12

    fake_server.reset()
    fake_server.enqueue(Reply(status=500, error_message="upstream exploded"))
    fake_server.reply = scripted_judge()
    strict = run_cli(*robust_overrides(fake_server, dataset), "judge.max_retries=0", "cache.mode=off",
                     "tracking=off")
    assert strict.proc.returncode == 1
    assert "1 of 12 judge calls failed" in strict.output
    assert (strict.run_dir / "summary.json").is_file()  # everything is still written


def test_transient_errors_are_retried_and_auth_errors_are_not(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    fake_server.enqueue(Reply(status=500, error_message="flaky"),
                        Reply(status=429, headers={"retry-after-ms": "200"}, error_message="slow down"),
                        Reply(status=503, error_message="overloaded"))
    fake_server.reply = scripted_judge()
    # a configured rpm: the 429 pauses the starts for its Retry-After and teaches no rate (without one, AIMD would
    # learn ~1 call/s from this cold start and pace the other calls for ~12 s; tests/integration/test_rate_limits.py
    # covers a limit nobody configured)
    result = run_cli(*robust_overrides(fake_server, dataset), "judge.retry_base_s=0.01", "judge.rpm=6000",
                     "tracking=off")
    assert result.proc.returncode == 0, result.output
    journal = result.journal()
    assert all(row["status"] != "error" for row in journal)  # nothing lost
    assert len(journal) == 12 and len(fake_server.requests) == 15  # 3 retried attempts on top
    retried = [row for row in journal if row["attempts"] > 1]
    assert len(retried) == 1 and retried[0]["attempts"] == 4 and retried[0]["rate_limited"] == 1

    fake_server.reset()
    fake_server.enqueue(Reply(status=401, error_message="bad key"))
    fake_server.reply = scripted_judge()
    auth = run_cli(*robust_overrides(fake_server, dataset), "max_error_rate=1.0", "cache.mode=off", "tracking=off")
    errors = [row for row in auth.journal() if row["status"] == "error"]
    assert len(errors) == 1 and errors[0]["error_type"] == "AuthenticationError" and errors[0]["attempts"] == 1
    assert len(fake_server.requests) == 12  # the 401 was not retried


def test_local_vllm_judge_takes_litellms_lighter_path_with_the_same_request(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    fake_server.reply = scripted_judge()
    result = run_cli("judge=local_vllm", f"judge.api_base={fake_server.base_url}", "judge.model=hosted_vllm/fake-judge",
                     "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
                     f"dataset.path={dataset}", "repeats=3", "order=fixed", "concurrency=1", "tracking=off",
                     "max_unscored_rate=0.25")  # q-unreadable on purpose (robust_overrides)
    assert result.proc.returncode == 0, result.output
    assert result.summary()["summary"]["final_verdict_distribution"] == {"chat": 1, "simple-chat": 1, "tie": 1}
    body = fake_server.requests[0]
    assert body["model"] == "fake-judge"
    assert body["temperature"] == 0.0 and body["seed"] == 0 and body["max_tokens"] == 512
    assert body["messages"][-1]["content"].startswith("[User Question]")


def test_price_as_prices_a_local_judges_calls_in_the_bar_the_summary_and_mlflow(run_cli, fake_server):
    """Issue 33: a local copy of a listed model with judge.price_as was shown as $0.0000 and "N calls unpriced"."""
    fake_server.reply = lambda body: Reply(content="[[A]]", prompt_tokens=1000, completion_tokens=100)
    run = run_cli(*live_judge(fake_server), "judge.price_as=gpt-4o-mini", "prompt=mtbench_pair",
                  "rubric=mtbench_verdict", "dataset=chat_vs_simple", "max_items=2", "order=fixed", "cache.mode=off")
    assert run.proc.returncode == 0, run.output
    per_call = sum(litellm.cost_per_token(model="gpt-4o-mini", prompt_tokens=1000, completion_tokens=100))
    metrics = json.loads((run.run_dir / "metrics.json").read_text())  # the summary's judge statistics
    assert per_call > 0 and metrics["cost/usd_total"] == pytest.approx(2 * per_call)
    assert metrics["cost/unknown_calls"] == 0
    assert f"cost ${2 * per_call:.4f} (0 calls unpriced)" in run.output  # the console summary
    assert re.search(rf"judging 2/2 \(100%\) .*  \${2 * per_call:.4f}  ", run.output), run.output  # the bar's record
    [mlflow_run] = MlflowClient(tracking_uri=run.mlflow_uri).search_runs(
        [MlflowClient(tracking_uri=run.mlflow_uri).get_experiment_by_name("judgesweep").experiment_id])
    assert mlflow_run.data.metrics["cost/usd_total"] == pytest.approx(2 * per_call)
    assert mlflow_run.data.metrics["cost/unknown_calls"] == 0
