"""Whatever a provider sends, a paid answer is kept and never paid twice (issue 29, points 2 and 4): lone surrogates
and NUL in an answer or an error, a 200 whose body is not UTF-8, not JSON or nested 200,000 deep, a usage that is not a
token count, an answer that trickles in a byte at a time, a Retry-After of a day. Every fault is sent by the fake
server over real HTTP; the runs are real runs, resumed where resuming is the point."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.fakes.openai_server import Reply, nested_body
from tests.integration.conftest import live_judge

PAIRS = Path(__file__).resolve().parents[1] / "fixtures" / "users" / "failures" / "pairs.jsonl"
LONE = "\ud800"  # what the JSON escape \ud800 decodes to: a lone surrogate, which no UTF-8 file or sqlite text holds
# a chat.completion whose content holds the bytes ff fe: not UTF-8
NOT_UTF8 = (b'{"id": "x", "object": "chat.completion", "created": 1, "model": "fake-judge", "choices": [{"index": 0, '
            b'"message": {"role": "assistant", "content": "[[A]] \xff\xfe"}, "finish_reason": "stop"}], '
            b'"usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}')


def pairwise(server, items: int, *extra: str) -> list[str]:
    """One call per item (order fixed), one at a time so the n-th request gets the n-th scripted reply."""
    return [*live_judge(server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
            f"dataset.path={PAIRS}", "order=fixed", "concurrency=1", f"max_items={items}", "judge.retry_base_s=0.01",
            *extra]


def metrics(run) -> dict[str, float]:
    client = MlflowClient(tracking_uri=run.mlflow_uri)
    [mlflow_run] = client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id])
    return mlflow_run.data.metrics


def resume(run_cli, run, overrides: list[str]):
    again = run_cli(*overrides, f"resume={run.run_dir}", run_dir=run.run_dir)
    assert again.proc.returncode == 0, again.output
    return again


def test_a_lone_surrogate_is_replaced_noted_and_counted_nul_kept_as_received(run_cli, fake_server):
    """Was: UnicodeEncodeError in the journal write, the paid answer lost, a traceback, and every resume crashing."""
    fake_server.reply = lambda _body: Reply(content=f"Verdict: [[A]] {LONE} and\x00NUL")
    overrides = pairwise(fake_server, 4, "cache.mode=read_write")
    run = run_cli(*overrides)
    assert run.proc.returncode == 0, run.output
    assert "Traceback" not in run.output
    assert len(fake_server.requests) == 4
    rows = run.journal()
    assert len(rows) == 4 and all(row["status"] == "scored" and row["winner"] is not None for row in rows)
    assert all(row["raw_response"] == "Verdict: [[A]] \ufffd and\x00NUL" for row in rows)  # NUL as received
    assert all(any(n.startswith("substituted: 1 lone surrogate") for n in row["provider_notes"]) for row in rows)
    assert metrics(run)["calls/substituted"] == 4
    again = resume(run_cli, run, overrides)
    assert len(fake_server.requests) == 4  # nothing paid twice
    results = [json.loads(line) for line in (again.run_dir / "results.jsonl").read_text().splitlines()]
    assert [row["raw_response"] for row in results] == ["Verdict: [[A]] \ufffd and\x00NUL"] * 4


def test_a_lone_surrogate_in_a_500s_message_is_journaled_with_the_failure(run_cli, fake_server):
    fake_server.reply = lambda _body: Reply(status=500, error_message=f"overloaded {LONE}")
    run = run_cli(*pairwise(fake_server, 2, "judge.max_retries=1", "max_error_rate=1", "tracking=off"))
    assert "Traceback" not in run.output and "UnicodeEncodeError" not in run.output, run.output
    rows = run.journal()
    assert len(rows) == 2 and all(row["status"] == "error" for row in rows)
    assert all("overloaded \ufffd" in row["error"] and row["provider_notes"] for row in rows)
    assert len(fake_server.requests) == 4  # a 5xx is retried as before: 2 calls x 2 attempts


def test_a_200_that_cannot_be_decoded_is_kept_unscored_with_its_reason_and_not_paid_again(run_cli, fake_server):
    """Was: retried as a 5xx (an extra paid answer per attempt), journaled as an error without the body."""
    fake_server.enqueue(Reply(body_bytes=NOT_UTF8), Reply(body_bytes=nested_body()), Reply(body_bytes=b"not json"))
    overrides = pairwise(fake_server, 3, "judge.max_retries=3", "max_unscored_rate=1", "cache.mode=read_write")
    run = run_cli(*overrides)
    assert run.proc.returncode == 0, run.output
    assert len(fake_server.requests) == 3  # a paid 2xx is never retried
    rows = run.journal()
    assert [row["status"] for row in rows] == ["unscored"] * 3
    assert [row["parse_error"] for row in rows] == ["undecodable_body"] * 3
    assert all(row["error_type"] is None and row["raw_response"] is None for row in rows)
    reasons = [row["provider_notes"][0] for row in rows]  # the recorded reason it has no raw text
    assert "UnicodeDecodeError" in reasons[0] and "RecursionError" in reasons[1] and "JSONDecodeError" in reasons[2]
    assert "an answer kept with a note (journaled with it): undecodable_body: UnicodeDecodeError" in run.output
    assert all(row["prompt_tokens"] is None for row in rows)  # nothing says what it cost: unknown, not 0
    m = metrics(run)
    assert m["judge/parse_failures/undecodable_body"] == 3 and m["calls/paid"] == 3 and m["tokens/unknown_calls"] == 3
    resume(run_cli, run, overrides)
    assert len(fake_server.requests) == 3  # read back from the journal, not paid again


def test_retry_malformed_sends_an_undecodable_200_again(run_cli, fake_server):
    fake_server.enqueue(Reply(body_bytes=nested_body()))
    run = run_cli(*pairwise(fake_server, 2, "judge.retry_malformed=true"))
    assert run.proc.returncode == 0, run.output
    assert len(fake_server.requests) == 3  # the undecodable answer was sent again ...
    assert [row["status"] for row in run.journal()] == ["scored", "scored"]
    assert metrics(run)["calls/paid"] == 3  # ... and counted as paid, not as a failed attempt


def test_a_valid_answer_with_a_malformed_usage_is_scored_with_its_tokens_unknown(run_cli, fake_server):
    """Was: journaled as unscored empty_choices, without the raw text, though the answer [[A]] was valid."""
    fake_server.enqueue(Reply(content="Verdict: [[A]]", usage={"prompt_tokens": -50, "completion_tokens": 3}),
                        Reply(content="Verdict: [[B]]", usage={"prompt_tokens": 10, "completion_tokens": 1e18}),
                        Reply(content="Verdict: [[A]]", usage="lots"))
    overrides = pairwise(fake_server, 3, "judge.retry_malformed=true", "cache.mode=read_write")
    run = run_cli(*overrides)
    assert run.proc.returncode == 0, run.output
    assert len(fake_server.requests) == 3  # an answer is not sent again, retry_malformed or not
    rows = run.journal()
    assert [row["status"] for row in rows] == ["scored"] * 3
    assert [row["raw_response"] for row in rows] == ["Verdict: [[A]]", "Verdict: [[B]]", "Verdict: [[A]]"]
    assert [row["verdict_label"] for row in rows] == ["A", "B", "A"]
    assert all(row["prompt_tokens"] is None and row["completion_tokens"] is None for row in rows)
    assert all(row["provider_notes"][0].startswith("usage_unknown: usage.") for row in rows)
    assert all(row["cost_usd"] is None for row in rows)
    m = metrics(run)
    assert m["tokens/unknown_calls"] == 3 and m["judge/scored"] == 3
    again = resume(run_cli, run, overrides)
    assert len(fake_server.requests) == 3
    assert [json.loads(line)["prompt_tokens"] for line in (again.run_dir / "results.jsonl").read_text().splitlines()
            ] == [None] * 3


@pytest.mark.slow  # waits on the clock for its point (a byte every 0.3 s until the deadline)
def test_an_answer_trickling_a_byte_at_a_time_ends_at_the_deadline_as_a_timeout(run_cli, fake_server):
    """Was: judge.timeout_s bounded each read, so a body sent a byte every 0.3 s took minutes (or forever)."""
    fake_server.reply = lambda _body: Reply(content="Verdict: [[A]]", trickle_s=0.3)
    run = run_cli(*pairwise(fake_server, 1, "judge.timeout_s=0.5", "judge.max_retries=1", "max_error_rate=1",
                            "tracking=off"))
    [row] = run.journal()
    assert row["status"] == "error" and row["error_type"] == "Timeout", row
    assert "judge.timeout_s=0.5" in row["error"] and "deadline" in row["error"]
    assert row["attempts"] == 2 and len(fake_server.requests) == 2  # retried as a timeout is


@pytest.mark.slow  # waits on the clock for its point (the Retry-After capped at 11 s)
def test_a_long_retry_after_is_capped_logged_with_its_end_and_shown_in_the_progress(run_cli, fake_server):
    """Was: Retry-After: 86400 honoured in full, silently (no request and no log line for 9+ minutes). One beyond
    judge.retry_rate_limited_s (300 s here) now fails its call at once (test_rate_limits.py); one within it is cut."""
    fake_server.enqueue(Reply(status=429, headers={"Retry-After": "200"}))
    run = run_cli(*pairwise(fake_server, 1, "judge.max_retry_after_s=11", "progress_interval_s=1", "tracking=off"))
    assert run.proc.returncode == 0, run.output
    assert len(fake_server.requests) == 2 and run.journal()[0]["status"] == "scored"
    assert re.search(r"local_openai: waiting 11 s for Retry-After \(until \d\d:\d\d:\d\d\)", run.output), run.output
    assert re.search(r"judging 0/1 .*eta -  .*paused: Retry-After, \d+ s left \(until \d\d:\d\d:\d\d\)", run.output), \
        run.output
