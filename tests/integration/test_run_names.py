"""What a person sees of a run in MLflow: its readable name, who ran it and from where (a real sqlite store)."""

from __future__ import annotations

import getpass
import json

from mlflow.tracking import MlflowClient


def logged(result):
    run_id = json.loads((result.run_dir / "run.json").read_text())["mlflow_run_id"]
    return MlflowClient(tracking_uri=result.mlflow_uri).get_run(run_id)


def test_a_run_is_named_by_what_it_changed_and_records_user_and_source(run_cli):
    result = run_cli("judge=replay_gpt4", "prompt=llmbar_vanilla_norules", "max_items=3")
    assert result.proc.returncode == 0, result.output
    run = logged(result)
    assert run.info.run_name == "gpt4 · vanilla_norules · max_items=3"
    tags = run.data.tags
    assert tags["mlflow.user"] == getpass.getuser()
    assert (tags["mlflow.source.name"], tags["mlflow.source.type"]) == ("judgesweep", "LOCAL")
    assert tags["mlflow.source.git.commit"] == tags["git.commit"] != ""
    assert tags["judgesweep.config"] == ("judge=replay_gpt4,prompt=llmbar_vanilla_norules,rubric=llmbar,"
                                         "dataset=llmbar_natural")
    assert "gpt4 · vanilla_norules · max_items=3" in (result.run_dir / "report.html").read_text()
