"""Unit tests for runner.run.sweep_resume: which job of a resumed sweep finished already and is skipped (files only,
tracking off; the MLflow side is in tests/integration/test_sweep_job_state.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.core.run_settings import TrackingConfig
from runner.outputs import sweep
from runner.run import sweep_resume
from runner.storage import store

OFF = TrackingConfig(enabled=False)


def finished_job(run_dir: Path, summary: str = '{"summary": {}}') -> Path:
    """A job directory as a finished job leaves it: manifest, summary.json, metrics.json."""
    run_dir.mkdir(parents=True, exist_ok=True)
    store.write_manifest(run_dir, store.Manifest("sha", {}, None))
    (run_dir / store.SUMMARY_NAME).write_text(summary)
    (run_dir / store.METRICS_NAME).write_text("{}")
    return run_dir


def test_a_finished_job_is_skipped_with_its_summary(tmp_path):
    outcome = sweep_resume.finished(OFF, finished_job(tmp_path / "0"))
    assert outcome is not None and outcome.skipped and not outcome.failed
    assert outcome.summary_path == tmp_path / "0" / store.SUMMARY_NAME


def test_a_job_that_finished_failing_stays_failed_with_its_reason(tmp_path):
    job = finished_job(tmp_path / "0")
    sweep.write_failure(job, "gate failed: score/mean 0.2 < 0.5")
    outcome = sweep_resume.finished(OFF, job)
    assert outcome is not None and outcome.skipped and outcome.failed
    assert outcome.reason == "gate failed: score/mean 0.2 < 0.5"


@pytest.mark.parametrize("damage", ["no manifest", "no summary", "torn summary", "partial summary", "no metrics"])
def test_a_job_not_finished_is_run(tmp_path, damage):
    job = finished_job(tmp_path / "0")
    if damage == "no manifest":
        (job / store.MANIFEST_NAME).unlink()
    elif damage == "no summary":
        (job / store.SUMMARY_NAME).unlink()
    elif damage == "torn summary":
        (job / store.SUMMARY_NAME).write_text('{"summary": {"succ')
    elif damage == "partial summary":
        (job / store.SUMMARY_NAME).write_text(json.dumps({"summary": {}, "partial": True, "partial_reason": "x"}))
    else:
        (job / store.METRICS_NAME).unlink()
    assert sweep_resume.finished(OFF, job) is None
