"""Nothing paid is thrown away (issue 17, deliverable 5): a 200 without a usable answer (``choices: []``, with its
usage) is a paid, malformed answer, journaled unscored with its reason and its tokens counted; it is sent again only
when ``judge.retry_malformed`` says so, and then counted as paid twice (``calls/paid``)."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from runner.llm.client import price
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.integration.conftest import live_judge

PAIRS = Path(__file__).resolve().parents[1] / "fixtures" / "users" / "failures" / "pairs.jsonl"
ITEMS = 30
EMPTY = Reply(no_choices=True, prompt_tokens=100, completion_tokens=20)
GOOD = Reply(content="Better: [[A]]", prompt_tokens=10, completion_tokens=2)


def pairwise(server, *extra: str) -> list[str]:
    """One call per item (order fixed), never cached, one at a time so the n-th request is the n-th reply."""
    return [*live_judge(server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
            f"dataset.path={PAIRS}", "order=fixed", "concurrency=1", "cache.mode=off", *extra]


def every_fifth_empty(first_only: bool = False):
    """Replies: every fifth request a 200 with no choices; ``first_only``: only the first time an item is asked."""
    counter, lock, seen = itertools.count(), threading.Lock(), set()

    def reply(body: dict) -> Reply:
        key = json.dumps(body["messages"], sort_keys=True)
        with lock:
            if first_only and key in seen:
                return GOOD
            seen.add(key)
            n = next(counter)
        return EMPTY if n % 5 == 0 else GOOD

    return reply


def metrics(run) -> dict[str, float]:
    client = MlflowClient(tracking_uri=run.mlflow_uri)
    [mlflow_run] = client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id])
    return mlflow_run.data.metrics


def test_a_200_without_choices_is_a_paid_unscored_answer_not_retried(run_cli, fake_server):
    fake_server.reply = every_fifth_empty()
    run = run_cli(*pairwise(fake_server, "max_unscored_rate=1"))
    assert run.proc.returncode == 0, run.output
    assert len(fake_server.requests) == ITEMS  # nothing paid twice
    rows = run.journal()
    empty = [row for row in rows if row["parse_error"] == "empty_choices"]
    assert len(empty) == ITEMS // 5 and all(row["status"] == "unscored" and row["error_type"] is None for row in empty)
    assert all((row["prompt_tokens"], row["completion_tokens"]) == (100, 20) for row in empty)
    m = metrics(run)
    assert m["tokens/prompt"] == 100 * (ITEMS // 5) + 10 * (ITEMS - ITEMS // 5)
    assert m["tokens/completion"] == 20 * (ITEMS // 5) + 2 * (ITEMS - ITEMS // 5)
    assert m["calls/paid"] == ITEMS and m["judge/errors"] == 0
    assert m["judge/parse_failures/empty_choices"] == ITEMS // 5


def test_retry_malformed_sends_it_again_and_counts_it_paid_twice(run_cli, fake_server):
    fake_server.reply = every_fifth_empty(first_only=True)
    run = run_cli(*pairwise(fake_server, "judge.retry_malformed=true"))
    assert run.proc.returncode == 0, run.output
    assert len(fake_server.requests) == ITEMS + ITEMS // 5
    rows = run.journal()
    assert len(rows) == ITEMS and all(row["status"] == "scored" for row in rows)
    m = metrics(run)
    assert m["calls/paid"] == ITEMS + ITEMS // 5 and m["calls/made"] == ITEMS
    # the malformed answers' tokens are part of the spend
    assert m["tokens/prompt"] == 100 * (ITEMS // 5) + 10 * ITEMS


def test_a_resumed_run_reads_the_empty_answer_back_and_does_not_pay_for_it_again(run_cli, fake_server):
    fake_server.reply = every_fifth_empty()
    first = run_cli(*pairwise(fake_server, "max_unscored_rate=1"))
    assert first.proc.returncode == 0, first.output
    sent = len(fake_server.requests)
    again = run_cli(*pairwise(fake_server, "max_unscored_rate=1"), f"resume={first.run_dir}", run_dir=first.run_dir)
    assert again.proc.returncode == 0, again.output
    assert len(fake_server.requests) == sent  # every answer, the empty ones included, came from the journal
    rows = [json.loads(line) for line in (again.run_dir / "results.jsonl").read_text().splitlines()]
    assert sum(row["parse_error"] == "empty_choices" for row in rows) == ITEMS // 5


def test_the_empty_answers_tokens_are_priced_into_the_spend(run_cli, fake_server):
    fake_server.reply = lambda _body: EMPTY
    run = run_cli(*pairwise(fake_server, "judge.model=openai/gpt-4o-mini", "max_unscored_rate=1",
                            "max_items=5"))
    assert len(fake_server.requests) == 5
    each = price("openai/gpt-4o-mini", 100, 20)
    assert each is not None and each > 0
    m = metrics(run)
    assert m["cost/usd_total"] == pytest.approx(5 * each) and m["cost/unknown_calls"] == 0


def test_a_replica_that_answers_without_choices_is_not_failed_over(run_cli):
    """litellm's Router fails over on a 500-status error, which is what litellm makes of an empty 200: the replica
    was paid, so the call is not sent to the other one."""
    with FakeOpenAIServer() as one, FakeOpenAIServer() as two:
        for server in (one, two):
            server.reply = lambda _body: EMPTY
        run = run_cli("judge=local_openai", "judge.api_base=null", "judge.model=openai/fake-judge",
                      f"judge.replicas=[{{api_base:{one.base_url},rpm:60000}},{{api_base:{two.base_url},rpm:60000}}]",
                      "prompt=mtbench_pair", "rubric=mtbench_verdict", "max_items=5", "order=fixed", "cache.mode=off",
                      "max_unscored_rate=1")
        sent = len(one.requests) + len(two.requests)
    assert run.proc.returncode == 0, run.output
    assert sent == 5
    assert metrics(run)["calls/paid"] == 5 and metrics(run)["judge/parse_failures/empty_choices"] == 5
