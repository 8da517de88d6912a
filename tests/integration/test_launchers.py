"""hydra/launcher=joblib: a sweep's jobs run in parallel worker processes on one machine and log to one
real `mlflow server` on 127.0.0.1 (a sqlite file shared by parallel writers is what the server avoids)."""

from __future__ import annotations

import csv
import json
import sys

from mlflow.tracking import MlflowClient

from tests.integration.conftest import REPO, live_judge
from tests.integration.launching import PID_LOG, Rendezvous, job_pids
from tests.integration.tracking_processes import assert_sweep_published, run, tails, workdir

PARALLEL = ("hydra/launcher=joblib", "hydra.launcher.n_jobs=2")
ITEMS = 4  # per job, each judged in both orders; no figure is looked at (output.plots=false)


def test_joblib_sweep_runs_jobs_in_parallel_processes_into_one_mlflow_server(fake_server, mlflow_server, tmp_path):
    # Created up front: two jobs that both find no experiment both create it, and one fails with
    # RESOURCE_ALREADY_EXISTS (runner/outputs/tracking.py _experiment_id does not handle that race yet).
    client = MlflowClient(tracking_uri=mlflow_server)
    experiment_id = client.create_experiment("launcher-test")
    rendezvous = Rendezvous({1, 2})
    fake_server.reply = rendezvous
    sweep_dir = tmp_path / "multirun"
    args = [sys.executable, "-m", "runner", "-m", f"hydra.sweep.dir={sweep_dir}", f"cache.path={tmp_path / 'c.sqlite'}",
            f"prompts_dir={REPO / 'prompts'}", *PARALLEL, PID_LOG, *live_judge(fake_server), "prompt=mtbench_pair",
            "rubric=mtbench_verdict", "judge.seed=1,2", f"max_items={ITEMS}", "output.plots=false", "tracking=server",
            f"tracking.uri={mlflow_server}", "tracking.artifact_location=null", "tracking.experiment=launcher-test"]
    proc = run(args, workdir(tmp_path))
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, tails(proc)
    assert "Joblib.Parallel(n_jobs=2" in output
    jobs = [sweep_dir / "0", sweep_dir / "1"]
    assert all((job / "summary.json").is_file() for job in jobs), output
    # two worker processes, each job in one of them, and both jobs in flight at once
    pids = [job_pids(job) for job in jobs]
    assert all(len(p) == 1 for p in pids) and pids[0] != pids[1], pids
    assert rendezvous.met.is_set(), f"the jobs never overlapped; seeds seen: {rendezvous.seen}"

    runs = client.search_runs([experiment_id])
    job_runs = [r for r in runs if "judgesweep.kind" not in r.data.tags]
    assert sorted(r.data.params["judge.seed"] for r in job_runs) == ["1", "2"]
    assert all(r.info.status == "FINISHED" and r.data.metrics["judge/calls"] == 2 * ITEMS for r in job_runs)
    assert {r.data.tags["judgesweep.sweep"] for r in runs} == {str(sweep_dir.resolve())}
    (table_run,) = [r for r in runs if r.data.tags.get("judgesweep.kind") == "sweep"]
    assert table_run.data.metrics["sweep/jobs"] == 2 and table_run.data.metrics["sweep/failed"] == 0
    assert "sweep_table.csv" in {a.path for a in client.list_artifacts(table_run.info.run_id)}

    with (sweep_dir / "sweep_table.csv").open(newline="") as fh:
        table = list(csv.DictReader(fh))
    assert [(row["job"], row["judge.seed"], row["status"]) for row in table] == [("0", "1", "ok"), ("1", "2", "ok")]
    # what tests/integration/test_tracking_launchers.py checks of the basic launcher: each job one MLflow run with a
    # trace per judgment, nested under the sweep's parent run (this sweep runs from a fresh working directory for it)
    assert_sweep_published(mlflow_server, sweep_dir, tails(proc), prompt_versions=False, per_job=2 * ITEMS)


def test_joblib_workers_serve_replay_judges_and_a_failed_job_fails_the_multirun(run_cli):
    # job 0 is a replay judge (no network); job 1 names an API-key variable that is not set and fails before any call
    result = run_cli(*PARALLEL, "judge=replay_gpt4", "judge.api_key_env=null,JUDGESWEEP_TEST_UNSET_KEY", "max_items=5",
                     "tracking=off", "output.plots=false", multirun=True)
    assert "JUDGESWEEP_TEST_UNSET_KEY is not set" in (result.run_dir / "1" / "judgesweep.log").read_text()
    metrics = json.loads((result.run_dir / "0" / "metrics.json").read_text())
    assert metrics["judge/calls"] == 10 and metrics["judge/errors"] == 0, "replay/gpt-4 unknown in the worker"
    with (result.run_dir / "sweep_table.csv").open(newline="") as fh:
        assert [row["status"] for row in csv.DictReader(fh)] == ["ok", "failed"], result.output
    assert result.proc.returncode == 1, "the failed job did not fail the multirun"
