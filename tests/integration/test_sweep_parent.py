"""A sweep in MLflow: one parent run with a readable label, its jobs nested under it with readable names (a real
multirun, ``python -m runner -m``, into a real sqlite store)."""

from __future__ import annotations

import re

import pytest
from mlflow.tracking import MlflowClient


@pytest.mark.slow
def test_a_sweep_is_a_parent_run_with_its_jobs_nested_under_it(run_cli):
    result = run_cli("judge=replay_gpt4,replay_chatgpt", "prompt=llmbar_vanilla_norules", "max_items=3",
                     multirun=True)
    assert result.proc.returncode == 0, result.output
    client = MlflowClient(tracking_uri=result.mlflow_uri)
    runs = client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("judgesweep.kind") == "sweep"]
    jobs = [r for r in runs if "judgesweep.kind" not in r.data.tags]
    assert re.fullmatch(r"sweep \d{4}-\d\d-\d\d \d\d:\d\d · judge", parent.info.run_name), parent.info.run_name
    assert parent.info.status == "FINISHED" and parent.data.metrics["sweep/jobs"] == 2  # the table is in it
    assert "sweep_table.csv" in {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {r.data.tags["mlflow.parentRunId"] for r in jobs} == {parent.info.run_id}
    assert {r.info.run_name for r in jobs} == {"gpt4 · vanilla_norules · max_items=3",
                                               "chatgpt · vanilla_norules · max_items=3"}
    # results.load and judgesweep-compare still find the jobs by the sweep's tag
    assert {r.data.tags["judgesweep.sweep"] for r in runs} == {str(result.run_dir.resolve())}
