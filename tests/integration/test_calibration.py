"""experiment=calibrate_llmbar through the real CLI: Hydra's Optuna sweeper tunes replay judges on the dev
split, then the winner runs once on the held-out test split; both are reported and logged to MLflow."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from tests.integration.conftest import SEARCH_ITEMS, SEARCH_TRIALS, CliRun, calibration_search


def item_ids(run_dir) -> set[str]:
    return {json.loads(line)["item_id"] for line in (run_dir / "results.jsonl").read_text().splitlines()}


def test_calibration_search_reports_dev_and_held_out_test_agreement(tmp_path_factory):
    # experiment=calibrate_llmbar hydra.sweeper.n_trials=2 max_items=30 into its default store, once per session
    cwd, proc = calibration_search(tmp_path_factory, "calibrate_llmbar")
    result = CliRun(proc=proc, run_dir=cwd / "multirun", mlflow_uri=f"sqlite:///{cwd / 'outputs' / 'mlflow.db'}")
    assert (SEARCH_TRIALS, SEARCH_ITEMS) == (2, 30)
    assert result.proc.returncode == 0, result.output
    outcome = json.loads((result.run_dir / "calibration.json").read_text())
    assert outcome["trials"] == 2 and outcome["failed_trials"] == 0
    assert set(outcome["best_params"]) == {"judge", "prompt", "judge.temperature", "repeats", "aggregation"}
    assert 0.5 < outcome["dev"]["value"] <= 1 and 0.5 < outcome["test"]["value"] <= 1
    assert outcome["test"]["ok"] and outcome["dev"]["items"] == outcome["test"]["items"] == 30
    # the best value is the best trial's dev agreement
    trials = [json.loads((result.run_dir / str(n) / "metrics.json").read_text()) for n in range(2)]
    assert outcome["dev"]["value"] == max(m["agreement/accuracy_all"] for m in trials)

    heldout = result.run_dir / "heldout"
    dev_ids = set().union(*(item_ids(result.run_dir / str(n)) for n in range(2)))
    assert item_ids(heldout).isdisjoint(dev_ids) and len(item_ids(heldout)) == 30
    overrides = (heldout / ".hydra" / "overrides.yaml").read_text()
    assert "dataset.split=test" in overrides and f"judge={outcome['best_params']['judge']}" in overrides
    assert "calibration: best of 2 trials on dev (30 items)" in result.output
    assert "calibration: held-out test (30 items, never tuned on)" in result.output

    client = MlflowClient(tracking_uri=result.mlflow_uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    (calibration,) = [r for r in runs if r.data.tags.get("judgesweep.kind") == "calibration"]
    assert calibration.data.metrics["calibration/test_agreement/accuracy_all"] == outcome["test"]["value"]
    assert "calibration.json" in {a.path for a in client.list_artifacts(calibration.info.run_id)}
    assert len([r for r in runs if r.data.params.get("dataset.split") == "test"]) == 1  # the held-out run


def test_a_failed_trial_is_recorded_and_the_study_goes_on(run_cli):
    # replay_pandalm_gpt35 has no answer for LLMBar's prompts: a trial that draws it fails (seeded sampler: 1 of 4);
    # untracked and without figures (none is looked at)
    result = run_cli("experiment=calibrate_llmbar", "hydra.sweeper.n_trials=4", "max_items=4", "tracking=off",
                     "output.plots=false", "judge=replay_pandalm_gpt35,replay_gpt4", multirun=True)
    assert result.proc.returncode == 1, result.output  # a failed job fails the command, after the study
    outcome = json.loads((result.run_dir / "calibration.json").read_text())
    assert outcome["trials"] == 4 and outcome["failed_trials"] >= 1
    assert outcome["best_params"]["judge"] == "replay_gpt4" and outcome["test"]["ok"]
    assert "Failed experiment" in result.output and "calibration: held-out test (4 items" in result.output


@pytest.mark.plots  # looks at the figures (drawn: a process keeps output.plots on)
def test_the_default_store_gets_the_sweep_and_calibration_runs(tmp_path_factory):
    # No tracking override: the default store is ${hydra:runtime.cwd}/outputs/mlflow.db, which the callbacks
    # that run when the sweep ends (no job's HydraConfig there) failed to resolve, so neither run was logged.
    # Started in a directory of its own (the runtime cwd), with the repository's prompts: the search above (once per
    # session; test_presets checks that the preset runs on it).
    cwd, proc = calibration_search(tmp_path_factory, "calibrate_llmbar")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "not logged to MLflow" not in proc.stderr and "raised" not in proc.stderr
    client = MlflowClient(tracking_uri=f"sqlite:///{cwd / 'outputs' / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    kinds = sorted(r.data.tags.get("judgesweep.kind", "job") for r in runs)
    assert kinds == ["calibration", "job", "job", "job", "sweep"]  # two trials and the held-out test
    (table,) = [r for r in runs if r.data.tags.get("judgesweep.kind") == "sweep"]
    assert {"sweep_table.csv", "frontier.png", "report.html"} <= {a.path for a in client.list_artifacts(
        table.info.run_id)}
    assert (cwd / "outputs" / "mlartifacts").is_dir()
