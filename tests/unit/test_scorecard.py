"""Unit tests for runner.modes.scorecard: per-item scores across repeats, report sections and MLflow metrics.

Every record is built by hand, so each expected number below can be checked on paper.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from runner.core.config import CriterionConfig, RubricConfig
from runner.core.types import JudgeRequest, JudgeResponse, Judgment, Status, Verdict
from runner.inputs.datasets import ItemRef
from runner.judging.scoring import Scoring
from runner.modes.scorecard import (
    CheckSpec,
    ItemScore,
    build_report,
    report_metrics,
    score_items,
    section,
)
from tests.builders import CRITERIA, errored, make_scoring, scored, unscored


def ref(item_id: str, tags: tuple[str, ...] = (), category: str | None = None,
        human: float | None = None) -> ItemRef:
    return ItemRef(item_id, gold=None, source="x", tags=tags, category=category, human_score=human)


def run_score(refs: list[ItemRef], judgments: list[Judgment], *, aggregation: str = "mean",
              threshold: float | None = 3.5, violations: dict[str, dict[str, list[str]]] | None = None,
              not_generated: frozenset[str] = frozenset()) -> list[ItemScore]:
    return score_items(refs, judgments, make_scoring(threshold), aggregation, {}, violations or {}, not_generated)


def by_id(items: list[ItemScore]) -> dict[str, ItemScore]:
    return {i.ref.id: i for i in items}


# --- score_items -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("aggregation", "overall", "passed", "accuracy"), [
    ("mean", 3.0, False, 11 / 3),  # overall (4 + 4 + 1) / 3; accuracy (4 + 5 + 2) / 3
    ("median", 4.0, True, 4.0),  # the odd repeat does not pull the median below 3.5
])
def test_repeats_are_combined_by_the_aggregation(aggregation: str, overall: float, passed: bool,
                                                 accuracy: float) -> None:
    judgments = [scored("a", 0, 4, 4), scored("a", 1, 5, 3), scored("a", 2, 2, 0)]
    [item] = run_score([ref("a")], judgments, aggregation=aggregation)
    assert item.status == "scored"
    assert item.overall == pytest.approx(overall)
    assert item.passed is passed
    assert item.repeat_scores == (4.0, 4.0, 1.0)
    assert item.criteria["accuracy"] == pytest.approx(accuracy)
    assert set(item.criteria) == set(CRITERIA)


def test_repeat_mean_exactly_at_threshold_passes() -> None:
    scoring = Scoring.from_config(RubricConfig(
        name="t", criteria=[CriterionConfig(name="quality", min=0.0, max=10.0)], pass_threshold=5.0))

    def one(repeat: int, score: float) -> Judgment:
        return Judgment(JudgeRequest("a", repeat, None, "judge", "h"), JudgeResponse(text="{}"),
                        Verdict(None, scores={"quality": score}), None, Status.SCORED, score=score)

    [item] = score_items([ref("a")], [one(0, 0.2), one(1, 5.1), one(2, 9.7)], scoring, "mean", {}, {}, frozenset())
    assert item.passed is True  # (0.2 + 5.1 + 9.7) / 3 = 5 on paper


def test_unscored_repeats_are_left_out_of_the_score_but_keep_their_reason() -> None:
    judgments = [scored("a", 0, 2, 2), unscored("a", 1, "out_of_range: accuracy 7"), scored("a", 2, 4, 4)]
    [item] = run_score([ref("a")], judgments)
    assert item.status == "scored"
    assert item.overall == 3.0
    assert item.repeat_scores == (2.0, 4.0)
    assert item.reasons == ("out_of_range: accuracy 7",)


def test_item_with_only_unscored_repeats_is_unscored_with_reasons() -> None:
    [item] = run_score([ref("a")], [unscored("a", 0, "no_json"), errored("a", 1), unscored("a", 2, "missing: x")])
    assert item.status == "unscored"
    assert item.overall is None and item.passed is None and item.criteria == {}
    assert item.reasons == ("no_json", "call_failed: RateLimitError", "missing: x")


def test_item_with_only_failed_calls_is_an_error() -> None:
    [item] = run_score([ref("a")], [errored("a", 0), errored("a", 1)])
    assert item.status == "error"
    assert item.overall is None and item.passed is None
    assert item.reasons == ("call_failed: RateLimitError", "call_failed: RateLimitError")


def test_item_whose_generation_failed_is_not_generated() -> None:
    items = by_id(run_score([ref("a"), ref("b")], [scored("a", 0, 5, 5)], not_generated=frozenset({"b"})))
    assert items["b"].status == "not_generated"
    assert items["b"].overall is None
    assert items["a"].status == "scored"


def test_items_follow_refs_order_and_ignore_foreign_judgments() -> None:
    judgments = [scored("b", 0, 5, 5), scored("zz", 0, 1, 1), scored("a", 0, 1, 1)]
    items = run_score([ref("a"), ref("b")], judgments)
    assert [i.ref.id for i in items] == ["a", "b"]
    assert [i.overall for i in items] == [1.0, 5.0]


def test_judge_pass_is_recorded_but_never_decides_passed() -> None:
    judgments = [scored("low", 0, 2, 2, **{"pass": True}), scored("low", 1, 1, 1, **{"pass": "yes"}),
                 scored("high", 0, 5, 5, **{"pass": False}), scored("silent", 0, 5, 5)]
    items = by_id(run_score([ref("low"), ref("high"), ref("silent")], judgments))
    assert items["low"].judge_pass == (True, "yes")
    assert items["low"].passed is False
    assert items["high"].judge_pass == (False,)
    assert items["high"].passed is True
    assert items["silent"].judge_pass == (None,)


def test_extras_come_from_the_first_scored_repeat_and_violations_are_kept() -> None:
    judgments = [unscored("a", 0), scored("a", 1, 4, 4, reasoning="first"), scored("a", 2, 4, 4, reasoning="second")]
    [item] = run_score([ref("a")], judgments, violations={"a": {"ai_phrases": ["As an AI"]}})
    assert item.extras["reasoning"] == "first"
    assert item.violations == {"ai_phrases": ["As an AI"]}


def test_no_threshold_leaves_passed_none() -> None:
    [item] = run_score([ref("a")], [scored("a", 0, 5, 5)], threshold=None)
    assert item.overall == 5.0
    assert item.passed is None


# --- section -----------------------------------------------------------------------------------------


@pytest.fixture
def mixed() -> list[ItemScore]:
    """Two passes (4.5, 3.5), one fail (2.0), one unscored, one error, one not generated."""
    refs = [ref(i) for i in ("p1", "p2", "f1", "u1", "e1", "g1")]
    judgments = [scored("p1", 0, 5, 4), scored("p2", 0, 3, 4), scored("f1", 0, 1, 3), unscored("u1", 0),
                 errored("e1", 0)]
    return run_score(refs, judgments, not_generated=frozenset({"g1"}))


def test_section_pass_rate_is_over_every_item_and_the_scored_rate_has_its_own_name(mixed: list[ItemScore]) -> None:
    # issue 30: one pass rate, over all examples; an unscored, errored or not generated item is not passed
    sec = section(mixed, 1, 0.5, [])
    assert (sec["total"], sec["scored"], sec["unscored"], sec["errors"]) == (6, 3, 1, 2)
    assert (sec["passed"], sec["failed"]) == (2, 1)
    assert sec["pass_rate"] == pytest.approx(2 / 6)
    assert sec["pass_rate_scored"] == pytest.approx(2 / 3)
    assert sec["average_overall"] == pytest.approx((4.5 + 3.5 + 2.0) / 3)
    assert sec["average_by_criterion"] == pytest.approx({"accuracy": 3.0, "completeness": 11 / 3})
    assert "consistency" not in sec
    assert "human_correlation" not in sec
    assert "checks" not in sec


def test_section_without_threshold_has_no_pass_figures() -> None:
    items = run_score([ref("a")], [scored("a", 0, 5, 5)], threshold=None)
    sec = section(items, 1, 0.5, [])
    assert sec["passed"] is None and sec["failed"] is None and sec["pass_rate"] is None
    assert sec["average_overall"] == 5.0


def test_section_with_nothing_scored_has_no_averages() -> None:
    sec = section(run_score([ref("a")], [unscored("a", 0)]), 1, 0.5, [])
    assert sec["scored"] == 0 and sec["unscored"] == 1
    assert sec["pass_rate"] is None and sec["average_overall"] is None
    graded = section(run_score([ref("a")], [unscored("a", 0)]), 1, 0.5, [], graded=True)  # a rubric with a threshold
    assert (graded["passed"], graded["failed"], graded["pass_rate"]) == (0, 0, 0.0)
    assert "pass_rate_scored" not in graded  # no scored item: undefined, left out
    assert sec["average_by_criterion"] == {}


def test_consistency_only_with_repeats() -> None:
    judgments = [scored("a", 0, 3, 3), scored("a", 1, 5, 5),  # sample std sqrt(2)
                 scored("b", 0, 4, 4), scored("b", 1, 4, 4),  # std 0.0
                 scored("c", 0, 2, 2), unscored("c", 1)]  # one scored repeat: not measured
    items = run_score([ref("a"), ref("b"), ref("c")], judgments)
    assert "consistency" not in section(items, 1, 0.5, [])
    consistency = section(items, 2, 0.5, [])["consistency"]
    assert consistency["repeats"] == 2
    assert consistency["items_measured"] == 2
    assert consistency["mean_std"] == pytest.approx(math.sqrt(2) / 2)
    assert consistency["max_std"] == pytest.approx(math.sqrt(2))
    assert consistency["std"] == "sample (n-1)"
    assert consistency["share_above_threshold"] == pytest.approx(0.5)
    assert consistency["items_above_threshold"] == ["a"]


def test_human_correlation_only_over_scored_items_with_human_scores() -> None:
    refs = [ref("a", human=1.0), ref("b", human=3.0), ref("c", human=5.0), ref("d", human=2.0), ref("e")]
    judgments = [scored("a", 0, 1, 2), scored("b", 0, 3, 3), scored("c", 0, 5, 5), unscored("d", 0),
                 scored("e", 0, 1, 1)]
    human = section(run_score(refs, judgments), 1, 0.5, [])["human_correlation"]
    assert human["n"] == 3  # d is unscored, e has no human score
    assert human["mean_abs_error"] == pytest.approx(0.5 / 3)  # |1.5-1| + 0 + 0
    assert human["within_1_rate"] == 1.0
    assert human["pearson"]["r"] == pytest.approx(7 / math.sqrt(37 / 6 * 8))  # cov 7; ss 37/6 and 8
    no_human = section(run_score([ref("e")], [scored("e", 0, 1, 1)]), 1, 0.5, [])
    assert "human_correlation" not in no_human


def test_checks_section_rates_over_items_with_a_candidate() -> None:
    refs = [ref(i) for i in ("a", "b", "c", "d", "g")]
    judgments = [scored("a", 0, 5, 5), scored("b", 0, 5, 5), scored("c", 0, 5, 5), errored("d", 0)]
    violations = {"a": {"ai": ["As an AI", "Let me know"]}, "b": {"ai": []}, "c": {"ai": []},
                  "d": {"ai": ["Let me know"]}}
    items = run_score(refs, judgments, violations=violations, not_generated=frozenset({"g"}))
    checks = section(items, 1, 0.5, [CheckSpec("ai", 0.5), CheckSpec("ai_tight", 0.05), CheckSpec("ai_loose")])
    ai = checks["checks"]["ai"]
    assert ai["items_checked"] == 4  # the item without a generated candidate is not checked
    assert ai["items_with_violations"] == 2  # the errored item's candidate still counts
    assert ai["violation_rate"] == 0.5
    assert ai["met"] is False  # the target is "< max_rate": 0.5 does not meet 0.5
    assert ai["by_violation"] == {"As an AI": 1, "Let me know": 2}
    assert checks["checks"]["ai_tight"]["violation_rate"] == 0.0
    assert checks["checks"]["ai_tight"]["met"] is True
    assert checks["checks"]["ai_loose"]["met"] is None


# --- build_report ---------------------------------------------------------------------------------


@pytest.fixture
def report() -> dict[str, Any]:
    refs = [ref("a", tags=("retrieval", "needs review"), category="emotion", human=4.0),
            ref("b", tags=("retrieval",), category="casual", human=2.0),
            ref("c", tags=("needs review",), category="emotion", human=5.0),
            ref("d", tags=("tool_use",))]
    judgments = [
        scored("a", 0, 5, 4, reasoning="Grounded.\nCites the context."), scored("a", 1, 5, 5),
        scored("b", 0, 2, 1, reasoning="\n\n   Misses the root cause.  \nAnd invents an action item.",
               improvement_suggestions=["Name the certificate"]),
        scored("b", 1, 2, 2),
        scored("c", 0, 1, 2), scored("c", 1, 4, 4),
        unscored("d", 0, "no_json"), errored("d", 1),
    ]
    items = run_score(refs, judgments, violations={"b": {"ai_phrases": ["Let me know"]}})
    return build_report(items, make_scoring(), 2, 0.5, [CheckSpec("ai_phrases", 0.05)])


def test_report_shape(report: dict[str, Any]) -> None:
    assert list(report) == ["summary", "by_tag", "by_category", "detailed_results"]
    summary = report["summary"]
    assert summary["pass_threshold"] == 3.5
    assert summary["scale"] == [1.0, 5.0]
    assert summary["repeats"] == 2
    assert list(report["by_tag"]) == ["retrieval", "needs review", "tool_use"]
    assert list(report["by_category"]) == ["emotion", "casual"]  # d has no category
    assert [d["id"] for d in report["detailed_results"]] == ["a", "b", "c", "d"]


def test_report_summary_figures(report: dict[str, Any]) -> None:
    summary = report["summary"]
    assert (summary["total"], summary["scored"], summary["unscored"], summary["errors"]) == (4, 3, 1, 0)
    assert (summary["passed"], summary["failed"]) == (1, 2)  # a 4.75; b 1.75; c 2.75
    assert summary["average_overall"] == pytest.approx((4.75 + 1.75 + 2.75) / 3)
    assert summary["consistency"]["items_measured"] == 3
    assert summary["human_correlation"]["n"] == 3
    assert summary["checks"]["ai_phrases"]["items_with_violations"] == 1


def test_failed_examples_carry_the_first_nonempty_line_of_reasoning(report: dict[str, Any]) -> None:
    assert report["summary"]["failed_examples"] == [
        {"id": "b", "overall": 1.75, "reasoning": "Misses the root cause."},
        {"id": "c", "overall": 2.75, "reasoning": ""},  # its first scored repeat gave no reasoning
    ]


def test_unscored_items_are_listed_with_reasons(report: dict[str, Any]) -> None:
    assert report["summary"]["unscored_items"] == [
        {"id": "d", "status": "unscored", "reasons": ["no_json", "call_failed: RateLimitError"]}]


def test_breakdowns_are_sections_over_their_subset(report: dict[str, Any]) -> None:
    retrieval = report["by_tag"]["retrieval"]
    assert (retrieval["total"], retrieval["scored"], retrieval["passed"], retrieval["failed"]) == (2, 2, 1, 1)
    assert retrieval["pass_rate"] == 0.5
    assert report["by_tag"]["tool_use"]["scored"] == 0
    assert report["by_tag"]["tool_use"]["pass_rate"] == 0.0  # issue 30: its one item, unscored, is not passed
    assert "pass_rate_scored" not in report["by_tag"]["tool_use"]  # no scored item to take a share of
    emotion = report["by_category"]["emotion"]
    assert emotion["average_overall"] == pytest.approx((4.75 + 2.75) / 2)
    assert emotion["checks"]["ai_phrases"]["violation_rate"] == 0.0
    assert report["by_category"]["casual"]["checks"]["ai_phrases"]["violation_rate"] == 1.0


def test_detailed_results_rows(report: dict[str, Any]) -> None:
    a, b, _, d = report["detailed_results"]
    assert a == {
        "id": "a", "status": "scored", "tags": ["retrieval", "needs review"], "category": "emotion",
        "overall": 4.75, "passed": True, "scores": {"accuracy": 5.0, "completeness": 4.5},
        "repeat_scores": [4.5, 5.0], "std": pytest.approx(math.sqrt(0.125)),  # sample std
        "human_score": 4.0, "reasoning": "Grounded.\nCites the context.",
        "improvement_suggestions": None, "judge_pass": [None, None], "violations": {}, "unscored_reasons": [],
    }
    assert b["improvement_suggestions"] == ["Name the certificate"]
    assert b["violations"] == {"ai_phrases": ["Let me know"]}
    assert d["status"] == "unscored"
    assert d["overall"] is None and d["std"] is None
    assert d["unscored_reasons"] == ["no_json", "call_failed: RateLimitError"]


# --- report_metrics ------------------------------------------------------------------------------


def test_report_metric_names_and_values(report: dict[str, Any]) -> None:
    metrics = report_metrics(report)
    assert metrics["score/mean"] == pytest.approx((4.75 + 1.75 + 2.75) / 3)
    assert metrics["score/accuracy_mean"] == pytest.approx((5.0 + 2.0 + 2.5) / 3)
    assert metrics["score/completeness_mean"] == pytest.approx((4.5 + 1.5 + 3.0) / 3)
    assert metrics["pass/rate"] == pytest.approx(1 / 4)  # issue 30: over every item, the unscored one not passed
    assert metrics["pass/rate_scored"] == pytest.approx(1 / 3)
    assert {k: metrics[k] for k in ("items/total", "items/scored", "items/unscored", "items/errors",
                                    "items/passed", "items/failed")} == {
        "items/total": 4.0, "items/scored": 3.0, "items/unscored": 1.0, "items/errors": 0.0,
        "items/passed": 1.0, "items/failed": 2.0}
    assert metrics["consistency/items_measured"] == 3.0
    assert metrics["consistency/max_std"] == pytest.approx(2.5 / math.sqrt(2))  # c: 1.5 and 4.0, sample std
    for key in ("consistency/mean_std", "consistency/share_above_threshold", "human/n", "human/pearson_r",
                "human/spearman_rho", "human/within_1_rate", "human/mean_abs_error"):
        assert key in metrics
    assert metrics["checks/ai_phrases/violation_rate"] == pytest.approx(1 / 4)
    assert metrics["checks/ai_phrases/items_with_violations"] == 1.0
    assert all(isinstance(v, float) for v in metrics.values())


def test_breakdown_metrics_are_prefixed_and_sanitized(report: dict[str, Any]) -> None:
    metrics = report_metrics(report)
    assert metrics["by_tag/retrieval/pass/rate"] == 0.5
    assert metrics["by_tag/needs_review/items/total"] == 2.0
    assert metrics["by_category/emotion/score/mean"] == pytest.approx(3.75)
    assert metrics["by_category/casual/checks/ai_phrases/violation_rate"] == 1.0
    assert not any(" " in k for k in metrics)


def test_none_values_are_left_out(report: dict[str, Any]) -> None:
    metrics = report_metrics(report)
    assert "by_tag/tool_use/items/total" in metrics
    assert "by_tag/tool_use/pass/rate_scored" not in metrics  # nothing scored under that tag
    assert "by_tag/tool_use/score/mean" not in metrics
    assert "by_tag/retrieval/human/pearson_r" not in metrics  # two pairs: no correlation


def test_metrics_without_threshold_repeats_humans_or_checks() -> None:
    items = run_score([ref("a"), ref("b")], [scored("a", 0, 5, 5), scored("b", 0, 1, 3)], threshold=None)
    metrics = report_metrics(build_report(items, make_scoring(None), 1, 0.5, []))
    # the summary's mean score has a bootstrap interval (here the two scores 5 and 2 bound it)
    assert metrics == {"items/total": 2.0, "items/scored": 2.0, "items/unscored": 0.0, "items/errors": 0.0,
                       "score/mean": 3.5, "score/accuracy_mean": 3.0, "score/completeness_mean": 4.0,
                       "score/mean_ci_low": 2.0, "score/mean_ci_high": 5.0}
