"""A judge served by several replicas: the model list of the litellm Router that shares the calls.

Pure functions of the config and the keys; the Router itself is built in ``runner.llm.failover``, beside
the client, where litellm is imported. Each replica is one Router deployment of the model group ``judge.name``. Calls
are shared in proportion to the replicas' rpm (or tpm when only that is set everywhere), which litellm's
simple-shuffle strategy reads from each deployment's ``weight``; the judge's limiter paces them all at their
summed rpm/tpm (:func:`pacing_limits`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.core.config import JudgeConfig, ReplicaConfig
from runner.core.errors import ConfigurationError
from runner.core.types import Secret

NO_KEY = "no-key"  # OpenAI-compatible local servers usually take no key, but the OpenAI SDK insists on one


def replica_id(index: int) -> str:
    """The Router deployment id of the replica at ``index`` in ``judge.replicas`` (stable, holds no secret)."""
    return f"replica-{index}"


def replica_key(judge: JudgeConfig, replica: ReplicaConfig, api_keys: Mapping[str, Secret]) -> Secret | None:
    """The replica's key: from its own ``api_key_env``, else from the judge's; None when neither names one."""
    name = replica.api_key_env or judge.api_key_env
    return api_keys.get(name) if name else None


def judge_secrets(judge: JudgeConfig, api_keys: Mapping[str, Secret]) -> tuple[Secret, ...]:
    """Every key a call of this judge may send (the judge's and each replica's): what errors are scrubbed of."""
    names = {name for name in (judge.api_key_env, *(r.api_key_env for r in judge.replicas)) if name is not None}
    return tuple(api_keys[name] for name in sorted(names) if name in api_keys and api_keys[name].reveal())


def routing_weights(replicas: list[ReplicaConfig]) -> list[int]:
    """Each replica's share of the calls: its rpm when every replica sets one, else its tpm when every one
    does, else equal shares (a replica without a limit has no capacity to weigh against the others)."""
    for limit in ("rpm", "tpm"):
        values = [getattr(r, limit) for r in replicas]
        if all(v is not None for v in values):
            return values
    return [1] * len(replicas)


def pacing_limits(judge: JudgeConfig) -> tuple[int | None, int | None]:
    """(rpm, tpm) the judge's client-side limiter paces at: the judge's own when set, else the sum over its
    replicas when every replica sets that limit, else None (no limit)."""

    def summed(values: list[int | None]) -> int | None:
        known = [v for v in values if v is not None]
        return sum(known) if values and len(known) == len(values) else None

    rpm = judge.rpm if judge.rpm is not None else summed([r.rpm for r in judge.replicas])
    tpm = judge.tpm if judge.tpm is not None else summed([r.tpm for r in judge.replicas])
    return rpm, tpm


def _check(judge: JudgeConfig) -> None:
    for n, replica in enumerate(judge.replicas):
        for limit in ("rpm", "tpm"):
            value = getattr(replica, limit)
            if value is not None and value <= 0:
                raise ConfigurationError(f"judge {judge.name}: replicas[{n}].{limit} must be positive, got {value}")
    bases = [r.api_base for r in judge.replicas]
    if len(set(bases)) != len(bases):
        raise ConfigurationError(f"judge {judge.name}: two replicas share an api_base: {bases}")


def model_list(judge: JudgeConfig, api_keys: Mapping[str, Secret]) -> list[dict[str, Any]]:
    """The Router's model list: one deployment per replica, all in the model group ``judge.name``.

    Each deployment carries the judge's model string, the replica's api_base and key (see
    :func:`replica_key`; ``no-key`` for an ``openai/`` server without one), its rpm/tpm and its routing
    weight. The list holds revealed keys: hand it to the Router and nowhere else.

    Raises:
        ConfigurationError: A replica's rpm or tpm is not positive, or two replicas share an api_base.
    """
    _check(judge)
    deployments = []
    for n, (replica, weight) in enumerate(zip(judge.replicas, routing_weights(judge.replicas), strict=True)):
        params: dict[str, Any] = {"model": judge.model, "api_base": replica.api_base, "weight": weight}
        key = replica_key(judge, replica, api_keys)
        if key is not None:
            params["api_key"] = key.reveal()
        elif judge.model.startswith("openai/"):
            params["api_key"] = NO_KEY
        params.update({limit: getattr(replica, limit) for limit in ("rpm", "tpm") if getattr(replica, limit)})
        deployments.append({"model_name": judge.name, "litellm_params": params, "model_info": {"id": replica_id(n)}})
    return deployments
