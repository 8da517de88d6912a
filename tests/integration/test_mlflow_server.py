"""tracking=server: a run logged to a real `mlflow server` process on 127.0.0.1 (conftest.mlflow_server: one per
test process, each test in an experiment of its own)."""

from __future__ import annotations

from mlflow.tracking import MlflowClient


def test_run_is_logged_to_a_real_mlflow_server(run_cli, mlflow_server):
    result = run_cli("tracking=server", f"tracking.uri={mlflow_server}", "tracking.artifact_location=null",
                     "tracking.experiment=server-test", "max_items=10")
    assert result.proc.returncode == 0, result.output
    client = MlflowClient(tracking_uri=mlflow_server)
    runs = client.search_runs([client.get_experiment_by_name("server-test").experiment_id])
    assert len(runs) == 1
    assert runs[0].data.metrics["judge/calls"] == 20
    assert runs[0].data.params["choice.tracking"] == "server"
    assert "summary.json" in {a.path for a in client.list_artifacts(runs[0].info.run_id)}
    # issue 44.8: the report links to the run's page on that server, in the run directory and in MLflow alike
    run = runs[0].info
    page = f"{mlflow_server.rstrip('/')}/#/experiments/{run.experiment_id}/runs/{run.run_id}"
    link = f'MLflow run: <a href="{page}" target="_blank" rel="noopener" data-mlflow-run>{page}</a>'
    assert link in (result.run_dir / "report.html").read_text(encoding="utf-8")
    logged = client.download_artifacts(run.run_id, "report.html", str(result.run_dir.parent))
    assert link in open(logged, encoding="utf-8").read()
