"""The Hydra entry point (``judgesweep`` / ``python -m runner``): composes the config, runs each job through
:func:`runner.run.experiment.run_job`, ends a sweep with its table, and exits non-zero when a job failed."""

from __future__ import annotations

import importlib
import logging
import math
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import hydra

# Hydra's own argv parser, so --config-dir is read as Hydra reads it; Hydra 1.3 has no public one
from hydra._internal.utils import get_args_parser
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from runner.core import gc_pause, locations
from runner.core.config_store import multirun_tracking
from runner.core.errors import (
    BUDGET_REACHED,
    RUN_DIR_BUSY,
    TRACKING_FAILED,
    WRITE_FAILED,
    BatchFailed,
    BatchPending,
    ConfigurationError,
    DatasetError,
    RunDirectoryBusy,
    WriteFailed,
)
from runner.core.input_limits import UnsafeFile
from runner.core.registry import UnknownNameError
from runner.inputs.prompts import TemplateError
from runner.judging.calls import BudgetReached, RunAborted
from runner.judging.scoring import RubricError
from runner.judging.shutdown import Interrupted

# Only what composing the config and classifying errors needs is imported here: `judgesweep --help` and
# `--cfg job` never import litellm, MLflow or the statistics stack. The modules that run a job (pipeline,
# client, and through them litellm) are imported by experiment.prepare_run, those that end a sweep by
# SweepSummary.
from runner.outputs import sweep
from runner.run import config_guard, launcher_watch, naming, open_mappings
from runner.run.experiment import PROCESS_PUBLISHERS, prepare_process, run_job
from runner.storage import budget_ledger, owner, store
from runner.storage.cache import CacheError

if TYPE_CHECKING:
    from runner.run.context import RunOutcome

log = logging.getLogger("judgesweep")

# A bad parameter from config is a ParamsError (a ConfigurationError); any other TypeError is a bug and keeps
# its traceback.
EXPECTED_ERRORS = (ConfigurationError, DatasetError, TemplateError, UnknownNameError, RubricError, RunAborted,
                   CacheError, BatchFailed)

# Process-wide state: jobs of this process that failed (bad input, too many failed calls), and jobs whose files are
# complete but whose MLflow tracking failed. A multirun goes on after either and the process exits non-zero at the
# end: 1 for a failed job, else TRACKING_FAILED. (The rate limiters: runner.run.experiment.)
_failed_jobs: list[str] = []
_untracked_jobs: list[str] = []



def _job(dcfg: DictConfig) -> float | None:
    """One job; returns its ``objective`` metric for a sweeper, or None when the job failed or lacks the metric.

    None, not NaN: hydra-optuna-sweeper records a None as a failed trial and the study goes on, while a NaN
    makes it tell Optuna a failed trial with a value, which raises and ends the whole study.
    """
    prepare_process()
    # cast: HydraConfig.get() is annotated as the HydraConf dataclass but returns the config's ``hydra`` DictConfig node
    hc = cast(DictConfig, HydraConfig.get())
    job = hc.runtime.output_dir
    try:
        with owner.owned(Path(job)):  # before anything is written or sent: a second process refuses here
            return _owned_job(dcfg, hc, job)
    except RunDirectoryBusy as exc:
        _say(f"judgesweep: RunDirectoryBusy: {exc}")
        sys.exit(RUN_DIR_BUSY)
    except WriteFailed as exc:  # disk full: nothing more was sent, and nothing more can be written here
        _say(f"judgesweep: WriteFailed: {exc}; nothing more was sent. Every answer in the journal is kept: make room "
             f"and continue with resume={job}")
        sys.exit(WRITE_FAILED)


def _owned_job(dcfg: DictConfig, hc: DictConfig, job: str) -> float | None:
    """The job once its run directory is this process's (runner.storage.owner)."""
    failure = Path(job) / sweep.FAILURE_NAME
    failure.unlink(missing_ok=True)  # a resumed job that failed before
    untracked = Path(job) / sweep.UNTRACKED_NAME
    untracked.unlink(missing_ok=True)
    try:
        outcome = run_job(dcfg, hc)
    except Interrupted as exc:  # Ctrl-C or SIGTERM: one line, no traceback, and the sweep stops too
        _say(f"judgesweep: {exc}")
        sys.exit(exc.exit_code)
    except BudgetReached as exc:  # budget.max_usd: one line with the resume command; the sweep stops too
        _say(f"judgesweep: {exc}")
        _fail(job, str(exc))
        sys.exit(BUDGET_REACHED)
    except BatchPending as exc:  # batch.wait=false: submitted, collected by a later resume; not a failure
        _say(f"judgesweep: {exc}")
        return None
    except EXPECTED_ERRORS as exc:
        log.error("judgesweep: %s: %s", type(exc).__name__, exc)
        _fail(job, f"{type(exc).__name__}: {exc}")
        return None
    if outcome is not None and outcome.tracking_error:  # a launcher worker's list never reaches main(): the file does
        _say(f"judgesweep: {outcome.tracking_error}")
        _untracked_jobs.append(job)
        store.write_json(untracked, {"reason": outcome.tracking_error})
    if outcome is not None and outcome.failed:
        log.error("judgesweep: run failed: %s", outcome.reason)
        _fail(job, outcome.reason)
        return None
    return _objective(outcome, str(dcfg.objective))


def _say(line: str) -> None:
    """One line for the user on stderr (Hydra's console log goes to stdout, where a script reads results)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _objective(outcome: RunOutcome | None, name: str) -> float | None:
    """The job's metric ``name`` from its outcome (None for a dry run, a missing metric or NaN)."""
    value = outcome.metrics.get(name) if outcome is not None else None
    return None if value is None or math.isnan(value) else float(value)


def _fail(job: str, reason: str) -> None:
    """Record a failed job in this process and in its directory: a launcher worker's list never reaches
    ``main()``, the file does (``SweepSummary`` reads it in the launching process)."""
    _failed_jobs.append(job)
    sweep.write_failure(Path(job), reason)


class RunDirectory(Callback):
    """Hydra callback (conf/hydra/default.yaml, first): the run or sweep directory is created and written to before
    Hydra's own mkdir and log file, so a read-only place is one line naming it, not a traceback; a joblib sweep's
    workers are guarded against this process's death (runner.run.loky_workers)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:  # noqa: D102
        _writable(config, str(config.hydra.run.dir), "hydra.run.dir")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:  # noqa: D102
        _writable(config, str(config.hydra.sweep.dir), "hydra.sweep.dir")
        if "joblib" in str(OmegaConf.select(config, "hydra.launcher._target_", default="")):
            from runner.run import loky_workers  # imports joblib: for a joblib sweep only

            loky_workers.register()  # its workers end once this process is gone, also those that ran no job
        if OmegaConf.select(config, "budget.max_usd", default=None) is not None:  # the jobs share one limit
            budget_ledger.start(Path(config.hydra.sweep.dir))


def _writable(config: DictConfig, directory: str, hydra_key: str) -> None:
    key = locations.directory_key(OmegaConf.select(config, "output_dir", default=None), directory, hydra_key)
    try:
        locations.check_writable(Path(directory), key)
    except locations.UnwritableDirectory as exc:
        _say(f"judgesweep: {type(exc).__name__}: {exc}")
        sys.exit(1)


class SweepSummary(Callback):
    """Hydra callback (conf/hydra/default.yaml): when a multirun ends, write, print and log its table.

    When a multirun starts, its parent run is opened in MLflow (``judgesweep.kind=sweep``, named by when it
    started and what it sweeps); each job finds it by the sweep's ``judgesweep.sweep`` tag and nests under it
    (``mlflow.parentRunId``): jobs may run in other processes or machines (joblib, Ray launchers), and the tag
    needs nothing shared between them. When it ends, the table is logged to that run, and then the publishing process
    that the jobs run in this process shared (runner.run.experiment.PROCESS_PUBLISHERS) is closed.
    """

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:  # noqa: D102
        from runner.outputs.tracking import sweeps

        try:
            tracking_cfg = multirun_tracking(config)
            if tracking_cfg.enabled:
                label = naming.sweep_label(datetime.now(), list(config.hydra.overrides.task))
                run_id = sweeps.open_sweep(tracking_cfg, Path(config.hydra.sweep.dir), label)
                log.info("sweep %r: MLflow run %s, its jobs nested under it", label, run_id)
        except Exception as exc:  # noqa: BLE001 - the jobs still carry the sweep's tag; nesting them is a bonus
            log.warning("sweep run not opened in MLflow: %s", exc)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:  # noqa: D102
        try:
            _end_multirun(config)
        finally:  # the publishing process the jobs of this process shared (runner.run.experiment) ends with them
            PROCESS_PUBLISHERS.close()


def _end_multirun(config: DictConfig) -> None:
    """The sweep's table: written, printed, and logged to its MLflow run (SweepSummary)."""
    from runner.outputs import console, sweep_best, sweep_page, tracking

    sweep_dir = Path(config.hydra.sweep.dir)
    if not sweep_dir.is_dir():
        return
    rows = sweep.collect(sweep_dir)
    # jobs that ran in other processes (joblib workers) marked their failure in their directory
    _failed_jobs.extend(str(path.parent) for path in sweep_dir.glob(f"*/{sweep.FAILURE_NAME}"))
    _untracked_jobs.extend(str(path.parent) for path in sweep_dir.glob(f"*/{sweep.UNTRACKED_NAME}"))
    answer, best_files = sweep_best.settle(sweep_dir, rows)  # the best configuration and those tied with it
    pages = sweep_page.write_sweep_report(sweep_dir, rows, answer=answer)  # frontier.csv/png, report.html
    files = [*sweep.write(sweep_dir, rows), *best_files, *pages]
    sweep.render(rows)
    for line in sweep_best.lines(answer) if answer else []:
        console.print_line(line)
    if pages:
        console.print_line(f"report: {pages[-1]}")
    try:
        tracking_cfg = multirun_tracking(config)
    except Exception as exc:  # noqa: BLE001 - the table is written; tracking it is a bonus
        log.warning("sweep table not logged to MLflow: %s", exc)
        return
    if tracking_cfg.enabled:
        try:
            metrics, tags = sweep_best.tracking_values(answer)
            run_id = tracking.log_sweep(tracking_cfg, sweep_dir, files, {**sweep.summary_metrics(rows), **metrics},
                                        tags=tags)
            log.info("sweep table %s logged to MLflow run %s", files[0], run_id)
        except Exception as exc:  # noqa: BLE001 - the table is written; `judgesweep sync` logs it later
            log.error("judgesweep: tracking failed: the sweep table was not logged to MLflow (%s: %s); finish "
                      "it with: judgesweep sync %s", type(exc).__name__, " ".join(str(exc).split())[:300],
                      sweep_dir)
            _untracked_jobs.append(str(sweep_dir))


# `judgesweep <subcommand> ...`: the module whose ``main(argv)`` runs it, imported only when chosen (so that
# `judgesweep --help` imports none of them). `judgesweep run ...`, and anything else (overrides, -m, --help, --cfg),
# composes the run config with Hydra; conf/hydra/default.yaml's help lists every one (tests/unit/test_cli_group.py).
SUBCOMMANDS: dict[str, str] = {
    "aggregate": "runner.app.aggregate_cli",  # re-aggregate evaluation files: no judge call
    "compare": "runner.app.compare_cli",  # compare runs or a sweep's jobs item by item
    "init": "runner.app.init_project",  # write a small project of your own
    "sync": "runner.app.sync_cli",  # publish run directories to MLflow: what the store lacks, nothing twice
}
RUN = "run"


def main() -> None:
    """Console-script entry point: ``judgesweep <subcommand> ARGS`` runs a :data:`SUBCOMMANDS` entry;
    ``judgesweep [run] [overrides]`` composes the config (the user's conf/ overlaid on the packaged one), runs the
    job(s) and exits non-zero on failure."""
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command in SUBCOMMANDS:  # before Hydra, which would read the name as an override
        gc_pause.resume()  # not a run: no prepare_run to turn the collector on again
        sys.exit(importlib.import_module(SUBCOMMANDS[command]).main(sys.argv[2:]))
    if command == RUN:
        del sys.argv[1]
    _run()


def _run() -> None:
    """``judgesweep [run] [overrides]``: Hydra composes the config and runs the job(s)."""
    prepare_process()
    # a launcher's workers (joblib, Ray) inherit it: each of their jobs stops once this process is gone
    os.environ[launcher_watch.LAUNCHER_PID] = launcher_watch.launcher_id()
    primary, sys.argv[1:] = _overlay(sys.argv[1:])
    try:
        hydra.main(config_path=str(primary), config_name="config", version_base="1.3")(_job)()
    except KeyboardInterrupt:  # Ctrl-C outside the paid calls (loading, summarizing): nothing paid is in flight
        sys.stderr.write("judgesweep: interrupted by SIGINT\n")  # logging may already be torn down here
        sys.exit(130)
    if _failed_jobs:
        sys.exit(1)
    if _untracked_jobs:
        sys.exit(TRACKING_FAILED)


def _overlay(argv: list[str]) -> tuple[Path, list[str]]:
    """The primary config directory and Hydra's argv: a user's config directory (``--config-dir``, else ./conf)
    becomes the primary one and the packaged conf/ goes after it on the search path, so the user's files win and
    the packaged options stay selectable. Hydra's own ``--config-dir`` adds a directory after the primary one:
    given last (argparse keeps the last value), ours names the packaged conf/.
    """
    args = get_args_parser().parse_args(argv)
    try:
        user = locations.user_conf_dir(Path.cwd(), args.config_dir)
        # before Hydra composes: it instantiates hydra.callbacks before the job could refuse them
        config_guard.check_overrides(args.overrides)
        config_guard.check_user_conf(user)
    except (FileNotFoundError, UnsafeFile) as exc:  # UnsafeFile: "<file>:<line>: <what> (cap: ...)" says it all
        sys.exit(f"judgesweep: {exc}")
    except ConfigurationError as exc:
        sys.exit(f"judgesweep: {type(exc).__name__}: {exc}")
    argv = open_mappings.opened(argv)  # rubric.category_weights.<new>.x=... without Hydra's "+"
    if user is None:
        return locations.PACKAGED_CONF, argv
    return user, [*argv, "--config-dir", str(locations.PACKAGED_CONF)]


if __name__ == "__main__":
    main()
