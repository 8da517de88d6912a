"""No telemetry leaves the process: MLflow's client never starts once judgesweep prepared the process.

MLflow starts its telemetry client when imported, unless told not to, and says nothing when it is off in a CI
or a test run: each check runs a fresh python with no CI or pytest variable, where it would start.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integration.conftest import REPO, offline_env

CHECK = "import mlflow; from mlflow.telemetry.client import get_telemetry_client; print(get_telemetry_client())"
CI_MARKERS = ("PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER", "CI", "GITHUB_ACTIONS", "GITLAB_CI", "CIRCLECI",
              "JENKINS_URL", "TRAVIS", "BUILDKITE", "CODEBUILD_BUILD_ID", "TF_BUILD", "BITBUCKET_BUILD_NUMBER",
              "MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK")


def python(code: str) -> str:
    env = {k: v for k, v in offline_env().items() if k not in CI_MARKERS}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.slow
def test_mlflow_telemetry_starts_without_judgesweep_and_never_with_it():
    assert python(CHECK).startswith("<mlflow.telemetry.client.TelemetryClient")  # what the switch prevents
    prepared = "from runner.run.experiment import prepare_process; prepare_process(); import os; "
    out = python(prepared + "print(os.environ['MLFLOW_DISABLE_TELEMETRY'], os.environ['DO_NOT_TRACK']); " + CHECK)
    assert out.splitlines() == ["true true", "None"]

