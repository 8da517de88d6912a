"""Pointwise reports: per-item scores across repeats, and the users' report shape.

The report (runner.modes.sections.PointwiseReport, built typed by :func:`scorecard`; :func:`build_report` gives
its JSON) is ``{"summary", "by_tag", "by_category", "detailed_results"}``. ``summary`` and every
``by_tag`` / ``by_category`` entry are the same section: counts, pass rate, average overall and per
criterion, consistency across repeats, correlation with human scores and check violations, computed on
that subset, so every metric has its per-tag and per-category breakdown. Unscored judgments never
become scores: an item with no scored repeat is counted as unscored and listed with its reasons.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from runner.core.types import Judgment, Status
from runner.inputs.datasets import ItemRef
from runner.judging.scoring import OVERALL_DECIMALS, SCORE_AGGREGATIONS, Scoring
from runner.modes.sections import (
    CheckSection,
    Consistency,
    DetailedResult,
    FailedExample,
    HumanAgreement,
    Interval,
    PointwiseReport,
    PointwiseSummary,
    ScoreSection,
    UnscoredItem,
)
from runner.modes.shared_values import frozen_mapping, frozen_tuple
from runner.modes.summary import sanitize
from runner.stats import agreement, proportions, uncertainty
from runner.stats import scores as stats

SCORED, UNSCORED, ERROR, NOT_GENERATED = "scored", "unscored", "error", "not_generated"
JUDGE_OVERALL = "overall_score"  # the judge's own overall, when its JSON has one (the rubric's extra_keys)


@dataclass(frozen=True)
class CheckSpec:
    """A deterministic check's name and target, as the report needs them."""

    name: str
    max_rate: float | None = None


@dataclass(frozen=True)
class ItemTexts:
    """What the report shows of one example: its input, expected output and the judged (actual) output."""

    input: str | None = None
    expected_output: str | None = None
    output: str | None = None

    def to_dict(self) -> dict[str, str]:
        """The texts there are, under the report's keys, whole (a text the dataset does not map is left out)."""
        texts = {"input": self.input, "expected_output": self.expected_output, "output": self.output}
        return {key: text for key, text in texts.items() if text is not None}


@dataclass(frozen=True)
class ItemScore:
    """One item's outcome across its repeats."""

    ref: ItemRef
    status: str  # scored | unscored | error | not_generated
    overall: float | None = None
    criteria: Mapping[str, float] = field(default_factory=dict)
    repeat_scores: tuple[float, ...] = ()
    passed: bool | None = None
    reasons: tuple[str, ...] = ()  # why repeats were not scored
    extras: Mapping[str, Any] = field(default_factory=dict)  # the first scored repeat's reasoning, suggestions
    judge_pass: tuple[Any, ...] = ()  # the judge's own pass field per scored repeat (recorded, never used)
    judge_overall: tuple[Any, ...] = ()  # the judge's own overall_score per scored repeat (recorded, never used)
    violations: Mapping[str, Sequence[str]] = field(default_factory=dict)
    texts: ItemTexts | None = None  # None: not read (an ensemble's combined items, older callers)


def score_items(refs: Sequence[ItemRef], judgments: Sequence[Judgment], scoring: Scoring, aggregation: str,
                params: Mapping[str, Any], violations: Mapping[str, Mapping[str, Sequence[str]]],
                not_generated: frozenset[str], texts: Mapping[str, ItemTexts] | None = None) -> list[ItemScore]:
    """Combine each item's repeats into one ItemScore (in ``refs`` order).

    Args:
        refs: Every planned item.
        judgments: All judgments of the run.
        scoring: The rubric's scoring (pass threshold).
        aggregation: A name registered in runner.judging.scoring.SCORE_AGGREGATIONS, e.g. ``mean``.
        params: Its keyword parameters.
        violations: item id -> check name -> violations found in the item's candidate.
        not_generated: Items whose generation failed (never judged).
        texts: Item id -> its input, expected and actual output, shown in the report.
    """
    fn = SCORE_AGGREGATIONS.get(aggregation)
    by_item: dict[str, list[Judgment]] = {ref.id: [] for ref in refs}
    for j in judgments:  # pointwise: one stage, one judgment per (item, repeat)
        by_item.setdefault(j.item_id, []).append(j)
    out = []
    for ref in refs:
        js = by_item[ref.id]
        scored = [j for j in js if j.status is Status.SCORED and j.score is not None]
        reasons = tuple(j.verdict.reason or "" for j in js if j.status is not Status.SCORED)
        item_violations = violations.get(ref.id, {})
        if not scored:
            status = NOT_GENERATED if ref.id in not_generated else (
                UNSCORED if any(j.status is Status.UNSCORED for j in js) else ERROR)
            out.append(ItemScore(ref, status, reasons=reasons, violations=item_violations,
                                 texts=(texts or {}).get(ref.id)))
            continue
        overall = round(fn([j.score for j in scored], **dict(params)), OVERALL_DECIMALS)
        names = list(dict.fromkeys(name for j in scored for name in j.verdict.scores))
        criteria = {n: round(fn([j.verdict.scores[n] for j in scored if n in j.verdict.scores], **dict(params)),
                             OVERALL_DECIMALS) for n in names}
        out.append(ItemScore(
            ref, SCORED, overall=overall, criteria=criteria,
            repeat_scores=tuple(j.score for j in scored if j.score is not None),
            passed=scoring.passed(overall), reasons=reasons, extras=dict(scored[0].verdict.extras),
            judge_pass=tuple(j.verdict.extras.get("pass") for j in scored),
            judge_overall=tuple(j.verdict.extras.get(JUDGE_OVERALL) for j in scored), violations=item_violations,
            texts=(texts or {}).get(ref.id)))
    return out


def _overall(item: ItemScore) -> float:
    """A scored item's overall score (every scored item has one)."""
    assert item.overall is not None, f"scored item {item.ref.id} has no overall score"
    return item.overall


def _first_line(value: Any) -> str:
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def section(items: Sequence[ItemScore], repeats: int, consistency_threshold: float,
            checks: Sequence[CheckSpec], graded: bool | None = None) -> dict[str, Any]:
    """The JSON of :func:`score_section`."""
    return score_section(items, repeats, consistency_threshold, checks, graded).to_json()


def score_section(items: Sequence[ItemScore], repeats: int, consistency_threshold: float,
                  checks: Sequence[CheckSpec], graded: bool | None = None) -> ScoreSection:
    """Every metric over ``items``: counts, pass rate, averages, consistency, human correlation, checks.

    ``pass_rate`` is over every item: an unscored, failed or not generated one is not passed (the users'
    definition, and the gate's); ``pass_rate_scored`` is over the items that got a score. ``graded``: whether the
    rubric has a pass threshold (None: whether any item has a pass decision).
    """
    return ScoreSection(**_section_fields(items, repeats, consistency_threshold, checks, graded))


def _section_fields(items: Sequence[ItemScore], repeats: int, consistency_threshold: float,
                    checks: Sequence[CheckSpec], graded: bool | None) -> dict[str, Any]:
    """The fields of a :class:`ScoreSection` over ``items`` (a summary's are these and its own)."""
    scored = [i for i in items if i.status == SCORED]
    judged_pass = [i for i in scored if i.passed is not None]
    passed = sum(bool(i.passed) for i in judged_pass)
    graded = bool(judged_pass) if graded is None else graded
    names = list(dict.fromkeys(n for i in scored for n in i.criteria))
    rated = [i for i in scored if i.ref.human_score is not None]
    humans = [i.ref.human_score for i in rated if i.ref.human_score is not None]
    return {
        "total": len(items),
        "scored": len(scored),
        "unscored": sum(i.status == UNSCORED for i in items),
        "errors": sum(i.status in (ERROR, NOT_GENERATED) for i in items),
        "passed": passed if graded else None,
        "failed": len(judged_pass) - passed if graded else None,
        "pass_rate": passed / len(items) if graded and items else None,
        "pass_rate_scored": passed / len(judged_pass) if graded and judged_pass else None,
        "average_overall": stats.mean([_overall(i) for i in scored]),
        "average_by_criterion": frozen_mapping(
            {n: stats.mean([i.criteria[n] for i in scored if n in i.criteria]) for n in names}, fresh=True),
        "consistency": Consistency.from_json(stats.consistency(
            {i.ref.id: i.repeat_scores for i in scored}, repeats, consistency_threshold).to_dict(), "consistency")
        if repeats > 1 else None,
        # correlations, +-1 agreement, weighted kappa and Krippendorff's alpha with the human scores
        "human_correlation": HumanAgreement.from_json(agreement.ordinal_agreement(
            [_overall(i) for i in rated], humans), "human_correlation") if rated else None,
        "checks": MappingProxyType({c.name: _check_section(items, c) for c in checks}) if checks else None,
    }


def _check_section(items: Sequence[ItemScore], check: CheckSpec) -> CheckSection:
    checked = [i for i in items if i.status != NOT_GENERATED]
    hits = [i for i in checked if i.violations.get(check.name)]
    rate = len(hits) / len(checked) if checked else None
    by_phrase: dict[str, int] = {}
    for i in hits:
        for v in i.violations[check.name]:
            by_phrase[v] = by_phrase.get(v, 0) + 1
    met = None if rate is None or check.max_rate is None else rate < check.max_rate
    return CheckSection(items_checked=len(checked), items_with_violations=len(hits), violation_rate=rate,
                        max_rate=check.max_rate, met=met, by_violation=frozen_mapping(by_phrase, fresh=True))


def build_report(items: Sequence[ItemScore], scoring: Scoring, repeats: int, consistency_threshold: float,
                 checks: Sequence[CheckSpec], ci: tuple[float, int, int] = (0.95, 1000, 0)) -> dict[str, Any]:
    """The JSON of :func:`scorecard`."""
    return scorecard(items, scoring, repeats, consistency_threshold, checks, ci).to_json()


def scorecard(items: Sequence[ItemScore], scoring: Scoring, repeats: int, consistency_threshold: float,
              checks: Sequence[CheckSpec], ci: tuple[float, int, int] = (0.95, 1000, 0)) -> PointwiseReport:
    """The users' report, typed: ``summary``, ``by_tag``, ``by_category``, ``detailed_results``.

    ``ci`` is (level, resamples, seed) of the bootstrap intervals on the summary's mean score and pass rate.
    """
    graded = scoring.pass_threshold is not None
    level, resamples, seed = ci
    scored = [i for i in items if i.status == SCORED]
    summary = PointwiseSummary(
        **_section_fields(items, repeats, consistency_threshold, checks, graded),
        average_overall_ci=Interval.from_json(uncertainty.bootstrap_ci(
            [_overall(i) for i in scored], "mean", level, resamples, seed, unit="item"), "average_overall_ci"),
        # Wilson over every item, as pass_rate: an item without a score is not passed
        pass_rate_ci=Interval.from_json(proportions.proportion_ci(
            [float(i.passed is True) for i in items], None, level), "pass_rate_ci") if graded and items else None,
        pass_threshold=scoring.pass_threshold,
        scale=(scoring.low, scoring.high),
        repeats=repeats,
        failed_examples=tuple(FailedExample(id=i.ref.id, overall=i.overall,
                                            reasoning=_first_line(i.extras.get("reasoning")), **_texts(i))
                              for i in items if i.passed is False),
        unscored_items=tuple(UnscoredItem(id=i.ref.id, status=i.status, reasons=frozen_tuple(tuple(i.reasons)))
                             for i in items if i.status != SCORED),
    )
    tags = list(dict.fromkeys(t for i in items for t in i.ref.tags))
    categories = list(dict.fromkeys(i.ref.category for i in items if i.ref.category is not None))
    return PointwiseReport(
        summary=summary,
        by_tag=MappingProxyType({t: score_section([i for i in items if t in i.ref.tags], repeats,
                                                  consistency_threshold, checks, graded) for t in tags}),
        by_category=MappingProxyType({c: score_section([i for i in items if i.ref.category == c], repeats,
                                                       consistency_threshold, checks, graded) for c in categories}),
        detailed_results=tuple(_detail(i) for i in items),
    )


def _texts(i: ItemScore) -> dict[str, str | None]:
    """The example's texts as a record's ``input``, ``expected_output`` and ``output`` (None: not shown)."""
    t = i.texts or ItemTexts()
    return {"input": t.input, "expected_output": t.expected_output, "output": t.output}


def _detail(i: ItemScore) -> DetailedResult:
    """An item's ``detailed_results`` entry; its short tuples and mappings of exact values are the shared copies
    (runner.modes.shared_values)."""
    return DetailedResult(
        id=i.ref.id, status=i.status, tags=frozen_tuple(tuple(i.ref.tags)), category=i.ref.category,
        overall=i.overall, passed=i.passed, scores=frozen_mapping(dict(i.criteria), fresh=True),
        repeat_scores=frozen_tuple(tuple(i.repeat_scores)), std=stats.item_std(i.repeat_scores),
        human_score=i.ref.human_score, reasoning=i.extras.get("reasoning"),
        improvement_suggestions=i.extras.get("improvement_suggestions"), judge_pass=frozen_tuple(tuple(i.judge_pass)),
        violations=frozen_mapping({k: frozen_tuple(tuple(v)) for k, v in i.violations.items() if v}, fresh=True),
        unscored_reasons=frozen_tuple(tuple(i.reasons)), **_texts(i),
        # shown beside ours, never used as it
        judge_overall_score=frozen_tuple(tuple(i.judge_overall))
        if any(v is not None for v in i.judge_overall) else None)


def section_metrics(sec: ScoreSection, prefix: str = "") -> dict[str, float]:
    """Numeric MLflow metrics of one section; None values are left out."""
    raw: dict[str, Any] = {"items/total": sec.total, "items/scored": sec.scored, "items/unscored": sec.unscored,
                           "items/errors": sec.errors, "items/passed": sec.passed, "items/failed": sec.failed,
                           "pass/rate": sec.pass_rate, "pass/rate_scored": sec.pass_rate_scored,
                           "score/mean": sec.average_overall}
    raw.update({f"score/{sanitize(n)}_mean": v for n, v in sec.average_by_criterion.items()})
    consistency = sec.consistency
    if consistency is not None:
        raw.update({"consistency/items_measured": consistency.items_measured,
                    "consistency/mean_std": consistency.mean_std, "consistency/max_std": consistency.max_std,
                    "consistency/share_above_threshold": consistency.share_above_threshold})
    human = sec.human_correlation
    if human is not None:
        raw.update({"human/n": human.n, "human/pearson_r": human.pearson.r, "human/pearson_p": human.pearson.p,
                    "human/spearman_rho": human.spearman.rho, "human/spearman_p": human.spearman.p,
                    "human/within_1_rate": human.within_1_rate, "human/mean_abs_error": human.mean_abs_error,
                    "human/kappa_quadratic": human.kappa_quadratic,
                    "human/krippendorff_alpha_interval": human.krippendorff_alpha_interval})
    if isinstance(sec, PointwiseSummary):  # the CI bounds beside their metric: score/mean_ci_low, ...
        for name, interval in (("score/mean", sec.average_overall_ci), ("pass/rate", sec.pass_rate_ci)):
            raw[f"{name}_ci_low"] = None if interval is None else interval.low
            raw[f"{name}_ci_high"] = None if interval is None else interval.high
    for name, check in (sec.checks or {}).items():
        raw[f"checks/{sanitize(name)}/violation_rate"] = check.violation_rate
        raw[f"checks/{sanitize(name)}/items_with_violations"] = check.items_with_violations
    return {prefix + k: float(v) for k, v in raw.items() if v is not None and not isinstance(v, bool)}


def report_metrics(report: PointwiseReport | Mapping[str, Any]) -> dict[str, float]:
    """Every numeric metric of the report (typed or as JSON): the summary, ``bias/*``, then
    ``by_tag/<tag>/...`` and ``by_category/<c>/...``."""
    rep = PointwiseReport.of(report, "pointwise report")
    out = section_metrics(rep.summary)
    length = rep.bias.length if rep.bias is not None else None
    if length is not None:
        for name, value in (("bias/length_score_spearman", length.judge_length_spearman),
                            ("bias/human_length_score_spearman", length.human_length_spearman),
                            ("bias/length_excess", length.excess)):
            if value is not None:
                out[name] = float(value)
    for family, sections in (("by_tag", rep.by_tag), ("by_category", rep.by_category)):
        for name, sec in sections.items():
            out.update(section_metrics(sec, f"{family}/{sanitize(name)}/"))
    return out
