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
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from tests.fakes.openai_server import Reply
from tests.integration.conftest import REPO, live_judge, offline_env

pytestmark = pytest.mark.slow

JUDGESWEEP = Path(sys.executable).with_name("judgesweep")
RUN_DIR_TAG = "judgesweep.run_dir"
ITEMS = 10  # LLMBar Natural with the replay judge: 10 items x 2 orders
JUDGMENTS = 2 * ITEMS
FILES = ("journal.jsonl", "results.jsonl", "summary.json", "metrics.json", "report.html", "run.json")
ARTIFACTS = {"summary.json", "metrics.json", "results.jsonl", "journal.jsonl", "run.json", "report.html", "config.yaml"}
TRACE_KEYS = {"mlflow.sourceRun", "judgesweep.item_id", "judgesweep.repeat", "judgesweep.order", "judgesweep.stage"}
TIMEOUT_S = 120


# --- processes --------------------------------------------------------------------------------------------------


def uri_of(path: Path) -> str:
    return f"sqlite:///{path}"


def store(tmp_path: Path, empty_mlflow_store, name: str = "mlflow.db") -> Path:
    """A fresh MLflow store under tmp_path (a copy of an empty one: its tables made already)."""
    path = tmp_path / name
    shutil.copyfile(empty_mlflow_store(), path)
    return path


def workdir(tmp_path: Path, name: str = "cwd") -> Path:
    """A fresh working directory for a process: nothing there but what the process writes."""
    path = tmp_path / name
    path.mkdir(exist_ok=True)
    return path


def run_args(tmp_path: Path, run_dir: Path, db: Path | None, *overrides: str) -> list[str]:
    """``python -m runner`` writing its run to run_dir, its cache and artifacts under tmp_path, MLflow to ``db``."""
    tracking = [f"tracking.uri={uri_of(db)}"] if db is not None else []
    return [sys.executable, "-m", "runner", f"hydra.run.dir={run_dir}", *tracking,
            f"tracking.artifact_location={tmp_path / 'mlartifacts'}", f"cache.path={tmp_path / 'cache.sqlite'}",
            f"prompts_dir={REPO / 'prompts'}", *overrides]


def start(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(args, cwd=cwd, env=offline_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=offline_env(), capture_output=True, text=True, timeout=TIMEOUT_S)


def finish(proc: subprocess.Popen, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def sync(target: Path, cwd: Path, *overrides: str) -> subprocess.CompletedProcess:
    """``judgesweep sync <target> [overrides]`` (the console script)."""
    return run([str(JUDGESWEEP), "sync", str(target), *overrides], cwd)


def tails(proc: subprocess.CompletedProcess | subprocess.Popen, stdout: str = "", stderr: str = "") -> str:
    """The end of a process's output, for a failure message."""
    out = getattr(proc, "stdout", None) if isinstance(proc, subprocess.CompletedProcess) else stdout
    err = getattr(proc, "stderr", None) if isinstance(proc, subprocess.CompletedProcess) else stderr
    return (f"\n--- exit {proc.returncode} of {' '.join(map(str, proc.args))[:300]}"
            f"\n--- stdout tail:\n{(out or '')[-2500:]}\n--- stderr tail:\n{(err or '')[-2500:]}")


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr, tails(proc)


def assert_files(run_dir: Path, judgments: int, proc: subprocess.CompletedProcess | None = None) -> None:
    """The run's files are complete: summary and metrics readable, a results line per judgment."""
    where = tails(proc) if proc is not None else ""
    missing = [name for name in ("summary.json", "metrics.json", "results.jsonl") if not (run_dir / name).is_file()]
    assert not missing, f"{missing} missing in {run_dir}: {sorted(p.name for p in run_dir.glob('*'))}{where}"
    assert json.loads((run_dir / "summary.json").read_text()), f"empty summary.json{where}"
    assert json.loads((run_dir / "metrics.json").read_text()), f"empty metrics.json{where}"
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    assert len(lines) == judgments, f"results.jsonl has {len(lines)} lines, expected {judgments}{where}"


def sync_line(proc: subprocess.CompletedProcess, run_dir: Path, starts: str = "judgesweep: tracking failed") -> str:
    """The one stderr line that starts with ``starts`` and names ``judgesweep sync <run_dir>``."""
    lines = [line for line in proc.stderr.splitlines() if line.startswith(starts)]
    assert len(lines) == 1, f"expected one stderr line starting {starts!r}, got {lines}{tails(proc)}"
    assert any(f"judgesweep sync {d}" in lines[0] for d in (run_dir, run_dir.resolve())), (lines[0], tails(proc))
    return lines[0]


# --- what MLflow holds ------------------------------------------------------------------------------------------


def runs_of(uri: str, run_dir: Path) -> list:
    """The MLflow runs of a run directory in any experiment of the store (found by its judgesweep.run_dir tag)."""
    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    if not experiments:
        return []
    return client.search_runs(experiments, filter_string=f"tags.`{RUN_DIR_TAG}` = '{run_dir.resolve()}'")


def traces_of(uri: str, run) -> list:
    mlflow.set_tracking_uri(uri)
    return mlflow.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id, return_type="list")


def assert_published(uri: str, run_dir: Path, judgments: int, status: str = "FINISHED", experiment: str | None = None,
                     where: str = "", prompt_versions: bool = True):
    """The store holds the run directory as one complete MLflow run, nothing in it twice; returns the run."""
    client = MlflowClient(uri)
    runs = runs_of(uri, run_dir)
    assert len(runs) == 1, (f"{len(runs)} MLflow runs tagged {RUN_DIR_TAG}={run_dir.resolve()} in {uri} "
                            f"(runs there: {[(r.info.run_id, r.data.tags.get('hydra.run_dir')) for r in _all(uri)]})"
                            f"{where}")
    (tracked,) = runs
    run_id = tracked.info.run_id
    assert tracked.info.status == status, (tracked.info.status, tracked.data.tags.get("judgesweep.abort_reason"), where)
    if experiment is not None:
        assert client.get_experiment(tracked.info.experiment_id).name == experiment
    assert tracked.data.params, f"no params{where}"
    assert tracked.data.metrics, f"no metrics{where}"
    for key in tracked.data.metrics:
        history = client.get_metric_history(run_id, key)
        assert [m.step for m in history] == [0], f"metric {key!r} has {len(history)} points: {history}{where}"
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert ARTIFACTS <= artifacts, f"artifacts missing: {ARTIFACTS - artifacts}{where}"
    traces = traces_of(uri, tracked)
    assert len(traces) == judgments, f"{len(traces)} traces, expected {judgments}{where}"
    for trace in traces:
        assert TRACE_KEYS <= set(trace.info.trace_metadata), (sorted(trace.info.trace_metadata), where)
        assert trace.info.trace_metadata["mlflow.sourceRun"] == run_id
    keys = {tuple(t.info.trace_metadata[k] for k in sorted(TRACE_KEYS - {"mlflow.sourceRun"})) for t in traces}
    assert len(keys) == judgments, f"{judgments - len(keys)} duplicated judgments among the traces{where}"
    linked = json.loads(tracked.data.tags.get("mlflow.linkedPrompts", "[]"))
    assert linked, f"no prompt linked{where}"
    assert len({(p["name"], p["version"]) for p in linked}) == len(linked), (linked, where)
    for name in {p["name"] for p in linked} if prompt_versions else ():  # a shared server: other tests' too
        versions = [v.version for v in client.search_prompt_versions(name)]
        assert len(versions) == 1, f"prompt {name!r} has versions {versions} (the template did not change){where}"
    assert len(tracked.inputs.dataset_inputs) == 1, (tracked.inputs.dataset_inputs, where)
    return tracked


def _all(uri: str) -> list:
    client = MlflowClient(uri)
    return client.search_runs([e.experiment_id for e in client.search_experiments()] or ["0"])


def wait_for_mlflow_run(uri: str, run_dir: Path, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Until the store shows an MLflow run tagged with run_dir (publishing has begun); fails if ``proc`` ends
    first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # the store may be busy, or have no tables yet
            if runs_of(uri, run_dir):
                return
        if proc.poll() is not None:
            done = finish(proc)
            pytest.fail(f"{done.args[1:3]} ended before any MLflow run tagged {RUN_DIR_TAG}={run_dir.resolve()} "
                        f"appeared in {uri}{tails(done)}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"no MLflow run tagged {RUN_DIR_TAG} after {timeout} s{tails(finish(proc))}")


# --- a store held locked, processes and open files --------------------------------------------------------------


class StoreLock:
    """Another process's write lock on a sqlite store: ``BEGIN EXCLUSIVE`` held until :meth:`release`."""

    def __init__(self, db: Path) -> None:
        self.db = sqlite3.connect(db, timeout=30, isolation_level=None, check_same_thread=False)
        self.db.execute("BEGIN EXCLUSIVE")
        self.since = time.monotonic()

    def release(self) -> None:
        if self.db is not None:
            self.db.execute("ROLLBACK")
            self.db.close()
            self.db = None


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, start time) of a process, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[19])


def descendants(pid: int) -> dict[int, int]:
    """Every live process below ``pid`` (children, their children...): pid -> start time."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            table[int(entry.name)] = stat
    found, frontier = {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, (state, ppid, started) in table.items():
            if ppid == parent and child not in found and state != "Z":
                found[child] = started
                frontier.append(child)
    return found


def alive(processes: dict[int, int]) -> dict[int, str]:
    """Those of ``processes`` (pid -> start time) still running: pid -> command line."""
    out = {}
    for pid, started in processes.items():
        stat = _stat(pid)
        if stat is not None and stat[0] != "Z" and stat[2] == started:
            with contextlib.suppress(OSError):
                out[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    return out


def holders(paths: list[Path]) -> dict[int, list[str]]:
    """Processes other than this one with a file under any of ``paths`` open: pid -> the files."""
    roots = [str(p.resolve()) for p in paths]
    out: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if any(target == r or target.startswith(r + "/") or target.startswith(r + "-") for r in roots):
                        out.setdefault(int(entry.name), []).append(target)
    return out


def assert_nothing_outlives(pid: int, children: dict[int, int], paths: list[Path], where: str) -> None:
    """Within 5 s of the kill: none of ``children`` alive, no process holding a file under ``paths``."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (alive(children) or holders(paths)):
        time.sleep(0.1)
    left = alive(children)
    for orphan in left:  # leave the machine clean for the next test
        with contextlib.suppress(OSError):
            os.kill(orphan, signal.SIGKILL)
    assert not left, f"processes started by {pid} alive 5 s after kill -9: {left}{where}"
    held = holders(paths)
    assert not held, f"files of the run or store still open 5 s after kill -9: {held}{where}"


# --- a run whose judge is slow (the fake server), so the store can be locked before it ends ----------------------

SLOW_ITEMS = 12


def slow_overrides(server, tmp_path: Path, concurrency: int = 4) -> list[str]:
    dataset = tmp_path / "pairs.jsonl"
    with dataset.open("w") as fh:
        for n in range(SLOW_ITEMS):
            fh.write(json.dumps({"id": f"q{n}", "prompt": f"question {n}", "chat": f"chat {n}",
                                 "simple_chat": f"simple {n}"}) + "\n")
    return [*live_judge(server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
            f"dataset.path={dataset}", "order=fixed", f"concurrency={concurrency}", "cache.mode=off"]


def start_publishing_into_a_locked_store(tmp_path: Path, empty_mlflow_store, server,
                                         run_dir: Path) -> tuple[subprocess.Popen, StoreLock, Path]:
    """Start a run whose store is locked from its first judge call on; return once its files are written (so it
    is publishing, blocked on the lock), with the lock still held."""
    db = store(tmp_path, empty_mlflow_store)
    server.reply = lambda _body: Reply(content="Verdict: [[A]]", delay_s=0.5)
    proc = start(run_args(tmp_path, run_dir, db, *slow_overrides(server, tmp_path)), workdir(tmp_path))
    deadline = time.monotonic() + 60
    while server.stats()["requests"] == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    lock = StoreLock(db)
    while time.monotonic() < deadline and proc.poll() is None:
        if all((run_dir / name).is_file() for name in ("summary.json", "metrics.json", "report.html")):
            time.sleep(1.0)  # into the publishing
            if proc.poll() is None:
                return proc, lock, db
            break
        time.sleep(0.05)
    lock.release()
    if proc.poll() is None:
        proc.kill()
    pytest.fail(f"the run did not write its files and wait on the locked store (files there: "
                f"{sorted(p.name for p in run_dir.glob('*'))}){tails(finish(proc))}")


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


def test_a_run_with_tracking_off_syncs_into_two_stores(tmp_path, empty_mlflow_store):
    run_dir, cwd = tmp_path / "run", workdir(tmp_path)
    proc = run(run_args(tmp_path, run_dir, None, "judge=replay_gpt4", f"max_items={ITEMS}", "tracking=off"), cwd)
    assert proc.returncode == 0, tails(proc)
    first, second = store(tmp_path, empty_mlflow_store, "first.db"), store(tmp_path, empty_mlflow_store, "second.db")
    one = sync(run_dir, cwd, "tracking=sqlite", f"tracking.uri={uri_of(first)}")
    assert one.returncode == 0, tails(one)
    no_traceback(one)
    assert_published(uri_of(first), run_dir, JUDGMENTS, experiment="judgesweep", where=tails(one))
    two = sync(run_dir, cwd, "tracking.enabled=true", f"tracking.uri={uri_of(second)}", "tracking.experiment=elsewhere")
    assert two.returncode == 0, tails(two)
    assert_published(uri_of(second), run_dir, JUDGMENTS, experiment="elsewhere", where=tails(two))
    assert_published(uri_of(first), run_dir, JUDGMENTS, where=tails(two))  # the first store as it was
    assert not list(cwd.rglob("mlflow.db")), list(cwd.rglob("*"))


def test_kill_9_of_a_sync_then_sync_again_leaves_one_complete_run(tmp_path, empty_mlflow_store):
    run_dir, cwd = tmp_path / "run", workdir(tmp_path)
    proc = run(run_args(tmp_path, run_dir, None, "judge=replay_gpt4", "max_items=40", "tracking=off"), cwd)
    assert proc.returncode == 0, tails(proc)
    db = store(tmp_path, empty_mlflow_store)
    syncing = start([str(JUDGESWEEP), "sync", str(run_dir), "tracking=sqlite", f"tracking.uri={uri_of(db)}"], cwd)
    wait_for_mlflow_run(uri_of(db), run_dir, syncing)
    children = descendants(syncing.pid)
    syncing.send_signal(signal.SIGKILL)
    killed = finish(syncing)
    assert_nothing_outlives(syncing.pid, children, [run_dir, db], tails(killed))
    again = sync(run_dir, cwd, "tracking=sqlite", f"tracking.uri={uri_of(db)}")
    assert again.returncode == 0, tails(again)
    assert_published(uri_of(db), run_dir, 80, where=tails(again))


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


@pytest.mark.parametrize("elsewhere", ["tracking=off", "another uri"])
def test_resuming_a_finished_run_elsewhere_leaves_no_store_in_the_working_directory(tmp_path, empty_mlflow_store,
                                                                                    elsewhere):
    db, run_dir = store(tmp_path, empty_mlflow_store), tmp_path / "run"
    proc = run(run_args(tmp_path, run_dir, db, "judge=replay_gpt4", "max_items=3"), workdir(tmp_path))
    assert proc.returncode == 0, tails(proc)
    other = tmp_path / "other" / "mlflow.db"
    tracking = ["tracking=off"] if elsewhere == "tracking=off" else [f"tracking.uri={uri_of(other)}"]
    cwd = workdir(tmp_path, "resume-cwd")
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
