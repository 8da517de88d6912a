"""Honest failure semantics and independent repeats (issue 15, parts 3 and 4), in process against the loopback judge
with the users' own files (tests/fixtures/users/failures/: a pairwise JSONL, an agent-examples JSON).

An aborted run still writes what completed, marked partial; a pairwise run of unreadable answers fails; the
pass-rate gate counts every item; ``evaluation_completed`` is a timestamp; ``unanimous`` needs every vote valid;
repeat r is sent seed + r, and repeats at temperature 0 say once that their votes may be identical.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.fakes.openai_server import Reply
from tests.integration.conftest import live_judge

USERS = Path(__file__).resolve().parents[1] / "fixtures" / "users" / "failures"
PAIRS = USERS / "pairs.jsonl"
AGENT_EXAMPLES = USERS / "agent_examples.json"
AGENT_CRITERIA = ("accuracy", "completeness", "format_compliance", "scope_adherence", "context_usage")


def pairwise(server, *extra: str) -> list[str]:
    """The robust-pairwise setup on the users' pairs, one call per item and repeat, answers never cached."""
    return [*live_judge(server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
            f"dataset.path={PAIRS}", "order=fixed", "concurrency=1", "cache.mode=off", *extra]


def counted(answer):
    """A thread-safe reply policy: ``answer(n)`` for the n-th request (0-based)."""
    counter, lock = itertools.count(), threading.Lock()

    def reply(_body: dict) -> Reply:
        with lock:
            n = next(counter)
        return answer(n)

    return reply


def results(run) -> list[dict]:
    return [json.loads(line) for line in (run.run_dir / "results.jsonl").read_text().splitlines()]


# --------------------------------------------------------------------------------- an aborted run is partial


def test_an_aborted_run_writes_what_completed_marked_partial(run_cli, fake_server):
    # every third call fails: more than the default max_error_rate (5%), so the run stops after 20 calls
    fake_server.reply = counted(lambda n: Reply(status=500) if n % 3 == 2 else Reply(content="Better: [[A]]"))
    run = run_cli(*pairwise(fake_server, "judge.max_retries=0"))
    assert run.proc.returncode == 1, run.output
    assert "judge calls failed" in run.output and f"continue with resume={run.run_dir}" in run.output
    doc = run.summary()
    s = doc["summary"]
    assert doc["partial"] is True and s["partial"] is True
    assert doc["partial_reason"] == s["partial_reason"]
    assert re.match(r"stopped by max_error_rate after \d+ of 30 items: \d+ of \d+ judge calls failed",
                    doc["partial_reason"]), doc["partial_reason"]
    rows = results(run)
    judged = {row["item_id"] for row in rows}
    assert 0 < len(judged) < 30 and s["total_subsets"] == len(judged) == len(doc["aggregated_results"])
    failed = sorted(row["item_id"] for row in rows if row["status"] == "error")
    assert failed and s["failed_items"] == failed  # the failed calls' items have no verdict, the others do
    assert s["successful_evaluations"] == len(judged) - len(failed)
    assert "PARTIAL: stopped by max_error_rate" in run.output
    client = MlflowClient(tracking_uri=run.mlflow_uri)
    [mlflow_run] = client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id])
    assert mlflow_run.info.status == "FAILED" and "judge calls failed" in mlflow_run.data.tags[
        "judgesweep.abort_reason"]
    assert mlflow_run.data.metrics["items/total"] == len(judged)  # what completed is logged too


@pytest.mark.slow  # waits on the clock for its point (slow answers cut off by the abort)
def test_a_partial_run_summarizes_every_item_that_finished_before_the_abort(run_cli, fake_server):
    # pair-00's call is the first sent and fails last (after 1 s); the 29 others are answered at once: they finish
    # before it and wait behind it to be collected, and its failure crosses max_error_rate=0 (1 of 30 calls)
    fake_server.reply = lambda body: (Reply(status=400, error_message="no", delay_s=1.0)
                                      if "pair-00:" in json.dumps(body) else Reply(content="Better: [[A]]"))
    run = run_cli(*pairwise(fake_server, "concurrency=30", "max_error_rate=0.0"))
    assert run.proc.returncode == 1, run.output
    doc = run.summary()
    assert doc["partial"] is True and "1 of 30 judge calls failed" in doc["partial_reason"], doc["partial_reason"]
    judged = {row["item_id"] for row in results(run)}
    assert judged == {f"pair-{n:02d}" for n in range(1, 30)} and doc["summary"]["total_subsets"] == 29


# --------------------------------------------------------------------------------- unreadable pairwise answers


def test_a_pairwise_run_of_garbage_answers_exits_non_zero_with_one_line(run_cli, fake_server):
    fake_server.reply = lambda _body: Reply(content="Both answers have their merits.")
    run = run_cli(*pairwise(fake_server, "max_items=10"))
    assert run.proc.returncode == 1, run.output
    lines = [line for line in run.output.splitlines() if "max_unscored_rate" in line]
    assert len(lines) == 1 and lines[0].endswith(
        "judgesweep: run failed: 10 of 10 items have no valid verdict (100.0% > max_unscored_rate 20.0%)"), lines
    assert run.summary()["summary"]["successful_evaluations"] == 0


def test_max_unscored_rate_is_a_run_knob(run_cli, fake_server):
    # 2 of 10 items unreadable: 20% is not more than the default 20%; a lower max_unscored_rate fails the run
    fake_server.reply = counted(lambda n: Reply(content="no idea" if n in (3, 7) else "[[B]]"))
    ok = run_cli(*pairwise(fake_server, "max_items=10"))
    assert ok.proc.returncode == 0, ok.output
    fake_server.reply = counted(lambda n: Reply(content="no idea" if n in (3, 7) else "[[B]]"))
    strict = run_cli(*pairwise(fake_server, "max_items=10", "max_unscored_rate=0.1"))
    assert strict.proc.returncode == 1
    assert "run failed: 2 of 10 items have no valid verdict (20.0% > max_unscored_rate 10.0%)" in strict.output


# --------------------------------------------------------------------------------- the users' summary fields


def test_evaluation_completed_is_a_timestamp_and_unanimous_needs_every_vote(run_cli, fake_server):
    # per item, 3 repeats: pair-00 A A A (unanimous); pair-01 A A + an unreadable one (majority, not unanimous)
    script = {"pair-00": ["[[A]]"] * 3, "pair-01": ["[[A]]", "I cannot tell.", "[[A]]"]}
    calls: dict[str, int] = {}

    def reply(body: dict) -> Reply:
        item = re.search(r"(pair-\d\d):", body["messages"][-1]["content"]).group(1)
        calls[item] = calls.get(item, 0) + 1
        return Reply(content=script[item][calls[item] - 1])

    fake_server.reply = reply
    before = datetime.now(timezone.utc).replace(microsecond=0)
    run = run_cli(*pairwise(fake_server, "max_items=2", "repeats=3"))
    assert run.proc.returncode == 0, run.output
    doc = run.summary()
    completed = datetime.fromisoformat(doc["summary"]["evaluation_completed"])
    assert completed.utcoffset() == timedelta(0) and before <= completed <= datetime.now(timezone.utc)
    agg = doc["aggregated_results"]
    assert (agg["pair-00"]["final_verdict"], agg["pair-00"]["confidence"]) == ("chat", "unanimous")
    assert agg["pair-01"]["verdicts"] == ["chat", "chat"]
    assert (agg["pair-01"]["final_verdict"], agg["pair-01"]["confidence"]) == ("chat", "majority")
    assert doc["summary"]["confidence_distribution"] == {"unanimous": 1, "majority": 1, "no_consensus": 0}
    assert doc["summary"]["unanimous_agreement_rate"] == 0.5


# --------------------------------------------------------------------------------- the pass-rate gate's denominator


def agent_answer(body: dict) -> str:
    """All 4s for agent-pass (overall 4.0 >= 3.5); an accuracy of 9 on the 1-5 scale (unscored) for the other."""
    unscored = "agent-unscored:" in body["messages"][-1]["content"]
    scores = dict.fromkeys(AGENT_CRITERIA, 4) | ({"accuracy": 9} if unscored else {})
    return json.dumps({"scores": scores, "reasoning": "checked against the expected output", "pass": True})


def agent(server, *extra: str) -> list[str]:
    return ["experiment=agent_rubric", *live_judge(server), f"dataset.path={AGENT_EXAMPLES}", "cache.mode=off",
            "tracking=off", *extra]


def test_the_pass_rate_gate_counts_an_unscored_item_as_not_passed(run_cli, fake_server):
    fake_server.reply = agent_answer
    run = run_cli(*agent(fake_server))
    assert run.proc.returncode == 1, run.output
    line = ("gate.min_pass_rate: pass rate 50.0% < 80.0% (1 of 2 items passed, 1 unscored counted as not "
            "passed)")
    assert f"FAIL {line}" in run.output
    [gate] = run.summary()["gates"]
    assert (gate["passed"], gate["value"], gate["message"]) == (False, 0.5, line)


def test_the_pass_rate_gate_can_exclude_unscored_items_and_says_so(run_cli, fake_server):
    fake_server.reply = agent_answer
    run = run_cli(*agent(fake_server, "gate.unscored_as=exclude"))
    assert run.proc.returncode == 0, run.output
    line = "gate.min_pass_rate: pass rate 100.0% >= 80.0% (1 of 1 scored items passed, excluding 1 unscored)"
    assert f"PASS {line}" in run.output
    assert run.summary()["gates"][0]["message"] == line


def test_one_pass_rate_everywhere_over_all_examples(run_cli, fake_server):
    # issue 30, point 3: 1 passing + 1 unscored example is 50% on the console, in summary.json, in MLflow and at the
    # gate; the share of the scored examples (100%) has its own name
    fake_server.reply = agent_answer
    run = run_cli("experiment=agent_rubric", *live_judge(fake_server), f"dataset.path={AGENT_EXAMPLES}",
                  "cache.mode=off")
    assert run.proc.returncode == 1, run.output
    assert ("passed 1, failed 0, not scored 1 of 2 items: pass rate 50.0% (threshold 3.5; of the scored items only: "
            "100.0%)") in run.output
    assert "  tag services: 0 of 1 scored, pass rate 0.0%" in run.output  # its one example is unscored
    assert "FAIL gate.min_pass_rate: pass rate 50.0% < 80.0%" in run.output
    doc = run.summary()
    s = doc["summary"]
    assert (s["pass_rate"], s["pass_rate_scored"], s["passed"], s["failed"]) == (0.5, 1.0, 1, 0)
    assert s["pass_rate_ci"]["low"] < 0.5 < s["pass_rate_ci"]["high"]  # the interval is pass_rate's
    assert doc["gates"][0]["value"] == s["pass_rate"]
    assert doc["by_tag"]["services"]["pass_rate"] == 0.0 and doc["by_tag"]["hours"]["pass_rate"] == 1.0
    run_id = json.loads((run.run_dir / "run.json").read_text())["mlflow_run_id"]
    logged = MlflowClient(tracking_uri=run.mlflow_uri).get_run(run_id).data.metrics
    assert (logged["pass/rate"], logged["pass/rate_scored"]) == (0.5, 1.0)
    assert json.loads((run.run_dir / "metrics.json").read_text())["pass/rate"] == 0.5


# --------------------------------------------------------------------------------- independent repeats


def test_repeat_r_is_sent_seed_plus_r_and_its_own_cache_entry(run_cli, fake_server):
    args = [*live_judge(fake_server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
            f"dataset.path={PAIRS}", "order=fixed", "concurrency=1", "max_items=1", "repeats=3", "judge.seed=7",
            "tracking=off"]
    run = run_cli(*args)
    assert run.proc.returncode == 0, run.output
    assert sorted(body["seed"] for body in fake_server.requests) == [7, 8, 9]
    warnings = [line for line in run.output.splitlines() if "votes" in line or "same vote" in line]
    assert len(warnings) == 1 and "repeats=3 at temperature 0" in warnings[0], warnings
    assert sorted(row["repeat"] for row in results(run)) == [0, 1, 2]
    again = run_cli(*args)  # the cache answers each repeat with its own answer: nothing is sent again
    assert again.proc.returncode == 0, again.output
    assert len(fake_server.requests) == 3
    assert sorted(row["source"] for row in again.journal()) == ["cache"] * 3


def test_repeats_above_temperature_0_do_not_warn(run_cli, fake_server):
    run = run_cli(*pairwise(fake_server, "max_items=1", "repeats=2", "judge.temperature=0.7", "judge.seed=null",
                            "tracking=off"))
    assert run.proc.returncode == 0, run.output
    assert "temperature 0" not in run.output
    assert all("seed" not in body for body in fake_server.requests)  # no seed configured: none is sent


def test_an_aborted_ensemble_writes_the_items_every_member_finished(run_cli, fake_server):
    from tests.integration.shared import live_members

    calls_of_b = itertools.count()

    def reply(body: dict) -> Reply:  # member b (seed 2) fails from its 7th call on; member a always answers
        if body.get("seed") == 2 and next(calls_of_b) >= 6:
            return Reply(status=500)
        return Reply(content="Better: [[A]]")

    fake_server.reply = reply
    run = run_cli(*live_members(fake_server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
                  f"dataset.path={PAIRS}", "order=fixed", "concurrency=1", "cache.mode=off",
                  "judge.members.b.max_retries=0")
    assert run.proc.returncode == 1, run.output
    doc = run.summary()
    assert doc["partial"] is True and "stopped by max_error_rate" in doc["partial_reason"]
    rows = results(run)
    by_member = {m: {r["item_id"] for r in rows if r["judge"] == m} for m in ("a", "b")}
    assert by_member["a"] == by_member["b"] and 0 < len(by_member["a"]) < 30  # the items both finished
    assert doc["summary"]["total_subsets"] == len(by_member["a"]) == len(doc["aggregated_results"])
    assert (run.run_dir / "members" / "a" / "summary.json").is_file()
