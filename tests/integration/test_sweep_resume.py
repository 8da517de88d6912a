"""A sweep killed with SIGKILL during its second job finishes with ``resume=<sweep dir>``: the started job continues
from its journal, the job that never started starts, the finished one is skipped; no journaled answer is paid
again, and MLflow holds one sweep run and one run per job. Also with the joblib launcher (its workers killed with
the launching process), and under Ray (the basic sweep's finished directory, cut back by hand, resumed with
hydra/launcher=ray_local). The process is the point: kill -9, then the CLI's multirun callbacks."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.integration.conftest import REPO, cli_args, live_judge, mlflow_uri, offline_env

pytestmark = pytest.mark.slow

N_ITEMS, SEEDS = 6, (1, 2, 3)
JOBS = len(SEEDS)
JOBLIB = ("hydra/launcher=joblib", "hydra.launcher.n_jobs=2")
# No assertion here reads a figure or a trace: the runs' MLflow runs, metrics and tags are what is checked.
QUIET = ("output.plots=false", "tracking.traces=false")


def slow_judge(body: dict) -> Reply:
    """A verdict, a little slow: the sweep is still in its second job when it is killed."""
    return Reply(content="Verdict: [[A]]", delay_s=0.2)


def write_dataset(path: Path) -> None:
    with path.open("w") as fh:
        for n in range(N_ITEMS):
            fh.write(json.dumps({"id": f"q{n}", "prompt": f"question {n}", "chat": f"chat {n}",
                                 "simple_chat": f"simple {n}"}) + "\n")


def sweep_overrides(server, dataset: Path, launcher: tuple[str, ...]) -> tuple[str, ...]:
    return (*live_judge(server), *launcher, "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
            f"dataset.path={dataset}", "order=fixed", "concurrency=1", "cache.mode=off",
            f"judge.seed={','.join(map(str, SEEDS))}", *QUIET)


def journal_lines(sweep: Path) -> int:
    """Complete journal lines over every job of the sweep."""
    return sum(sum(1 for line in j.read_text().splitlines() if line.endswith("}"))
               for j in sweep.glob("*/journal.jsonl"))


def kill_during_second_job(args: list[str], sweep: Path) -> None:
    """Start the sweep and SIGKILL its process group (a launcher's workers too) once job 1 journaled 2 answers."""
    proc = subprocess.Popen(args, cwd=REPO, env=offline_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    journal = sweep / "1" / "journal.jsonl"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.is_file() and journal.read_text().count("\n") >= 2:
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the sweep ended before it was killed"


def resume(tmp_path: Path, sweep: Path | str, overrides: tuple[str, ...]) -> subprocess.CompletedProcess:
    """``judgesweep -m <overrides> resume=<sweep>``: the sweep directory comes from ``resume`` alone."""
    args = [sys.executable, "-m", "runner", "-m", *cli_args(tmp_path, Path(sweep), overrides)[4:], f"resume={sweep}"]
    return subprocess.run(args, cwd=REPO, env=offline_env(), capture_output=True, text=True, timeout=600)


@dataclass
class Resumed:
    """What a sweep killed during its second job and resumed twice left, read as each step ended (the Ray test goes
    on from the basic one's finished sweep: what is asserted here was read before it changed anything)."""

    journaled: int  # journal lines when it was killed
    job_2_started: bool  # job 2's run.json existed when it was killed
    resumed: subprocess.CompletedProcess
    paid: int  # requests the resume sent
    summaries: list[dict]
    journal_lines: int
    runs: list  # MLflow's runs after the resume
    again: subprocess.CompletedProcess  # the finished sweep resumed again
    paid_again: list
    summary_0_kept: bool  # job 0's summary.json not rewritten by it
    runs_again: int


def kill_and_resume(server, tmp_path: Path, launcher: tuple[str, ...]) -> Resumed:
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    server.reply = slow_judge
    sweep = tmp_path / "multirun"
    overrides = sweep_overrides(server, dataset, launcher)
    kill_during_second_job(cli_args(tmp_path, sweep, overrides, multirun=True), sweep)
    journaled, job_2_started = journal_lines(sweep), (sweep / "2" / "run.json").exists()

    server.reset()
    resumed = resume(tmp_path, sweep, overrides)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr  # (what follows reads what it wrote)
    paid = len(server.requests)
    summaries = [json.loads((sweep / str(job) / "summary.json").read_text()) for job in range(JOBS)]
    client = MlflowClient(tracking_uri=mlflow_uri(tmp_path))
    runs = client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id])

    # A finished sweep resumed again (named relative to the working directory, as users do)
    server.reset()
    summary_0 = (sweep / "0" / "summary.json").stat().st_mtime_ns
    again = resume(tmp_path, os.path.relpath(sweep, REPO), overrides)
    return Resumed(journaled, job_2_started, resumed, paid, summaries, journal_lines(sweep), runs, again,
                   list(server.requests), (sweep / "0" / "summary.json").stat().st_mtime_ns == summary_0,
                   len(client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id])))


@pytest.fixture(scope="module")
def module_server() -> Iterator[FakeOpenAIServer]:
    """The fake judge of the basic sweep and of the Ray test that goes on from it."""
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def basic_sweep(module_server, tmp_path_factory) -> tuple[Path, Resumed]:
    """The basic launcher's sweep killed and resumed twice, once per module: its directory and what it left."""
    tmp_path = tmp_path_factory.mktemp("basic")
    return tmp_path, kill_and_resume(module_server, tmp_path, ())


@pytest.mark.parametrize("launcher", [(), JOBLIB], ids=["basic", "joblib"])
def test_a_killed_sweep_resumes_to_every_job_paying_nothing_twice(request, tmp_path, launcher):
    if launcher:
        done = kill_and_resume(request.getfixturevalue("fake_server"), tmp_path, launcher)
    else:
        _, done = request.getfixturevalue("basic_sweep")
    assert not done.job_2_started or launcher, "job 2 started before the kill"
    out = done.resumed.stdout + done.resumed.stderr
    assert done.resumed.returncode == 0, out
    assert done.paid == JOBS * N_ITEMS - done.journaled  # nothing the journals held was paid again
    for job, summary in enumerate(done.summaries):
        assert not summary.get("partial") and summary["summary"]["successful_evaluations"] == N_ITEMS, job
    assert done.journal_lines == JOBS * N_ITEMS

    (parent,) = [r for r in done.runs if r.data.tags.get("judgesweep.kind") == "sweep"]
    jobs = [r for r in done.runs if "judgesweep.kind" not in r.data.tags]
    assert parent.info.status == "FINISHED" and parent.data.metrics["sweep/jobs"] == JOBS
    assert len(jobs) == JOBS and {r.info.status for r in jobs} == {"FINISHED"}  # the killed job's run continued
    assert {r.data.tags["mlflow.parentRunId"] for r in jobs} == {parent.info.run_id}

    # A finished sweep resumed again: every job is skipped, nothing is paid, still one sweep run.
    assert done.again.returncode == 0, done.again.stdout + done.again.stderr
    assert done.paid_again == []
    assert done.summary_0_kept
    assert done.runs_again == JOBS + 1


@pytest.mark.ray
def test_a_ray_sweep_resumes_each_job_as_it_was_left(module_server, basic_sweep):
    """The kill's aftermath built by hand (a Ray cluster is too slow to kill on cue): job 0 cut short after 3
    answers (no summary), job 1 never started (no directory), job 2 finished. Resumed under Ray, job 0 pays for the
    rest, job 1 for all and job 2 for nothing (skipped); the sweep keeps its one run. Made from the basic launcher's
    finished sweep (basic_sweep: the files a job leaves do not depend on the launcher; one Ray cluster start and no
    sweep of its own)."""
    tmp_path, _ = basic_sweep
    sweep = tmp_path / "multirun"
    module_server.reply = lambda body: "Verdict: [[A]]"
    overrides = sweep_overrides(module_server, tmp_path / "pairs.jsonl", ("hydra/launcher=ray_local",))
    journal = sweep / "0" / "journal.jsonl"
    journal.write_text("".join(journal.read_text().splitlines(keepends=True)[:3]))
    for name in ("summary.json", "metrics.json"):
        (sweep / "0" / name).unlink()
    shutil.rmtree(sweep / "1")
    summary_2 = (sweep / "2" / "summary.json").stat().st_mtime_ns

    module_server.reset()
    resumed = resume(tmp_path, sweep, overrides)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert len(module_server.requests) == 2 * N_ITEMS - 3
    assert all((sweep / job / "summary.json").is_file() for job in ("0", "1"))
    assert (sweep / "2" / "summary.json").stat().st_mtime_ns == summary_2
    client = MlflowClient(tracking_uri=mlflow_uri(tmp_path))
    runs = client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("judgesweep.kind") == "sweep"]
    assert parent.data.metrics["sweep/jobs"] == JOBS
    (job_0,) = [r for r in runs if r.data.params.get("judge.seed") == "1"]  # continued, not duplicated
    assert job_0.info.status == "FINISHED" and job_0.data.metrics["calls/resumed"] == 3
