"""Issue 44, point 13: `judgesweep sync` with a tracking override other than the store's address publishes to the
run's own store (its view.json), not the working directory's default; a store locked past SQLite's busy timeout
(MLflow's 20 s) shows on the console no MLflow ERROR record and no traceback: MLflow's own records go to the run's
judgesweep.log (runner.outputs.tracking.own_log)."""

from __future__ import annotations

import time

import pytest
from mlflow.tracking import MlflowClient

from tests.fakes.openai_server import Reply
from tests.integration.conftest import REPO
from tests.integration.tracking_processes import (
    SLOW_ITEMS,
    StoreLock,
    assert_files,
    finish,
    no_traceback,
    run_args,
    runs_of,
    slow_overrides,
    start,
    store,
    sync_here,
    tails,
    uri_of,
    workdir,
)


def test_sync_with_an_experiment_override_publishes_to_the_runs_own_store(run_cli, tmp_path):
    made = run_cli("judge=replay_gpt4", "max_items=2", f"prompts_dir={REPO / 'prompts'}")
    assert made.proc.returncode == 0, made.output
    cwd = workdir(tmp_path)
    synced = sync_here(made.run_dir, cwd, "tracking.experiment=elsewhere", "tracking.traces=false")
    assert synced.returncode == 0, tails(synced)
    no_traceback(synced)
    assert not (cwd / "outputs").exists(), sorted(str(p) for p in cwd.rglob("*"))  # no default store made there
    client = MlflowClient(made.mlflow_uri)
    experiment = client.get_experiment_by_name("elsewhere")
    assert experiment is not None, [e.name for e in client.search_experiments()]
    [run] = [r for r in runs_of(made.mlflow_uri, made.run_dir) if r.info.experiment_id == experiment.experiment_id]
    assert run.info.status == "FINISHED" and run.data.metrics

    bad = cwd / "conf" / "tracking" / "mine.yaml"  # a conf/ file over a cap (input_limits): one line, exit 1
    bad.parent.mkdir(parents=True)
    bad.write_text("experiment: x\nexperiment: y\n")
    refused = sync_here(made.run_dir, cwd, "tracking.experiment=third")
    assert (refused.returncode, refused.stderr) == (1, f"judgesweep sync: {bad}:2: duplicate key 'experiment'\n")


@pytest.mark.slow  # holds a store locked past SQLite's busy timeout (MLflow's fixed 20 s)
def test_a_store_locked_past_the_busy_timeout_shows_no_mlflow_record_on_the_console(
        tmp_path, empty_mlflow_store, fake_server):
    """The store locked from the run's first call for 22 s: the helper's trace writing meets MLflow's "database is
    locked" (which MLflow logs as an ERROR record with two tracebacks), the publish after the release succeeds;
    exit 0, nothing of MLflow's on the console, its record in the run's judgesweep.log."""
    db, run_dir = store(tmp_path, empty_mlflow_store), tmp_path / "run"
    fake_server.reply = lambda _body: Reply(content="Verdict: [[A]]", delay_s=0.2)
    proc = start(run_args(tmp_path, run_dir, db, *slow_overrides(fake_server, tmp_path, concurrency=1)),
                 workdir(tmp_path))
    deadline = time.monotonic() + 60
    while fake_server.stats()["requests"] == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    lock = StoreLock(db)
    try:
        time.sleep(22)
    finally:
        lock.release()
    done = finish(proc)
    assert done.returncode == 0, tails(done)
    no_traceback(done)
    assert "ERROR" not in done.stderr + done.stdout and "mlflow" not in done.stderr.lower(), tails(done)
    assert_files(run_dir, SLOW_ITEMS, done)
    assert "database is locked" in (run_dir / "judgesweep.log").read_text(), tails(done)
    assert len(runs_of(uri_of(db), run_dir)) == 1
