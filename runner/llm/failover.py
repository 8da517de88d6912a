"""Which provider errors are worth another try, and the Router a judge with ``replicas`` sends its calls through.

Errors are classified by exception type (litellm's exceptions subclass openai's), never by message text.

A judge with ``replicas`` sends its calls through a litellm Router (one per client, model list from
:mod:`runner.llm.replicas`). ``simple-shuffle`` draws a replica weighted by its rpm (or tpm), with no per-call
usage bookkeeping; the judge's limiter paces the group at the replicas' summed rpm/tpm
(:func:`runner.llm.replicas.pacing_limits`). Retries stay the client's (Router ``num_retries=0``). An error worth
retrying (connection, timeout, 429, 5xx) is failed over at once to a replica not yet tried in that attempt;
auth and bad-request errors are not, so a replica with a wrong key shows up as failed calls instead of hiding
behind the others. Cooldowns are off: they would turn the provider's error into the Router's own "no
deployments available" (not an APIError).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Mapping
from typing import Any

import litellm
import openai

from runner.core.config import JudgeConfig
from runner.core.types import Secret
from runner.llm import replicas
from runner.llm.responses import RawBody

log = logging.getLogger(__name__)

# what litellm's error was raised from when the 2xx body itself could not be read (not UTF-8, not JSON, nested deeper
# than the parser's recursion): the provider answered, so the answer was paid for
UNDECODABLE = (UnicodeDecodeError, RecursionError, json.JSONDecodeError)
RETRYABLE = (litellm.RateLimitError, litellm.Timeout, litellm.APIConnectionError, litellm.InternalServerError,
             litellm.ServiceUnavailableError, litellm.BadGatewayError)


def retryable(exc: openai.APIError) -> bool:
    if isinstance(exc, RETRYABLE):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(exc, litellm.APIError) and isinstance(status, int) and status >= 500


def undecodable_body(exc: BaseException) -> BaseException | None:
    """The decoding error a provider's error was raised from (see :data:`UNDECODABLE`), None when there is none."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, UNDECODABLE):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _answered(failover_kwargs: Mapping[str, Any]) -> bool:
    """Whether the call the Router would fail over got a 2xx body (its RawBody, our logger_fn, holds one)."""
    for name in ("kwargs", "input_kwargs"):
        call = failover_kwargs.get(name)
        body = call.get("logger_fn") if isinstance(call, Mapping) else None
        if isinstance(body, RawBody) and body.text is not None:
            return True
    return False


class ReplicaRouter(litellm.Router):
    """litellm's Router over the replicas of one judge, failing over only on errors worth retrying.

    It narrows litellm 1.100's private failover hook (``_maybe_run_weighted_failover``); a unit test fails
    if an upgrade renames it.

    Args:
        judge_name: The judge (its model group), for log lines.
        bases: Deployment id -> api_base, to name a failed replica without its key.
        **kwargs: litellm.Router's arguments.
    """

    def __init__(self, judge_name: str, bases: Mapping[str, str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.judge_name = judge_name
        self.bases = dict(bases)
        self.failures: Counter[str] = Counter()  # api_base -> errors worth retrying it answered with

    async def _maybe_run_weighted_failover(self, exception: Exception, *args: Any, **kwargs: Any) -> Any | None:
        # litellm fails over on any error; an auth or bad-request error is the caller's to see, not to hide. Nor is
        # a 2xx whose body litellm refused (no choices): that replica answered and was paid.
        if (not (isinstance(exception, openai.APIError) and retryable(exception)) or _answered(kwargs)
                or undecodable_body(exception) is not None):
            return None
        base = self.bases.get(getattr(exception, "failed_deployment_id", None) or "", "?")
        self.failures[base] += 1
        # the first failure of a replica is news; a replica that is down would otherwise log every call it draws
        log.log(logging.WARNING if self.failures[base] == 1 else logging.DEBUG,
                "%s: replica %s failed (%s); failing over to a replica not tried yet, if any", self.judge_name, base,
                type(exception).__name__)
        return await super()._maybe_run_weighted_failover(exception, *args, **kwargs)


def build_router(judge: JudgeConfig, api_keys: Mapping[str, Secret]) -> ReplicaRouter:
    """A Router over ``judge.replicas`` (see the module docstring for the choices it makes).

    Raises:
        ConfigurationError: A replica's rpm/tpm is not positive, or two replicas share an api_base.
    """
    deployments = replicas.model_list(judge, api_keys)
    listed = set(litellm.model_cost)
    router = ReplicaRouter(
        judge.name, {d["model_info"]["id"]: d["litellm_params"]["api_base"] for d in deployments},
        model_list=deployments, routing_strategy="simple-shuffle", num_retries=0, timeout=judge.timeout_s,
        disable_cooldowns=True, enable_weighted_failover=True, max_fallbacks=len(deployments))
    forget_unpriced(listed)
    return router


def forget_unpriced(listed: set[str]) -> None:
    """Drop the entries litellm's Router added to its process-wide cost map (``litellm.model_cost``) that hold no
    price: the Router registers each deployment's model and id there, and litellm then prices an unlisted model's
    calls at $0.00 rather than unknown, in this process, for every later judge of that model too (a replicated
    job of a sweep made the next job's unpriced calls look free, and ``budget.max_usd`` with them)."""
    for key in set(litellm.model_cost) - listed:
        entry = litellm.model_cost.get(key)
        if not isinstance(entry, dict) or not any("cost" in name and value for name, value in entry.items()):
            litellm.model_cost.pop(key, None)
