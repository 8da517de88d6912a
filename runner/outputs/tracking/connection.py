"""The MLflow client of a tracking config, and the experiment its runs go to (created on first use).

mlflow is imported inside the functions: with pandas it costs ~120 MB of memory and a second of start-up,
which a run with tracking=off should not pay.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from runner.core.run_settings import TrackingConfig

# How long a process waits for another one to finish creating a fresh store (a few dozen migrations: seconds).
STORE_LOCK_TIMEOUT_S = 300.0


def client(cfg: TrackingConfig) -> Any:
    """An ``MlflowClient`` for ``cfg.uri`` (MLflow's default store when unset), its store created if need be."""
    from mlflow.tracking import MlflowClient, get_tracking_uri

    uri = cfg.uri or get_tracking_uri()
    _open_store(uri)
    return MlflowClient(tracking_uri=uri)


@functools.cache
def _open_store(uri: str) -> None:
    """Open a sqlite store once per process, holding a file lock beside it while it is opened.

    Opening a store that has no tables yet creates them through a few dozen alembic migrations; two processes doing
    so at once on one fresh file fail ("table runs already exists", "Online migration expected to match one row").
    Under the lock the first creates it and the others find it made. MLflow keeps the opened store for the process,
    so later clients of the same URI neither lock nor migrate. Other stores (a server) need nothing.
    """
    from filelock import FileLock
    from mlflow.tracking import MlflowClient
    from sqlalchemy.engine import make_url

    if not uri.startswith("sqlite:"):
        return
    database = make_url(uri).database
    if not database or database == ":memory:":
        return
    path = Path(database)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not os.access(path.parent, os.W_OK):  # a store only read (results.load): no one can create it here
        return
    with FileLock(f"{path}.lock", timeout=STORE_LOCK_TIMEOUT_S):
        MlflowClient(tracking_uri=uri).search_experiments(max_results=1)  # opens the store: creates or upgrades it


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
