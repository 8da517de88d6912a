"""CI gates: thresholds a finished run must meet, each with one line saying why it failed.

Pure: the caller hands in the run's typed report section, its flat metrics and (when a baseline is
configured) the baseline run's value, looked up in MLflow before the first judge call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from runner.core.choices import GateUnscoredAs
from runner.core.run_settings import GateConfig
from runner.modes.base import RunMode
from runner.modes.record import Record
from runner.modes.sections import Gate

BASELINE_PREFIX = "latest on "

GateResult = Gate  # a gate's outcome is the report's own record (summary.json's ``gates``)


@dataclass(frozen=True)
class Baseline:
    """The run a gate compares against: which one, and its value of the gated metric."""

    ref: str  # as configured: a run id or "latest on <branch>"
    run_id: str
    value: float


class PassCounts(Protocol):
    """What the pass-rate gate reads of a report's scored section (runner.modes.sections.ScoreSection)."""

    @property
    def total(self) -> int: ...  # noqa: D102
    @property
    def passed(self) -> int | None: ...  # noqa: D102 - None: the rubric has no pass threshold
    @property
    def failed(self) -> int | None: ...  # noqa: D102
    @property
    def pass_rate(self) -> float | None: ...  # noqa: D102
    @property
    def pass_rate_scored(self) -> float | None: ...  # noqa: D102


class CheckRate(Protocol):
    """What a check's gate reads of its section (runner.modes.sections.CheckSection)."""

    @property
    def violation_rate(self) -> float | None: ...  # noqa: D102
    @property
    def max_rate(self) -> float | None: ...  # noqa: D102


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def _pass_rate(gate: GateConfig, summary: PassCounts) -> GateResult:
    """The report's own pass rate, over every item (``pass_rate``: an unscored or failed item is not passed), or
    over the scored items only (``pass_rate_scored``, ``gate.unscored_as=exclude``): the gate never computes a rate
    of its own, so it says what the console, summary.json and MLflow say. The line names its denominator."""
    limit = gate.min_pass_rate
    assert limit is not None  # evaluate() checks a gate only when it is set
    passed, failed = summary.passed or 0, summary.failed or 0
    unjudged = summary.total - passed - failed  # unscored, failed calls, not generated
    if gate.unscored_as is GateUnscoredAs.exclude:
        rate = summary.pass_rate_scored
        counted = f"{passed} of {passed + failed} scored items passed, excluding {unjudged} unscored"
    else:
        rate = summary.pass_rate
        counted = f"{passed} of {passed + failed + unjudged} items passed, {unjudged} unscored counted as not passed"
    if rate is None:
        return GateResult("gate.min_pass_rate", False, None, limit, "gate.min_pass_rate: no item was scored")
    ok = rate >= limit
    return GateResult("gate.min_pass_rate", ok, rate, limit,
                      f"gate.min_pass_rate: pass rate {_pct(rate)} {'>=' if ok else '<'} {_pct(limit)} ({counted})")


def _mean_score(gate: GateConfig, metrics: Mapping[str, float]) -> GateResult:
    value, limit = metrics.get("score/mean"), gate.min_mean_score
    assert limit is not None  # evaluate() checks a gate only when it is set
    if value is None:
        return GateResult("gate.min_mean_score", False, None, limit,
                          "gate.min_mean_score: this run has no score/mean (no item was scored, or a pairwise run)")
    ok = value >= limit
    return GateResult("gate.min_mean_score", ok, value, limit,
                      f"gate.min_mean_score: mean score {value:.3f} {'>=' if ok else '<'} {limit:g}")


def _baseline(gate: GateConfig, metrics: Mapping[str, float], baseline: Baseline) -> GateResult:
    value, allowed = metrics.get(gate.metric), gate.max_drop if gate.max_drop is not None else 0.0
    if value is None:
        return GateResult("gate.max_drop", False, None, allowed, f"gate.max_drop: this run has no metric {gate.metric}")
    drop = round(baseline.value - value, 9)  # 0.8 - 0.7 is 0.10000000000000009: an ulp must not fail the gate
    ok = drop <= allowed
    return GateResult("gate.max_drop", ok, drop, allowed,
                      f"gate.max_drop: {gate.metric} {value:.4f} vs {baseline.value:.4f} in baseline run "
                      f"{baseline.run_id} ({baseline.ref}): drop {drop:+.4f} {'<=' if ok else '>'} {allowed:g}")


def check_results(checks: Mapping[str, CheckRate], enforced: frozenset[str]) -> list[GateResult]:
    """Gates for the deterministic checks configured with ``enforce: true``."""
    out = []
    for name in sorted(enforced):
        check = checks.get(name)
        rate, limit = (None, None) if check is None else (check.violation_rate, check.max_rate)
        if rate is None:
            out.append(GateResult(f"checks.{name}", False, None, limit, f"checks.{name}: no item was checked"))
            continue
        if limit is None:
            out.append(GateResult(f"checks.{name}", False, rate, None,
                                  f"checks.{name}: enforce is set but max_rate is not"))
            continue
        ok = rate < limit
        relation = "<" if ok else ">="
        out.append(GateResult(f"checks.{name}", ok, rate, limit,
                              f"checks.{name}: violation rate {_pct(rate)} {relation} max_rate {_pct(limit)}"))
    return out


def evaluate(gate: GateConfig, scores: PassCounts | None, metrics: Mapping[str, float],
             baseline: Baseline | None) -> list[GateResult]:
    """Evaluate every configured gate.

    Args:
        gate: The gate config.
        scores: The report's scored section over every item (a pointwise report's ``summary``: ``total``,
            ``passed``, ``failed``, ``pass_rate``, ``pass_rate_scored``), or None; ``min_pass_rate`` applies only
            where it counts passes (``passed`` is None without the rubric's pass threshold).
        metrics: The run's flat metrics (``score/mean`` and the baseline metric).
        baseline: The baseline run's value of ``gate.metric``, when ``gate.baseline_run`` is set.

    Returns:
        One result per active gate, in config order.
    """
    results = []
    if gate.min_pass_rate is not None and scores is not None and scores.passed is not None:
        results.append(_pass_rate(gate, scores))
    if gate.min_mean_score is not None:
        results.append(_mean_score(gate, metrics))
    if baseline is not None:
        results.append(_baseline(gate, metrics, baseline))
    return results


def of_report(gate: GateConfig, mode: RunMode, report: Record, metrics: Mapping[str, float],
              baseline: Baseline | None, enforced: frozenset[str] = frozenset()) -> list[GateResult]:
    """Every gate of a built report: :func:`evaluate` over its scored section (``mode.scores``), then the
    ``enforced`` checks of that section (:func:`check_results`)."""
    scores = mode.scores(report)
    results = evaluate(gate, scores, metrics, baseline)
    if scores is not None:
        results += check_results(scores.checks or {}, enforced)
    return results
