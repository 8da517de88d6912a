"""Reading the store: runs by id, the job runs of a sweep, a run's artifacts and its metrics.

What ``judgesweep compare`` and the results API (:mod:`runner.outputs.results`) find runs with. mlflow is
imported inside the functions, as everywhere in this package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.core.run_settings import TrackingConfig
from runner.outputs.tracking import connection
from runner.outputs.tracking.records import KIND_TAG, SWEEP_TAG, TrackedRun


def _tracked(run: Any) -> TrackedRun:
    return TrackedRun(run_id=run.info.run_id, run_name=run.info.run_name or "", status=run.info.status,
                      start_time=run.info.start_time or 0, params=dict(run.data.params), tags=dict(run.data.tags))


def get_runs(cfg: TrackingConfig, run_ids: list[str] | tuple[str, ...]) -> list[TrackedRun]:
    """Fetch runs by id, in the order given.

    Raises:
        LookupError: Naming every id the store does not know.
    """
    from mlflow.exceptions import MlflowException

    client = connection.client(cfg)
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
    client = connection.client(cfg)
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
        local = connection.client(cfg).download_artifacts(run_id, artifact_path, str(dst_dir))
    except (MlflowException, OSError) as exc:
        raise LookupError(f"run {run_id} has no artifact {artifact_path!r} ({type(exc).__name__})") from None
    return Path(local)


def get_run_metrics(cfg: TrackingConfig, run_ids: list[str] | tuple[str, ...]) -> dict[str, dict[str, float]]:
    """The latest value of every metric of each run (``runner.outputs.results`` reads them into a DataFrame).

    Raises:
        LookupError: A run id the store does not know.
    """
    from mlflow.exceptions import MlflowException

    client = connection.client(cfg)
    out = {}
    for run_id in run_ids:
        try:
            out[run_id] = dict(client.get_run(run_id).data.metrics)
        except MlflowException:
            raise LookupError(f"no MLflow run {run_id!r} at {client.tracking_uri}") from None
    return out
