"""The MLflow client of a tracking config, and the experiment its runs go to (created on first use).

mlflow is imported inside the functions: with pandas it costs ~120 MB of memory and a second of start-up,
which a run with tracking=off should not pay.
"""

from __future__ import annotations

from typing import Any

from runner.core.config import TrackingConfig


def client(cfg: TrackingConfig) -> Any:
    """An ``MlflowClient`` for ``cfg.uri`` (MLflow's default store when unset)."""
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=cfg.uri) if cfg.uri else MlflowClient()


def experiment_id(client: Any, cfg: TrackingConfig) -> str:
    """The id of ``cfg.experiment``, created (at ``cfg.artifact_location``) if it does not exist yet."""
    exp = client.get_experiment_by_name(cfg.experiment)
    if exp is not None:
        return exp.experiment_id
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import RESOURCE_ALREADY_EXISTS, ErrorCode

    try:
        return client.create_experiment(cfg.experiment, artifact_location=cfg.artifact_location)
    except MlflowException as exc:  # a parallel job created it between our lookup and our create
        if exc.error_code != ErrorCode.Name(RESOURCE_ALREADY_EXISTS):
            raise
        return client.get_experiment_by_name(cfg.experiment).experiment_id
