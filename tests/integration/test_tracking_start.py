"""The MLflow run is created beside the judge calls once the first answer is in, not before (issue 12, start-up):
the first request is sent, and answered, before the run exists; the manifest (run.json) holds the run's id as
soon as it exists, so a run killed after that is continued on resume; and an error creating the run still fails
the job without losing an answer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from mlflow.tracking import MlflowClient

from tests.fakes.openai_server import Reply
from tests.integration.conftest import REPO, cli_args, live_judge, mlflow_uri, offline_env

N_ITEMS = 20


def write_dataset(path: Path) -> None:
    with path.open("w") as fh:
        for n in range(N_ITEMS):
            fh.write(json.dumps({"id": f"q{n}", "prompt": f"question {n}", "chat": f"chat {n}",
                                 "simple_chat": f"simple {n}"}) + "\n")


def overrides(server, dataset: Path) -> list[str]:
    return [*live_judge(server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
            f"dataset.path={dataset}", "order=fixed", "concurrency=2", "cache.mode=off", "progress=false"]


def manifest_run_id(run_dir: Path) -> str | None:
    """The MLflow run id in the run's manifest; None before the manifest or the run exists."""
    try:
        return json.loads((run_dir / "run.json").read_text()).get("mlflow_run_id")
    except FileNotFoundError:  # replaced atomically, so never read half-written
        return None


def job_runs(tmp_path: Path) -> list:
    client = MlflowClient(tracking_uri=mlflow_uri(tmp_path))
    return client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id])


def test_the_first_request_does_not_wait_for_the_mlflow_run_and_resume_continues_it(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    run_dir = tmp_path / "killed"
    before_the_run: list[bool] = []  # per request: whether it arrived before the manifest named the MLflow run
    first_answered: list[float] = []  # time.time() when the first answer was handed to the server

    def answer_once_the_run_exists(body: dict) -> Reply:
        before_the_run.append(manifest_run_id(run_dir) is None)
        if not first_answered:  # the first answer goes at once: the MLflow run is created after it
            first_answered.append(time.time())
            return Reply(content="Verdict: [[A]]")
        deadline = time.monotonic() + 120
        while manifest_run_id(run_dir) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        return Reply(content="Verdict: [[A]]", delay_s=0.2)

    fake_server.reply = answer_once_the_run_exists
    proc = subprocess.Popen(cli_args(tmp_path, run_dir, tuple(overrides(fake_server, dataset))), cwd=REPO,
                            env=offline_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = run_dir / "journal.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (journal.is_file() and journal.read_text().count("\n") >= 3):
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert before_the_run[:2] == [True, True]  # both first requests (concurrency 2) went before the run existed
    killed_run = manifest_run_id(run_dir)
    assert killed_run is not None
    killed = MlflowClient(tracking_uri=mlflow_uri(tmp_path)).get_run(killed_run)
    created_ms, name = killed.info.start_time, killed.info.run_name
    assert created_ms / 1000 >= first_answered[0]  # created once the first answer was in, not beside the request

    fake_server.reply = lambda body: "Verdict: [[A]]"
    resumed = run_cli(*overrides(fake_server, dataset), f"resume={run_dir}", run_dir=run_dir)
    assert resumed.proc.returncode == 0, resumed.output
    runs = job_runs(tmp_path)
    assert [run.info.run_id for run in runs] == [killed_run] and runs[0].info.status == "FINISHED"
    assert runs[0].info.run_name == name and name.startswith("local_openai · ")  # the resumed run keeps its name
    assert manifest_run_id(run_dir) == killed_run


def test_an_error_creating_the_mlflow_run_fails_the_job_and_resume_pays_nothing_twice(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    not_a_store = tmp_path / "broken.db"
    not_a_store.write_text("not an sqlite database\n")
    fake_server.reply = lambda body: "Verdict: [[A]]"
    failed = run_cli(*overrides(fake_server, dataset), f"tracking.uri=sqlite:///{not_a_store}")
    assert failed.proc.returncode == 1
    assert "file is not a database" in failed.output  # the store's own error, with its traceback
    assert "the MLflow run could not be created; the journal keeps every answer" in failed.output
    assert f"continue with resume={failed.run_dir}" in failed.output
    assert len(failed.journal()) == N_ITEMS and manifest_run_id(failed.run_dir) is None

    fake_server.reset()
    resumed = run_cli(*overrides(fake_server, dataset), f"resume={failed.run_dir}", run_dir=failed.run_dir)
    assert resumed.proc.returncode == 0, resumed.output
    assert fake_server.requests == []
    runs = job_runs(tmp_path)
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert manifest_run_id(failed.run_dir) == runs[0].info.run_id


def test_the_mlflow_run_is_created_after_the_first_answer_not_beside_the_first_request(run_cli, fake_server, tmp_path):
    # In this process mlflow is imported and the store exists, so creating the run takes a fraction of a second: held
    # for a second, the first answer would find the run made if its creation started beside the first request.
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    run_dir = tmp_path / "run"
    held: list[str | None] = []  # the manifest's MLflow run id at the end of holding the first answer

    def hold_the_first_answer(body: dict) -> Reply:
        if not held:
            held.append("holding")
            time.sleep(1.0)
            held[0] = manifest_run_id(run_dir)
        return Reply(content="Verdict: [[A]]")

    fake_server.reply = hold_the_first_answer
    done = run_cli(*overrides(fake_server, dataset), "concurrency=1", run_dir=run_dir)
    assert done.proc.returncode == 0, done.proc.stdout + done.proc.stderr
    assert held == [None]
    assert manifest_run_id(run_dir) == job_runs(tmp_path)[0].info.run_id
