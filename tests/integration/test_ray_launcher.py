"""hydra/launcher=ray_local: a sweep's jobs run as Ray tasks on a local Ray cluster on 127.0.0.1 and log to
one real `mlflow server`, as on a cluster (see test_launchers.py for the joblib launcher)."""

from __future__ import annotations

import csv
import re
import sys
from importlib.util import find_spec

import pytest
from mlflow.tracking import MlflowClient

from tests.integration.conftest import REPO, live_judge
from tests.integration.launching import PID_LOG, Rendezvous, job_pids, killed_sweep_goes_quiet
from tests.integration.tracking_processes import assert_sweep_published, run, tails, workdir

pytestmark = pytest.mark.ray
ITEMS = 3  # per job, each judged in both orders; no figure is looked at (output.plots=false)
# The launching process's lines carry its PID too, to tell it apart from the Ray workers that run the jobs.
LAUNCHER_PID_LOG = "hydra.hydra_logging.formatters.simple.format='[HYDRA] pid=%(process)d %(message)s'"


def test_ray_sweep_runs_jobs_as_parallel_ray_tasks_into_one_mlflow_server(fake_server, mlflow_server, tmp_path):
    """Also what tests/integration/test_tracking_launchers.py checks of the basic and joblib launchers: each job one
    MLflow run with a trace per judgment, nested under the sweep's parent run (one Ray cluster for both checks). The
    sweep starts in a fresh working directory, the repository's prompts given by absolute path."""
    # the dev extra installs Ray: without it this test fails instead of skipping
    assert find_spec("ray") and find_spec("hydra_plugins.hydra_ray_launcher"), "pip install -e '.[dev]'"
    client = MlflowClient(tracking_uri=mlflow_server)
    experiment_id = client.create_experiment("ray-test")
    rendezvous = Rendezvous({1, 2})  # opens only when both jobs have a request in flight
    fake_server.reply = rendezvous
    sweep_dir = tmp_path / "multirun"
    args = [sys.executable, "-m", "runner", "-m", f"hydra.sweep.dir={sweep_dir}", f"cache.path={tmp_path / 'c.sqlite'}",
            f"prompts_dir={REPO / 'prompts'}", "hydra/launcher=ray_local", PID_LOG, LAUNCHER_PID_LOG,
            *live_judge(fake_server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "judge.seed=1,2",
            f"max_items={ITEMS}", "output.plots=false", "tracking=server", f"tracking.uri={mlflow_server}",
            "tracking.artifact_location=null", "tracking.experiment=ray-test"]
    proc = run(args, workdir(tmp_path))
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, tails(proc)
    launcher = re.search(r"^\[HYDRA\] pid=(\d+) Ray Launcher is launching 2 jobs", output, re.M)
    assert launcher, output
    assert "2 parallel workers: this job paces each model at 1/2 of its rpm/tpm" in output
    jobs = [sweep_dir / "0", sweep_dir / "1"]
    assert all((job / "summary.json").is_file() for job in jobs), output
    pids = [job_pids(job) for job in jobs]
    assert all(len(p) == 1 for p in pids) and pids[0] != pids[1], pids  # two Ray worker processes
    assert int(launcher[1]) not in pids[0] | pids[1], (launcher[1], pids)  # neither of them the launching one
    assert rendezvous.met.is_set(), f"the jobs never overlapped; seeds seen: {rendezvous.seen}"

    runs = client.search_runs([experiment_id])
    job_runs = [r for r in runs if "judgesweep.kind" not in r.data.tags]
    assert sorted(r.data.params["judge.seed"] for r in job_runs) == ["1", "2"]
    assert all(r.info.status == "FINISHED" and r.data.metrics["judge/calls"] == 2 * ITEMS for r in job_runs)
    assert {r.data.tags["judgesweep.sweep"] for r in runs} == {str(sweep_dir.resolve())}
    (table_run,) = [r for r in runs if r.data.tags.get("judgesweep.kind") == "sweep"]
    assert table_run.data.metrics["sweep/jobs"] == 2 and table_run.data.metrics["sweep/failed"] == 0
    with (sweep_dir / "sweep_table.csv").open(newline="") as fh:
        assert [(row["judge.seed"], row["status"]) for row in csv.DictReader(fh)] == [("1", "ok"), ("2", "ok")]
    assert_sweep_published(mlflow_server, sweep_dir, tails(proc), prompt_versions=False, per_job=2 * ITEMS)


def test_ray_workers_stop_paying_once_the_sweeps_process_is_killed(fake_server, tmp_path):
    """As the joblib test (test_run_dir_owner.py): kill -9 of the process that launched a ray_local sweep, and its Ray
    workers send nothing more within seconds (issue 29, point 1)."""
    assert killed_sweep_goes_quiet(fake_server, tmp_path, "hydra/launcher=ray_local") < 2 * 400
