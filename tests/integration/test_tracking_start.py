"""MLflow is a view of the run directory (issue 28): the run's own process never touches the store (its helper
process writes traces as the answers are journaled, and the rest once the files are complete); a run killed with
kill -9 during its calls leaves no process and no open file of the run or its store, and at most one MLflow run,
never FINISHED, which its resume makes complete; a store that cannot be written (corrupt, or one that cannot be
created) costs no answer and no file: the run ends with status 3 and the one line that says how to finish the
tracking, and ``judgesweep sync`` (or a resume) finishes it without a call, what MLflow then holds checked as
tests/integration/test_tracking_view.py checks it. The killed run is a process; the other runs and the syncs run in
this process (test_tracking_view has the exit code 3 of a process, with a locked store)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.fakes.openai_server import Reply
from tests.integration.conftest import REPO, cli_args, live_judge, mlflow_uri, offline_env
from tests.integration.tracking_processes import (
    assert_files,
    assert_nothing_outlives,
    assert_published,
    descendants,
    no_traceback,
    sync_here,
    sync_line,
    tails,
)

N_ITEMS = 20


def write_dataset(path: Path) -> None:
    with path.open("w") as fh:
        for n in range(N_ITEMS):
            fh.write(json.dumps({"id": f"q{n}", "prompt": f"question {n}", "chat": f"chat {n}",
                                 "simple_chat": f"simple {n}"}) + "\n")


def overrides(server, dataset: Path) -> list[str]:
    return [*live_judge(server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
            f"dataset.path={dataset}", "order=fixed", "concurrency=2", "cache.mode=off", "progress=false"]


def job_runs(uri: str) -> list:
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("judgesweep")
    return [] if experiment is None else client.search_runs([experiment.experiment_id])


def test_a_run_killed_during_its_calls_leaves_nothing_and_is_one_mlflow_run_once_resumed(run_cli, fake_server,
                                                                                        tmp_path, empty_mlflow_store):
    """kill -9 of the run while answers are journaled and more calls are in flight: within 5 s no process of it is
    left and no file of the run or the store is open; its store then holds at most one MLflow run, never FINISHED,
    and the resume (in this process) makes that one complete. (It was two tests, each killing a run during its calls:
    this and test_tracking_view's test_kill_9_during_the_judge_calls_leaves_no_process_and_no_open_file.)"""
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    run_dir, db = tmp_path / "killed", tmp_path / "mlflow.db"
    shutil.copyfile(empty_mlflow_store(), db)  # its tables made already (as run_cli's runs find it)
    fake_server.reply = lambda body: Reply(content="Verdict: [[A]]", delay_s=0.3)
    proc = subprocess.Popen(cli_args(tmp_path, run_dir, tuple(overrides(fake_server, dataset))), cwd=REPO,
                            env=offline_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = run_dir / "journal.jsonl"
    deadline = time.monotonic() + 120  # a bound on a hang, not a speed claim
    # some answers journaled and more calls in flight: the run's helper has started and is following the journal
    while proc.poll() is None and time.monotonic() < deadline and not (
            journal.is_file() and journal.read_text().count("\n") >= 6
            and fake_server.stats()["requests"] > fake_server.stats()["accepted"]):
        time.sleep(0.02)
    assert proc.poll() is None, f"the run ended (exit {proc.returncode}) before it was killed"
    helpers = descendants(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert_nothing_outlives(proc.pid, helpers, [run_dir, db], f"\nchildren: {helpers}")
    killed = job_runs(mlflow_uri(tmp_path))
    assert len(killed) <= 1 and all(run.info.status != "FINISHED" for run in killed)

    resumed = run_cli(*overrides(fake_server, dataset), f"resume={run_dir}", run_dir=run_dir)
    assert resumed.proc.returncode == 0, resumed.output
    [run] = job_runs(mlflow_uri(tmp_path))
    assert run.info.status == "FINISHED" and run.info.run_name.startswith("local_openai · ")
    assert run.data.metrics["judge/calls"] == N_ITEMS
    assert [k.info.run_id for k in killed] in ([], [run.info.run_id])
    assert json.loads((run_dir / "run.json").read_text())["mlflow_run_id"] == run.info.run_id


@pytest.mark.traces  # the sync publishes the run's traces, checked as every published run is (assert_published)
@pytest.mark.parametrize("broken", ["corrupt", "unwritable"])
def test_a_store_that_cannot_be_written_costs_no_answer_and_sync_finishes_it(run_cli, fake_server, tmp_path, broken):
    """(The process tests of test_tracking_view made the same check: its run and syncs in this process here.)"""
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    if broken == "unwritable":
        not_a_store = Path("/proc/forbidden/mlflow.db")
    else:
        not_a_store = tmp_path / "broken.db"
        not_a_store.write_text("not an sqlite database\n")
    fake_server.reply = lambda body: "Verdict: [[A]]"
    failed = run_cli(*overrides(fake_server, dataset), f"tracking.uri=sqlite:///{not_a_store}")
    assert failed.proc.returncode == 3, failed.output
    line = sync_line(failed.proc, failed.run_dir)  # the one line
    assert str(not_a_store) in line and f"judgesweep sync {failed.run_dir}" in line
    assert "Traceback" not in failed.output
    for name in ("summary.json", "metrics.json", "report.html", "view.json"):
        assert (failed.run_dir / name).is_file(), name
    assert len(failed.journal()) == N_ITEMS and len((failed.run_dir / "results.jsonl").read_text().splitlines()) == 20
    assert_files(failed.run_dir, N_ITEMS, failed.proc)

    fake_server.reset()
    good = mlflow_uri(tmp_path)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    for n in range(2):  # again: nothing twice
        synced = sync_here(failed.run_dir, cwd, f"tracking.uri={good}")
        assert synced.returncode == 0, tails(synced)
        no_traceback(synced)
        assert "created" in synced.stdout or n, tails(synced)
        assert_published(good, failed.run_dir, N_ITEMS, where=tails(synced))
    assert fake_server.requests == []
    [run] = job_runs(good)
    assert run.info.status == "FINISHED" and run.data.metrics["judge/calls"] == N_ITEMS
