"""One job from a composed config to its outcome, and the in-process seam :func:`run_experiment`.

The CLI (runner/app/cli.py, Hydra's ``@hydra.main``) and :func:`run_experiment` (Hydra's compose API, for tests,
notebooks and other programs) both end in :func:`run_job`: the config is checked and validated into typed
objects once, the judge's API key read from the variable the config names, and the job handed to the pipeline
as frozen records. This module and :mod:`runner.run.job_context` (the checks, the API keys and the job's
context) are the only ones besides the CLI that read a DictConfig or the environment.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import gc
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hydra import compose, version

# Hydra 1.3 has no public way to put a second directory at the place the CLI's --config-dir puts it:
# initialize_config_dir takes one directory, a `hydra.searchpath` override would replace the user's own, and a
# SearchPathPlugin is discovered for every Hydra app in the environment and cannot know the user's directory.
from hydra._internal.hydra import Hydra  # as initialize_config_dir builds it, with one more search path entry
from hydra._internal.utils import create_config_search_path
from hydra.core.config_search_path import SearchPathQuery
from hydra.core.hydra_config import HydraConfig
from hydra.initialize import get_gh_backup, restore_gh_from_backup
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

# Only what composing the config needs is imported here: `judgesweep --help` and `--cfg job` never import
# litellm, MLflow or the statistics stack. The modules that run a job (pipeline, client, and through them
# litellm) are imported by prepare_run.
from runner.core import gc_pause, locations
from runner.core.addresses import check_addresses
from runner.core.config import RunConfig
from runner.core.config_store import register_configs
from runner.core.values import check_values
from runner.llm.limiter_pool import LimiterPool
from runner.outputs.idle_publisher import Idle
from runner.run import config_guard, job_context, launcher_watch, open_mappings
from runner.storage import owner

if TYPE_CHECKING:
    from runner.run.context import RunOutcome

__all__ = ["CONFIG_DIR", "PROCESS_LIMITERS", "PROCESS_PUBLISHERS", "TELEMETRY_OFF", "prepare_process", "prepare_run",
           "run_experiment", "run_job"]

# judgesweep's own conf/ (runner/core/locations.py: in the checkout, or inside the installed package)
CONFIG_DIR = str(locations.PACKAGED_CONF)

# Process-wide state: the rate limiters. Every job and repeat of a judge in this process shares one, whether
# the jobs come from the CLI (a multirun) or from run_experiment calls.
PROCESS_LIMITERS = LimiterPool()
# Process-wide state: the publishing process a job of a multirun leaves idle for the next job of this process
# (runner.outputs.idle_publisher.Idle), closed when the multirun ends (runner.app.cli.SweepSummary) or the process
# exits.
PROCESS_PUBLISHERS = Idle()
# No run leaves the machine: MLflow's own switch and the cross-tool convention it also reads.
TELEMETRY_OFF = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}


@functools.cache
def prepare_process() -> None:
    """Process-wide settings, once per process: the launching process and each launcher worker (joblib's
    loky processes import this module to run ``_job`` but never run ``main()``)."""
    register_configs()
    # Ray (hydra/launcher=ray*) reports usage to the internet unless told not to; no run leaves the machine.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # MLflow 3 starts a telemetry client when imported (mlflow/telemetry) unless one of these says no: set before
    # any module imports mlflow, and inherited by launcher workers. litellm's is off in runner/llm/client.py.
    os.environ.update(TELEMETRY_OFF)
    # litellm counts a Llama judge's tokens (pricing, the budget) with a tokenizer from the Hugging Face Hub: without
    # this it fetches it from huggingface.co, and offline it retries for ~23 s before falling back to its bundled
    # tokenizer. A tokenizer already in the user's Hugging Face cache is still used; HF_HUB_OFFLINE=0 allows the fetch.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if not OmegaConf.has_resolver("resume_or"):
        # hydra.run.dir / hydra.sweep.dir: the directory being resumed, else a new timestamped one.
        OmegaConf.register_new_resolver("resume_or", lambda resume, fresh: resume or fresh)


@functools.cache
def prepare_run() -> None:
    """Once per process, before its first job runs: import the run's modules and configure litellm."""
    from runner.llm import client
    from runner.run import pipeline  # noqa: F401 - litellm and everything a job needs, imported once

    client.configure()
    # Whatever exists now (litellm, openai, httpx, hydra, the config: several hundred thousand objects) lives
    # as long as the process. Moved to the permanent generation, the cyclic GC stops walking it on every full
    # collection during the judge stage: issue 12 measured 18% less CPU per judge call.
    gc.freeze()
    gc_pause.resume()  # paused by the process's entry point (runner.app.entry) through its imports and composition


def run_job(dcfg: DictConfig, hc: DictConfig, limiters: LimiterPool = PROCESS_LIMITERS, publish_here: bool = False
            ) -> RunOutcome | None:
    """Check, type and run one composed job config; None for a dry run.

    A sweep's job resumed (``resume=<sweep dir>``) that finished already is not run again: its outcome says
    ``skipped`` (:mod:`runner.run.sweep_resume`).

    Args:
        dcfg: The job's config without its ``hydra`` node.
        hc: The ``hydra`` node it was composed with (run directory, choices, overrides, launcher).
        limiters: Where the judge's rate limiter comes from (shared by the jobs of this process by default).
        publish_here: Publish the finished run to MLflow in this process (run_experiment) instead of a helper
            process started beside the calls (the CLI).

    Raises:
        The errors of bad input (runner.app.cli.EXPECTED_ERRORS), before any call; RunAborted when too many calls fail.
    """
    job_context.check_keys(dcfg)
    cfg: RunConfig = OmegaConf.to_object(dcfg)  # type: ignore[assignment]
    check_values(cfg)
    check_addresses(cfg)
    if cfg.resume and hc.mode == RunMode.MULTIRUN:
        from runner.run import sweep_resume

        done = sweep_resume.finished(cfg.tracking, Path(hc.runtime.output_dir))
        if done is not None:
            return done
    launcher = _launcher(hc)
    # a multirun's jobs run one after another in its own process (Hydra's basic launcher): they share a publishing
    # process, closed when the multirun ends; a launcher's workers (joblib, Ray) start one a job, as a single run does
    shared = launcher == os.getpid()
    publishers = PROCESS_PUBLISHERS if shared else Idle()
    if cfg.tracking.enabled and not publish_here and not cfg.dry_run:
        # started before litellm is imported: its imports and the store's opening overlap the job's own start-up
        publishers.start(cfg.tracking)
    try:
        prepare_run()
        from runner.run import pipeline

        ctx = dataclasses.replace(job_context.context(dcfg, cfg, hc, limiters), publish_here=publish_here,
                                  publishers=publishers)
        job_context.protect_secrets(ctx.api_keys)  # Hydra configured this job's handlers before the job started
        with launcher_watch.watching(launcher):
            return pipeline.run(ctx)
    finally:
        if not shared:  # this job's own helper, idle once its publish answered (or never used: a refused config)
            publishers.close(None)


def _launcher(hc: DictConfig) -> int | None:
    """The pid of the process that launched this sweep job, when the CLI said (None for a single run)."""
    value = os.environ.get(launcher_watch.LAUNCHER_PID, "")
    return launcher_watch.launcher_pid(value) if hc.mode == RunMode.MULTIRUN else None


@contextlib.contextmanager
def _hydra_initialized(config_dir: str | Path | None) -> Iterator[None]:
    """Hydra initialized for compose as the CLI composes: the user's config directory (``config_dir``, else
    ``./conf``) as the primary one with the packaged conf/ after it on the search path (where the CLI's
    ``--config-dir`` puts it), or the packaged conf/ alone. What ``initialize_config_dir`` does, plus that entry.

    Raises:
        FileNotFoundError: ``config_dir`` is not a directory.
        ForbiddenKey, UnsafeFile: A file of the user's config directory that config_guard.check_user_conf refuses.
    """
    user = locations.user_conf_dir(Path.cwd(), config_dir)
    config_guard.check_user_conf(user)  # before Hydra reads any of its files (a file that would hang or crash it)
    backup = get_gh_backup()
    version.setbase("1.3")
    search_path = create_config_search_path(str(user or locations.PACKAGED_CONF))
    if user is not None:
        search_path.prepend(provider="command-line", path=f"file://{locations.PACKAGED_CONF}",
                            anchor=SearchPathQuery(provider="schema"))
    Hydra.create_main_hydra2(task_name="judgesweep", config_search_path=search_path)
    try:
        yield
    finally:
        restore_gh_from_backup(backup)


def run_experiment(overrides: Sequence[str] = (), config_dir: str | Path | None = None, *,
                   limiters: LimiterPool = PROCESS_LIMITERS) -> RunOutcome | None:
    """Run one experiment in this process, as ``judgesweep <overrides>`` would, and return its outcome.

    The config is composed with Hydra's compose API as the CLI composes it: from ``config_dir`` (else ``./conf``
    when it exists) overlaid on judgesweep's packaged conf/, or from the packaged conf/ alone; and
    written to ``<run dir>/.hydra/`` as the CLI does; the run directory is ``hydra.run.dir`` (``output_dir=DIR``
    or a ``hydra.run.dir`` override may set it). Sweeps (``-m``), Hydra's logging setup and its callbacks are the
    CLI's: here the caller's logging applies.

    The finished run is published to MLflow in this process (the CLI starts a helper process for it): its
    ``tracking_error`` says when the store could not be written (the files are complete).

    Returns:
        The RunOutcome (``failed`` with its ``reason`` when a gate or the summary failed), None for a dry run.

    Raises:
        The errors of bad input before any call (ConfigurationError, DatasetError, TemplateError,
        UnknownNameError, RubricError), hydra's errors for overrides that do not parse or name nothing, and
        RunAborted when too many calls fail.
    """
    prepare_process()
    config_guard.check_overrides(overrides)
    with _hydra_initialized(config_dir):  # checks the user's files first (config_guard.check_user_conf)
        full = compose(config_name="config", overrides=open_mappings.opened(overrides), return_hydra_config=True)
    HydraConfig.instance().set_config(full)  # resolves ${hydra:...} (the default store's runtime.cwd)
    run_dir = Path(str(full.hydra.run.dir))
    locations.check_writable(run_dir, locations.directory_key(full.get("output_dir"), str(full.hydra.run.dir),
                                                                "hydra.run.dir"))
    with read_write(full.hydra), open_dict(full.hydra):
        full.hydra.runtime.output_dir = str(run_dir.resolve())
    HydraConfig.instance().set_config(full)
    dcfg = copy.deepcopy(full)  # the job's config is the composed one without its hydra node, as in run_job
    with read_write(dcfg), open_dict(dcfg):
        del dcfg["hydra"]
    with owner.owned(run_dir.resolve()):  # before anything is written or sent: a second process refuses here
        if full.hydra.output_subdir is not None:  # what Hydra's run_job writes there: the sweep table reads it
            hydra_dir = run_dir / str(full.hydra.output_subdir)
            hydra_dir.mkdir(parents=True, exist_ok=True)
            OmegaConf.save(dcfg, hydra_dir / "config.yaml")
            OmegaConf.save(full.hydra, hydra_dir / "hydra.yaml")
            OmegaConf.save(OmegaConf.create(list(full.hydra.overrides.task)), hydra_dir / "overrides.yaml")
        return run_job(dcfg, full.hydra, limiters, publish_here=True)
