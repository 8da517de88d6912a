"""A provider's rate limit that nobody configured: the run learns it from the 429s and loses nothing.

The provider admits 8 requests in any sliding second (480 rpm, metered per second) and answers 429 with
Retry-After and retry-after-ms beyond it. Without ``judge.rpm`` a run at concurrency 16 used to exhaust its
retries and abort ("RunAborted: 4 of 74 judge calls failed"); now every 429 goes back through the judge's
limiter, which learns the rate (runner.llm.pacing), and never counts against max_retries or max_error_rate.
"""

from __future__ import annotations

import json
import math
import threading
import time

import pytest

from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.integration.conftest import live_judge

pytestmark = pytest.mark.integration

PER_SECOND = 8  # under the 16 requests concurrency=16 sends at once: the limit is hit however slow the machine
N_ITEMS = 12  # 24 calls: the first 16 at once meet a limit of 8, and the run waits ~3 s, not ~7.5


class OneSecondWindow:
    """A reply policy admitting PER_SECOND requests in any sliding second; 429 + Retry-After beyond it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.admitted: list[float] = []
        self.rejected = 0

    def __call__(self, body: dict) -> Reply:
        now = time.monotonic()
        with self.lock:
            self.admitted = [t for t in self.admitted if now - t < 1.0]
            if len(self.admitted) >= PER_SECOND:
                self.rejected += 1
                wait = self.admitted[0] + 1.0 - now
                return Reply(status=429, error_message="Rate limit reached for requests",
                             headers={"Retry-After": str(max(1, math.ceil(wait))),
                                      "retry-after-ms": str(round(wait * 1000))})
            self.admitted.append(now)
        return Reply(content="[[A]]", delay_s=0.05)


@pytest.mark.slow  # waits on the clock for its point (429s and their Retry-After)
def test_an_unconfigured_rate_limit_loses_no_judgment(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    dataset.write_text("".join(json.dumps({"id": f"q{n}", "prompt": f"q{n}", "chat": "a", "simple_chat": "b"}) + "\n"
                               for n in range(N_ITEMS)))
    provider = OneSecondWindow()
    fake_server.reply = provider
    result = run_cli(*live_judge(fake_server), "prompt=mtbench_pair", "rubric=mtbench_verdict",
                     "dataset=chat_vs_simple", f"dataset.path={dataset}", "order=both", "concurrency=16",
                     "judge.max_retries=0", "tracking=off", "cache.mode=off", "progress=false")
    assert result.proc.returncode == 0, result.output
    journal = result.journal()
    assert len(journal) == 2 * N_ITEMS and all(row["status"] == "scored" for row in journal)
    assert provider.rejected > 0  # the limit was hit, and every 429 was absorbed ...
    assert sum(row["rate_limited"] for row in journal) == provider.rejected
    assert max(row["rate_limited"] for row in journal) > 0  # ... though judge.max_retries=0 allows no retry


@pytest.mark.slow  # waits on the clock for its point (the patience of 429s without progress)
def test_without_progress_a_429_is_given_up_after_the_patience(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    dataset.write_text(json.dumps({"id": "q0", "prompt": "q", "chat": "a", "simple_chat": "b"}) + "\n")
    fake_server.reply = lambda body: Reply(status=429, headers={"retry-after-ms": "50"}, error_message="no")
    result = run_cli(*live_judge(fake_server), "prompt=mtbench_pair", "rubric=mtbench_verdict",
                     "dataset=chat_vs_simple", f"dataset.path={dataset}", "order=fixed",
                     "judge.retry_rate_limited_s=1", "max_error_rate=1.0", "tracking=off", "cache.mode=off")
    [row] = result.journal()
    assert (row["status"], row["error_type"]) == ("error", "RateLimitError")
    assert row["rate_limited"] == row["attempts"] > 1


N_SPORADIC = 300  # judgments against 10% sporadic 429s: enough answers for a few trials of a cut (20 requests a side)


@pytest.mark.slow  # waits on the clock for its point (429s and their Retry-After)
def test_sporadic_429s_are_not_read_as_a_rate_limit(run_cli, tmp_path):
    """A provider answering 10% of requests 429 whatever the rate (seeded): their share is no evidence of a rate limit
    (under 20% of the answers), so each holds back only its own call: no cut of the rate, no pause; nothing is lost."""
    dataset = tmp_path / "pairs.jsonl"
    dataset.write_text("".join(json.dumps({"id": f"q{n}", "prompt": f"q{n}", "chat": "a", "simple_chat": "b"}) + "\n"
                               for n in range(N_SPORADIC)))
    with FakeOpenAIServer(sporadic_429=0.1, sporadic_seed=29) as server:
        server.reply = lambda body: Reply(content="[[A]]", delay_s=0.02)
        result = run_cli(*live_judge(server), "prompt=mtbench_pair", "rubric=mtbench_verdict",
                         "dataset=chat_vs_simple", f"dataset.path={dataset}", "order=fixed", "concurrency=16",
                         "tracking=off", "cache.mode=off", "progress=false")
        count_429 = server.stats()["count_429"]
    assert result.proc.returncode == 0, result.output
    journal = result.journal()
    assert len(journal) == N_SPORADIC and all(row["status"] == "scored" for row in journal)
    assert sum(row["rate_limited"] for row in journal) == count_429 > 0  # every 429 sent again, none lost
    assert "429 with no rpm configured: pacing at" not in result.output, result.output  # never read as a rate limit


def one_judgment_per_item(tmp_path, items: int) -> list[str]:
    """Overrides of a run of ``items`` single-order judgments of the local_openai judge."""
    dataset = tmp_path / "pairs.jsonl"
    dataset.write_text("".join(json.dumps({"id": f"q{n}", "prompt": f"q{n}", "chat": "a", "simple_chat": "b"}) + "\n"
                               for n in range(items)))
    return ["prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple", f"dataset.path={dataset}",
            "order=fixed", "max_error_rate=1.0", "tracking=off", "cache.mode=off", "progress=false"]


@pytest.mark.slow  # a run, then its resume, against a provider's 429s
def test_a_retry_after_beyond_the_patience_fails_the_call_at_once_and_a_resume_sends_it_again(run_cli, fake_server,
                                                                                              tmp_path):
    """Issue 44 point 11 was: each 429 Retry-After: 86400 paused every call of the judge for max_retry_after_s (60 s),
    one call after another, so 200 calls took ~3.3 h whatever judge.retry_rate_limited_s said."""
    overrides = [*live_judge(fake_server), *one_judgment_per_item(tmp_path, 12), "concurrency=4",
                 "judge.retry_rate_limited_s=2", "judge.max_retry_after_s=1"]
    fake_server.reply = lambda body: Reply(status=429, headers={"Retry-After": "86400"}, error_message="quota")
    run = run_cli(*overrides)
    journal = run.journal()
    assert len(journal) == 12 and len(fake_server.requests) == 12  # each call sent once, none waited
    assert all((row["status"], row["error_type"], row["attempts"]) == ("error", "RateLimitError", 1) for row in journal)
    assert all(row["error"].startswith("rate limited: retry-after 86400 s exceeds judge.retry_rate_limited_s=2")
               for row in journal), journal[0]["error"]
    fake_server.reset()
    fake_server.reply = lambda body: Reply(content="[[A]]")
    again = run_cli(*overrides, f"resume={run.run_dir}", run_dir=run.run_dir)
    assert again.proc.returncode == 0, again.output
    assert len(fake_server.requests) == 12 and all(row["status"] == "scored" for row in again.journal()[12:])


@pytest.mark.slow  # waits on the clock for its point (the judge's patience with 429s)
def test_the_patience_with_429s_is_the_judges_not_each_calls(run_cli, fake_server, tmp_path):
    """Was: each call had its own judge.retry_rate_limited_s from its first attempt, so a provider that let nothing
    through held every group of `concurrency` calls for a whole patience, one group after another."""
    fake_server.reply = lambda body: Reply(status=429, headers={"retry-after-ms": "300"}, error_message="no")
    run = run_cli(*live_judge(fake_server), *one_judgment_per_item(tmp_path, 4), "concurrency=1",
                  "judge.retry_rate_limited_s=1", "judge.rpm=6000")  # an rpm: a 429 pauses all, lends no place
    attempts = [row["attempts"] for row in run.journal()]
    assert attempts[0] > 1 and attempts[1:] == [1, 1, 1], attempts  # past the judge's patience: given up at once
