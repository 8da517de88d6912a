"""What the process tests of tracking share (tests/integration/test_tracking_view.py, test_tracking_promises.py,
test_tracking_launchers.py, test_tracking_start.py, test_launchers.py, test_ray_launcher.py): judgesweep and
`judgesweep sync` as processes in a fresh working directory, `judgesweep sync` in this process (where its process is
not the point: mlflow is imported here already), what MLflow holds read back through MLflow's client, a store held
locked by another process, the processes and open files a killed run leaves, a run whose judge is slow (the fake
server)."""

from __future__ import annotations

import contextlib
import io
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

from runner.app import sync_cli
from tests.fakes.openai_server import Reply
from tests.integration.conftest import REPO, live_judge, offline_env

JUDGESWEEP = Path(sys.executable).with_name("judgesweep")
RUN_DIR_TAG = "judgesweep.run_dir"
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


def sync_here(target: Path, cwd: Path, *overrides: str) -> subprocess.CompletedProcess:
    """``judgesweep sync <target> [overrides]`` in this process (runner.app.sync_cli.main, what the console script
    runs) from ``cwd`` in the offline environment, with its exit status and output as a process would give them:
    ~2.4 CPU-s less than the process, for a test whose point is what the sync writes rather than its process."""
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = dict(os.environ), Path.cwd()
    os.environ.clear()
    os.environ.update(offline_env())
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = sync_cli.main([str(target), *overrides])
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["runner.app.sync_cli.main", str(target), *overrides], code, out.getvalue(),
                                       err.getvalue())


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


def wait_for_log(run_dir: Path, text: str, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    """Until the run's own log (``<run_dir>/judgesweep.log``, Hydra's job log) holds ``text``; fails if ``proc`` ends
    first."""
    log, deadline = run_dir / "judgesweep.log", time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if text in log.read_text(encoding="utf-8"):
                return
        if proc.poll() is not None:
            pytest.fail(f"the run ended before its log said {text!r}{tails(finish(proc))}")
        time.sleep(0.02)
    proc.kill()
    pytest.fail(f"the run's log did not say {text!r} within {timeout} s{tails(finish(proc))}")


def kill_while_publishing(uri: str, db: Path, run_dir: Path, proc: subprocess.Popen) -> tuple[dict[int, int], str]:
    """kill -9 of ``proc`` (a sync) while it publishes ``run_dir`` into ``db``: once its MLflow run is in the store,
    the store is locked (between two of its writes) and released again just before the kill, so the kill lands
    mid-publish however few judgments there are and however fast the machine is. Returns the processes below it
    (pid -> start time) as they were before the kill, and its output's tail. (A run's publishing process makes the
    MLflow run at its first answer: test_tracking_view's run case waits for the run's log instead.)"""
    wait_for_mlflow_run(uri, run_dir, proc)
    try:
        lock = StoreLock(db)
    except BaseException:
        proc.kill()
        finish(proc)
        raise
    try:
        children = descendants(proc.pid)
    finally:
        lock.release()
    proc.send_signal(signal.SIGKILL)
    return children, tails(finish(proc))


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
    """SLOW_ITEMS pairs judged by the fake server (its replies set by the test); no figures drawn (no test of these
    looks at one: report.html and every other file are the same without them)."""
    dataset = tmp_path / "pairs.jsonl"
    with dataset.open("w") as fh:
        for n in range(SLOW_ITEMS):
            fh.write(json.dumps({"id": f"q{n}", "prompt": f"question {n}", "chat": f"chat {n}",
                                 "simple_chat": f"simple {n}"}) + "\n")
    return [*live_judge(server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
            f"dataset.path={dataset}", "order=fixed", f"concurrency={concurrency}", "cache.mode=off",
            "output.plots=false"]


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


# --- a sweep of JOBS jobs, each in MLflow --------------------------------------------------------------------------

JOBS = 2


def judgments(job_dir: Path) -> int:
    return len((job_dir / "results.jsonl").read_text().splitlines())


def assert_sweep_published(uri: str, sweep_dir: Path, where: str, prompt_versions: bool = True,
                           per_job: int = 10) -> None:
    """One parent run for the sweep; each of its JOBS jobs one complete run with all its ``per_job`` traces, nested
    under the parent."""
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
        assert count == per_job, f"{job}: {count} judgments{where}"
        tracked = assert_published(uri, job, count, where=f"\njob {job.name}{where}", prompt_versions=prompt_versions)
        assert tracked.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id, (job, where)
