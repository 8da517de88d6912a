"""Exact resume: a run killed with SIGKILL mid-way and resumed pays for nothing twice and ends with the
same results file as an uninterrupted run; its MLflow run is continued, not duplicated. What each journaled call
was shown is in messages.sqlite after the kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from mlflow.tracking import MlflowClient

from runner.storage.messages import MESSAGES_NAME, MessageStore
from tests.fakes.openai_server import slow_verdict_by_prompt, verdict_by_prompt
from tests.integration.conftest import REPO, cli_args, live_judge, mlflow_uri, offline_env

N_ITEMS, REPEATS = 8, 3
TOTAL = N_ITEMS * REPEATS


def write_dataset(path) -> None:
    with path.open("w") as fh:
        for n in range(N_ITEMS):
            fh.write(json.dumps({"id": f"q{n}", "prompt": f"question {n}", "chat": f"chat {n} " * (n + 1),
                                 "simple_chat": f"simple {n}"}) + "\n")


def overrides(server, dataset, experiment: str) -> list[str]:
    return [*live_judge(server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
            f"dataset.path={dataset}", f"repeats={REPEATS}", "order=fixed", "concurrency=2", "cache.mode=off",
            f"tracking.experiment={experiment}"]


def kill_after_journal_lines(args: list[str], journal, lines: int) -> None:
    """Start the CLI and SIGKILL it once the journal holds ``lines`` lines."""
    proc = subprocess.Popen(args, cwd=REPO, env=offline_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if journal.is_file() and journal.read_text().count("\n") >= lines:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.traces  # the resumed run (in this process) logs its traces: one per judgment, none twice
def test_resume_after_kill_pays_nothing_twice_and_matches_an_uninterrupted_run(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    fake_server.reply = verdict_by_prompt  # the same answers; only the killed run needs them slow (killed mid-way)
    reference = run_cli(*overrides(fake_server, dataset, "reference"))
    assert reference.proc.returncode == 0, reference.output

    fake_server.reset()
    fake_server.reply = slow_verdict_by_prompt
    run_dir = tmp_path / "interrupted"
    journal = run_dir / "journal.jsonl"
    kill_after_journal_lines(cli_args(tmp_path, run_dir, tuple(overrides(fake_server, dataset, "resumed"))),
                             journal, lines=7)
    killed = [json.loads(line) for line in journal.read_text().splitlines() if line.endswith("}")]
    with MessageStore(run_dir / MESSAGES_NAME, read_only=True) as messages:  # what each journaled call was shown
        assert all(messages.get(row["messages_sha256"]) for row in killed)
    with journal.open("a") as fh:
        fh.write('{"item_id": "q7", "repeat": 2, "ord')  # a line torn by the crash
    journaled = sum(1 for line in journal.read_text().splitlines() if line.endswith("}"))
    assert 7 <= journaled < TOTAL

    fake_server.reset()
    fake_server.reply = verdict_by_prompt
    resumed = run_cli(*overrides(fake_server, dataset, "resumed"), f"resume={run_dir}", run_dir=run_dir)
    assert resumed.proc.returncode == 0, resumed.output
    assert len(fake_server.requests) == TOTAL - journaled  # nothing the journal held was paid again
    assert (run_dir / "results.jsonl").read_bytes() == (reference.run_dir / "results.jsonl").read_bytes()
    assert f"resumed {journaled}" in resumed.proc.stdout

    client = MlflowClient(tracking_uri=mlflow_uri(tmp_path))
    runs = client.search_runs([client.get_experiment_by_name("resumed").experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert runs[0].data.metrics["calls/resumed"] == journaled
    assert runs[0].data.metrics["items/successful"] == N_ITEMS
    traces = client.search_traces(locations=[runs[0].info.experiment_id], run_id=runs[0].info.run_id)
    assert len(traces) == TOTAL  # one per judgment, written once the resumed run finished


def test_resume_refuses_a_changed_config_and_a_fresh_run_refuses_a_used_dir(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    fake_server.reply = lambda body: "[[A]]"
    first = run_cli(*overrides(fake_server, dataset, "e"), "tracking=off")
    assert first.proc.returncode == 0, first.output
    fake_server.reset()
    changed = run_cli(*overrides(fake_server, dataset, "e"), "tracking=off", "judge.temperature=0.7",
                      f"resume={first.run_dir}", run_dir=first.run_dir)
    assert changed.proc.returncode == 1
    assert "the config differs from the interrupted run's in ['judge.temperature']" in changed.output
    again = run_cli(*overrides(fake_server, dataset, "e"), "tracking=off", run_dir=first.run_dir)
    assert again.proc.returncode == 1 and "already holds a journal; continue it with resume=" in again.output
    # Operational knobs may change on resume: a completed run resumes with nothing left to pay for.
    done = run_cli(*overrides(fake_server, dataset, "e"), "tracking=off", "concurrency=7",
                   f"resume={first.run_dir}", run_dir=first.run_dir)
    assert done.proc.returncode == 0, done.output
    assert fake_server.requests == []
