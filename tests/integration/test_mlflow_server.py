"""tracking=server: a run logged to a real `mlflow server` process on 127.0.0.1."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.integration.conftest import offline_env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mlflow_server(tmp_path):
    """Start `mlflow server` on a free loopback port; yield its URL; stop it."""
    port = free_port()
    mlflow_bin = Path(sys.executable).with_name("mlflow")
    proc = subprocess.Popen(
        [str(mlflow_bin), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
         "--artifacts-destination", str(tmp_path / "server-artifacts")],
        env=offline_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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


def test_run_is_logged_to_a_real_mlflow_server(run_cli, mlflow_server):
    result = run_cli("tracking=server", f"tracking.uri={mlflow_server}", "tracking.artifact_location=null",
                     "tracking.experiment=server-test", "max_items=10")
    assert result.proc.returncode == 0, result.output
    client = MlflowClient(tracking_uri=mlflow_server)
    runs = client.search_runs([client.get_experiment_by_name("server-test").experiment_id])
    assert len(runs) == 1
    assert runs[0].data.metrics["judge/calls"] == 20
    assert runs[0].data.params["choice.tracking"] == "server"
    assert "summary.json" in {a.path for a in client.list_artifacts(runs[0].info.run_id)}
