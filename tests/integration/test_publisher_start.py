"""The publishing process starts with the job (issue 43): a run's MLflow view costs no time after its printed result
for the imports and the store, because its helper (runner.outputs.publisher) imports mlflow and opens the store on the
other core while the job imports litellm and makes its first calls. Seen from outside: the helper is a live child of
the run while the first judge call is still unanswered, the MLflow run itself is made only once an answer is in (as
before), and a job refused before its first call leaves no helper behind.

judgesweep as a process (its children are the point), against the fake server, into a real sqlite store."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

import pytest

from runner.outputs.publishing import PUBLISHED_NAME
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.integration.tracking_processes import (
    alive,
    assert_published,
    descendants,
    finish,
    run,
    run_args,
    runs_of,
    slow_overrides,
    start,
    store,
    tails,
    uri_of,
    workdir,
)

pytestmark = pytest.mark.slow

HELPER = "runner.outputs.publisher"


def _helpers(pid: int) -> dict[int, str]:
    return {child: cmd for child, cmd in alive(descendants(pid)).items() if HELPER in cmd}


def test_the_helper_runs_before_the_first_answer_and_the_mlflow_run_is_made_after_it(tmp_path, empty_mlflow_store):
    answer = threading.Event()
    first_request = threading.Event()

    def held(body: dict) -> Reply:
        first_request.set()
        answer.wait(60)
        return Reply(content="[[A]]")

    db = store(tmp_path, empty_mlflow_store)
    run_dir = tmp_path / "run"
    with FakeOpenAIServer(held) as server:
        proc = start(run_args(tmp_path, run_dir, db, *slow_overrides(server, tmp_path, concurrency=1)),
                     workdir(tmp_path))
        try:
            assert first_request.wait(120), tails(proc)
            helpers = _helpers(proc.pid)
            made_before = runs_of(uri_of(db), run_dir)
        finally:
            answer.set()
        done = finish(proc)
    assert done.returncode == 0, tails(done)
    assert len(helpers) == 1, f"no publishing process while the first call was unanswered: {helpers}"
    assert made_before == [], "the MLflow run was made before any answer"
    assert_published(uri_of(db), run_dir, judgments=12, where=tails(done))
    _assert_none_lingers(tmp_path)


def _lingering(tmp_path: Path) -> dict[int, str]:
    """Live processes anywhere whose command line names this test's store (a helper orphaned by its run)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                if str(tmp_path) in cmd and HELPER in cmd:
                    out[int(entry.name)] = cmd
    return out


def _assert_none_lingers(tmp_path: Path) -> None:
    deadline = time.monotonic() + 5
    while _lingering(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _lingering(tmp_path), f"a publishing process outlived its job: {_lingering(tmp_path)}"


def test_a_job_refused_before_its_first_call_leaves_no_helper(tmp_path, empty_mlflow_store):
    db = store(tmp_path, empty_mlflow_store)
    run_dir = tmp_path / "run"
    # the dataset is read in the pipeline's prepare, after the helper started: the job ends there (exit 1, one line)
    done = run(run_args(tmp_path, run_dir, db, f"dataset.path={tmp_path / 'missing.jsonl'}"), workdir(tmp_path))
    assert done.returncode == 1, tails(done)
    assert "missing.jsonl" in done.stderr + done.stdout, tails(done)
    _assert_none_lingers(tmp_path)
    assert not (run_dir / PUBLISHED_NAME).exists() and runs_of(uri_of(db), run_dir) == []
