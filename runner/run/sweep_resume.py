"""A sweep resumed with ``resume=<sweep dir>``: which of its jobs finished already and is skipped.

A job the kill interrupted continues from its journal and a job that never started starts
(:func:`runner.run.pipeline.prepare`'s resume state); a job that finished is not run again, so its summary,
report and MLflow run stay as they were and nothing of it is logged twice.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from runner.core.run_settings import TrackingConfig
from runner.outputs import publishing, sweep
from runner.run.context import RunOutcome
from runner.storage import store

log = logging.getLogger("judgesweep")


def _complete_summary(run_dir: Path) -> bool:
    """summary.json and metrics.json are written, and the summary is not an aborted run's partial one."""
    try:
        summary = json.loads((run_dir / store.SUMMARY_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent, or torn by a kill while it was written
        return False
    return isinstance(summary, dict) and not summary.get("partial") and (run_dir / store.METRICS_NAME).is_file()


def _tracked(cfg: TrackingConfig, run_dir: Path) -> bool:
    """The job's publish into this store completed (tracking off: nothing to publish). Read from the run directory
    (mlflow.json): deciding to skip a job never opens the store."""
    return not cfg.enabled or publishing.is_published(run_dir, cfg)


def finished(cfg: TrackingConfig, run_dir: Path) -> RunOutcome | None:
    """The outcome of a sweep's job found finished on ``resume=`` (to skip it), or None to run it.

    Args:
        cfg: The job's tracking config (where its MLflow run is).
        run_dir: The job's directory.

    Finished means: a complete summary (not partial), published to the job's store (tracking on); a job finished
    but not published runs again, which finds every answer in its journal and publishes it. A job that failed when
    it finished (a gate; its failure.json) is skipped as failed, with the same reason.
    """
    manifest = store.read_manifest(run_dir)
    if manifest is None or not _complete_summary(run_dir) or not _tracked(cfg, run_dir):
        return None
    reason = ""
    failure = run_dir / sweep.FAILURE_NAME
    if failure.is_file():
        reason = str(json.loads(failure.read_text(encoding="utf-8")).get("reason", "failed"))
    log.info("resuming the sweep: %s finished already, skipped", run_dir)
    return RunOutcome(run_dir / store.SUMMARY_NAME, None, {}, bool(reason), reason, manifest.mlflow_run_id,
                      skipped=True, metrics=_metrics(run_dir))


def _metrics(run_dir: Path) -> dict[str, float]:
    """The finished job's metrics.json (what its sweeper optimises), as it wrote them."""
    try:
        metrics = json.loads((run_dir / store.METRICS_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return metrics if isinstance(metrics, dict) else {}
