"""judge=recorded: a user's recorded raw judge outputs, keyed by (item id, order, repeat), served through litellm's
custom-provider path and scored by every report as live answers are (README: Score recorded judge outputs)."""

from __future__ import annotations

import json
from pathlib import Path

from mlflow.tracking import MlflowClient

from runner.llm.recordings_export import export_run
from tests.integration.conftest import REPO

USERS = REPO / "tests" / "fixtures" / "users" / "recorded"
# Per-call facts that a recording does not hold (tokens) or that no two runs share (latency).
VOLATILE = ("tokens/", "cost/usd_list", "cost/list_", "latency/", "run/wall_s")


def metrics(uri: str, run_dir: Path) -> dict[str, float]:
    """The MLflow metrics of the run written to ``run_dir``, without VOLATILE ones."""
    run_id = json.loads((run_dir / "run.json").read_text())["mlflow_run_id"]
    logged = MlflowClient(tracking_uri=uri).get_run(run_id).data.metrics
    return {k: v for k, v in logged.items() if not k.startswith(VOLATILE)}


def test_recorded_judge_reproduces_the_default_llmbar_run(run_cli, tmp_path):
    replayed = run_cli()  # `make run`: replay_gpt4 on LLMBar Natural, both orders
    assert replayed.proc.returncode == 0, replayed.output
    recordings = tmp_path / "gpt4_natural.jsonl"
    assert export_run(replayed.run_dir, recordings) == 200
    first = json.loads(recordings.read_text().splitlines()[0])
    assert set(first) == {"id", "order", "repeat", "output", "finish_reason"}

    rec = run_cli("judge=recorded", f"judge.path={recordings}")
    assert rec.proc.returncode == 0, rec.output
    assert "accuracy AB 95.0% / BA 96.0% / mean 95.5% / both 93.0% / positional agreement 95.0%" in rec.proc.stdout
    assert rec.summary() == replayed.summary()  # verdicts, gold, trust and bias sections, every figure
    recorded_metrics = metrics(rec.mlflow_uri, rec.run_dir)
    assert recorded_metrics == metrics(replayed.mlflow_uri, replayed.run_dir)
    assert recorded_metrics["judge/scored"] == 200 and recorded_metrics["cost/usd_total"] == 0
    # recorded answers cost nothing and their tokens are not known (0)
    assert json.loads((rec.run_dir / "metrics.json").read_text())["tokens/total"] == 0
