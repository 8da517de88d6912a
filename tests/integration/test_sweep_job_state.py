"""A resumed sweep's job whose summary is written but whose MLflow run was never closed (killed in between) is run
again, not skipped: resuming it closes its run (runner.run.sweep_resume against a real sqlite store). A single run
resumed from a directory that holds none still fails: only a sweep's job that never started starts fresh."""

from __future__ import annotations

import shutil

from mlflow.entities import RunStatus
from mlflow.tracking import MlflowClient

from runner.core.config import TrackingConfig
from runner.run import sweep_resume
from runner.storage import store
from tests.integration.conftest import live_judge, mlflow_uri


def test_a_job_whose_mlflow_run_is_still_open_is_run_again(tmp_path, empty_mlflow_store):
    shutil.copyfile(empty_mlflow_store(), tmp_path / "mlflow.db")
    cfg = TrackingConfig(uri=mlflow_uri(tmp_path))
    client = MlflowClient(tracking_uri=cfg.uri)
    run_id = client.create_run(client.create_experiment("e")).info.run_id
    job = tmp_path / "0"
    job.mkdir()
    store.write_manifest(job, store.Manifest("sha", {}, run_id))
    (job / store.SUMMARY_NAME).write_text('{"summary": {}}')
    (job / store.METRICS_NAME).write_text("{}")
    assert sweep_resume.finished(cfg, job) is None  # RUNNING: killed before finish_run closed it
    client.set_terminated(run_id, status=RunStatus.to_string(RunStatus.FINISHED))
    outcome = sweep_resume.finished(cfg, job)
    assert outcome is not None and outcome.skipped and outcome.mlflow_run_id == run_id


def test_a_single_run_resumed_from_a_directory_without_a_run_still_fails_before_any_call(run_cli, fake_server,
                                                                                         tmp_path):
    # only a sweep's job may start fresh under resume= (it never started before the sweep was killed)
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_cli(*live_judge(fake_server), "tracking=off", f"resume={empty}", run_dir=empty)
    assert result.proc.returncode == 1 and f"{empty} holds no run to continue (no run.json)" in result.output
    assert fake_server.requests == []
