"""Runs that are not jobs: a sweep's summary table and a comparison of runs, each logged as a finished run.

They carry a ``judgesweep.kind`` tag, so a search for a sweep's job runs skips them. mlflow is imported inside
the functions, as everywhere in this package.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.core.run_settings import TrackingConfig
from runner.outputs import report_links
from runner.outputs.tracking import connection, runs, sweeps
from runner.outputs.tracking.records import (
    COMPARISON_KIND,
    KIND_TAG,
    MAX_PARAM_CHARS,
    SWEEP_KIND,
    SWEEP_TAG,
    safe_params,
)


def log_sweep(cfg: TrackingConfig, sweep_dir: Path, files: list[Path], metrics: Mapping[str, float],
              kind: str = SWEEP_KIND, tags: Mapping[str, str] | None = None) -> str:
    """Log a sweep's summary as a finished MLflow run tagged like its jobs (``judgesweep.sweep``) and
    ``judgesweep.kind=<kind>`` (``sweep``: the table; ``calibration``: a calibration search's outcome):
    filtering the experiment on the sweep tag shows the jobs and their table. ``tags`` are set on that run too
    (the sweep's answer: ``sweep/best_config``, ...).

    Returns:
        The new run's id.
    """
    from mlflow.entities import RunStatus

    client = connection.client(cfg)
    own = {KIND_TAG: kind, SWEEP_TAG: str(sweep_dir.resolve())}
    experiment = connection.experiment_id(client, cfg)
    # the sweep's parent run, opened when it started (runner.outputs.tracking.sweeps), takes its table
    run_id = sweeps.sweep_run_id(client, experiment, own[SWEEP_TAG]) if kind == SWEEP_KIND else None
    run_id = run_id or client.create_run(experiment, run_name=f"{kind} {sweep_dir.name}", tags=own).info.run_id
    runs.log_new_metrics(cfg, run_id, metrics)  # a sweep resumed or synced again: no second point of a metric
    for key, value in (tags or {}).items():
        client.set_tag(run_id, key, value)
    for path in files:  # its report links to this run (runner.outputs.report_links) before it is logged
        if path.name == report_links.REPORT_NAME:
            report_links.fill(path, report_links.content(cfg, experiment, run_id))
    have = {f.path: f.file_size for f in client.list_artifacts(run_id)}
    for path in files:
        if have.get(path.name) != path.stat().st_size:
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
    from mlflow.entities import Metric, Param, RunStatus

    client = connection.client(cfg)
    tags = {KIND_TAG: COMPARISON_KIND, "judgesweep.compared_runs": ",".join(compared)[:MAX_PARAM_CHARS]}
    run_id = client.create_run(connection.experiment_id(client, cfg), run_name=run_name, tags=tags).info.run_id
    stamp = int(time.time() * 1000)
    client.log_batch(run_id, params=[Param(k, v) for k, v in safe_params(params).items()],
                     metrics=[Metric(k, float(v), stamp, 0) for k, v in metrics.items()])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "comparison.json"
        path.write_text(json.dumps(comparison, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        client.log_artifact(run_id, str(path))
    client.set_terminated(run_id, status=RunStatus.to_string(RunStatus.FINISHED))
    return run_id
