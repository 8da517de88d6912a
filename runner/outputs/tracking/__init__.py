"""The only package that talks to MLflow (ruff's banned-api rule lifts the ban on ``mlflow`` for it alone).

Its modules, each importing mlflow (and pandas) inside the functions that use them, never at import time,
so a run with tracking=off does not pay ~120 MB of memory and a second of start-up:

- :mod:`~runner.outputs.tracking.records`: the mlflow-free tags, limits, ``RunRecord``, ``TrackedRun`` and
  ``safe_params``;
- :mod:`~runner.outputs.tracking.connection`: the client of a tracking config and its experiment;
- :mod:`~runner.outputs.tracking.own_log`: MLflow's own log records into the run's log file, not the console;
- :mod:`~runner.outputs.tracking.runs`: one judge run per Hydra job (start, finish, fail) and a gate's
  baseline;
- :mod:`~runner.outputs.tracking.queries`: finding runs and sweeps, fetching artifacts and metrics;
- :mod:`~runner.outputs.tracking.summaries`: the runs that are not jobs (a sweep's table, a comparison);
- :mod:`~runner.outputs.tracking.traces`: one trace per judgment (the run's Evaluations rows) and the human
  feedback added to them; :mod:`~runner.outputs.tracking.prompts`: prompt registry and dataset input.

Callers use the names re-exported here (``tracking.start_run(...)``, ``tracking.SWEEP_TAG``).
"""

from runner.outputs.tracking.connection import client as _client
from runner.outputs.tracking.connection import experiment_id as _experiment_id
from runner.outputs.tracking.own_log import records_to
from runner.outputs.tracking.prompts import log_dataset, register_prompt
from runner.outputs.tracking.queries import download_artifact, find_sweep_runs, get_run_metrics, get_runs
from runner.outputs.tracking.records import (
    ARTIFACTS,
    BATCH,
    COMPARISON_KIND,
    CONFIG_TAG,
    KIND_TAG,
    MAX_PARAM_CHARS,
    SECRET_KEY,
    SWEEP_KIND,
    SWEEP_TAG,
    RunRecord,
    TrackedRun,
    safe_params,
)
from runner.outputs.tracking.runs import (
    BASELINE_LATEST,
    close_run,
    ensure_run,
    experiment_of,
    fail_run,
    find_baseline,
    find_run,
    finish_run,
    log_new_artifacts,
    log_new_metrics,
    start_run,
)
from runner.outputs.tracking.summaries import log_comparison, log_sweep
from runner.outputs.tracking.trace_record import TraceRecord
from runner.outputs.tracking.traces import TraceWriter, human_feedback, log_traces

__all__ = [
    "ARTIFACTS", "BASELINE_LATEST", "BATCH", "COMPARISON_KIND", "CONFIG_TAG", "KIND_TAG", "MAX_PARAM_CHARS",
    "RunRecord", "SECRET_KEY", "SWEEP_KIND", "SWEEP_TAG", "TraceRecord", "TraceWriter", "TrackedRun", "_client",
    "_experiment_id", "close_run", "download_artifact", "ensure_run", "experiment_of", "fail_run", "find_baseline",
    "find_run", "find_sweep_runs", "finish_run", "get_run_metrics", "get_runs", "human_feedback", "log_comparison",
    "log_dataset", "log_new_artifacts", "log_new_metrics", "log_sweep", "log_traces", "records_to", "register_prompt",
    "safe_params",
    "start_run",
]
