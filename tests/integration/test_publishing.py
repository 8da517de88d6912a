"""Publishing a run directory (runner.outputs.publishing.publish, what a run's end, ``judgesweep sync`` and
``aggregate`` call) into real sqlite stores, in this process: a run made with tracking off is published into two
stores, each gets one complete run; publishing again writes nothing twice; a metric that changed is one more
point, not a second point at the same step. And the publishing process (runner.outputs.publisher) serving runs one
after another, as a basic-launcher sweep's jobs share it: a process, as its signals are the point."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from runner.core.run_settings import TrackingConfig
from runner.outputs import publishing
from runner.outputs.publisher import Publisher
from tests.integration.tracking_processes import runs_of, traces_of

pytestmark = [pytest.mark.integration, pytest.mark.traces]  # run_cli keeps traces on


def _store(tmp_path, name: str, empty) -> TrackingConfig:
    shutil.copyfile(empty, tmp_path / name)
    return TrackingConfig(uri=f"sqlite:///{tmp_path / name}", experiment="published")


def _counts(cfg: TrackingConfig, run_id: str) -> dict:
    client = MlflowClient(cfg.uri)
    run = client.get_run(run_id)
    mlflow.set_tracking_uri(cfg.uri)
    traces = mlflow.search_traces(locations=[run.info.experiment_id], run_id=run_id, return_type="list")
    return {"runs": len(client.search_runs([run.info.experiment_id])), "status": run.info.status,
            "traces": len(traces), "metric_points": {k: len(client.get_metric_history(run_id, k))
                                                     for k in run.data.metrics},
            "artifacts": sorted(a.path for a in client.list_artifacts(run_id)),
            "inputs": len(run.inputs.dataset_inputs),
            "prompt_versions": len(list(client.search_prompt_versions("llmbar_vanilla")))}


def test_a_run_is_published_into_two_stores_once_each(run_cli, tmp_path, empty_mlflow_store):
    run = run_cli("judge=replay_gpt4", "max_items=3", "tracking=off")
    assert run.proc.returncode == 0, run.output
    first, second = _store(tmp_path, "a.db", empty_mlflow_store()), _store(tmp_path, "b.db", empty_mlflow_store())
    published = publishing.publish(run.run_dir, first)
    assert published.created and published.traces == 6
    counts = _counts(first, published.run_id)
    assert counts["runs"] == 1 and counts["status"] == "FINISHED" and counts["traces"] == 6
    assert set(counts["metric_points"].values()) == {1} and counts["inputs"] == 1 == counts["prompt_versions"]
    assert {"config.yaml", "results.jsonl", "summary.json", "results_table.json"} <= set(counts["artifacts"])

    again = publishing.publish(run.run_dir, first)
    assert (again.run_id, again.created, again.traces) == (published.run_id, False, 0)
    assert _counts(first, published.run_id) == counts

    elsewhere = publishing.publish(run.run_dir, second)
    assert elsewhere.created and _counts(second, elsewhere.run_id) == counts
    assert publishing.is_published(run.run_dir, first) and publishing.is_published(run.run_dir, second)

    metrics_path = run.run_dir / "metrics.json"  # a resumed run's summary changed one value
    metrics = json.loads(metrics_path.read_text())
    metrics["run/wall_s"] += 1.0
    metrics_path.write_text(json.dumps(metrics))
    publishing.publish(run.run_dir, first)
    history = MlflowClient(first.uri).get_metric_history(published.run_id, "run/wall_s")
    assert [(m.step, m.value) for m in history] == [(0, metrics["run/wall_s"] - 1.0), (1, metrics["run/wall_s"])]


def test_a_directory_without_a_finished_run_is_refused(tmp_path, empty_mlflow_store):
    with pytest.raises(FileNotFoundError, match="resume="):
        publishing.publish(tmp_path, _store(tmp_path, "a.db", empty_mlflow_store()))


def test_one_publishing_process_publishes_runs_one_after_another_and_idle_hears_only_its_stdin(
        run_cli, tmp_path, empty_mlflow_store):
    """Once a run's publish answered, the process stays: idle, SIGTERM and SIGINT are nothing to it; told to follow
    the next run it publishes that one too; a SIGTERM during a run's publishing stops it as it stops the process of a
    single run: no answer, that run's MLflow run (if made) FAILED, the process gone."""
    first, second, third = (run_cli("judge=replay_gpt4", "max_items=2", "tracking=off").run_dir for _ in range(3))
    cfg = _store(tmp_path, "a.db", empty_mlflow_store())
    helper = Publisher(cfg, follow=first)
    try:
        published = [helper.publish(first, 120)]
        assert published[0][1] is None and helper.alive(), published
        for signum in (signal.SIGTERM, signal.SIGINT):  # idle: ignored (the answer came once they were)
            os.kill(helper.pid, signum)
        assert helper.follow(second)
        published.append(helper.publish(second, 120))
        assert published[1][1] is None and helper.alive(), published
        client = MlflowClient(cfg.uri)
        assert [client.get_run(run_id).info.status for run_id, _ in published] == ["FINISHED", "FINISHED"]
        assert published[0][0] != published[1][0]

        assert helper.follow(third)
        deadline = time.monotonic() + 120  # a bound on a hang, not a speed claim
        # until the third run's follow has made its MLflow run and written its 4 judgments' traces: the job is on,
        # and the follow tails the journal, so the stop lands there rather than inside a write to the store (a stop
        # inside one can leave that write's sqlite lock held and the run RUNNING until a sync: best effort)
        while not any(len(traces_of(cfg.uri, run)) == 4 for run in runs_of(cfg.uri, third)) and helper.alive() \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(helper.pid, signal.SIGTERM)  # during the third run's publishing: a stop
        run_id, error = helper.publish(third, 120)
        assert run_id is None and error is not None and "ended" in error, error
        assert not helper.alive()
        assert [run.info.status for run in runs_of(cfg.uri, third)] == ["FAILED"]
    finally:
        helper.close()
