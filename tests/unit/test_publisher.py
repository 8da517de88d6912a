"""runner.outputs.publisher.describe: how a tracking message names a store, never with its user or password."""

from __future__ import annotations

from runner.core.run_settings import TrackingConfig
from runner.outputs.publisher import describe


def test_a_store_is_named_without_its_credentials():
    named = describe(TrackingConfig(uri="https://ann:s3cr3t-token@mlflow.example:5000/path", experiment="e"))
    assert "s3cr3t" not in named and "ann" not in named
    assert named == "https://mlflow.example:5000/path (experiment 'e')"
    local = "sqlite:////tmp/x/mlflow.db"
    assert describe(TrackingConfig(uri=local)) == f"{local} (experiment 'judgesweep')"
    assert describe(TrackingConfig(uri=None)).startswith("MLflow's default store")
