"""The robust pairwise preset survives failed calls as its users asked (issue 30, point 2), in process against the
loopback judge on the users' pairs (tests/fixtures/users/failures/pairs.jsonl): one failed run never stops the rest,
failed votes are counted as such, and the summary and console say how many calls failed and were retried. Also
for every run: a partial run's retries count the calls its abort cut off."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

from tests.fakes.openai_server import Reply
from tests.integration.conftest import live_judge

PAIRS = Path(__file__).resolve().parents[1] / "fixtures" / "users" / "failures" / "pairs.jsonl"
CONTEXT_LENGTH = ("This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 "
                  "tokens. Please reduce the length of the messages.")
RETRY_LINE = re.compile(r"local_openai: \w+, retry \d+/\d+ in ")


def robust(server, tmp_path: Path, items: int, *extra: str) -> list[str]:
    """``experiment=robust_pairwise`` (3 repeats, swap_random) on the first ``items`` of the users' pairs."""
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(PAIRS.read_text().splitlines(keepends=True)[:items]))
    return ["experiment=robust_pairwise", *live_judge(server), f"dataset.path={data}", "cache.mode=off",
            "tracking=off", *extra]


def failing(context_length: set[str], broken: str, delay_s: float = 0.0):
    """Replies: a context-length 400 to the first call of each item in ``context_length`` (after ``delay_s``), a 500
    to every call of ``broken``, else a verdict for A."""
    first_calls: set[str] = set()
    lock = threading.Lock()

    def reply(body: dict) -> Reply:
        item = re.search(r"(pair-\d\d):", body["messages"][-1]["content"]).group(1)
        with lock:
            first = item not in first_calls
            first_calls.add(item)
        if item in context_length and first:
            return Reply(status=400, error_message=CONTEXT_LENGTH, delay_s=delay_s)
        if item == broken:
            return Reply(status=500, error_message="internal error")
        return Reply(content="A is better. [[A]]")

    return reply


def test_robust_pairwise_counts_failed_votes_and_completes(run_cli, fake_server, tmp_path):
    # 10 pairs x 3 votes = 30 calls; 4 fail: pair-03's first call (context length, not retried), pair-05's three
    # (500 after judge.max_retries=4 retries each): more than the default max_error_rate 0.05 of the calls
    fake_server.reply = failing({"pair-03"}, "pair-05")
    run = run_cli(*robust(fake_server, tmp_path, 10, "judge.retry_base_s=0.001", "judge.retry_max_s=0.002"))
    assert run.proc.returncode == 0, run.output
    doc = run.summary()
    s, items = doc["summary"], doc["aggregated_results"]
    assert "partial" not in doc and (s["total_subsets"], s["successful_evaluations"]) == (10, 9)
    assert s["failed_items"] == ["pair-05"]  # no vote: failed, counted
    assert (items["pair-05"]["verdicts"], items["pair-05"]["final_verdict"]) == ([], None)
    assert len(items["pair-03"]["verdicts"]) == 2  # judged on the two votes it has
    assert items["pair-03"]["final_verdict"] is not None and items["pair-03"]["confidence"] == "majority"
    assert all(len(v["verdicts"]) == 3 for k, v in items.items() if k not in ("pair-03", "pair-05"))
    logged = len(RETRY_LINE.findall(run.output))
    assert logged == 12  # pair-05's three calls, 4 retries each
    assert (s["failed_calls"], s["retries"]) == (4, 12)
    assert "calls made 30 (failed 4)" in run.output and "retries 12," in run.output
    metrics = json.loads((run.run_dir / "metrics.json").read_text())
    assert (metrics["calls/failed"], metrics["calls/retries"], metrics["judge/errors"]) == (4, 12, 4)


def test_robust_pairwise_with_every_call_failing_still_exits_non_zero(run_cli, fake_server, tmp_path):
    # max_error_rate 1.0 never stops the preset; a judge that never answers still fails the run (max_unscored_rate)
    fake_server.reply = lambda _body: Reply(status=400, error_message=CONTEXT_LENGTH)
    run = run_cli(*robust(fake_server, tmp_path, 3))
    assert run.proc.returncode == 1, run.output
    assert "run failed: 3 of 3 items have no valid verdict" in run.output
    assert run.summary()["summary"]["failed_calls"] == 9


def test_a_partial_run_counts_the_retries_of_the_calls_its_abort_cut_off(run_cli, fake_server, tmp_path):
    # All 30 calls at once. pair-09 answers 500 every time: its three calls back off (up to 5 s a retry); two
    # context-length 400s (answered after 0.3 s) then cross max_error_rate 0.05 and the run stops with pair-09's
    # calls cut off. Their retries were made (and logged): the summary counts them.
    fake_server.reply = failing({"pair-01", "pair-02"}, "pair-09", delay_s=0.3)
    run = run_cli(*robust(fake_server, tmp_path, 10, "max_error_rate=0.05", "concurrency=30",
                          "judge.retry_base_s=5", "judge.retry_max_s=5"))
    assert run.proc.returncode == 1, run.output
    doc = run.summary()
    assert doc["partial"] is True and "pair-09" not in doc["aggregated_results"]
    logged = len(RETRY_LINE.findall(run.output))
    assert logged >= 3  # each of pair-09's calls decided at least one retry
    metrics = json.loads((run.run_dir / "metrics.json").read_text())
    assert metrics["calls/retries"] == logged
    assert f"retries {logged}," in run.output
    assert doc["summary"]["retries"] == logged
    assert metrics["calls/made"] >= 20 and metrics["calls/failed"] >= 2
