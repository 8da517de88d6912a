"""Hydra glue: the schemas of :mod:`runner.core.config` registered in Hydra's ConfigStore, and a composed config
(or part of one) turned into a schema instance outside of a job.
"""

from __future__ import annotations

from typing import Any, TypeVar

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from runner.core.config import RunConfig
from runner.core.run_settings import TrackingConfig

_Schema = TypeVar("_Schema")


def register_configs() -> None:
    """Register the schemas with Hydra's ConfigStore (idempotent), and share the store instead of copying it.

    Hydra 1.3.8 deep-copies its config repository for every compose and every config-group listing, and
    with it the ConfigStore singleton that its StructuredConfigSource keeps a reference to, holding every
    schema and plugin config (the Ray launcher's alone is thousands of nodes): `judgesweep --help` lists
    the groups with 97 such copies (1.2 s of its 1.65 s), and every job composes twice. Hydra's main
    branch reads ``ConfigStore.instance()`` on each use instead (facebookresearch/hydra#2928), so a copied
    repository sees the one live store; until a release carries that, copying the store yields the store
    itself. Nothing copied it to protect it: ``ConfigStore.load`` already returns a copy of the node.
    """
    cs = ConfigStore.instance()
    cs.store(name="run_schema", node=RunConfig)
    ConfigStore.__deepcopy__ = _the_store_itself  # type: ignore[attr-defined]


def _the_store_itself(store: ConfigStore, memo: dict[int, object]) -> ConfigStore:
    return store


def multirun_tracking(config: DictConfig) -> TrackingConfig:
    """The tracking settings of a multirun, read by a Hydra callback in the launching process when the sweep
    ends. No job has set HydraConfig there, and the default store's ``${hydra:runtime.cwd}`` needs it: it is set
    from the callback's own config (the launching process's working directory is the runtime cwd)."""
    if not HydraConfig.initialized():
        HydraConfig.instance().set_config(config)
    return to_schema(TrackingConfig, config.tracking)


def to_schema(schema: type[_Schema], *configs: Any) -> _Schema:
    """``configs`` merged onto the defaults of ``schema`` (a config dataclass) and validated into an instance of it.

    Raises:
        omegaconf.errors.OmegaConfBaseException: A key the schema does not have, or a value of the wrong type.
    """
    instance = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), *configs))
    if not isinstance(instance, schema):  # cannot happen: a structured config converts to its dataclass
        raise TypeError(f"{schema.__name__} expected, OmegaConf made a {type(instance).__name__}")
    return instance
