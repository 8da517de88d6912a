"""Without a terminal (piped output, CI), a paid stage logs a one-line progress record every
``progress_interval_s`` seconds and once at its end (run in this process, whose output is not a TTY)."""

from __future__ import annotations

import re

import pytest

from tests.fakes.openai_server import Reply
from tests.integration.conftest import live_judge

RECORD = re.compile(r"\[runner\.judging\.progress\]\[INFO\] - judging (\d+)/6 \(\d+%\)  \d+ s  [\d.]+ calls/s  "
                    r"eta (-|\d+:\d\d:\d\d)  \$[\d.]+  errors (\d+)  429s (\d+)  retries 0$")


def run(run_cli, fake_server, *extra: str, delay_s: float = 0.15):
    fake_server.reply = lambda body: Reply(content="[[A]]", delay_s=delay_s)
    return run_cli(*live_judge(fake_server), "prompt=mtbench_pair", "rubric=mtbench_verdict",
                   "dataset=chat_vs_simple", "max_items=6", "order=fixed", "concurrency=1", "cache.mode=off",
                   "tracking=off", *extra)


@pytest.mark.slow  # waits on the clock for its point (progress records every interval)
def test_progress_is_logged_every_interval_and_at_the_end(run_cli, fake_server):
    result = run(run_cli, fake_server, "progress_interval_s=0.2")
    assert result.proc.returncode == 0, result.output
    records = [RECORD.search(line) for line in result.output.splitlines()]
    done = [int(m.group(1)) for m in records if m]
    assert len(done) >= 3, result.output  # ~1 s of calls at 0.2 s: periodic records, then the last one
    assert done == sorted(done) and done[-1] == 6 and done[0] < 6
    assert all(m.group(3) == "0" and m.group(4) == "0" for m in records if m)
    # a piped heartbeat carries the ETA from the rate so far (issue 33); the last one none is left
    etas = [m.group(2) for m in records if m]
    assert any(re.fullmatch(r"0:\d\d:\d\d", e) and e != "0:00:00" for e in etas[:-1]), etas
    assert etas[-1] == "0:00:00"


def test_no_progress_record_when_progress_is_off_or_the_interval_zero(run_cli, fake_server):
    for off in ("progress=false", "progress_interval_s=0"):
        result = run(run_cli, fake_server, off, delay_s=0.0)  # not even the stage's last record
        assert result.proc.returncode == 0, result.output
        assert "runner.judging.progress" not in result.output, off


def test_the_steps_after_judging_are_logged_after_the_last_record(run_cli, fake_server):
    result = run(run_cli, fake_server, "tracking=sqlite", delay_s=0.0)
    assert result.proc.returncode == 0, result.output
    lines = [line.split(" - ", 1)[1] for line in result.output.splitlines()
             if "[runner.judging.progress][INFO]" in line]
    assert lines[0].startswith("judging 6/6 (100%)"), lines  # the stage's last record, then the steps in order
    assert lines[1:] == ["summarizing", "writing results.jsonl", "writing summary", "writing report.html",
                         "publishing to MLflow"]  # results.jsonl is written once, with the report's posteriors
