"""Unit tests for runner.run.gates: which gates apply, their boundaries, and the line that says why."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from runner.core.run_settings import GateConfig
from runner.run.gates import Baseline, GateResult, check_results, evaluate


def summary(passed: int, failed: int) -> SimpleNamespace:
    """The pass counts of a report's scored section (runner.modes.sections.ScoreSection's)."""
    total = passed + failed
    return SimpleNamespace(total=total, passed=passed, failed=failed, pass_rate=passed / total if total else None,
                           pass_rate_scored=passed / total if total else None)


def gate(**overrides: Any) -> GateConfig:
    """Every gate off unless named (GateConfig's own default enables min_pass_rate)."""
    fields: dict[str, Any] = {"min_pass_rate": None, "min_mean_score": None}
    fields.update(overrides)
    return GateConfig(**fields)


def baseline(value: float) -> Baseline:
    return Baseline(ref="latest on main", run_id="run123", value=value)


# --- min_pass_rate -----------------------------------------------------------------------------------


def test_pass_rate_gate_only_with_a_threshold() -> None:
    assert evaluate(gate(min_pass_rate=0.8), None, {}, baseline=None) == []
    [result] = evaluate(gate(min_pass_rate=0.8), summary(0, 5), {}, baseline=None)
    assert result.name == "gate.min_pass_rate"
    assert result.passed is False


def test_default_gate_config_checks_the_pass_rate() -> None:
    [result] = evaluate(GateConfig(), summary(7, 3), {"score/mean": 1.0}, baseline=None)
    assert result.name == "gate.min_pass_rate"
    assert (result.passed, result.threshold) == (False, 0.8)


@pytest.mark.parametrize(("passed", "failed", "ok"), [(4, 1, True), (8, 2, True), (5, 0, True), (3, 1, False),
                                                      (79, 21, False)])
def test_pass_rate_exactly_at_the_minimum_passes(passed: int, failed: int, ok: bool) -> None:
    [result] = evaluate(gate(min_pass_rate=0.8), summary(passed, failed), {}, baseline=None)
    assert result.passed is ok
    assert result.value == pytest.approx(passed / (passed + failed))
    assert result.threshold == 0.8


def test_pass_rate_message_names_the_gate_and_counts() -> None:
    [ok] = evaluate(gate(min_pass_rate=0.8), summary(4, 1), {}, baseline=None)
    assert ok.message == ("gate.min_pass_rate: pass rate 80.0% >= 80.0% (4 of 5 items passed, 0 unscored counted as "
                          "not passed)")
    [bad] = evaluate(gate(min_pass_rate=0.8), summary(3, 2), {}, baseline=None)
    assert bad.message == ("gate.min_pass_rate: pass rate 60.0% < 80.0% (3 of 5 items passed, 0 unscored counted as "
                           "not passed)")


def test_pass_rate_with_no_scored_item_fails_clearly() -> None:
    [result] = evaluate(gate(min_pass_rate=0.0), summary(0, 0), {}, baseline=None)
    assert result == GateResult("gate.min_pass_rate", False, None, 0.0, "gate.min_pass_rate: no item was scored")


# --- min_mean_score ------------------------------------------------------------------------------


@pytest.mark.parametrize(("mean", "ok"), [(3.5, True), (4.2, True), (3.499, False)])
def test_mean_score_gate(mean: float, ok: bool) -> None:
    [result] = evaluate(gate(min_mean_score=3.5), None, {"score/mean": mean}, baseline=None)
    assert result.name == "gate.min_mean_score"
    assert result.passed is ok
    assert (result.value, result.threshold) == (mean, 3.5)
    assert result.message.startswith(f"gate.min_mean_score: mean score {mean:.3f} {'>=' if ok else '<'} 3.5")


def test_mean_score_gate_without_a_score_fails_clearly() -> None:
    [result] = evaluate(gate(min_mean_score=3.5), None, {"pass/rate": 1.0}, baseline=None)
    assert result.passed is False
    assert result.value is None
    assert result.message.startswith("gate.min_mean_score: ")
    assert "score/mean" in result.message and "no item was scored" in result.message


# --- baseline ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "ok"), [(3.75, True), (4.5, True), (3.5, False)])
def test_baseline_drop_up_to_max_drop_passes(value: float, ok: bool) -> None:
    # 4.0 - 3.75 = 0.25 exactly (binary fractions), so the boundary itself is tested, not rounding
    [result] = evaluate(gate(max_drop=0.25), None, {"score/mean": value}, baseline=baseline(4.0))
    assert result.name == "gate.max_drop"
    assert result.passed is ok
    assert result.value == 4.0 - value
    assert result.threshold == 0.25


def test_baseline_message_names_the_gate_run_and_drop() -> None:
    [result] = evaluate(gate(max_drop=0.25), None, {"score/mean": 3.5}, baseline=baseline(4.0))
    assert result.message == ("gate.max_drop: score/mean 3.5000 vs 4.0000 in baseline run run123 (latest on main): "
                              "drop +0.5000 > 0.25")


def test_baseline_max_drop_none_means_no_drop_allowed() -> None:
    [same] = evaluate(gate(), None, {"score/mean": 4.0}, baseline=baseline(4.0))
    [lower] = evaluate(gate(), None, {"score/mean": 3.999}, baseline=baseline(4.0))
    [higher] = evaluate(gate(), None, {"score/mean": 4.5}, baseline=baseline(4.0))
    assert (same.passed, lower.passed, higher.passed) == (True, False, True)
    assert same.threshold == 0.0


def test_baseline_gate_uses_the_configured_metric() -> None:
    cfg = gate(metric="pass/rate", max_drop=0.5)
    [result] = evaluate(cfg, None, {"score/mean": 0.0, "pass/rate": 0.75}, baseline=baseline(1.0))
    assert result.passed is True
    assert result.value == 0.25


def test_baseline_gate_fails_when_the_metric_is_missing() -> None:
    [result] = evaluate(gate(metric="pass/rate", max_drop=1.0), None, {"score/mean": 4.0},
                        baseline=baseline(0.5))
    assert result.passed is False
    assert result.value is None
    assert result.message == "gate.max_drop: this run has no metric pass/rate"


def test_no_baseline_means_no_baseline_gate() -> None:
    assert evaluate(gate(max_drop=0.1), None, {"score/mean": 0.0}, baseline=None) == []


def test_baseline_drop_equal_to_decimal_max_drop_passes() -> None:
    [result] = evaluate(gate(max_drop=0.1), None, {"score/mean": 0.7}, baseline=baseline(0.8))
    assert result.passed is True


def test_every_active_gate_in_config_order() -> None:
    cfg = gate(min_pass_rate=0.5, min_mean_score=2.0, max_drop=0.5)
    results = evaluate(cfg, summary(1, 1), {"score/mean": 3.0}, baseline=baseline(3.0))
    assert [r.name for r in results] == ["gate.min_pass_rate", "gate.min_mean_score", "gate.max_drop"]
    assert all(r.passed for r in results)
    assert all(r.message.startswith(r.name + ": ") for r in results)
    assert results[0].to_json() == {"name": "gate.min_pass_rate", "passed": True, "value": 0.5, "threshold": 0.5,
                                    "message": results[0].message}


# --- check_results -------------------------------------------------------------------------------


CHECKS = {
    "ai_phrases": SimpleNamespace(violation_rate=0.05, max_rate=0.05),
    "clean": SimpleNamespace(violation_rate=0.0, max_rate=0.05),
    "loose": SimpleNamespace(violation_rate=0.5, max_rate=None),
}


def test_only_enforced_checks_become_gates() -> None:
    assert check_results(CHECKS, frozenset()) == []
    assert [r.name for r in check_results(CHECKS, frozenset({"clean"}))] == ["checks.clean"]


def test_check_at_max_rate_fails_because_the_target_is_below() -> None:
    [result] = check_results(CHECKS, frozenset({"ai_phrases"}))
    assert result == GateResult("checks.ai_phrases", False, 0.05, 0.05,
                                "checks.ai_phrases: violation rate 5.0% >= max_rate 5.0%")


def test_check_below_max_rate_passes() -> None:
    [result] = check_results(CHECKS, frozenset({"clean"}))
    assert result.passed is True
    assert result.message == "checks.clean: violation rate 0.0% < max_rate 5.0%"


def test_enforced_checks_without_a_target_or_a_rate_fail_saying_why() -> None:
    results = check_results(CHECKS, frozenset({"loose", "not_configured"}))
    assert [(r.name, r.passed) for r in results] == [("checks.loose", False), ("checks.not_configured", False)]
    assert "max_rate is not" in results[0].message
    assert "no item was checked" in results[1].message


def test_check_gates_in_name_order() -> None:
    results = check_results(CHECKS, frozenset({"clean", "ai_phrases"}))
    assert [r.name for r in results] == ["checks.ai_phrases", "checks.clean"]
