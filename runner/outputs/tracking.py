"""The only module that talks to MLflow: one MLflow run per Hydra job.

The run is created when the job starts (params and tags first, so a run in progress is visible) and
completed at the end with metrics and artifacts. A resumed job continues its MLflow run instead of
starting another one.
"""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.core import metric_names
from runner.core.config import TrackingConfig

# mlflow and pandas are imported inside the functions that use them: together they cost ~120 MB of
# memory and a second of start-up, which a run with tracking=off should not pay.

log = logging.getLogger(__name__)

MAX_PARAM_CHARS = 6000  # MLflow's limit on one param value
BATCH = 100  # MLflow's limit on params per log_batch call
# Names that hold credentials. A bare "key" is not one (rubric.parser.params.key names a JSON field).
SECRET_KEY = re.compile(r"(^|[._])(api_key|apikey|private_key|token|access_token|secret|password)$", re.IGNORECASE)
ARTIFACTS = ("summary.json", "metrics.json", "results.jsonl", "journal.jsonl", "generations.jsonl", "run.json",
             "report.html")


@dataclass(frozen=True)
class RunRecord:
    """What is logged when a run ends."""

    metrics: Mapping[str, float]
    run_dir: Path
    resolved_config_yaml: str
    rows: list[dict[str, Any]] = field(default_factory=list)  # per-judgment results with raw responses
    failed: bool = False


def safe_params(params: Mapping[str, Any]) -> dict[str, str]:
    """Drop anything named like a credential and clip values to MLflow's limit."""
    out = {}
    for key, value in params.items():
        if SECRET_KEY.search(key):
            continue
        text = "" if value is None else str(value)
        out[key] = text[:MAX_PARAM_CHARS]
    return out


def _client(cfg: TrackingConfig) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=cfg.uri) if cfg.uri else MlflowClient()


def _experiment_id(client: Any, cfg: TrackingConfig) -> str:
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


def start_run(cfg: TrackingConfig, run_name: str, params: Mapping[str, Any], tags: Mapping[str, str],
              run_id: str | None = None) -> str:
    """Create the job's MLflow run (or reopen ``run_id`` on resume) and log params and tags.

    Returns:
        The MLflow run id.
    """
    from mlflow.entities import Param, RunStatus

    client = _client(cfg)
    if run_id is None:
        run_id = client.create_run(_experiment_id(client, cfg), run_name=run_name, tags=dict(tags)).info.run_id
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

    client = _client(cfg)
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

    client = _client(cfg)
    client.set_tag(run_id, "judgesweep.abort_reason", reason[:5000])
    client.set_terminated(run_id, status=RunStatus.to_string(RunStatus.FAILED))


BASELINE_LATEST = re.compile(r"latest on (\S+)")


def find_baseline(cfg: TrackingConfig, ref: str, run_name: str, metric: str) -> tuple[str, float]:
    """Find the baseline run a gate compares against and its value of ``metric``.

    Args:
        cfg: Where MLflow records runs.
        ref: An MLflow run id, or ``latest on <branch>``: the most recent FINISHED run in the experiment
            with the same run name (judge, prompt, rubric, dataset) whose ``git.branch`` tag is ``<branch>``
            and which logged ``metric``.
        run_name: This run's name.
        metric: The gated metric, e.g. ``score/mean``.

    Returns:
        (run id, metric value).

    Raises:
        LookupError: No such run, or the run has no such metric.
    """
    from mlflow.exceptions import MlflowException

    client = _client(cfg)
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
    if exp is not None:
        quoted = run_name.replace("'", "\\'")
        runs = client.search_runs(
            [exp.experiment_id], max_results=100, order_by=["attributes.start_time DESC"],
            filter_string=f"tags.`git.branch` = '{branch}' and attributes.status = 'FINISHED' "
                          f"and attributes.run_name = '{quoted}'")
        for run in runs:
            value = metric_names.lookup(run.data.metrics, metric)
            if value is not None:
                return run.info.run_id, value
    raise LookupError(f"no finished run named {run_name!r} with metric {metric!r} on branch {branch!r} in "
                      f"experiment {cfg.experiment!r}")


# --- judgesweep-compare: find runs, fetch their artifacts, log the comparison as a run of its own ---

SWEEP_TAG = "judgesweep.sweep"
KIND_TAG = "judgesweep.kind"
COMPARISON_KIND = "comparison"


@dataclass(frozen=True)
class TrackedRun:
    """An MLflow run as ``judgesweep-compare`` sees it."""

    run_id: str
    run_name: str
    status: str
    start_time: int
    params: Mapping[str, str]
    tags: Mapping[str, str]


def _tracked(run: Any) -> TrackedRun:
    return TrackedRun(run_id=run.info.run_id, run_name=run.info.run_name or "", status=run.info.status,
                      start_time=run.info.start_time or 0, params=dict(run.data.params), tags=dict(run.data.tags))


def get_runs(cfg: TrackingConfig, run_ids: list[str] | tuple[str, ...]) -> list[TrackedRun]:
    """Fetch runs by id, in the order given.

    Raises:
        LookupError: Naming every id the store does not know.
    """
    from mlflow.exceptions import MlflowException

    client = _client(cfg)
    found, unknown = [], []
    for run_id in run_ids:
        try:
            found.append(_tracked(client.get_run(run_id)))
        except MlflowException:
            unknown.append(run_id)
    if unknown:
        raise LookupError(f"no MLflow run {', '.join(map(repr, unknown))} at {client.tracking_uri}")
    return found


def find_sweep_runs(cfg: TrackingConfig, sweep_dir: str | Path) -> list[TrackedRun]:
    """The job runs of one Hydra multirun, oldest first, in any active experiment of the store.

    Args:
        cfg: Where MLflow records runs.
        sweep_dir: The sweep directory, absolute or relative to the working directory; it is resolved
            the way the CLI resolved it into the ``judgesweep.sweep`` tag.

    Raises:
        LookupError: No run carries the sweep's tag.
    """
    client = _client(cfg)
    resolved = str(Path(sweep_dir).expanduser().resolve())
    quoted = resolved.replace("\\", "\\\\").replace("'", "\\'")
    experiment_ids = [exp.experiment_id for exp in client.search_experiments()]
    runs, token = [], None
    while experiment_ids:
        page = client.search_runs(experiment_ids, filter_string=f"tags.`{SWEEP_TAG}` = '{quoted}'",
                                  max_results=1000, page_token=token)
        # job runs carry no kind; comparison and sweep-summary runs do, and are not jobs
        runs += [_tracked(run) for run in page if not run.data.tags.get(KIND_TAG)]
        token = page.token
        if not token:
            break
    if not runs:
        raise LookupError(f"no MLflow run of the sweep {resolved} (tag {SWEEP_TAG}) at {client.tracking_uri}")
    return sorted(runs, key=lambda run: (run.start_time, run.run_id))


def download_artifact(cfg: TrackingConfig, run_id: str, artifact_path: str, dst_dir: Path) -> Path:
    """Download one artifact of a run into ``dst_dir`` (created if missing) and return its local path.

    Raises:
        LookupError: The run has no such artifact.
    """
    from mlflow.exceptions import MlflowException

    dst_dir.mkdir(parents=True, exist_ok=True)
    try:
        local = _client(cfg).download_artifacts(run_id, artifact_path, str(dst_dir))
    except (MlflowException, OSError) as exc:
        raise LookupError(f"run {run_id} has no artifact {artifact_path!r} ({type(exc).__name__})") from None
    return Path(local)


SWEEP_KIND = "sweep"


def log_sweep(cfg: TrackingConfig, sweep_dir: Path, files: list[Path], metrics: Mapping[str, float],
              kind: str = SWEEP_KIND) -> str:
    """Log a sweep's summary as a finished MLflow run tagged like its jobs (``judgesweep.sweep``) and
    ``judgesweep.kind=<kind>`` (``sweep``: the table; ``calibration``: a calibration search's outcome):
    filtering the experiment on the sweep tag shows the jobs and their table.

    Returns:
        The new run's id.
    """
    import time

    from mlflow.entities import Metric, RunStatus

    client = _client(cfg)
    tags = {KIND_TAG: kind, SWEEP_TAG: str(sweep_dir.resolve())}
    run_id = client.create_run(_experiment_id(client, cfg), run_name=f"{kind} {sweep_dir.name}", tags=tags).info.run_id
    stamp = int(time.time() * 1000)
    client.log_batch(run_id, metrics=[Metric(k, float(v), stamp, 0) for k, v in metrics.items()])
    for path in files:
        client.log_artifact(run_id, str(path))
    client.set_terminated(run_id, status=RunStatus.to_string(RunStatus.FINISHED))
    return run_id


def log_comparison(cfg: TrackingConfig, comparison: Mapping[str, Any], compared: list[str], run_name: str,
                   params: Mapping[str, Any], metrics: Mapping[str, float]) -> str:
    """Log a comparison of runs as a new, finished MLflow run in ``cfg.experiment``.

    The run is tagged ``judgesweep.kind=comparison`` (so a sweep search skips it) and
    ``judgesweep.compared_runs`` (comma-separated ids), and holds ``comparison.json`` as its artifact.

    Args:
        cfg: Where MLflow records runs.
        comparison: The JSON-serializable comparison (``runner.outputs.compare.compare_runs``).
        compared: The compared run ids.
        run_name: The new run's name.
        params: Settings of the comparison (level, resamples, ...).
        metrics: Summary numbers (e.g. ``compare/pairs``).

    Returns:
        The new run's id.
    """
    import json
    import time

    from mlflow.entities import Metric, Param, RunStatus

    client = _client(cfg)
    tags = {KIND_TAG: COMPARISON_KIND, "judgesweep.compared_runs": ",".join(compared)[:MAX_PARAM_CHARS]}
    run_id = client.create_run(_experiment_id(client, cfg), run_name=run_name, tags=tags).info.run_id
    stamp = int(time.time() * 1000)
    client.log_batch(run_id, params=[Param(k, v) for k, v in safe_params(params).items()],
                     metrics=[Metric(k, float(v), stamp, 0) for k, v in metrics.items()])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "comparison.json"
        path.write_text(json.dumps(comparison, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        client.log_artifact(run_id, str(path))
    client.set_terminated(run_id, status=RunStatus.to_string(RunStatus.FINISHED))
    return run_id


def get_run_metrics(cfg: TrackingConfig, run_ids: list[str] | tuple[str, ...]) -> dict[str, dict[str, float]]:
    """The latest value of every metric of each run (``runner.outputs.results`` reads them into a DataFrame).

    Raises:
        LookupError: A run id the store does not know.
    """
    from mlflow.exceptions import MlflowException

    client = _client(cfg)
    out = {}
    for run_id in run_ids:
        try:
            out[run_id] = dict(client.get_run(run_id).data.metrics)
        except MlflowException:
            raise LookupError(f"no MLflow run {run_id!r} at {client.tracking_uri}") from None
    return out
