"""One judge run's MLflow run: one per Hydra job, and the baseline a gate compares it against.

The run is created when the job starts (params and tags first, so a run in progress is visible) and
completed at the end with metrics and artifacts. A resumed job continues its MLflow run instead of
starting another one.
"""

from __future__ import annotations

import logging
import re
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from runner.core import metric_names
from runner.core.run_settings import TrackingConfig
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


def ensure_run(cfg: TrackingConfig, uid: str, run_name: str, tags: Mapping[str, str], params: Mapping[str, Any]
               ) -> tuple[str, bool]:
    """The MLflow run tagged ``judgesweep.run_uid`` = ``uid`` in ``cfg.experiment``, created if there is none (a
    sweep's job nested under the sweep's parent run, found or created), with the tags and params it lacks.

    Returns:
        (run id, whether it was created now).
    """
    from mlflow.entities import Param, RunTag

    client = connection.client(cfg)
    experiment = connection.experiment_id(client, cfg)
    found = _by_uid(client, experiment, uid)
    created = not found
    if found:
        run = found[0]
    else:
        run = client.create_run(experiment, run_name=run_name, tags=sweeps.parent_tags(client, experiment, dict(tags),
                                                                                       create=True))
    run_id = run.info.run_id
    have_tags, have_params = run.data.tags, run.data.params
    new_tags = [RunTag(k, v) for k, v in tags.items() if have_tags.get(k) != v]
    new_params = [Param(k, v) for k, v in safe_params(params).items() if k not in have_params]
    for start in range(0, max(len(new_params), len(new_tags)), BATCH):
        client.log_batch(run_id, params=new_params[start:start + BATCH], tags=new_tags[start:start + BATCH])
    log.info("MLflow run %s in experiment %r at %s", run_id, cfg.experiment, client.tracking_uri)
    return run_id, created


def experiment_of(cfg: TrackingConfig, run_id: str) -> str:
    """The id of the experiment that holds the run ``run_id``."""
    return str(connection.client(cfg).get_run(run_id).info.experiment_id)


def find_run(cfg: TrackingConfig, uid: str) -> str | None:
    """The id of the MLflow run tagged ``judgesweep.run_uid`` = ``uid`` in ``cfg.experiment``; None if there is none."""
    client = connection.client(cfg)
    found = _by_uid(client, connection.experiment_id(client, cfg), uid)
    return found[0].info.run_id if found else None


def _by_uid(client: Any, experiment: str, uid: str) -> list[Any]:
    quoted = uid.replace("\\", "\\\\").replace("'", "\\'")
    return client.search_runs([experiment], filter_string=f"tags.`judgesweep.run_uid` = '{quoted}'", max_results=1)


def log_new_metrics(cfg: TrackingConfig, run_id: str, metrics: Mapping[str, float]) -> None:
    """Log each metric the run does not have with this value: a new key at step 0, a changed value (a resumed run's
    summary) one step after its last point; a metric already logged with this value is not logged again."""
    import math

    from mlflow.entities import Metric

    client = connection.client(cfg)
    have = client.get_run(run_id).data.metrics
    stamp = int(time.time() * 1000)
    new = []
    for key, value in metrics.items():
        value = float(value)
        if key in have and (have[key] == value or (math.isnan(have[key]) and math.isnan(value))):
            continue
        step = 0 if key not in have else max(m.step for m in client.get_metric_history(run_id, key)) + 1
        new.append(Metric(key, value, stamp, step))
    for start in range(0, len(new), 1000):
        client.log_batch(run_id, metrics=new[start:start + 1000])


def log_new_artifacts(cfg: TrackingConfig, run_id: str, run_dir: Path, config_yaml: str,
                      table_rows: Callable[[], list[dict[str, Any]]]) -> None:
    """Log the run's files (and its resolved config as config.yaml, its results table) the run does not have, or
    has with another size (a resumed run rewrote them)."""
    import pandas as pd

    client = connection.client(cfg)
    have = {f.path: f.file_size for f in client.list_artifacts(run_id)}
    with tempfile.TemporaryDirectory() as tmp:
        cfg_path = Path(tmp) / "config.yaml"
        cfg_path.write_text(config_yaml, encoding="utf-8")
        for path in [cfg_path, *(run_dir / name for name in ARTIFACTS)]:
            if path.is_file() and have.get(path.name) != path.stat().st_size:
                client.log_artifact(run_id, str(path))
    if "results_table.json" not in have:
        rows = table_rows()
        if rows:
            client.log_table(run_id, data=pd.DataFrame(rows), artifact_file="results_table.json")


def close_run(cfg: TrackingConfig, run_id: str, failed: bool, reason: str = "") -> None:
    """End the run FINISHED, or FAILED with ``reason`` as its ``judgesweep.abort_reason`` tag, unless it is."""
    from mlflow.entities import RunStatus

    client = connection.client(cfg)
    status = RunStatus.to_string(RunStatus.FAILED if failed else RunStatus.FINISHED)
    run = client.get_run(run_id)
    if failed and reason and run.data.tags.get("judgesweep.abort_reason") != reason[:5000]:
        client.set_tag(run_id, "judgesweep.abort_reason", reason[:5000])
    if run.info.status != status or not run.info.end_time:
        client.set_terminated(run_id, status=status)


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
