"""Integration fixtures: a run in this process (runner.run_experiment) or the real CLI in a subprocess, a fake
OpenAI-compatible server on 127.0.0.1, a throw-away MLflow sqlite store per test, a real `mlflow server` per test
process, and runs that several modules read made once per session (once_per_session: the replay sweep, a
calibration search). What integration modules share that is not a fixture is in tests/integration/shared.py."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import io
import json
import logging
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import traceback
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from runner.app.cli import EXPECTED_ERRORS
from runner.core.errors import BUDGET_REACHED, TRACKING_FAILED, BatchPending
from runner.judging.calls import BudgetReached
from runner.run.experiment import run_experiment
from tests.fakes.openai_server import FakeOpenAIServer

# tests/integration/shared.py's checks (assert_only_what_a_user_reads, sweep_items_blob) fail with pytest's account
# of the values, as they did in the test modules they came from: registered before any test module imports it.
pytest.register_assert_rewrite("tests.integration.shared")

REPO = Path(__file__).resolve().parents[2]
SECRET_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CEREBRAS_API_KEY")
# Anything that tries to leave the machine over HTTP(S) hits a closed local port and fails fast.
CLOSED_PROXIES = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
                  "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


def offline_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The subprocess environment: no provider keys, no way out but loopback."""
    env = {k: v for k, v in os.environ.items() if k not in SECRET_VARS}
    env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", **CLOSED_PROXIES, "HYDRA_FULL_ERROR": "0"})
    env.update(extra or {})
    return env


def one_ca_file(directory: Path) -> str:
    """A CA file of one certificate (certifi's first) in ``directory``, for SSL_CERT_FILE: litellm builds a new OpenAI
    client for each Files/Batches call (an upload, a poll, a download), and httpx loads the CA file for each of its
    transports (one, and one per proxy variable: three with offline_env's): certifi's bundle costs ~15 ms of CPU each
    time. For runs that speak plain HTTP to 127.0.0.1, where which CAs are trusted is nothing a test checks."""
    import certifi

    bundle = certifi.contents()
    end = "-----END CERTIFICATE-----"
    path = directory / "one_ca.pem"
    path.write_text(bundle[bundle.index("-----BEGIN CERTIFICATE-----"):bundle.index(end) + len(end)] + "\n")
    return str(path)


@dataclass
class CliRun:
    """A finished CLI invocation and where it wrote."""

    proc: subprocess.CompletedProcess
    run_dir: Path
    mlflow_uri: str

    @property
    def output(self) -> str:
        """stdout and stderr together."""
        return self.proc.stdout + self.proc.stderr

    def summary(self) -> dict:
        """The run's summary.json."""
        return json.loads((self.run_dir / "summary.json").read_text())

    def journal(self) -> list[dict]:
        """The run's journal lines."""
        return [json.loads(line) for line in (self.run_dir / "journal.jsonl").read_text().splitlines()]


def cli_args(tmp_path: Path, run_dir: Path, overrides: tuple[str, ...], multirun: bool = False) -> list[str]:
    """The command line of one CLI run with every output under tmp_path."""
    args = [sys.executable, "-m", "runner"]
    args += ["-m", f"hydra.sweep.dir={run_dir}"] if multirun else [f"hydra.run.dir={run_dir}"]
    return args + [f"tracking.uri={mlflow_uri(tmp_path)}", f"tracking.artifact_location={tmp_path / 'mlartifacts'}",
                   f"cache.path={tmp_path / 'cache.sqlite'}", *overrides]


def mlflow_uri(tmp_path: Path) -> str:
    """The test's MLflow store."""
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


# Hydra's job logging (conf/hydra/default.yaml) for a run in this process: its line format and quiet libraries.
LOG_FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"
QUIET_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "mlflow", "httpx", "alembic")


@contextlib.contextmanager
def _as_the_cli(env: dict[str, str], out: io.StringIO, err: io.StringIO) -> Iterator[None]:
    """What a CLI process has and a test process must lend for one run: the offline environment, the repo as
    working directory, stdout/stderr, and INFO logging to stdout; all restored afterwards."""
    saved_env, saved_cwd = dict(os.environ), Path.cwd()
    root = logging.getLogger()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    levels = {name: logging.getLogger(name).level for name in (None, *QUIET_LOGGERS)}
    os.environ.clear()
    os.environ.update(env)
    os.chdir(REPO)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield
    finally:
        root.removeHandler(handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def _messages(exc: BaseException) -> str:
    """An error and its causes, one per line, as Hydra prints a failed compose (without the traceback)."""
    lines = []
    while exc is not None:
        lines.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return "\n".join(lines)


def run_in_process(tmp_path: Path, run_dir: Path, overrides: tuple[str, ...],
                   env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """One run through ``runner.run_experiment`` with the same overrides the CLI would get, its exit code and
    output as the CLI would give them: 1 after a bad-input error (logged as the CLI logs it), a failed run, a
    config that does not compose or any other exception (its traceback in stderr, as the CLI prints it); 3 with one
    line in stderr when the run's files are complete but MLflow could not be written; BUDGET_REACHED with one line in
    stderr when budget.max_usd stopped it; 0 with one line when a batch was submitted and not waited for."""
    args = cli_args(tmp_path, run_dir, overrides)[3:]
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with _as_the_cli(offline_env(env), out, err):
        log = logging.getLogger("judgesweep")
        try:
            outcome = run_experiment(args)
        except BudgetReached as exc:  # the CLI's one line and exit code (runner.app.cli)
            err.write(f"judgesweep: {exc}\n")
            code = BUDGET_REACHED
        except BatchPending as exc:  # batch.wait=false: submitted, exit 0 (runner.app.cli)
            err.write(f"judgesweep: {exc}\n")
        except EXPECTED_ERRORS as exc:
            log.error("judgesweep: %s: %s", type(exc).__name__, exc)
            code = 1
        except (HydraException, OmegaConfBaseException) as exc:
            err.write(_messages(exc) + "\n")
            code = 1
        except Exception:  # noqa: BLE001 - a bug: the CLI prints its traceback and exits 1, and so does this
            err.write(traceback.format_exc())
            code = 1
        else:
            if outcome is not None and outcome.tracking_error:
                err.write(f"judgesweep: {outcome.tracking_error}\n")
                code = TRACKING_FAILED
            if outcome is not None and outcome.failed:
                log.error("judgesweep: run failed: %s", outcome.reason)
                code = 1
    return subprocess.CompletedProcess(["runner.run_experiment", *args], code, out.getvalue(), err.getvalue())


def _runner(tmp_path: Path, in_process: bool, empty_store: Callable[[], Path] | None = None,
            traces: bool = True, plots: bool = True):
    runs = []

    def run(*overrides: str, env: dict[str, str] | None = None, multirun: bool = False,
            run_dir: Path | None = None) -> CliRun:
        runs.append(1)
        if run_dir is None:
            run_dir = tmp_path / (f"{'multirun' if multirun else 'run'}{len(runs) if len(runs) > 1 else ''}")
        if in_process and not multirun:
            store = tmp_path / "mlflow.db"
            if empty_store is not None and "tracking=off" not in overrides and not store.exists():
                shutil.copyfile(empty_store(), store)
            if not traces and not any(o.startswith("tracking.traces=") for o in overrides):
                overrides = (*overrides, "tracking.traces=false")
            if not plots and not any(o.startswith("output.plots=") for o in overrides):
                overrides = (*overrides, "output.plots=false")
            proc = run_in_process(tmp_path, run_dir, overrides, env)
        else:
            proc = subprocess.run(cli_args(tmp_path, run_dir, overrides, multirun), cwd=REPO, env=offline_env(env),
                                  capture_output=True, text=True, timeout=600)
        return CliRun(proc=proc, run_dir=run_dir, mlflow_uri=mlflow_uri(tmp_path))

    return run


@pytest.fixture(scope="session")
def empty_mlflow_store(tmp_path_factory) -> Callable[[], Path]:
    """An MLflow sqlite store with its tables and nothing else, made once per test process when first asked for:
    creating the tables (a few dozen migrations) costs a run seconds of CPU that a copy does not."""
    @functools.cache
    def made() -> Path:
        from mlflow.tracking import MlflowClient

        directory = tmp_path_factory.mktemp("empty_store")
        MlflowClient(tracking_uri=mlflow_uri(directory)).search_experiments()  # creates the tables
        return directory / "mlflow.db"

    return made


@pytest.fixture
def run_cli(request, tmp_path, empty_mlflow_store):
    """Run one experiment with run dirs, cache and MLflow store under tmp_path: in this process through
    ``runner.run_experiment`` (a multirun: ``python -m runner -m`` in a subprocess), with the CLI's exit code
    and output.

    Each invocation gets its own run directory unless ``run_dir`` is given; the cache and the MLflow
    store are shared by the invocations of one test. A run in this process (unless ``tracking=off``) finds the
    store as a copy of an empty one (empty_mlflow_store) rather than creating it.

    Its runs log no MLflow traces (``tracking.traces=false`` is added unless the test sets ``tracking.traces``)
    unless the test is marked ``traces``: a trace per judgment is ~10 ms of MLflow's own database work, ~0.3 s
    of CPU for a small run and ~20 s for the published-figure runs, and a failed trace is only a warning, which
    no other test would see. tests/integration/test_genai_traces.py (marked ``traces``) checks them, and the
    tests that run judgesweep as a process (``run_process``, `make run`'s command line) keep the default.

    Nor do they draw report.html's figures (``output.plots=false`` is added unless the test sets ``output.plots``)
    unless the test is marked ``plots``: the PNGs and importing matplotlib were ~22% of these runs' CPU (cProfile,
    issue 32), and the tables, every file but the figures and what MLflow holds are the same without them
    (tests/integration/test_plots.py). A test that looks at a figure, a PNG or the plot files is marked ``plots``;
    a multirun here and ``run_process`` keep the default (plots on).
    """
    traced = request.node.get_closest_marker("traces") is not None
    plotted = request.node.get_closest_marker("plots") is not None
    return _runner(tmp_path, in_process=True, empty_store=empty_mlflow_store, traces=traced, plots=plotted)


@pytest.fixture
def run_process(tmp_path):
    """``run_cli`` as ``python -m runner`` in a subprocess from the repo root: for tests where the process is the
    point (exit codes, Hydra's own output and logging, kill and resume, launchers)."""
    return _runner(tmp_path, in_process=False)


def session_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of this test session that every xdist worker sees (the controller's basetemp; without xdist,
    the session's own)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once_per_session(tmp_path_factory: pytest.TempPathFactory, name: str,
                     make: Callable[[Path], subprocess.CompletedProcess]) -> tuple[Path, subprocess.CompletedProcess]:
    """``make(directory)`` once per test session, however many modules and xdist workers ask for it: the first
    caller runs it (the others wait on a lock) and every caller gets the directory and the finished process.

    For an expensive run that several modules read (a sweep): they must not write to what it wrote.
    """
    root = session_dir(tmp_path_factory)
    where, record = root / name, root / f"{name}.json"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        if not record.is_file():  # not run yet, or it raised (a timeout): run it again
            shutil.rmtree(where, ignore_errors=True)
            where.mkdir()
            proc = make(where)
            record.write_text(json.dumps({"args": [str(arg) for arg in proc.args], "returncode": proc.returncode,
                                          "stdout": proc.stdout, "stderr": proc.stderr}))
    return where, subprocess.CompletedProcess(**json.loads(record.read_text()))


# The 6-job LLMBar replay sweep (no network) that test_replay_sweep and test_sweep_best check, test_compare compares and
# test_results_api loads.
REPLAY_SWEEP = ("judge=replay_gpt4,replay_chatgpt", "prompt=llmbar_vanilla,llmbar_vanilla_norules,llmbar_swap")


def replay_sweep(tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    """``python -m runner -m`` over REPLAY_SWEEP with run dirs, cache and MLflow store in one directory, run once
    per test session (once_per_session). Read-only: a test that logs to its store logs to a copy (copy_store).

    Tracked without traces (``tracking.traces=false``): none of its readers (test_replay_sweep, test_sweep_best,
    test_compare, test_results_api) reads a trace, and they were ~15% of its CPU; a basic-launcher sweep's traces
    are checked by tests/integration/test_tracking_launchers.py. Plots on: test_replay_sweep looks at them."""
    def make(tmp: Path) -> subprocess.CompletedProcess:
        return subprocess.run(cli_args(tmp, tmp / "multirun", (*REPLAY_SWEEP, "tracking.traces=false"), multirun=True),
                              cwd=REPO, env=offline_env(), capture_output=True, text=True, timeout=600)

    tmp, proc = once_per_session(tmp_path_factory, "replay_sweep", make)
    return CliRun(proc=proc, run_dir=tmp / "multirun", mlflow_uri=mlflow_uri(tmp))


# The calibration search that test_calibration and test_presets read: trials on dev, then the winner on test.
# Two trials: "the best is the best trial's value" needs no more (a trial and its publisher are ~3 CPU-s).
SEARCH_TRIALS, SEARCH_ITEMS = 2, 30


def calibration_search(tmp_path_factory: pytest.TempPathFactory,
                       preset: str) -> tuple[Path, subprocess.CompletedProcess]:
    """``python -m runner -m experiment=<preset> hydra.sweeper.n_trials=SEARCH_TRIALS max_items=SEARCH_ITEMS``,
    started in a directory of its own with no tracking.uri (so into the default store, <that
    directory>/outputs/mlflow.db) and the repository's prompts: the directory (sweep in multirun/) and the process,
    once per session (once_per_session). test_calibration checks what it reports and its default store, test_presets
    that the preset runs; neither reads a trace, so none is logged (``tracking.traces=false``)."""
    def make(tmp: Path) -> subprocess.CompletedProcess:
        args = [sys.executable, "-m", "runner", "-m", f"hydra.sweep.dir={tmp / 'multirun'}", f"experiment={preset}",
                f"hydra.sweeper.n_trials={SEARCH_TRIALS}", f"max_items={SEARCH_ITEMS}",
                f"prompts_dir={REPO / 'prompts'}", f"cache.path={tmp / 'cache.sqlite'}", "tracking.traces=false"]
        return subprocess.run(args, cwd=tmp, env=offline_env(), capture_output=True, text=True, timeout=600)

    return once_per_session(tmp_path_factory, f"search_{preset}", make)


def copy_store(uri: str, directory: Path) -> str:
    """A copy of the sqlite MLflow store ``uri`` as ``directory``/mlflow.db (sqlite's backup: consistent whatever
    state the file is in), and its URI. The runs' artifacts stay where they are; what is logged to the copy
    leaves the original as it was."""
    with contextlib.closing(sqlite3.connect(uri.removeprefix("sqlite:///"))) as source, \
            contextlib.closing(sqlite3.connect(directory / "mlflow.db")) as copy:
        source.backup(copy)
    return mlflow_uri(directory)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory, empty_mlflow_store):
    """Start `mlflow server` on a free loopback port; yield its URL; stop it when the session ends. Shared by the
    tests of this process (test_mlflow_server, test_launchers, test_ray_launcher): each logs to its own experiment.
    Without its job runner (MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false: GenAI jobs, which no test asks of it), whose
    huey consumer processes each import mlflow (seconds of CPU, ~390 MB each)."""
    tmp_path = tmp_path_factory.mktemp("mlflow-server")
    shutil.copyfile(empty_mlflow_store(), tmp_path / "server.db")  # its tables made already
    port = free_port()
    mlflow_bin = Path(sys.executable).with_name("mlflow")
    proc = subprocess.Popen(
        [str(mlflow_bin), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
         "--artifacts-destination", str(tmp_path / "server-artifacts")],
        env=offline_env({"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                if resp.status == 200:
                    break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("mlflow server did not come up")
            time.sleep(0.5)
    yield url
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture
def fake_server():
    """A fake OpenAI-compatible server on 127.0.0.1 (replies scripted per test)."""
    with FakeOpenAIServer() as server:
        yield server


def live_judge(server: FakeOpenAIServer) -> list[str]:
    """Overrides that point the local_openai judge at the fake server."""
    return ["judge=local_openai", f"judge.api_base={server.base_url}", "judge.model=openai/fake-judge"]
