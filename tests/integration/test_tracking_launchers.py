"""A sweep in MLflow whatever runs its jobs (issue 28): under the basic launcher each job is one MLflow run with a
trace per judgment of its results.jsonl, nested under the sweep's parent run, all written by one publishing process
that ends with the sweep (joblib and ray_local: the same check on the sweeps of tests/integration/test_launchers.py
and test_ray_launcher.py); and a sweep made with tracking off is published later by `judgesweep sync <sweep dir>`,
once, however often it is synced.

judgesweep as a process in a fresh working directory (a sweep's second sync in this process: what it writes is the
point); no figures drawn (no test here looks at one); what MLflow holds read back through MLflow's client."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from runner.run import launcher_watch
from tests.integration.conftest import REPO
from tests.integration.tracking_processes import (
    assert_sweep_published,
    run,
    store,
    sync,
    sync_here,
    tails,
    uri_of,
    workdir,
)

pytestmark = pytest.mark.slow

SWEEP = ("judge=replay_gpt4", "max_items=2", "prompt=llmbar_vanilla,llmbar_vanilla_norules", "output.plots=false")
PER_JOB = 4  # judgments: 2 items x 2 orders


def sweep_args(tmp_path: Path, sweep_dir: Path, *overrides: str) -> list[str]:
    return [sys.executable, "-m", "runner", "-m", f"hydra.sweep.dir={sweep_dir}",
            f"cache.path={tmp_path / 'cache.sqlite'}", f"prompts_dir={REPO / 'prompts'}", *SWEEP, *overrides]


def test_each_job_of_a_sweep_is_one_run_with_all_its_traces_under_the_parent(tmp_path, empty_mlflow_store):
    sweep_dir = tmp_path / "multirun"
    uri = uri_of(store(tmp_path, empty_mlflow_store))  # one process at a time: a sqlite store
    args = sweep_args(tmp_path, sweep_dir, "hydra/launcher=basic", "tracking=sqlite", f"tracking.uri={uri}",
                      f"tracking.artifact_location={tmp_path / 'mlartifacts'}")
    proc = run(args, workdir(tmp_path))
    assert proc.returncode == 0, tails(proc)
    assert_sweep_published(uri, sweep_dir, tails(proc), per_job=PER_JOB)
    # the jobs, run one after another in the sweep's process, were served by one publishing process (each job's log
    # names it), which ended with the sweep: closed once its table was published, exiting at once (0, neither cut nor
    # killed) at the end of file on its stdin, and gone now
    written_by = {job.parent.name: re.findall(r"MLflow run \w+ at .* \(written by publishing process (\d+)\)",
                                              job.read_text()) for job in sweep_dir.glob("*/judgesweep.log")}
    assert sorted(written_by) == ["0", "1"] and all(len(pids) == 1 for pids in written_by.values()), written_by
    (pid,) = {pids[0] for pids in written_by.values()}
    ended = rf"sweep table .* logged to MLflow run .*publishing process {pid} ended \(exit 0\)"
    assert re.search(ended, proc.stdout, re.S), tails(proc)
    assert not launcher_watch.alive(int(pid))


def test_sync_of_a_sweep_dir_publishes_every_job_and_the_parent_once(tmp_path, empty_mlflow_store):
    sweep_dir, cwd = tmp_path / "multirun", workdir(tmp_path)
    proc = run(sweep_args(tmp_path, sweep_dir, "tracking=off"), cwd)
    assert proc.returncode == 0, tails(proc)
    db = store(tmp_path, empty_mlflow_store)
    for sync_of in (sync, sync_here):  # the console script, then again in this process
        synced = sync_of(sweep_dir, cwd, "tracking=sqlite", f"tracking.uri={uri_of(db)}")
        assert synced.returncode == 0, tails(synced)
        assert "Traceback" not in synced.stdout + synced.stderr, tails(synced)
        assert_sweep_published(uri_of(db), sweep_dir, tails(synced), per_job=PER_JOB)
