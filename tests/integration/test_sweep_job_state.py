"""A resumed sweep's job whose summary is written but whose publish to MLflow never completed (killed in between)
is run again, not skipped: resuming it publishes it (runner.run.sweep_resume reads the run directory's
mlflow.json, never the store). A single run
resumed from a directory that holds none still fails: only a sweep's job that never started starts fresh."""

from __future__ import annotations

from runner.core.run_settings import TrackingConfig
from runner.outputs import publishing
from runner.run import sweep_resume
from runner.storage import store
from tests.integration.conftest import live_judge, mlflow_uri


def test_a_job_whose_publish_did_not_complete_is_run_again(tmp_path):
    cfg, other = TrackingConfig(uri=mlflow_uri(tmp_path)), TrackingConfig(uri="sqlite:///elsewhere.db")
    job = tmp_path / "0"
    job.mkdir()
    store.write_manifest(job, store.Manifest("sha", {}, None, "uid"))
    (job / store.SUMMARY_NAME).write_text('{"summary": {}}')
    (job / store.METRICS_NAME).write_text("{}")
    assert sweep_resume.finished(cfg, job) is None  # killed before its publish completed
    publishing._record(job, cfg, "run-1")  # what a completed publish writes last
    outcome = sweep_resume.finished(cfg, job)
    assert outcome is not None and outcome.skipped and outcome.mlflow_run_id == "run-1"
    assert sweep_resume.finished(other, job) is None  # resumed into another store: published there too
    assert sweep_resume.finished(TrackingConfig(enabled=False), job) is not None


def test_a_single_run_resumed_from_a_directory_without_a_run_still_fails_before_any_call(run_cli, fake_server,
                                                                                         tmp_path):
    # only a sweep's job may start fresh under resume= (it never started before the sweep was killed)
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_cli(*live_judge(fake_server), "tracking=off", f"resume={empty}", run_dir=empty)
    assert result.proc.returncode == 1 and f"{empty} holds no run to continue (no run.json)" in result.output
    assert fake_server.requests == []
