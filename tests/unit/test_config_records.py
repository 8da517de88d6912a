"""Issue 32 Deliver 5: the config records are frozen once built (yet Hydra still composes into their schemas), and a
run's identity comes from field metadata on the schemas, not from a hand-kept list."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import field

import pytest
from omegaconf import OmegaConf
from omegaconf.errors import ReadonlyConfigError

from runner.core.config import GeneratorConfig, JudgeConfig, RunConfig
from runner.core.config_store import to_schema
from runner.core.identity import is_operational, operational_keys, schema_keys
from runner.core.records import OPERATIONAL, config_record
from runner.core.run_settings import TrackingConfig
from runner.run.job_context import _operational

# The hand-kept list (runner/run/job_context.py up to 3656644, plus "budget." which issue 34 added there) that the
# field metadata replaced, with its rule: an ensemble member's keys counted as the judge's; since then issue 44's
# judge.free_tier (what a call costs, not what it answers).
OLD_PREFIXES = ("resume", "output_dir", "dry_run", "progress", "concurrency", "max_error_rate", "shutdown_grace_s",
                "tracking.", "cache.", "choice.tracking", "judge.rpm", "judge.tpm", "judge.max_retries",
                "judge.retry_", "judge.max_retry_after_s", "judge.timeout_s", "judge.replicas", "judge.price_as",
                "judge.batch", "batch.", "budget.", "generator.rpm", "generator.tpm", "generator.max_retries",
                "generator.retry_", "generator.max_retry_after_s", "generator.timeout_s", "generator.concurrency",
                "git_sha", "on_bad_row", "gate.", "metrics.", "output.", "judge.free_tier", "generator.free_tier")


def _old_rule(key: str) -> bool:
    return re.sub(r"^judge\.members\.[^.]+\.", "judge.", key).startswith(OLD_PREFIXES)


def test_a_config_record_refuses_assignment_and_replace_makes_a_copy() -> None:
    judge = JudgeConfig(name="j", model="openai/m", members={"a": JudgeConfig(name="a", model="openai/a")})
    with pytest.raises(dataclasses.FrozenInstanceError, match="rpm"):
        judge.rpm = 10  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        judge.members["a"].temperature = 1.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del judge.name  # type: ignore[misc]
    faster = dataclasses.replace(judge, rpm=10)
    assert (faster.rpm, judge.rpm, faster.name) == (10, None, "j")
    assert faster == dataclasses.replace(judge, rpm=10) and faster != judge  # equality is the fields'


def test_omegaconf_builds_frozen_records_from_a_merged_config() -> None:
    tracking = to_schema(TrackingConfig, {"uri": "sqlite:///x.db"}, OmegaConf.from_dotlist(["enabled=false"]))
    assert (tracking.uri, tracking.enabled) == ("sqlite:///x.db", False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tracking.enabled = True  # type: ignore[misc]
    generator = to_schema(GeneratorConfig, {"name": "g", "model": "openai/g", "template": "t",
                                            "replicas": [{"api_base": "http://h/v1"}]})
    with pytest.raises(dataclasses.FrozenInstanceError):
        generator.replicas[0].rpm = 1  # type: ignore[misc]


@dataclasses.dataclass(frozen=True)
class _FrozenInner:
    x: int = 1


@dataclasses.dataclass(frozen=True)
class _FrozenOuter:
    inner: _FrozenInner = field(default_factory=_FrozenInner)


def test_why_not_dataclass_frozen_omegaconf_cannot_merge_into_it() -> None:
    """What runner/core/records.py works around: a frozen dataclass's schema is read-only to OmegaConf."""
    with pytest.raises(ReadonlyConfigError):
        OmegaConf.merge(OmegaConf.structured(_FrozenOuter), {"inner": {"x": 2}})


def test_the_derived_operational_keys_are_the_old_hand_kept_list() -> None:
    keys = set(schema_keys(RunConfig))
    derived = operational_keys(RunConfig)
    # a generator's members (no generator stage reads them) now follow a judge's members, whose pacing is operational
    generator_members = {key for key in derived if key.startswith("generator.members.")}
    assert derived - generator_members == {key for key in keys if _old_rule(key)}
    assert "judge.members.<name>.rpm" in derived and "judge.members.<name>.temperature" not in derived
    assert {"generator.rpm", "generator.concurrency"} <= derived
    assert not {"generator.batch", "generator.price_as", "generator.replicas"} & derived  # identity, as before
    assert len(derived) > 50 and len(keys - derived) > 100  # both sides are real


def test_the_params_a_job_records_split_as_before() -> None:
    params = ["git_sha", "choice.tracking", "choice.judge", "choice.judge.members.a", "judge.members.gpt.rpm",
              "judge.members.gpt.members.x.rpm", "dataset.variables.question", "judge.combine.name",
              "rubric.parser.params.labels", "tracking.uri", "progress_interval_s", "objective", "judge.batch",
              "judge.batch_threshold", "judge.model", "seed"]
    assert {key: _operational(key) for key in params} == {key: _old_rule(key) for key in params}


@config_record
class Inner:
    """A schema with one operational field and one left unmarked."""

    pace: int = field(default=1, metadata=OPERATIONAL)
    meaning: str = "x"


@config_record
class Outer:
    """A schema holding it twice (once as an operational group), and a field added without the marker."""

    inner: Inner = field(default_factory=Inner)
    tracked: Inner = field(default_factory=Inner, metadata=OPERATIONAL)
    added_later: int = 0


def test_a_field_without_the_marker_is_identity() -> None:
    assert set(schema_keys(Outer)) == {"inner.pace", "inner.meaning", "tracked.pace", "tracked.meaning",
                                       "added_later"}
    assert operational_keys(Outer) == {"inner.pace", "tracked.pace", "tracked.meaning"}
    assert not is_operational(Outer, "added_later") and not is_operational(Outer, "unknown.key")
