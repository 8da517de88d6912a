"""A sweep in MLflow whatever runs its jobs (issue 28): under the basic, joblib and ray_local launchers each job is
one MLflow run with a trace per judgment of its results.jsonl, nested under the sweep's parent run; and a sweep made
with tracking off is published later by `judgesweep sync <sweep dir>`, once, however often it is synced.

judgesweep as a process in a fresh working directory; what MLflow holds read back through MLflow's client."""

from __future__ import annotations

import sys
import uuid
from importlib.util import find_spec
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.integration.conftest import REPO
from tests.integration.test_tracking_view import assert_published, run, store, sync, tails, traces_of, uri_of, workdir

pytestmark = pytest.mark.slow

SWEEP = ("judge=replay_gpt4", "max_items=5", "prompt=llmbar_vanilla,llmbar_vanilla_norules")
JOBS = 2
LAUNCHERS = {
    "basic": ("hydra/launcher=basic",),
    "joblib": ("hydra/launcher=joblib", f"hydra.launcher.n_jobs={JOBS}"),
    "ray_local": ("hydra/launcher=ray_local",),
}


def sweep_args(tmp_path: Path, sweep_dir: Path, *overrides: str) -> list[str]:
    return [sys.executable, "-m", "runner", "-m", f"hydra.sweep.dir={sweep_dir}",
            f"cache.path={tmp_path / 'cache.sqlite'}", f"prompts_dir={REPO / 'prompts'}", *SWEEP, *overrides]


def judgments(job_dir: Path) -> int:
    return len((job_dir / "results.jsonl").read_text().splitlines())


def assert_sweep_published(uri: str, sweep_dir: Path, where: str, prompt_versions: bool = True) -> None:
    """One parent run for the sweep; each job one complete run with all its traces, nested under the parent."""
    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    parents = client.search_runs(experiments, filter_string=(f"tags.`judgesweep.kind` = 'sweep' and "
                                                             f"tags.`judgesweep.sweep` = '{sweep_dir.resolve()}'"))
    assert len(parents) == 1, f"{len(parents)} parent runs of the sweep{where}"
    jobs = sorted(p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit())
    assert len(jobs) == JOBS, (jobs, where)
    nested = client.search_runs(experiments, filter_string=f"tags.`mlflow.parentRunId` = '{parents[0].info.run_id}'")
    traced = sorted(len(traces_of(uri, r)) for r in nested)  # before the run_dir tag: what each job's run holds
    assert traced == sorted(judgments(job) for job in jobs), (
        f"traces per nested job run {traced}, judgments per job {[judgments(job) for job in jobs]}{where}")
    for job in jobs:
        count = judgments(job)
        assert count == 10, f"{job}: {count} judgments{where}"
        tracked = assert_published(uri, job, count, where=f"\njob {job.name}{where}", prompt_versions=prompt_versions)
        assert tracked.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id, (job, where)


@pytest.mark.parametrize("launcher", [
    "basic", "joblib", pytest.param("ray_local", marks=pytest.mark.ray)])
def test_each_job_of_a_sweep_is_one_run_with_all_its_traces_under_the_parent(tmp_path, empty_mlflow_store,
                                                                             mlflow_server, launcher):
    if launcher == "ray_local":  # the dev extra installs Ray: without it this test fails instead of skipping
        assert find_spec("ray") and find_spec("hydra_plugins.hydra_ray_launcher"), "pip install -e '.[dev]'"
    sweep_dir = tmp_path / "multirun"
    if launcher == "basic":  # one process at a time: a sqlite store
        uri, tracking = uri_of(store(tmp_path, empty_mlflow_store)), ["tracking=sqlite"]
    else:  # jobs in parallel processes: a server, as on a cluster
        uri, experiment = mlflow_server, f"tracking-{launcher}-{uuid.uuid4().hex[:8]}"
        MlflowClient(uri).create_experiment(experiment)
        tracking = ["tracking=server", "tracking.artifact_location=null", f"tracking.experiment={experiment}"]
    args = sweep_args(tmp_path, sweep_dir, *LAUNCHERS[launcher], *tracking, f"tracking.uri={uri}")
    if launcher == "basic":
        args.append(f"tracking.artifact_location={tmp_path / 'mlartifacts'}")
    proc = run(args, workdir(tmp_path))
    assert proc.returncode == 0, tails(proc)
    assert_sweep_published(uri, sweep_dir, tails(proc), prompt_versions=launcher == "basic")


def test_sync_of_a_sweep_dir_publishes_every_job_and_the_parent_once(tmp_path, empty_mlflow_store):
    sweep_dir, cwd = tmp_path / "multirun", workdir(tmp_path)
    proc = run(sweep_args(tmp_path, sweep_dir, "tracking=off"), cwd)
    assert proc.returncode == 0, tails(proc)
    db = store(tmp_path, empty_mlflow_store)
    for _ in range(2):
        synced = sync(sweep_dir, cwd, "tracking=sqlite", f"tracking.uri={uri_of(db)}")
        assert synced.returncode == 0, tails(synced)
        assert "Traceback" not in synced.stdout + synced.stderr, tails(synced)
        assert_sweep_published(uri_of(db), sweep_dir, tails(synced))
