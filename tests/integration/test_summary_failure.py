"""A run whose calls all succeeded but whose summary fails (a bug in a statistic, e.g. the out-of-memory
bootstrap that 100,000 judgments once hit) keeps every answer, publishes nothing to MLflow (the view is written
from complete files only), and is finished by ``resume=`` without a single judge call, its MLflow run then made.

The bug is injected by replacing ``runner.modes.trust.pairwise_trust`` with a function that raises MemoryError for
the first run (in this process, through runner.run_experiment with the CLI's exit code: conftest.run_cli); nothing
else is replaced: real HTTP to the fake server, a real MLflow store.
"""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

import runner.modes.trust
from tests.integration.conftest import live_judge, mlflow_uri

pytestmark = pytest.mark.integration

N_ITEMS = 6


def broken_statistic(*args, **kwargs):
    raise MemoryError("Unable to allocate 9.31 GiB for an array with shape (100000, 100000)")


def test_a_failed_summary_keeps_every_answer_and_resume_rebuilds_it_without_calls(run_cli, fake_server, tmp_path,
                                                                                  monkeypatch):
    dataset = tmp_path / "pairs.jsonl"
    dataset.write_text("".join(json.dumps({"id": f"q{n}", "prompt": f"question {n}", "chat": f"chat {n}",
                                           "simple_chat": f"simple {n}"}) + "\n" for n in range(N_ITEMS)))
    run_dir = tmp_path / "run"
    overrides = (*live_judge(fake_server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
                 f"dataset.path={dataset}", "order=both", "cache.mode=off", "progress=false")

    with monkeypatch.context() as patch:
        patch.setattr(runner.modes.trust, "pairwise_trust", broken_statistic)
        broken = run_cli(*overrides, run_dir=run_dir).proc
    assert broken.returncode != 0
    assert "resume=" in broken.stdout + broken.stderr
    calls = len(fake_server.requests)
    assert calls == 2 * N_ITEMS
    results = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2 * N_ITEMS and all(r["status"] == "scored" for r in results)
    assert not (run_dir / "summary.json").exists()
    assert "MemoryError" in broken.stdout + broken.stderr
    assert not (run_dir / "view.json").exists()
    assert json.loads((run_dir / "run.json").read_text())["mlflow_run_id"] is None

    resumed = run_cli(*overrides, f"resume={run_dir}", run_dir=run_dir).proc
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert len(fake_server.requests) == calls  # nothing paid twice
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["trust"]["win_rate"]["n"] == N_ITEMS
    client = MlflowClient(tracking_uri=mlflow_uri(tmp_path))
    run_id = json.loads((run_dir / "run.json").read_text())["mlflow_run_id"]
    finished = client.get_run(run_id)
    assert finished.info.status == "FINISHED"
    assert finished.data.metrics["judge/calls"] == 2 * N_ITEMS
