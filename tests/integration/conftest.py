"""Integration fixtures: a run in this process (runner.run_experiment) or the real CLI in a subprocess, a fake
OpenAI-compatible server on 127.0.0.1, and a throw-away MLflow sqlite store per test."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import subprocess
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from runner.app.cli import EXPECTED_ERRORS
from runner.run.experiment import run_experiment
from tests.fakes.openai_server import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[2]
SECRET_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CEREBRAS_API_KEY")


def offline_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The subprocess environment: no provider keys, no way out but loopback."""
    env = {k: v for k, v in os.environ.items() if k not in SECRET_VARS}
    env.update({
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        # Anything that tries to leave the machine over HTTP(S) hits a closed local port and fails fast.
        "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
        "HYDRA_FULL_ERROR": "0",
    })
    env.update(extra or {})
    return env


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
    config that does not compose or any other exception (its traceback in stderr, as the CLI prints it)."""
    args = cli_args(tmp_path, run_dir, overrides)[3:]
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with _as_the_cli(offline_env(env), out, err):
        log = logging.getLogger("judgesweep")
        try:
            outcome = run_experiment(args)
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
            if outcome is not None and outcome.failed:
                log.error("judgesweep: run failed: %s", outcome.reason)
                code = 1
    return subprocess.CompletedProcess(["runner.run_experiment", *args], code, out.getvalue(), err.getvalue())


def _runner(tmp_path: Path, in_process: bool):
    runs = []

    def run(*overrides: str, env: dict[str, str] | None = None, multirun: bool = False,
            run_dir: Path | None = None) -> CliRun:
        runs.append(1)
        if run_dir is None:
            run_dir = tmp_path / (f"{'multirun' if multirun else 'run'}{len(runs) if len(runs) > 1 else ''}")
        if in_process and not multirun:
            proc = run_in_process(tmp_path, run_dir, overrides, env)
        else:
            proc = subprocess.run(cli_args(tmp_path, run_dir, overrides, multirun), cwd=REPO, env=offline_env(env),
                                  capture_output=True, text=True, timeout=600)
        return CliRun(proc=proc, run_dir=run_dir, mlflow_uri=mlflow_uri(tmp_path))

    return run


@pytest.fixture
def run_cli(tmp_path):
    """Run one experiment with run dirs, cache and MLflow store under tmp_path: in this process through
    ``runner.run_experiment`` (a multirun: ``python -m runner -m`` in a subprocess), with the CLI's exit code
    and output.

    Each invocation gets its own run directory unless ``run_dir`` is given; the cache and the MLflow
    store are shared by the invocations of one test.
    """
    return _runner(tmp_path, in_process=True)


@pytest.fixture
def run_process(tmp_path):
    """``run_cli`` as ``python -m runner`` in a subprocess from the repo root: for tests where the process is the
    point (exit codes, Hydra's own output and logging, kill and resume, launchers)."""
    return _runner(tmp_path, in_process=False)


@pytest.fixture
def fake_server():
    """A fake OpenAI-compatible server on 127.0.0.1 (replies scripted per test)."""
    with FakeOpenAIServer() as server:
        yield server


def live_judge(server: FakeOpenAIServer) -> list[str]:
    """Overrides that point the local_openai judge at the fake server."""
    return ["judge=local_openai", f"judge.api_base={server.base_url}", "judge.model=openai/fake-judge"]
