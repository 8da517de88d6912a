"""Unit tests for replicated judges: the Router's model list, weights and keys, the judge-level limits,
the Router's settings and failover filter, and key scrubbing. No sockets: nothing here sends a call."""

from __future__ import annotations

import asyncio
import collections
import gc
import os
import random

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map from the internet

import litellm  # noqa: E402

from runner.core.config import JudgeConfig, ReplicaConfig  # noqa: E402
from runner.core.errors import ConfigurationError  # noqa: E402
from runner.core.types import Secret  # noqa: E402
from runner.llm.client import JudgeClient, price  # noqa: E402
from runner.llm.failover import ReplicaRouter, build_router  # noqa: E402
from runner.llm.replicas import (  # noqa: E402
    judge_secrets,
    model_list,
    pacing_limits,  # noqa: E402
    replica_id,
    routing_weights,
)
from tests.builders import to_run_config  # noqa: E402

BASE_1, BASE_2, BASE_3 = "http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1", "http://127.0.0.1:8003/v1"
KEYS = {"JUDGE_KEY": Secret("sk-judge-0001"), "REPLICA_KEY": Secret("sk-replica-0002")}


def judge(*replicas: ReplicaConfig, **fields: object) -> JudgeConfig:
    """A local judge with the given replicas."""
    return JudgeConfig(name="local_replicas", model="openai/local-judge", replicas=list(replicas), **fields)


def params(cfg: JudgeConfig, keys: dict[str, Secret] | None = None) -> list[dict]:
    """The litellm_params of each deployment."""
    return [d["litellm_params"] for d in model_list(cfg, KEYS if keys is None else keys)]


# --- the config ---------------------------------------------------------------------------------------

@pytest.mark.usefixtures("hydra_conf")
def test_the_shipped_example_shares_two_local_replicas_by_rpm() -> None:
    cfg = to_run_config(["judge=local_replicas"]).judge
    assert cfg.api_base is None and cfg.model.startswith("openai/")
    assert [(p["api_base"], p["weight"], p["api_key"]) for p in params(cfg, {})] == [
        (BASE_1, 600, "no-key"), (BASE_2, 600, "no-key")]
    assert pacing_limits(cfg) == (1200, None)


@pytest.mark.usefixtures("hydra_conf")
def test_replicas_parse_from_the_command_line() -> None:
    override = f"judge.replicas=[{{api_base:{BASE_1},rpm:600}},{{api_base:{BASE_2},rpm:300,api_key_env:REPLICA_KEY}}]"
    cfg = to_run_config(["judge=local_openai", override]).judge
    assert cfg.replicas == [ReplicaConfig(api_base=BASE_1, rpm=600),
                            ReplicaConfig(api_base=BASE_2, rpm=300, api_key_env="REPLICA_KEY")]


# --- the model list -----------------------------------------------------------------------------------

def test_one_deployment_per_replica_in_the_judges_model_group() -> None:
    cfg = judge(ReplicaConfig(api_base=BASE_1, rpm=600, tpm=90_000), ReplicaConfig(api_base=BASE_2, rpm=300))
    deployments = model_list(cfg, {})
    assert [d["model_name"] for d in deployments] == ["local_replicas", "local_replicas"]
    assert [d["model_info"]["id"] for d in deployments] == [replica_id(0), replica_id(1)]
    assert deployments[0]["litellm_params"] == {"model": "openai/local-judge", "api_base": BASE_1, "weight": 600,
                                                "api_key": "no-key", "rpm": 600, "tpm": 90_000}
    assert deployments[1]["litellm_params"] == {"model": "openai/local-judge", "api_base": BASE_2, "weight": 300,
                                                "api_key": "no-key", "rpm": 300}


@pytest.mark.parametrize(("limits", "weights"), [
    ([(600, None), (300, None)], [600, 300]),  # rpm everywhere: rpm
    ([(600, 10_000), (None, 30_000)], [10_000, 30_000]),  # rpm not everywhere, tpm everywhere: tpm
    ([(600, None), (None, 30_000)], [1, 1]),  # neither everywhere: equal shares, never 0 for a replica
    ([(None, None), (None, None)], [1, 1]),
])
def test_weights_follow_the_limits_every_replica_sets(limits, weights) -> None:
    replicas = [ReplicaConfig(api_base=f"http://127.0.0.1:{8001 + n}/v1", rpm=rpm, tpm=tpm)
                for n, (rpm, tpm) in enumerate(limits)]
    assert routing_weights(replicas) == weights
    assert [p["weight"] for p in params(judge(*replicas))] == weights


def test_each_replica_sends_its_own_key_else_the_judges() -> None:
    cfg = judge(ReplicaConfig(api_base=BASE_1), ReplicaConfig(api_base=BASE_2, api_key_env="REPLICA_KEY"),
                api_key_env="JUDGE_KEY")
    assert [p["api_key"] for p in params(cfg)] == ["sk-judge-0001", "sk-replica-0002"]


def test_keyless_openai_replicas_send_no_key_and_other_providers_none() -> None:
    assert [p["api_key"] for p in params(judge(ReplicaConfig(api_base=BASE_1)), {})] == ["no-key"]
    hosted = JudgeConfig(name="h", model="anthropic/claude-3-haiku", replicas=[ReplicaConfig(api_base=BASE_1)])
    assert "api_key" not in params(hosted, {})[0]  # litellm then reads the provider's own variable


@pytest.mark.parametrize("replica", [ReplicaConfig(api_base=BASE_2, rpm=0), ReplicaConfig(api_base=BASE_2, tpm=-5),
                                     ReplicaConfig(api_base=BASE_1)])
def test_bad_replica_configs_fail_before_any_call(replica) -> None:
    with pytest.raises(ConfigurationError, match="replica"):
        model_list(judge(ReplicaConfig(api_base=BASE_1), replica), {})


def test_secrets_cover_the_judge_and_every_replica() -> None:
    cfg = judge(ReplicaConfig(api_base=BASE_1, api_key_env="REPLICA_KEY"), api_key_env="JUDGE_KEY")
    assert sorted(s.reveal() for s in judge_secrets(cfg, KEYS)) == ["sk-judge-0001", "sk-replica-0002"]


# --- the judge-level limiter --------------------------------------------------------------------------

def test_limiter_paces_at_the_sum_of_the_replicas() -> None:
    cfg = judge(ReplicaConfig(api_base=BASE_1, rpm=600, tpm=50_000), ReplicaConfig(api_base=BASE_2, rpm=300,
                                                                                   tpm=25_000))
    assert pacing_limits(cfg) == (900, 75_000)


def test_the_judges_own_limits_win_and_an_unlimited_replica_unlimits_the_sum() -> None:
    replicas = (ReplicaConfig(api_base=BASE_1, rpm=600, tpm=50_000), ReplicaConfig(api_base=BASE_2, rpm=300))
    assert pacing_limits(judge(*replicas)) == (900, None)  # replica 2 sets no tpm: no tpm we know of
    assert pacing_limits(judge(*replicas, rpm=100, tpm=9_000)) == (100, 9_000)
    assert pacing_limits(JudgeConfig(name="one", model="openai/x", rpm=60)) == (60, None)
    assert pacing_limits(JudgeConfig(name="one", model="openai/x")) == (None, None)


# --- the Router ---------------------------------------------------------------------------------------

def test_router_settings_keep_retries_ours_and_cooldowns_off() -> None:
    router = build_router(judge(ReplicaConfig(api_base=BASE_1, rpm=600), ReplicaConfig(api_base=BASE_2, rpm=300),
                                timeout_s=7.0), {})
    try:
        assert router.routing_strategy == "simple-shuffle"
        assert router.num_retries == 0 and router.disable_cooldowns is True
        assert router.enable_weighted_failover is True and router.max_fallbacks == 2
        assert router.timeout == 7.0
        assert router.bases == {replica_id(0): BASE_1, replica_id(1): BASE_2}
    finally:
        router.discard()


def test_a_router_leaves_an_unlisted_model_unpriced_in_this_process() -> None:
    """litellm's Router registers its deployments in the process-wide cost map; an unlisted model's calls (this
    judge's, and any later judge's of the same model) must stay unpriced (None), not $0.00."""
    listed = set(litellm.model_cost)
    router = build_router(judge(ReplicaConfig(api_base=BASE_1), ReplicaConfig(api_base=BASE_2)), {})
    try:
        assert set(litellm.model_cost) == listed
        assert price(judge().model, 100, 10) is None
    finally:
        router.discard()


def test_simple_shuffle_shares_calls_in_proportion_to_rpm() -> None:
    router = build_router(judge(ReplicaConfig(api_base=BASE_1, rpm=600), ReplicaConfig(api_base=BASE_2, rpm=200),
                                ReplicaConfig(api_base=BASE_3, rpm=200)), {})
    try:
        random.seed(0)  # litellm picks with the module-level generator
        picks = collections.Counter(router.get_available_deployment(model="local_replicas")["litellm_params"]
                                    ["api_base"] for _ in range(4000))
    finally:
        router.discard()
    assert picks[BASE_1] / 4000 == pytest.approx(0.6, abs=0.03)
    assert picks[BASE_2] / 4000 == pytest.approx(0.2, abs=0.03)
    assert picks[BASE_3] / 4000 == pytest.approx(0.2, abs=0.03)


def test_failover_hook_still_exists_in_litellm() -> None:
    # ReplicaRouter narrows this (private) hook; an upgrade that renames it must fail here, not silently.
    assert callable(getattr(litellm.Router, "_maybe_run_weighted_failover", None))


def _error(cls: type, status: int) -> Exception:
    exc = cls(message="boom", llm_provider="openai", model="local-judge")
    exc.status_code = status
    exc.failed_deployment_id = replica_id(1)
    return exc


@pytest.mark.parametrize(("cls", "status", "fails_over"), [
    (litellm.InternalServerError, 500, True),
    (litellm.RateLimitError, 429, True),
    (litellm.APIConnectionError, 500, True),
    (litellm.AuthenticationError, 401, False),
    (litellm.BadRequestError, 400, False),
    (litellm.NotFoundError, 404, False),
])
def test_router_fails_over_only_on_errors_worth_retrying(monkeypatch, cls, status, fails_over) -> None:
    seen = []

    async def parent(self, exception, **kwargs):
        seen.append(type(exception))
        return "answered by another replica"

    monkeypatch.setattr(litellm.Router, "_maybe_run_weighted_failover", parent)
    router = build_router(judge(ReplicaConfig(api_base=BASE_1), ReplicaConfig(api_base=BASE_2)), {})
    try:
        result = asyncio.run(router._maybe_run_weighted_failover(exception=_error(cls, status), args=(), kwargs={}))
    finally:
        router.discard()
    assert (result == "answered by another replica") is fails_over
    assert seen == ([cls] if fails_over else [])
    assert router.failures == ({BASE_2: 1} if fails_over else {})


# --- the client ---------------------------------------------------------------------------------------

def test_client_without_replicas_builds_no_router() -> None:
    plain = JudgeClient(JudgeConfig(name="one", model="openai/x", api_base=BASE_1), {})
    assert plain._router is None and plain.replica_failures == {}
    plain.close()  # nothing to unhook


def test_client_routes_through_a_router_and_unhooks_it(monkeypatch) -> None:
    cfg = judge(ReplicaConfig(api_base=BASE_1), ReplicaConfig(api_base=BASE_2))
    replicated = JudgeClient(cfg, {})
    assert isinstance(replicated._router, ReplicaRouter)
    router = replicated._router
    assert router.deployment_callback_on_success in litellm._async_success_callback
    replicated.close()
    assert router.deployment_callback_on_success not in litellm._async_success_callback
    collected = JudgeClient(cfg, {})
    router = collected._router
    del collected
    gc.collect()  # a client the stage drops unhooks its Router too
    assert router.deployment_callback_on_success not in litellm._async_success_callback


def test_errors_are_scrubbed_of_every_replica_key() -> None:
    cfg = judge(ReplicaConfig(api_base=BASE_1, api_key_env="REPLICA_KEY"), ReplicaConfig(api_base=BASE_2),
                api_key_env="JUDGE_KEY")
    replicated = JudgeClient(cfg, KEYS)
    try:
        response = replicated._error(RuntimeError("bad keys sk-replica-0002 and sk-judge-0001"), 0.0, 1, 0)
    finally:
        replicated.close()
    assert response.error == "bad keys *** and ***"


def test_one_judge_at_two_addresses_gets_two_limiters() -> None:
    # a quota is a deployment's: the same name and model at another api_base neither shares it nor learns its 429s
    from runner.core.config import JudgeConfig
    from runner.llm.limiter_pool import LimiterPool
    from runner.run.job_context import _limiter

    pool = LimiterPool()
    first, second = (JudgeConfig(name="local", model="openai/judge", api_base=f"http://127.0.0.1:{port}/v1", rpm=60)
                     for port in (8001, 8002))
    assert _limiter(pool, first, 1) is _limiter(pool, first, 1)
    assert _limiter(pool, first, 1) is not _limiter(pool, second, 1)
