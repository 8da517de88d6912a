"""MLflow as a view of the run directory (issue 28): a run writes its files first and then publishes them to MLflow
through a helper process (what `judgesweep sync` runs); `judgesweep sync` writes whatever a store lacks and nothing
twice; a store that stays locked fails tracking (exit 3, one line naming the sync command), never the run's files (a
store that cannot be written at all: tests/integration/test_tracking_start.py); no process outlives a run or sync
killed while it publishes (a run killed during its calls: test_tracking_start); a signal while publishing ends with
one line and a run that sync finishes.

The runs are judgesweep as a process started in a fresh working directory (the repository's prompts given by
absolute path) where the process is the point (kill -9, signals, exit 3, resumes from a working directory), else
in this process (conftest.run_in_process: the default run, an untracked run; their publishing helper is a process
all the same); a sync is `judgesweep sync` as a process where it is killed, else the same command in this process
(tracking_processes.sync_here; tests/integration/test_tracking_launchers.py has the console script's exit 0). What
MLflow holds is read back through MLflow's client."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.fakes.openai_server import Reply
from tests.integration.conftest import REPO, run_in_process
from tests.integration.tracking_processes import (
    JUDGESWEEP,
    RUN_DIR_TAG,
    SLOW_ITEMS,
    StoreLock,
    assert_files,
    assert_nothing_outlives,
    assert_published,
    descendants,
    finish,
    kill_while_publishing,
    no_traceback,
    run,
    run_args,
    runs_of,
    slow_overrides,
    start,
    start_publishing_into_a_locked_store,
    store,
    sync_here,
    sync_line,
    tails,
    uri_of,
    wait_for_log,
    workdir,
)

pytestmark = pytest.mark.slow

ITEMS = 10  # LLMBar Natural with the replay judge: 10 items x 2 orders
JUDGMENTS = 2 * ITEMS
FILES = ("journal.jsonl", "results.jsonl", "summary.json", "metrics.json", "report.html", "run.json")


# --- A and B: the default run, then judgesweep sync of it; an untracked run synced; kill -9 while publishing ---


def test_the_default_run_publishes_one_complete_mlflow_run_syncing_it_twice_writes_nothing_twice_and_resuming_it(
        tmp_path, empty_mlflow_store):
    """The default run (in this process: its helper process is the point, not its own) writes its files, then
    publishes one complete MLflow run; `judgesweep sync` of it, twice, into the run's own store (its view.json):
    nothing lacks, nothing is written twice. Then the finished run resumed (judgesweep as a process) into another
    store, and (again) with tracking off, each from its own working directory, leaves no store there. One run for
    all (they were three tests making the same run as a process, the resumes' test with max_items=3)."""
    db, run_dir, cwd = tmp_path / "mlflow.db", tmp_path / "run", workdir(tmp_path)
    shutil.copyfile(empty_mlflow_store(), db)  # run_in_process's store (conftest.mlflow_uri), its tables made
    # the prompts by absolute path, as the resumes below (from other directories) give them
    proc = run_in_process(tmp_path, run_dir, ("judge=replay_gpt4", f"max_items={ITEMS}",
                                              f"prompts_dir={REPO / 'prompts'}"))
    assert proc.returncode == 0, tails(proc)
    no_traceback(proc)
    assert all((run_dir / name).is_file() for name in FILES), sorted(p.name for p in run_dir.glob("*"))
    assert_files(run_dir, JUDGMENTS, proc)
    first = assert_published(uri_of(db), run_dir, JUDGMENTS, where=tails(proc))
    assert first.data.tags[RUN_DIR_TAG] == str(run_dir.resolve())
    assert json.loads(first.data.tags["mlflow.linkedPrompts"]) == [{"name": "llmbar_vanilla", "version": "1"}]
    assert [d.dataset.name for d in first.inputs.dataset_inputs] == ["llmbar_natural"]
    for _ in range(2):
        again = sync_here(run_dir, cwd)
        assert again.returncode == 0, tails(again)
        no_traceback(again)
        tracked = assert_published(uri_of(db), run_dir, JUDGMENTS, where=tails(again))
        assert tracked.info.run_id == first.info.run_id

    other = store(tmp_path, empty_mlflow_store, "other.db")  # its tables made already
    for n, tracking in enumerate(([f"tracking.uri={uri_of(other)}"], ["tracking=off"])):
        resume_cwd = workdir(tmp_path, f"resume-cwd-{n}")
        args = [sys.executable, "-m", "runner", f"hydra.run.dir={run_dir}", f"resume={run_dir}", "judge=replay_gpt4",
                f"max_items={ITEMS}", f"cache.path={tmp_path / 'cache.sqlite'}", f"prompts_dir={REPO / 'prompts'}",
                "output.plots=false", *tracking]  # no figures: what a resume draws is not the point here
        resumed = run(args, resume_cwd)
        assert resumed.returncode == 0, tails(resumed)
        no_traceback(resumed)
        left = list(resume_cwd.rglob("*"))
        assert not list(resume_cwd.rglob("mlflow.db")), f"a store in the working directory: {left}"
        assert_files(run_dir, JUDGMENTS, resumed)


def test_a_run_with_tracking_off_syncs_into_two_stores_and_a_killed_sync_synced_again_leaves_one_run(
        tmp_path, empty_mlflow_store):
    """An untracked run synced into two stores, each then holding it once: the sync into the second killed with
    kill -9 while it publishes first (which leaves no process or open file), then synced again. One untracked run
    (in this process: its process is not the point) for both (they were two tests, each making an untracked run of
    its own; the killed sync went to a third store)."""
    run_dir, cwd = tmp_path / "run", workdir(tmp_path)
    proc = run_in_process(tmp_path, run_dir, ("judge=replay_gpt4", f"max_items={ITEMS}", "tracking=off",
                                              "output.plots=false"))
    assert proc.returncode == 0, tails(proc)
    first, second = store(tmp_path, empty_mlflow_store, "first.db"), store(tmp_path, empty_mlflow_store, "second.db")
    one = sync_here(run_dir, cwd, "tracking=sqlite", f"tracking.uri={uri_of(first)}")
    assert one.returncode == 0, tails(one)
    no_traceback(one)
    assert_published(uri_of(first), run_dir, JUDGMENTS, experiment="judgesweep", where=tails(one))

    elsewhere = ("tracking.enabled=true", f"tracking.uri={uri_of(second)}", "tracking.experiment=elsewhere")
    syncing = start([str(JUDGESWEEP), "sync", str(run_dir), *elsewhere], cwd)
    children, where = kill_while_publishing(uri_of(second), second, run_dir, syncing)
    assert_nothing_outlives(syncing.pid, children, [run_dir, second], where)
    two = sync_here(run_dir, cwd, *elsewhere)
    assert two.returncode == 0, tails(two)
    no_traceback(two)
    assert_published(uri_of(second), run_dir, JUDGMENTS, experiment="elsewhere", where=tails(two))
    assert_published(uri_of(first), run_dir, JUDGMENTS, where=tails(two))  # the first store as it was
    assert not list(cwd.rglob("mlflow.db")), list(cwd.rglob("*"))


def test_kill_9_of_the_run_while_it_publishes_then_sync_completes_it(tmp_path, empty_mlflow_store):
    db, run_dir, cwd = store(tmp_path, empty_mlflow_store), tmp_path / "run", workdir(tmp_path)
    proc = start(run_args(tmp_path, run_dir, db, "judge=replay_gpt4", f"max_items={ITEMS}", "output.plots=false"),
                 cwd)

    # The publishing process makes the MLflow run at the first answer (it follows the run's traces), so the store is
    # locked once the run summarizes and the kill lands once the run has handed it the finished directory: the
    # publish then waits on the lock, and the kill comes just after the lock's release, in the middle of it.
    wait_for_log(run_dir, "summarizing", proc)
    lock = StoreLock(db)
    try:
        wait_for_log(run_dir, "publishing to MLflow", proc)
        assert (run_dir / "summary.json").is_file(), "publishing began before the run's files were written"
        children = descendants(proc.pid)
    finally:
        lock.release()
    proc.send_signal(signal.SIGKILL)
    where = tails(finish(proc))
    assert_nothing_outlives(proc.pid, children, [run_dir, db], where)
    again = sync_here(run_dir, cwd)
    assert again.returncode == 0, tails(again)
    assert_published(uri_of(db), run_dir, JUDGMENTS, where=tails(again))


# --- C: a locked store fails tracking, not the run ------------------------------------------------------------


def test_a_locked_store_does_not_fail_the_runs_files_and_tracking_timeout_s_bounds_the_wait(
        tmp_path, empty_mlflow_store, fake_server):
    """The store locked from the run's first judge call until the run has ended (so only ``tracking.timeout_s`` can
    end its wait): the run's files complete all the same, exit 3 and the sync line naming the timeout, and the sync
    finishes it. One run for both (they were two tests, the other in test_tracking_promises, each locking a run's
    store; this one for ~20 s of lock and the default timeout)."""
    db, run_dir, cwd = store(tmp_path, empty_mlflow_store), tmp_path / "run", workdir(tmp_path)
    fake_server.reply = lambda _body: Reply(content="Verdict: [[A]]", delay_s=0.3)
    overrides = (*slow_overrides(fake_server, tmp_path), "tracking.timeout_s=3")
    proc = start(run_args(tmp_path, run_dir, db, *overrides), cwd)
    deadline = time.monotonic() + 120
    while fake_server.stats()["requests"] == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    lock = StoreLock(db)  # held until the run has ended: only the timeout can end its wait
    try:
        done = finish(proc)
    finally:
        lock.release()
    assert done.returncode == 3, tails(done)
    no_traceback(done)
    assert "tracking.timeout_s=3" in sync_line(done, run_dir)
    assert_files(run_dir, SLOW_ITEMS, done)  # written while the store was locked
    assert json.loads((run_dir / "summary.json").read_text())["summary"]
    fixed = sync_here(run_dir, cwd)
    assert fixed.returncode == 0, tails(fixed)
    no_traceback(fixed)
    assert_published(uri_of(db), run_dir, SLOW_ITEMS, where=tails(fixed))


# --- D: no process outlives its run (killed while it publishes) ----------------------------------------------


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
    again = sync_here(run_dir, cwd)
    assert again.returncode == 0, tails(again)
    assert_published(uri_of(db), run_dir, SLOW_ITEMS, where=tails(again))


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
    fixed = sync_here(run_dir, cwd)
    assert fixed.returncode == 0, tails(fixed)
    assert_published(uri_of(db), run_dir, SLOW_ITEMS, where=tails(fixed))
