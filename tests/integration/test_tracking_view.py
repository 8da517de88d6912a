"""MLflow as a view of the run directory (issue 28): a run writes its files first and then publishes them to MLflow
through a helper process (what `judgesweep sync` runs); `judgesweep sync` writes whatever a store lacks and nothing
twice; a store that cannot be written fails tracking (exit 3, one line naming the sync command), never the run's
files; no process outlives a killed run; a signal while publishing ends with one line and a run that sync finishes.

Every run here is judgesweep as a process started in a fresh working directory (the repository's prompts given by
absolute path), and what MLflow holds is read back through MLflow's client."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.openai_server import Reply
from tests.integration.conftest import REPO
from tests.integration.tracking_processes import (
    JUDGESWEEP,
    RUN_DIR_TAG,
    SLOW_ITEMS,
    assert_files,
    assert_nothing_outlives,
    assert_published,
    descendants,
    finish,
    no_traceback,
    run,
    run_args,
    runs_of,
    slow_overrides,
    start,
    start_publishing_into_a_locked_store,
    store,
    sync,
    sync_line,
    tails,
    uri_of,
    wait_for_mlflow_run,
    workdir,
)

pytestmark = pytest.mark.slow

ITEMS = 10  # LLMBar Natural with the replay judge: 10 items x 2 orders
JUDGMENTS = 2 * ITEMS
FILES = ("journal.jsonl", "results.jsonl", "summary.json", "metrics.json", "report.html", "run.json")


# --- A and B: the default run, then judgesweep sync of it ------------------------------------------------------


def test_a_default_run_publishes_one_complete_mlflow_run_and_syncing_it_twice_writes_nothing_twice(
        tmp_path, empty_mlflow_store):
    """The default run writes its files, then publishes one complete MLflow run; `judgesweep sync` of it, twice,
    into the run's own store (its .hydra/config.yaml): nothing lacks, nothing is written twice. One run for both
    (they were two tests making the same run)."""
    db, run_dir, cwd = store(tmp_path, empty_mlflow_store), tmp_path / "run", workdir(tmp_path)
    proc = run(run_args(tmp_path, run_dir, db, "judge=replay_gpt4", f"max_items={ITEMS}"), cwd)
    assert proc.returncode == 0, tails(proc)
    no_traceback(proc)
    assert all((run_dir / name).is_file() for name in FILES), sorted(p.name for p in run_dir.glob("*"))
    assert_files(run_dir, JUDGMENTS, proc)
    first = assert_published(uri_of(db), run_dir, JUDGMENTS, where=tails(proc))
    assert first.data.tags[RUN_DIR_TAG] == str(run_dir.resolve())
    assert json.loads(first.data.tags["mlflow.linkedPrompts"]) == [{"name": "llmbar_vanilla", "version": "1"}]
    assert [d.dataset.name for d in first.inputs.dataset_inputs] == ["llmbar_natural"]
    for _ in range(2):
        again = sync(run_dir, cwd)
        assert again.returncode == 0, tails(again)
        no_traceback(again)
        tracked = assert_published(uri_of(db), run_dir, JUDGMENTS, where=tails(again))
        assert tracked.info.run_id == first.info.run_id


def test_a_run_with_tracking_off_syncs_into_two_stores_and_a_killed_sync_synced_again_leaves_one_run(
        tmp_path, empty_mlflow_store):
    """An untracked run synced into two stores, each then holding it once; a sync into a third store killed with
    kill -9 leaves no process or open file, and syncing again leaves one complete run. One untracked run of 40 items
    (long enough a sync to kill) for both (they were two tests, each making an untracked run)."""
    run_dir, cwd = tmp_path / "run", workdir(tmp_path)
    proc = run(run_args(tmp_path, run_dir, None, "judge=replay_gpt4", "max_items=40", "tracking=off"), cwd)
    assert proc.returncode == 0, tails(proc)
    judgments = 80
    first, second = store(tmp_path, empty_mlflow_store, "first.db"), store(tmp_path, empty_mlflow_store, "second.db")
    one = sync(run_dir, cwd, "tracking=sqlite", f"tracking.uri={uri_of(first)}")
    assert one.returncode == 0, tails(one)
    no_traceback(one)
    assert_published(uri_of(first), run_dir, judgments, experiment="judgesweep", where=tails(one))
    two = sync(run_dir, cwd, "tracking.enabled=true", f"tracking.uri={uri_of(second)}", "tracking.experiment=elsewhere")
    assert two.returncode == 0, tails(two)
    assert_published(uri_of(second), run_dir, judgments, experiment="elsewhere", where=tails(two))
    assert_published(uri_of(first), run_dir, judgments, where=tails(two))  # the first store as it was
    assert not list(cwd.rglob("mlflow.db")), list(cwd.rglob("*"))

    db = store(tmp_path, empty_mlflow_store)
    syncing = start([str(JUDGESWEEP), "sync", str(run_dir), "tracking=sqlite", f"tracking.uri={uri_of(db)}"], cwd)
    wait_for_mlflow_run(uri_of(db), run_dir, syncing)
    children = descendants(syncing.pid)
    syncing.send_signal(signal.SIGKILL)
    killed = finish(syncing)
    assert_nothing_outlives(syncing.pid, children, [run_dir, db], tails(killed))
    again = sync(run_dir, cwd, "tracking=sqlite", f"tracking.uri={uri_of(db)}")
    assert again.returncode == 0, tails(again)
    assert_published(uri_of(db), run_dir, judgments, where=tails(again))


def test_kill_9_of_the_run_while_it_publishes_then_sync_completes_it(tmp_path, empty_mlflow_store):
    db, run_dir, cwd = store(tmp_path, empty_mlflow_store), tmp_path / "run", workdir(tmp_path)
    proc = start(run_args(tmp_path, run_dir, db, "judge=replay_gpt4", "max_items=40"), cwd)
    wait_for_mlflow_run(uri_of(db), run_dir, proc)
    assert (run_dir / "summary.json").is_file(), "publishing began before the run's files were written"
    children = descendants(proc.pid)
    proc.send_signal(signal.SIGKILL)
    killed = finish(proc)
    assert_nothing_outlives(proc.pid, children, [run_dir, db], tails(killed))
    again = sync(run_dir, cwd)
    assert again.returncode == 0, tails(again)
    assert_published(uri_of(db), run_dir, 80, where=tails(again))


# --- C: tracking failures ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("broken", ["unwritable", "corrupt"])
def test_a_store_that_cannot_be_written_fails_tracking_not_the_run(tmp_path, empty_mlflow_store, broken):
    run_dir, cwd = tmp_path / "run", workdir(tmp_path)
    if broken == "unwritable":
        bad = Path("/proc/forbidden/mlflow.db")
    else:
        bad = tmp_path / "broken" / "mlflow.db"
        bad.parent.mkdir()
        bad.write_bytes(os.urandom(64 * 1024))
    proc = run(run_args(tmp_path, run_dir, bad, "judge=replay_gpt4", f"max_items={ITEMS}"), cwd)
    assert proc.returncode == 3, tails(proc)
    no_traceback(proc)
    assert_files(run_dir, JUDGMENTS, proc)
    line = sync_line(proc, run_dir)
    assert str(bad) in line, f"the line does not name the store {bad}: {line}"

    good = store(tmp_path, empty_mlflow_store)
    fixed = sync(run_dir, cwd, f"tracking.uri={uri_of(good)}")
    assert fixed.returncode == 0, tails(fixed)
    no_traceback(fixed)
    assert_published(uri_of(good), run_dir, JUDGMENTS, where=tails(fixed))


def test_a_locked_store_does_not_fail_the_runs_files(tmp_path, empty_mlflow_store, fake_server):
    run_dir, cwd = tmp_path / "run", workdir(tmp_path)
    proc, lock, db = start_publishing_into_a_locked_store(tmp_path, empty_mlflow_store, fake_server, run_dir)
    assert_files(run_dir, SLOW_ITEMS)  # written while the store is locked
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=max(0.0, 20 - (time.monotonic() - lock.since)))  # ~20 s of lock, or the run gave up
    lock.release()
    done = finish(proc)
    assert done.returncode in (0, 3), tails(done)
    no_traceback(done)
    assert_files(run_dir, SLOW_ITEMS, done)
    if done.returncode == 3:
        sync_line(done, run_dir)
        fixed = sync(run_dir, cwd)
        assert fixed.returncode == 0, tails(fixed)
        done = fixed
    assert_published(uri_of(db), run_dir, SLOW_ITEMS, where=tails(done))


def test_resuming_a_finished_run_elsewhere_leaves_no_store_in_the_working_directory(tmp_path, empty_mlflow_store):
    """Resumed into another store, then (again) with tracking off, each from its own working directory: one run
    for both cases (they were two tests making the same run)."""
    db, run_dir = store(tmp_path, empty_mlflow_store), tmp_path / "run"
    proc = run(run_args(tmp_path, run_dir, db, "judge=replay_gpt4", "max_items=3"), workdir(tmp_path))
    assert proc.returncode == 0, tails(proc)
    other = tmp_path / "other" / "mlflow.db"
    for n, tracking in enumerate(([f"tracking.uri={uri_of(other)}"], ["tracking=off"])):
        cwd = workdir(tmp_path, f"resume-cwd-{n}")
        args = [sys.executable, "-m", "runner", f"hydra.run.dir={run_dir}", f"resume={run_dir}", "judge=replay_gpt4",
                "max_items=3", f"cache.path={tmp_path / 'cache.sqlite'}", f"prompts_dir={REPO / 'prompts'}", *tracking]
        resumed = run(args, cwd)
        assert resumed.returncode == 0, tails(resumed)
        no_traceback(resumed)
        assert not list(cwd.rglob("mlflow.db")), f"a store in the working directory: {list(cwd.rglob('*'))}"
        assert_files(run_dir, 6, resumed)


# --- D: no process outlives its run -----------------------------------------------------------------------------


def test_kill_9_while_publishing_leaves_no_process_and_no_open_file(tmp_path, empty_mlflow_store, fake_server):
    run_dir, cwd = tmp_path / "run", workdir(tmp_path)
    proc, lock, db = start_publishing_into_a_locked_store(tmp_path, empty_mlflow_store, fake_server, run_dir)
    try:
        children = descendants(proc.pid)
        proc.send_signal(signal.SIGKILL)
        killed = finish(proc)
        assert_nothing_outlives(proc.pid, children, [run_dir, db], tails(killed))
    finally:
        lock.release()
    again = sync(run_dir, cwd)
    assert again.returncode == 0, tails(again)
    assert_published(uri_of(db), run_dir, SLOW_ITEMS, where=tails(again))


def test_kill_9_during_the_judge_calls_leaves_no_process_and_no_open_file(tmp_path, empty_mlflow_store,
                                                                          fake_server):
    db, run_dir = store(tmp_path, empty_mlflow_store), tmp_path / "run"
    fake_server.reply = lambda _body: Reply(content="Verdict: [[A]]", delay_s=2.0)
    proc = start(run_args(tmp_path, run_dir, db, *slow_overrides(fake_server, tmp_path)), workdir(tmp_path))
    deadline = time.monotonic() + 60
    # some answers journaled and more calls in flight: the run's helpers (if any) have started
    while proc.poll() is None and time.monotonic() < deadline and not (
            (run_dir / "journal.jsonl").is_file() and (run_dir / "journal.jsonl").read_text().strip()
            and fake_server.stats()["requests"] > fake_server.stats()["accepted"]):
        time.sleep(0.05)
    assert proc.poll() is None, tails(finish(proc))
    time.sleep(0.5)
    children = descendants(proc.pid)
    proc.send_signal(signal.SIGKILL)
    killed = finish(proc)
    assert_nothing_outlives(proc.pid, children, [run_dir, db], tails(killed) + f"\nchildren: {children}")


# --- E: a signal while publishing -------------------------------------------------------------------------------


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_while_publishing_ends_with_one_line_and_sync_finishes_the_run(tmp_path, empty_mlflow_store,
                                                                               fake_server, signum, code):
    run_dir, cwd = tmp_path / "run", workdir(tmp_path)
    proc, lock, db = start_publishing_into_a_locked_store(tmp_path, empty_mlflow_store, fake_server, run_dir)
    try:
        proc.send_signal(signum)
        try:
            done = finish(proc, timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"{signum.name} did not end the publishing run within 30 s{tails(finish(proc))}")
    finally:
        lock.release()
    assert done.returncode == code, tails(done)
    no_traceback(done)
    lines = [line for line in done.stderr.splitlines() if "judgesweep:" in line]
    assert len(lines) == 1, f"expected one 'judgesweep:' line in stderr, got {lines}{tails(done)}"
    names = [f"resume={d}" for d in (run_dir, run_dir.resolve())] + [f"judgesweep sync {d}"
                                                                     for d in (run_dir, run_dir.resolve())]
    assert any(name in lines[0] for name in names), lines[0]
    assert_files(run_dir, SLOW_ITEMS, done)
    left = runs_of(uri_of(db), run_dir)
    assert all(r.info.status == "FAILED" for r in left) and len(left) <= 1, [(r.info.run_id, r.info.status)
                                                                             for r in left]
    fixed = sync(run_dir, cwd)
    assert fixed.returncode == 0, tails(fixed)
    assert_published(uri_of(db), run_dir, SLOW_ITEMS, where=tails(fixed))
