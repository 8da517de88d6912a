"""Integration fixtures: the real CLI in a subprocess, a fake OpenAI-compatible server on 127.0.0.1,
and a throw-away MLflow sqlite store per test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

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


@pytest.fixture
def run_cli(tmp_path):
    """Run ``python -m runner`` from the repo root with run dirs, cache and MLflow store under tmp_path.

    Each invocation gets its own run directory unless ``run_dir`` is given; the cache and the MLflow
    store are shared by the invocations of one test.
    """
    runs = []

    def run(*overrides: str, env: dict[str, str] | None = None, multirun: bool = False,
            run_dir: Path | None = None) -> CliRun:
        runs.append(1)
        if run_dir is None:
            run_dir = tmp_path / (f"{'multirun' if multirun else 'run'}{len(runs) if len(runs) > 1 else ''}")
        proc = subprocess.run(cli_args(tmp_path, run_dir, overrides, multirun), cwd=REPO, env=offline_env(env),
                              capture_output=True, text=True, timeout=600)
        return CliRun(proc=proc, run_dir=run_dir, mlflow_uri=mlflow_uri(tmp_path))

    return run


@pytest.fixture
def fake_server():
    """A fake OpenAI-compatible server on 127.0.0.1 (replies scripted per test)."""
    with FakeOpenAIServer() as server:
        yield server


def live_judge(server: FakeOpenAIServer) -> list[str]:
    """Overrides that point the local_openai judge at the fake server."""
    return ["judge=local_openai", f"judge.api_base={server.base_url}", "judge.model=openai/fake-judge"]
