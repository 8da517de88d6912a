"""The only module that talks to MLflow: one MLflow run per Hydra job."""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd

from runner.config import TrackingConfig

log = logging.getLogger(__name__)

MAX_PARAM_CHARS = 6000  # MLflow's limit on one param value
# Names that hold credentials. A bare "key" is not one (rubric.parser.params.key names a JSON field).
SECRET_KEY = re.compile(r"(^|[._])(api_key|apikey|private_key|token|access_token|secret|password)$", re.IGNORECASE)


@dataclass(frozen=True)
class RunRecord:
    """Everything logged for one run."""

    run_name: str
    params: Mapping[str, Any]
    tags: Mapping[str, str]
    metrics: Mapping[str, float]
    run_dir: Path
    resolved_config_yaml: str
    rows: list[dict[str, Any]] = field(default_factory=list)  # per-judgment results with raw responses


def safe_params(params: Mapping[str, Any]) -> dict[str, str]:
    """Drop anything named like a credential and clip values to MLflow's limit."""
    out = {}
    for key, value in params.items():
        if SECRET_KEY.search(key):
            continue
        text = "" if value is None else str(value)
        out[key] = text[:MAX_PARAM_CHARS]
    return out


def log_run(cfg: TrackingConfig, record: RunRecord) -> str:
    """Create one MLflow run in ``cfg.experiment`` holding params, metrics, tags and artifacts.

    Returns:
        The MLflow run id.
    """
    if cfg.uri:
        mlflow.set_tracking_uri(cfg.uri)
    if mlflow.get_experiment_by_name(cfg.experiment) is None:
        mlflow.create_experiment(cfg.experiment, artifact_location=cfg.artifact_location)
    mlflow.set_experiment(cfg.experiment)
    with mlflow.start_run(run_name=record.run_name) as active:
        mlflow.set_tags(dict(record.tags))
        mlflow.log_params(safe_params(record.params))
        mlflow.log_metrics({k: float(v) for k, v in record.metrics.items()})
        with tempfile.TemporaryDirectory() as tmp:
            cfg_path = Path(tmp) / "config.yaml"
            cfg_path.write_text(record.resolved_config_yaml, encoding="utf-8")
            mlflow.log_artifact(str(cfg_path))
        for name in ("summary.json", "results.jsonl", "journal.jsonl"):
            path = record.run_dir / name
            if path.is_file():
                mlflow.log_artifact(str(path))
        if record.rows:
            mlflow.log_table(pd.DataFrame(record.rows), artifact_file="results_table.json")
        run_id = active.info.run_id
    log.info("MLflow run %s in experiment %r at %s", run_id, cfg.experiment, mlflow.get_tracking_uri())
    return run_id
