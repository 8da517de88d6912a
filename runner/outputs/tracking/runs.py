"""One judge run's MLflow run: one per Hydra job, and the baseline a gate compares it against.

The run is created when the job starts (params and tags first, so a run in progress is visible) and
completed at the end with metrics and artifacts. A resumed job continues its MLflow run instead of
starting another one.
"""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.core import metric_names
from runner.core.config import TrackingConfig
from runner.outputs.tracking import connection, sweeps
from runner.outputs.tracking.records import ARTIFACTS, BATCH, CONFIG_TAG, RunRecord, safe_params

# mlflow and pandas are imported inside the functions that use them: together they cost ~120 MB of
# memory and a second of start-up, which a run with tracking=off should not pay.

log = logging.getLogger(__name__)

BASELINE_LATEST = re.compile(r"latest on (\S+)")


def start_run(cfg: TrackingConfig, run_name: str, params: Mapping[str, Any], tags: Mapping[str, str],
              run_id: str | None = None) -> str:
    """Create the job's MLflow run (or reopen ``run_id`` on resume) and log params and tags.

    Returns:
        The MLflow run id.
    """
    from mlflow.entities import Param, RunStatus

    client = connection.client(cfg)
    if run_id is None:
        experiment = connection.experiment_id(client, cfg)
        tags = sweeps.parent_tags(client, experiment, dict(tags))  # a sweep's job: nested under the sweep's run
        run_id = client.create_run(experiment, run_name=run_name, tags=dict(tags)).info.run_id
    else:
        client.update_run(run_id, status=RunStatus.to_string(RunStatus.RUNNING))
        for key, value in tags.items():
            client.set_tag(run_id, key, value)
    logged = client.get_run(run_id).data.params
    items = [Param(k, v) for k, v in safe_params(params).items() if k not in logged]
    for start in range(0, len(items), BATCH):
        client.log_batch(run_id, params=items[start:start + BATCH])
    log.info("MLflow run %s in experiment %r at %s", run_id, cfg.experiment, client.tracking_uri)
    return run_id


def finish_run(cfg: TrackingConfig, run_id: str, record: RunRecord) -> None:
    """Log metrics, the resolved config, the run's files and the results table; close the run."""
    import pandas as pd
    from mlflow.entities import Metric, RunStatus

    client = connection.client(cfg)
    stamp = int(pd.Timestamp.now().timestamp() * 1000)
    metrics = [Metric(k, float(v), stamp, 0) for k, v in record.metrics.items()]
    for start in range(0, len(metrics), 1000):
        client.log_batch(run_id, metrics=metrics[start:start + 1000])
    with tempfile.TemporaryDirectory() as tmp:
        cfg_path = Path(tmp) / "config.yaml"
        cfg_path.write_text(record.resolved_config_yaml, encoding="utf-8")
        client.log_artifact(run_id, str(cfg_path))
    for name in ARTIFACTS:
        path = record.run_dir / name
        if path.is_file():
            client.log_artifact(run_id, str(path))
    if record.rows:
        client.log_table(run_id, data=pd.DataFrame(record.rows), artifact_file="results_table.json")
    status = RunStatus.FAILED if record.failed else RunStatus.FINISHED
    client.set_terminated(run_id, status=RunStatus.to_string(status))


def fail_run(cfg: TrackingConfig, run_id: str, reason: str) -> None:
    """Mark the run FAILED with the reason as a tag (an aborted run; resume continues it)."""
    from mlflow.entities import RunStatus

    client = connection.client(cfg)
    client.set_tag(run_id, "judgesweep.abort_reason", reason[:5000])
    client.set_terminated(run_id, status=RunStatus.to_string(RunStatus.FAILED))


def find_baseline(cfg: TrackingConfig, ref: str, config: str, metric: str) -> tuple[str, float]:
    """Find the baseline run a gate compares against and its value of ``metric``.

    Args:
        cfg: Where MLflow records runs.
        ref: An MLflow run id, or ``latest on <branch>``: the most recent FINISHED run in the experiment
            with the same configuration (its ``judgesweep.config`` tag: judge, prompt, rubric, dataset; a run
            logged before that tag existed: its run name, which was that string) whose ``git.branch`` tag is
            ``<branch>`` and which logged ``metric``.
        config: This run's configuration (``judge=x,prompt=y,...``).
        metric: The gated metric, e.g. ``score/mean``.

    Returns:
        (run id, metric value).

    Raises:
        LookupError: No such run, or the run has no such metric.
    """
    from mlflow.exceptions import MlflowException

    client = connection.client(cfg)
    latest = BASELINE_LATEST.fullmatch(ref.strip())
    if latest is None:
        try:
            run = client.get_run(ref)
        except MlflowException:
            raise LookupError(f"no MLflow run {ref!r} at {client.tracking_uri}") from None
        value = metric_names.lookup(run.data.metrics, metric)  # a run logged before a rename: its old name
        if value is None:
            raise LookupError(f"baseline run {ref} has no metric {metric!r}")
        return ref, value
    exp = client.get_experiment_by_name(cfg.experiment)
    branch = latest.group(1)
    quoted = config.replace("'", "\\'")
    for same_config in (f"tags.`{CONFIG_TAG}` = '{quoted}'", f"attributes.run_name = '{quoted}'"):
        runs = [] if exp is None else client.search_runs(
            [exp.experiment_id], max_results=100, order_by=["attributes.start_time DESC"],
            filter_string=f"tags.`git.branch` = '{branch}' and attributes.status = 'FINISHED' and {same_config}")
        for run in runs:
            value = metric_names.lookup(run.data.metrics, metric)
            if value is not None:
                return run.info.run_id, value
    raise LookupError(f"no finished run of {config!r} with metric {metric!r} on branch {branch!r} in "
                      f"experiment {cfg.experiment!r}")
