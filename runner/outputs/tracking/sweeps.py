"""A sweep as an MLflow parent run: opened by the launching process when the multirun starts, found by each job
through the sweep's tag (so jobs in other processes or machines need nothing passed to them), and given the
sweep's table when the multirun ends (:func:`runner.outputs.tracking.summaries.log_sweep`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.core.run_settings import TrackingConfig
from runner.outputs.tracking import connection
from runner.outputs.tracking.records import KIND_TAG, SWEEP_KIND, SWEEP_TAG

PARENT_TAG = "mlflow.parentRunId"  # MLflow's own: the runs list nests a run under its parent


def sweep_run_id(client: Any, experiment_id: str, sweep: str) -> str | None:
    """The id of the sweep's own run (``judgesweep.kind=sweep`` with the sweep's tag), the newest if several."""
    quoted = sweep.replace("\\", "\\\\").replace("'", "\\'")
    runs = client.search_runs([experiment_id], max_results=1, order_by=["attributes.start_time DESC"],
                              filter_string=f"tags.`{SWEEP_TAG}` = '{quoted}' and tags.`{KIND_TAG}` = '{SWEEP_KIND}'")
    return runs[0].info.run_id if runs else None


def open_sweep(cfg: TrackingConfig, sweep_dir: Path, label: str) -> str:
    """Create the sweep's parent run, named ``label``, before its jobs start (a resumed sweep: reopen it).

    Returns:
        The run's id.
    """
    from mlflow.entities import RunStatus

    client = connection.client(cfg)
    experiment = connection.experiment_id(client, cfg)
    sweep = str(sweep_dir.resolve())
    run_id = sweep_run_id(client, experiment, sweep)
    if run_id is not None:
        client.update_run(run_id, status=RunStatus.to_string(RunStatus.RUNNING))
        return run_id
    tags = {KIND_TAG: SWEEP_KIND, SWEEP_TAG: sweep, "judgesweep.sweep_label": label}
    return str(client.create_run(experiment, run_name=label, tags=tags).info.run_id)


def parent_tags(client: Any, experiment_id: str, tags: dict[str, str], create: bool = False) -> dict[str, str]:
    """``tags`` of a sweep's job with ``mlflow.parentRunId`` added when the sweep has its run (none: as given, or
    with ``create`` a parent run made now, as a sweep synced into another store needs)."""
    sweep = tags.get(SWEEP_TAG)
    if not sweep or PARENT_TAG in tags:
        return tags
    parent = sweep_run_id(client, experiment_id, sweep)
    if parent is None and create:
        label = tags.get("judgesweep.sweep_label") or Path(sweep).name
        parent = str(client.create_run(experiment_id, run_name=label, tags={
            KIND_TAG: SWEEP_KIND, SWEEP_TAG: sweep, "judgesweep.sweep_label": label}).info.run_id)
    return {**tags, PARENT_TAG: parent} if parent else tags
