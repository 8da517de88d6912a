"""A job's RunContext from its composed config: the checks on its keys, the API keys it needs, its params,
tags and identity, and its rate limiters (paced for the sweep's parallel workers).

Split from :mod:`runner.run.experiment`, which calls :func:`check_keys` and :func:`context` from ``run_job``; the
two are the only modules besides the CLI that read a DictConfig or the environment.
"""

from __future__ import annotations

import contextlib
import dataclasses
import getpass
import hashlib
import importlib.resources
import json
import logging
import os
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.types import RunMode
from omegaconf import DictConfig, ListConfig, OmegaConf

from runner.core import identity, locations, redaction
from runner.core.config import JudgeConfig, RunConfig
from runner.core.errors import ConfigurationError
from runner.core.types import Secret
from runner.llm.limiter_pool import LimiterPool
from runner.llm.pacing import RateLimiter
from runner.llm.replicas import pacing_limits
from runner.run import naming

if TYPE_CHECKING:
    from runner.run.context import RunContext

log = logging.getLogger("judgesweep")

# The params a job adds beside its config's keys that a resumed run may change (runner.core.identity says it for the
# config's own keys, from the schema's field metadata).
OPERATIONAL_PARAMS = frozenset({"git_sha"})


def _operational(key: str) -> bool:
    """Whether a flattened param may change on resume: a config key under a field marked operational, the choice of
    an operational group (``choice.tracking``), or one of :data:`OPERATIONAL_PARAMS`."""
    return key in OPERATIONAL_PARAMS or identity.is_operational(RunConfig, key.removeprefix("choice."))


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


# MLflow's own credential variables (read by MLflow itself, never by judgesweep): redacted from logs like the keys.
MLFLOW_SECRET_VARIABLES = ("MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN")


def protect_secrets(keys: Mapping[str, Secret]) -> None:
    """Redact the job's API keys and MLflow's credentials from every log record of this process
    (:mod:`runner.core.redaction`), on every handler configured now: the root's and Hydra's file handler included."""
    redaction.protect([key.reveal() for key in keys.values()])
    redaction.protect(os.environ.get(name, "") for name in MLFLOW_SECRET_VARIABLES)
    redaction.install_everywhere()


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


def _unknown_keys(node: DictConfig | ListConfig, path: str = "") -> Iterator[tuple[str, str, type]]:
    """(dotted path, key, schema) of each key below ``node`` that the schema Hydra typed its node with has no field
    for. Composing types every node of a structured config (lists' and dicts' elements too) and refuses unknown keys
    in YAML, so these are the keys a ``+`` override appended. Reads the nodes, resolving nothing."""
    if isinstance(node, ListConfig):
        children = [(f"{path}[{n}]", node._get_node(n)) for n in range(len(node))]
    else:
        schema = OmegaConf.get_type(node)
        fields = {f.name for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else None
        children = []
        for key in node.keys():
            name = str(key)  # a structured config's keys are field names
            where = f"{path}.{name}" if path else name
            if fields is not None and name not in fields:
                yield where, name, schema  # type: ignore[misc]
            children.append((where, node._get_node(key)))
    for where, child in children:
        if isinstance(child, (DictConfig, ListConfig)) and not child._is_none() and not child._is_missing():
            yield from _unknown_keys(child, where)


def check_keys(dcfg: DictConfig) -> None:
    """Refuse keys appended with ``+`` that the schema does not know, and any instantiate key.

    Hydra lets ``+group.key=value`` add keys even to a structured config; judgesweep never calls
    ``hydra.utils.instantiate``, and a ``_target_`` anywhere in user config is refused outright. (The unknown keys
    are read from the composed nodes' own schemas: ~1 ms, where merging the config into ``RunConfig``'s was ~34.)
    """
    forbidden = _instantiate_keys(OmegaConf.to_container(dcfg, resolve=False))
    if forbidden:
        raise ForbiddenKey(f"instantiate keys are not allowed in judgesweep configs: {forbidden}")
    for where, key, schema in _unknown_keys(dcfg):
        raise ForbiddenKey(f"unknown config key {where!r}: Key {key!r} not in {schema.__name__!r}")


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


def _limiter(pool: LimiterPool, model: JudgeConfig, workers: int) -> RateLimiter:
    """The model's limiter from ``pool`` (replicas: their rpm/tpm summed), paced at 1/workers of its limits when
    parallel workers share them."""
    # one quota per deployment: the same judge name and model served at two addresses (two local servers, two
    # fake servers of one test process) neither share limits nor learn each other's 429s
    return pool.get(f"{model.name}|{model.model}|{model.api_base or ''}",
                    *(_share(limit, workers) for limit in pacing_limits(model)))


def _group_options(hc: DictConfig, group: str) -> list[str]:
    """The option names of a config group in every directory or package Hydra composes from."""
    found: list[str] = []
    for source in hc.runtime.config_sources:
        if source.schema == "file":
            found += [p.stem for p in (Path(source.path) / group).glob("*.yaml")]
        elif source.schema == "pkg" and source.provider != "hydra":
            with contextlib.suppress(ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
                folder = importlib.resources.files(source.path.replace("/", ".")) / group
                found += [e.name.removesuffix(".yaml") for e in folder.iterdir() if e.name.endswith(".yaml")]
    return found


def _user() -> str:
    """Who runs the job, as MLflow's own runs record it (``mlflow.user``); empty when the system cannot say."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name and no USER/LOGNAME variable (a bare container)
        return ""


def _run_name(hc: DictConfig, choices: dict[str, Any]) -> str:
    return naming.run_name(list(hc.overrides.task), choices, choices.get("experiment"), _operational,
                           lambda group: _group_options(hc, group.split("@", 1)[0]))


def context(dcfg: DictConfig, cfg: RunConfig, hc: DictConfig, pool: LimiterPool) -> RunContext:
    """The job's context from its config and its ``hydra`` node (the CLI's HydraConfig, or the composed one)."""
    from runner.run.context import RunContext

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
        "mlflow.source.name": "judgesweep",
        "mlflow.source.type": "LOCAL",
        "mlflow.user": _user(),
        # tracking.CONFIG_TAG, spelled out (importing runner.outputs.tracking here would load it with the CLI):
        # what identified a configuration before run names were made readable; a gate's baseline is found by it
        "judgesweep.config": naming.config_key(choices),
        "hydra.run_dir": hc.runtime.output_dir,
        # the jobs of one multirun share this tag: `judgesweep compare --sweep <it>` compares them
        "judgesweep.sweep": str(Path(hc.sweep.dir).resolve()) if hc.mode == RunMode.MULTIRUN else "",
        "hydra.overrides": ",".join(hc.overrides.task),
    }
    identity = {k: v for k, v in params.items() if not _operational(k)}
    identity_sha = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()
    return RunContext(
        cfg=cfg,
        run_dir=Path(hc.runtime.output_dir),
        project_root=root,
        api_keys=_api_keys(cfg),
        generator_limiter=_limiter(pool, cfg.generator, workers) if cfg.generator is not None else None,
        run_name=_run_name(hc, choices),
        params=params,
        tags=tags,
        resolved_config_yaml=OmegaConf.to_yaml(dcfg, resolve=True),
        identity=identity,
        identity_sha256=identity_sha,
        limiter=_limiter(pool, cfg.judge, workers),
        member_limiters={name: _limiter(pool, m, workers) for name, m in cfg.judge.members.items()},
        input_roots=locations.input_roots(root, _user_conf(hc)),
    )


def _user_conf(hc: DictConfig) -> Path | None:
    """The user's config directory this job was composed from: Hydra's primary source when it is not the packaged
    conf/ (None when it is, or when it is not a directory on disk)."""
    for source in hc.runtime.config_sources:
        if source.provider == "main" and source.schema == "file":
            path = Path(str(source.path))
            return None if locations.is_packaged_conf(path) else path
    return None
