"""The valid range of every numeric knob, checked once on the typed config before anything runs.

The schema (:mod:`runner.core.config`) fixes each knob's type; this module its range, in one table of rules, so a
value that would fail late (``max_error_rate=-1``: an IndexError after 20 paid calls; ``judge.rpm=0``: a silent
stall) stops the job at start with the key, the value and the range in the message.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from runner.core.config import JudgeConfig, RunConfig
from runner.core.errors import ConfigurationError

__all__ = ["OutOfRange", "check_values"]


class OutOfRange(ConfigurationError):
    """A numeric setting outside its valid range."""


@dataclass(frozen=True)
class Rule:
    """A valid range: a test and how the message states it."""

    text: str
    test: Callable[[float], bool]


UNIT = Rule("must be in [0, 1]", lambda v: 0 <= v <= 1)
OPEN_UNIT = Rule("must be in (0, 1)", lambda v: 0 < v < 1)
POSITIVE = Rule("must be > 0", lambda v: v > 0)
POSITIVE_OR_NULL = Rule("must be > 0 or null", lambda v: v > 0)
NON_NEGATIVE = Rule("must be >= 0", lambda v: v >= 0)
AT_LEAST_ONE = Rule("must be >= 1", lambda v: v >= 1)

Check = tuple[str, Any, Rule]


def _model(model: JudgeConfig, path: str) -> Iterator[Check]:
    """A judge's or generator's transport and decoding knobs, its replicas' limits, its members and weights."""
    yield from ((f"{path}.{k}", getattr(model, k), POSITIVE_OR_NULL) for k in ("rpm", "tpm"))
    yield f"{path}.timeout_s", model.timeout_s, POSITIVE
    yield f"{path}.max_tokens", model.max_tokens, AT_LEAST_ONE
    yield from ((f"{path}.{k}", getattr(model, k), NON_NEGATIVE)
                for k in ("max_retries", "retry_base_s", "retry_max_s", "retry_rate_limited_s", "max_retry_after_s"))
    for n, replica in enumerate(model.replicas):
        yield from ((f"{path}.replicas[{n}].{k}", getattr(replica, k), POSITIVE_OR_NULL) for k in ("rpm", "tpm"))
    for name, member in model.members.items():
        yield from _model(member, f"{path}.members.{name}")
    # a weight of 0 mutes a member (all 0 is refused by runner.modes.ensemble_check, with the other ensemble rules)
    yield from ((f"{path}.weights.{name}", w, NON_NEGATIVE) for name, w in model.weights.items())
    combine = model.combine
    weights = combine.get("params", {}).get("weights") if isinstance(combine, dict) else None
    if isinstance(weights, dict):
        yield from ((f"{path}.combine.params.weights.{name}", w, NON_NEGATIVE) for name, w in weights.items())


def _checks(cfg: RunConfig) -> Iterator[Check]:
    yield "max_error_rate", cfg.max_error_rate, UNIT
    yield "max_unscored_rate", cfg.max_unscored_rate, UNIT
    yield "concurrency", cfg.concurrency, AT_LEAST_ONE
    yield "repeats", cfg.repeats, AT_LEAST_ONE
    yield "max_items", cfg.max_items, AT_LEAST_ONE
    yield "progress_interval_s", cfg.progress_interval_s, NON_NEGATIVE  # 0: no progress records
    yield "shutdown_grace_s", cfg.shutdown_grace_s, NON_NEGATIVE  # 0: stop at the first signal
    yield "tracking.timeout_s", cfg.tracking.timeout_s, NON_NEGATIVE
    yield "batch.poll_s", cfg.batch.poll_s, POSITIVE
    yield "judge.batch_threshold", cfg.judge.batch_threshold, NON_NEGATIVE
    yield "metrics.ci_level", cfg.metrics.ci_level, OPEN_UNIT
    yield "metrics.ci_resamples", cfg.metrics.ci_resamples, AT_LEAST_ONE
    yield "dataset.split_test_fraction", cfg.dataset.split_test_fraction, UNIT
    yield "gate.min_pass_rate", cfg.gate.min_pass_rate, UNIT
    yield "gate.max_drop", cfg.gate.max_drop, NON_NEGATIVE
    yield "rubric.consistency_threshold", cfg.rubric.consistency_threshold, NON_NEGATIVE
    for n, check in enumerate(cfg.rubric.checks):
        yield f"rubric.checks[{n}].max_rate", check.max_rate, UNIT
    yield from _model(cfg.judge, "judge")
    if cfg.generator is not None:
        yield from _model(cfg.generator, "generator")
        yield "generator.concurrency", cfg.generator.concurrency, AT_LEAST_ONE


def _valid(value: Any, rule: Rule) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) and rule.test(value)


def check_values(cfg: RunConfig) -> None:
    """Check every numeric knob against its range; None is valid where the schema allows it (no limit).

    Raises:
        OutOfRange: Naming every key out of range, its value and its range, one per line.
    """
    bad = [f"{key}={value!r}: {rule.text}" for key, value, rule in _checks(cfg)
           if value is not None and not _valid(value, rule)]
    if bad:
        raise OutOfRange("\n".join(bad))
