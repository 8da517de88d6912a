"""Markers by where a test lives: every test under tests/integration is ``integration``; those that run
judgesweep as a process (the process is their point: exit codes, kill -9 and resume, launchers, a sweep's
callbacks, Hydra's logging) or start an MLflow server are also ``slow``, which `make test-fast` leaves out."""

from __future__ import annotations

from pathlib import Path

import pytest

SLOW_MODULES = frozenset({
    "test_calibration",  # Optuna sweeps and their held-out runs
    "test_compare",  # a sweep, then judgesweep-compare as a command
    "test_default_run",  # `make run`'s command line
    "test_launchers",  # joblib workers
    "test_llmbar_subsets",  # sweeps over the published subsets
    "test_mlflow_server",  # a real `mlflow server`
    "test_ray_launcher",  # a local Ray cluster
    "test_replay_sweep",  # a six-job sweep and its table
    "test_resume",  # kill -9, then resume
    "test_results_api",  # sweeps read back
    "test_summary_failure",  # a crash after the calls, then resume
    "test_tracking_start",  # the first request against MLflow run creation, in a process
})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:  # noqa: D103
    for item in items:
        path = Path(str(item.fspath))
        if "integration" in path.parts:
            item.add_marker(pytest.mark.integration)
        if path.stem in SLOW_MODULES or "run_process" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
