"""runner.run_experiment: the same run as the CLI's, in the calling process, with its outcome returned."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

import runner
from runner.run.job_context import ForbiddenKey, MissingApiKey
from tests.integration.conftest import REPO, cli_args, mlflow_uri, offline_env


def _overrides(tmp_path, run_dir, *extra: str) -> list[str]:
    # no figures and no MLflow traces: no test here looks at them, and both ways of running get the same overrides
    return cli_args(tmp_path, run_dir, ("max_items=20", "output.plots=false", "tracking.traces=false", *extra))[3:]


@pytest.mark.slow  # the CLI's run is a process
def test_run_experiment_writes_what_the_cli_writes_and_returns_the_outcome(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    outcome = runner.run_experiment(_overrides(tmp_path, tmp_path / "inproc"))
    cli = subprocess.run([sys.executable, "-m", "runner", *_overrides(tmp_path, tmp_path / "cli")], cwd=REPO,
                         env=offline_env(), capture_output=True, text=True, timeout=600)
    assert cli.returncode == 0, cli.stderr

    assert outcome is not None and not outcome.failed
    assert (tmp_path / "inproc" / "results.jsonl").read_bytes() == (tmp_path / "cli" / "results.jsonl").read_bytes()
    inproc, cli = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("inproc", "cli"))
    for doc in (inproc, cli):  # when each summary was written (an ISO timestamp): the one thing that differs
        del doc["summary"]["evaluation_completed"]
    # the second run's answers came from the response cache the first filled, which its summary says (issue 44)
    assert "answers_from_cache" not in inproc["summary"] and cli["summary"].pop("answers_from_cache") > 0
    assert inproc == cli
    for name in ("overrides.yaml", "config.yaml"):  # the config as composed, before interpolation
        ours, theirs = (OmegaConf.load(tmp_path / d / ".hydra" / name) for d in ("inproc", "cli"))
        assert ours == theirs, name
    assert outcome.gold is not None and outcome.gold.accuracy_mean == pytest.approx(0.95)
    # the summary as written: read from summary.json when asked for, not held by the run (issue 12)
    assert outcome.summary == json.loads((tmp_path / "inproc" / "summary.json").read_text())
    assert outcome.summary["summary"]["total_subsets"] == 20 and outcome.summary is outcome.summary
    # the metrics as written (a sweeper's objective is read from them, not from the file)
    assert outcome.metrics == json.loads((tmp_path / "inproc" / "metrics.json").read_text())
    run = MlflowClient(mlflow_uri(tmp_path)).get_run(outcome.mlflow_run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["hydra.run_dir"] == str((tmp_path / "inproc").resolve())


def test_a_dry_run_returns_none_and_calls_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    assert runner.run_experiment(_overrides(tmp_path, tmp_path / "run", "dry_run=true")) is None
    assert not (tmp_path / "run" / "journal.jsonl").exists()


def test_bad_input_raises_before_any_call(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ForbiddenKey, match="judge.nonsense"):
        runner.run_experiment(_overrides(tmp_path, tmp_path / "a", "+judge.nonsense=1"))
    with pytest.raises(MissingApiKey, match="OPENAI_API_KEY is not set"):
        runner.run_experiment(_overrides(tmp_path, tmp_path / "b", "judge=gpt4o_mini"))
    assert not (tmp_path / "a" / "journal.jsonl").exists() and not (tmp_path / "b" / "journal.jsonl").exists()
