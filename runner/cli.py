"""The Hydra entry point (``judgesweep`` / ``python -m runner``).

The only module that reads a DictConfig or the environment: it validates the composed config into
typed objects once, reads the judge's API key from the variable the config names, and hands
everything down as frozen records.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import json
import logging
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError

# Only what composing the config and classifying errors needs is imported here: `judgesweep --help` and
# `--cfg job` never import litellm, MLflow or the statistics stack. The modules that run a job (pipeline,
# client, and through them litellm) are imported by _prepare_run, those that end a sweep by SweepSummary.
from runner import store, sweep
from runner.config import JudgeConfig, RunConfig, multirun_tracking, register_configs
from runner.errors import ConfigurationError, DatasetError
from runner.judge import RunAborted
from runner.pacing import LimiterPool, RateLimiter
from runner.prompts import TemplateError
from runner.registry import UnknownNameError
from runner.scoring import RubricError
from runner.types import Secret

if TYPE_CHECKING:
    from runner.context import RunContext

log = logging.getLogger("judgesweep")

CONFIG_DIR = str(Path(__file__).resolve().parent.parent / "conf")
# A bad parameter from config is a ParamsError (a ConfigurationError); any other TypeError is a bug and keeps
# its traceback.
EXPECTED_ERRORS = (ConfigurationError, DatasetError, TemplateError, UnknownNameError, RubricError, RunAborted)

# Process-wide state lives here, the one module allowed it. Jobs of this process that failed (bad
# input, too many failed calls): a multirun goes on after a failed job and the process exits non-zero
# at the end. Rate limiters: every job and repeat of a judge in this process shares one.
_failed_jobs: list[str] = []
_limiters = LimiterPool()

# Settings that do not change what is asked or how answers are read; a resumed run may change them.
OPERATIONAL_PREFIXES = ("resume", "dry_run", "progress", "concurrency", "max_error_rate", "tracking.", "cache.",
                        "choice.tracking", "judge.rpm", "judge.tpm", "judge.max_retries", "judge.retry_",
                        "judge.timeout_s", "judge.replicas", "judge.price_as", "generator.rpm", "generator.tpm",
                        "generator.max_retries", "generator.retry_", "generator.timeout_s", "generator.concurrency",
                        "git_sha", "on_bad_row", "gate.", "metrics.")


def _operational(key: str) -> bool:
    """Whether a flattened config key may change on resume; an ensemble member's keys count as a judge's."""
    return re.sub(r"^judge\.members\.[^.]+\.", "judge.", key).startswith(OPERATIONAL_PREFIXES)


class MissingApiKey(ConfigurationError):
    """The chosen judge names an API-key variable that is not set."""


def _key_variables(model: JudgeConfig | None, path: str) -> list[tuple[str, str]]:
    """(config path, variable name) of every API-key variable a judge, its replicas and members name."""
    if model is None:
        return []
    found = [(f"{path}.api_key_env", model.api_key_env)] if model.api_key_env else []
    found += [(f"{path}.replicas[{n}].api_key_env", r.api_key_env) for n, r in enumerate(model.replicas)
              if r.api_key_env]
    for name, member in model.members.items():
        found += _key_variables(member, f"{path}.members.{name}")
    return found


def _api_keys(cfg: RunConfig) -> dict[str, Secret]:
    """The keys of the judge(s) and generator, read from the variables their configs name (variable name ->
    key); a missing one fails before any call, naming the config path."""
    if cfg.dry_run:  # a dry run calls nothing, so it needs no key
        return {}
    keys: dict[str, Secret] = {}
    for path, name in _key_variables(cfg.judge, "judge") + _key_variables(cfg.generator, "generator"):
        value = os.environ.get(name, "")
        if not value:
            role = path.split(".", 1)[0]
            raise MissingApiKey(f"{path}={name}: environment variable {name} is not set; set it or choose "
                                f"another {role}")
        keys[name] = Secret(value)
    return keys


INSTANTIATE_KEYS = frozenset({"_target_", "_partial_", "_args_", "_recursive_", "_convert_"})


class ForbiddenKey(ConfigurationError):
    """The config holds a key the schema does not know, or a Hydra instantiate key."""


def _instantiate_keys(node: Any, path: str = "") -> list[str]:
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            where = f"{path}.{key}" if path else str(key)
            if key in INSTANTIATE_KEYS:
                found.append(where)
            found += _instantiate_keys(value, where)
    return found


def _check_keys(dcfg: DictConfig) -> None:
    """Refuse keys appended with ``+`` that the schema does not know, and any instantiate key.

    Hydra lets ``+group.key=value`` add keys even to a structured config; judgesweep never calls
    ``hydra.utils.instantiate``, and a ``_target_`` anywhere in user config is refused outright.
    """
    container = OmegaConf.to_container(dcfg, resolve=False)
    forbidden = _instantiate_keys(container)
    if forbidden:
        raise ForbiddenKey(f"instantiate keys are not allowed in judgesweep configs: {forbidden}")
    try:
        OmegaConf.merge(OmegaConf.structured(RunConfig), container)
    except ConfigKeyError as exc:
        raise ForbiddenKey(f"unknown config key {exc.full_key!r}: {exc.msg}") from None


def _git(root: Path, *args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: node}


def _parallel_workers(hc: Any) -> int:
    """How many processes of this sweep run jobs at once (joblib's ``n_jobs``; Ray's cluster CPUs over each
    job's ``num_cpus``; 1 otherwise): each has its own limiters, so each gets that share of a judge's rpm/tpm.

    For Ray the CPUs are those of the cluster this job runs on, read from Ray in the worker (a local cluster:
    ``ray.init.num_cpus``; an existing one, which refuses ``num_cpus`` in ``ray.init``: all its nodes' CPUs
    when the job starts, so an autoscaling cluster that grows later is over its limits until the next sweep).
    Outside a connected worker: ``ray.init.num_cpus``, else this machine's CPUs.
    """
    target = str(hc.launcher.get("_target_", "")).lower() if hc.mode == RunMode.MULTIRUN else ""
    if "joblib" in target:
        n_jobs = int(hc.launcher.n_jobs)
        return n_jobs if n_jobs > 0 else max(1, (os.cpu_count() or 1) + 1 + n_jobs)  # joblib: -1 = every CPU
    if "ray" in target:
        import ray  # the `ray` extra: imported only by the jobs of a Ray launcher, which run in a Ray worker

        cpus = ray.cluster_resources().get("CPU") if ray.is_initialized() else None
        cpus = cpus or hc.launcher.ray.init.get("num_cpus") or os.cpu_count() or 1
        per_job = hc.launcher.ray.remote.get("num_cpus") or 1
        return max(1, int(cpus // per_job))
    return 1


def _share(limit: int | None, workers: int) -> int | None:
    return None if limit is None else max(1, limit // workers)


def _limiter(model: JudgeConfig, workers: int) -> RateLimiter:
    """The model's limiter, shared by every job of this process (replicas: their rpm/tpm summed), paced at
    1/workers of its limits when parallel workers share them."""
    from runner import client

    return _limiters.get(f"{model.name}|{model.model}",
                         *(_share(limit, workers) for limit in client.pacing_limits(model)))


def _context(dcfg: DictConfig, cfg: RunConfig) -> RunContext:
    from runner.context import RunContext

    hc = HydraConfig.get()
    root = Path(hc.runtime.cwd)
    workers = _parallel_workers(hc)
    if workers > 1:
        log.info("%d parallel workers: this job paces each model at 1/%d of its rpm/tpm", workers, workers)
    choices = {k: v for k, v in hc.runtime.choices.items() if not k.startswith("hydra") and v is not None}
    params = _flatten(OmegaConf.to_container(dcfg, resolve=True, enum_to_str=True))
    # a group chosen under another package (an ensemble's members: judge@judge.members.x) -> choice.judge.members.x
    params.update({f"choice.{k.split('@', 1)[-1] if '@' in k else k}": v for k, v in choices.items()})
    sha = _git(root, "rev-parse", "HEAD")
    params["git_sha"] = sha
    tags = {
        "git.commit": sha,
        "git.branch": _git(root, "rev-parse", "--abbrev-ref", "HEAD"),
        "git.dirty": str(bool(_git(root, "status", "--porcelain"))).lower(),
        "mlflow.source.git.commit": sha,
        "hydra.run_dir": hc.runtime.output_dir,
        # the jobs of one multirun share this tag: `judgesweep-compare --sweep <it>` compares them
        "judgesweep.sweep": str(Path(hc.sweep.dir).resolve()) if hc.mode == RunMode.MULTIRUN else "",
        "hydra.overrides": ",".join(hc.overrides.task),
    }
    name = ",".join(f"{k}={choices[k]}" for k in ("generator", "judge", "prompt", "rubric", "dataset") if k in choices)
    identity = {k: v for k, v in params.items() if not _operational(k)}
    identity_sha = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()
    return RunContext(
        cfg=cfg,
        run_dir=Path(hc.runtime.output_dir),
        project_root=root,
        api_keys=_api_keys(cfg),
        generator_limiter=_limiter(cfg.generator, workers) if cfg.generator is not None else None,
        run_name=name,
        params=params,
        tags=tags,
        resolved_config_yaml=OmegaConf.to_yaml(dcfg, resolve=True),
        identity=identity,
        identity_sha256=identity_sha,
        limiter=_limiter(cfg.judge, workers),
        member_limiters={name: _limiter(m, workers) for name, m in cfg.judge.members.items()},
    )


@functools.cache
def _prepare_process() -> None:
    """Process-wide settings, once per process: the launching process and each launcher worker (joblib's
    loky processes import this module to run ``_job`` but never run ``main()``)."""
    register_configs()
    # Ray (hydra/launcher=ray*) reports usage to the internet unless told not to; no run leaves the machine.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not OmegaConf.has_resolver("resume_or"):
        # hydra.run.dir / hydra.sweep.dir: the directory being resumed, else a new timestamped one.
        OmegaConf.register_new_resolver("resume_or", lambda resume, fresh: resume or fresh)


@functools.cache
def _prepare_run() -> None:
    """Once per process, before its first job runs: import the run's modules and configure litellm."""
    from runner import client, pipeline  # noqa: F401 - litellm and everything a job needs, imported once

    client.configure()
    # Whatever exists now (litellm, openai, httpx, hydra, the config: several hundred thousand objects) lives
    # as long as the process. Moved to the permanent generation, the cyclic GC stops walking it on every full
    # collection during the judge stage: issue 12 measured 18% less CPU per judge call.
    gc.freeze()


def _job(dcfg: DictConfig) -> float | None:
    """One job; returns its ``objective`` metric for a sweeper, or None when the job failed or lacks the metric.

    None, not NaN: hydra-optuna-sweeper records a None as a failed trial and the study goes on, while a NaN
    makes it tell Optuna a failed trial with a value, which raises and ends the whole study.
    """
    _prepare_process()
    job = HydraConfig.get().runtime.output_dir
    failure = Path(job) / sweep.FAILURE_NAME
    failure.unlink(missing_ok=True)  # a resumed job that failed before
    try:
        _check_keys(dcfg)
        cfg: RunConfig = OmegaConf.to_object(dcfg)  # type: ignore[assignment]
        _prepare_run()
        from runner import pipeline

        outcome = pipeline.run(_context(dcfg, cfg))
    except EXPECTED_ERRORS as exc:
        log.error("judgesweep: %s: %s", type(exc).__name__, exc)
        _fail(job, f"{type(exc).__name__}: {exc}")
        return None
    if outcome is not None and outcome.failed:
        log.error("judgesweep: run failed: %s", outcome.reason)
        _fail(job, outcome.reason)
        return None
    return _objective(Path(job), cfg.objective)


def _objective(job: Path, name: str) -> float | None:
    metrics = job / store.METRICS_NAME
    value = json.loads(metrics.read_text()).get(name) if metrics.is_file() else None
    return None if value is None or math.isnan(value) else float(value)


def _fail(job: str, reason: str) -> None:
    """Record a failed job in this process and in its directory: a launcher worker's list never reaches
    ``main()``, the file does (``SweepSummary`` reads it in the launching process)."""
    _failed_jobs.append(job)
    sweep.write_failure(Path(job), reason)


class SweepSummary(Callback):
    """Hydra callback (conf/hydra/default.yaml): when a multirun ends, write, print and log its table.

    The jobs of a sweep are grouped in MLflow by their ``judgesweep.sweep`` tag rather than under a parent
    run: jobs may run in other processes or machines (joblib, Ray launchers), and a tag needs nothing
    shared between them, while the MLflow UI filters on it. The table itself is logged as a run with the
    same tag and ``judgesweep.kind=sweep``.
    """

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:  # noqa: D102
        from runner import html_report, report, tracking

        sweep_dir = Path(config.hydra.sweep.dir)
        if not sweep_dir.is_dir():
            return
        rows = sweep.collect(sweep_dir)
        # jobs that ran in other processes (joblib workers) marked their failure in their directory
        _failed_jobs.extend(str(path.parent) for path in sweep_dir.glob(f"*/{sweep.FAILURE_NAME}"))
        pages = html_report.write_sweep_report(sweep_dir, rows)  # frontier.csv/png (with labels), report.html
        files = [*sweep.write(sweep_dir, rows), *pages]
        sweep.render(rows)
        if pages:
            report.print_line(f"report: {pages[-1]}")
        try:
            tracking_cfg = multirun_tracking(config)
        except Exception as exc:  # noqa: BLE001 - the table is written; tracking it is a bonus
            log.warning("sweep table not logged to MLflow: %s", exc)
            return
        if tracking_cfg.enabled:
            run_id = tracking.log_sweep(tracking_cfg, sweep_dir, files, sweep.summary_metrics(rows))
            log.info("sweep table %s logged to MLflow run %s", files[0], run_id)


def main() -> None:
    """Console-script entry point: compose the config, run the job(s), exit non-zero on failure."""
    _prepare_process()
    hydra.main(config_path=CONFIG_DIR, config_name="config", version_base="1.3")(_job)()
    if _failed_jobs:
        sys.exit(1)


if __name__ == "__main__":
    main()
