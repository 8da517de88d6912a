"""Unit tests for runner.judging.scoring: rubric validation, applicable criteria, weighted overall, pass/fail."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from runner.core.config import CriterionConfig, RubricConfig
from runner.core.registry import UnknownNameError
from runner.core.types import Item
from runner.judging.scoring import SCORE_AGGREGATIONS, RubricError, Scoring

# The weights of conf/rubric/reply_quality.yaml: defaults 0.4/0.3/0.3, emotion 0.5/0.3/0.2.
REPLY_CRITERIA = (("naturalness", 0.4), ("appropriateness", 0.3), ("intent_match", 0.3))
EMOTION = {"naturalness": 0.5, "appropriateness": 0.3, "intent_match": 0.2}


def crit(name: str, *, lo: float = 1.0, hi: float = 5.0, weight: float = 1.0, when: str | None = None
         ) -> CriterionConfig:
    return CriterionConfig(name=name, min=lo, max=hi, weight=weight, when=when)


def rubric(criteria: list[CriterionConfig], **overrides: object) -> RubricConfig:
    return RubricConfig(name="test_rubric", criteria=criteria, **overrides)  # type: ignore[arg-type]


def reply_rubric(**overrides: object) -> RubricConfig:
    criteria = [crit(n, lo=0, hi=10, weight=w) for n, w in REPLY_CRITERIA]
    return rubric(criteria, category_weights={"emotion": dict(EMOTION)}, **overrides)


def item(variables: dict[str, str] | None = None, category: str | None = None) -> Item:
    return Item(id="i1", variables=MappingProxyType(variables or {}), candidates=(), category=category)


# --- from_config: validation ------------------------------------------------------------------------


def test_valid_rubric_keeps_criteria_in_order_and_the_scale() -> None:
    scoring = Scoring.from_config(rubric([crit("a", lo=1, hi=5), crit("b", lo=0, hi=10, weight=2.0, when="x")],
                                         pass_threshold=3.5))
    assert [c.name for c in scoring.criteria] == ["a", "b"]
    assert [c.weight for c in scoring.criteria] == [1.0, 2.0]
    assert (scoring.low, scoring.high) == (0, 10)
    assert scoring.pass_threshold == 3.5
    assert scoring.when_variables == frozenset({"x"})


def test_no_criteria_is_rejected() -> None:
    with pytest.raises(RubricError, match=r"rubric test_rubric: a pointwise rubric needs criteria"):
        Scoring.from_config(rubric([]))


def test_duplicate_criterion_names_are_rejected() -> None:
    with pytest.raises(RubricError, match=r"criterion names repeat: \['a', 'b', 'a'\]"):
        Scoring.from_config(rubric([crit("a"), crit("b"), crit("a")]))


@pytest.mark.parametrize(("lo", "hi"), [(5.0, 5.0), (5.0, 1.0)])
def test_min_not_below_max_is_rejected(lo: float, hi: float) -> None:
    with pytest.raises(RubricError, match=rf"criterion b: min {lo} must be below max {hi}"):
        Scoring.from_config(rubric([crit("a"), crit("b", lo=lo, hi=hi)]))


def test_negative_weight_is_rejected() -> None:
    with pytest.raises(RubricError, match=r"criteria \(those without `when`\): negative weight for \['b'\]"):
        Scoring.from_config(rubric([crit("a", weight=2.0), crit("b", weight=-1.0)]))


def test_weights_summing_to_zero_are_rejected() -> None:
    with pytest.raises(RubricError, match=r"criteria \(those without `when`\): weights sum to 0"):
        Scoring.from_config(rubric([crit("a", weight=0.0), crit("b", weight=0.0)]))


def test_category_weights_naming_an_unknown_criterion_are_rejected() -> None:
    cfg = rubric([crit("a"), crit("b")], category_weights={"emotion": {"a": 1.0, "tone": 2.0}})
    with pytest.raises(RubricError, match=r"category_weights\.emotion names unknown criteria \['tone'\]; "
                                          r"known: \['a', 'b'\]"):
        Scoring.from_config(cfg)


def test_category_weights_are_checked_like_the_defaults() -> None:
    negative = rubric([crit("a"), crit("b")], category_weights={"emotion": {"b": -0.5}})
    with pytest.raises(RubricError, match=r"category_weights\.emotion: negative weight for \['b'\]"):
        Scoring.from_config(negative)
    zero = rubric([crit("a"), crit("b")], category_weights={"casual": {"a": 0.0, "b": 0.0}})
    with pytest.raises(RubricError, match=r"category_weights\.casual: weights sum to 0"):
        Scoring.from_config(zero)


@pytest.mark.parametrize("threshold", [0.5, 5.5, -1.0])
def test_pass_threshold_off_the_scale_is_rejected(threshold: float) -> None:
    with pytest.raises(RubricError, match=rf"pass_threshold {threshold} is outside the scale \[1\.0, 5\.0\]"):
        Scoring.from_config(rubric([crit("a"), crit("b")], pass_threshold=threshold))


@pytest.mark.parametrize("threshold", [1.0, 5.0])
def test_pass_threshold_on_the_scale_edges_is_accepted(threshold: float) -> None:
    assert Scoring.from_config(rubric([crit("a")], pass_threshold=threshold)).pass_threshold == threshold


def test_every_criterion_having_when_is_rejected() -> None:
    with pytest.raises(RubricError, match=r"at least one criterion must apply to every item"):
        Scoring.from_config(rubric([crit("a", when="x"), crit("b", when="y")]))


def test_shipped_reply_quality_weights_validate() -> None:
    scoring = Scoring.from_config(reply_rubric())
    assert scoring.category_weights == {"emotion": EMOTION}
    assert scoring.pass_threshold is None


# --- for_item -------------------------------------------------------------------------------------------


@pytest.fixture
def agent_scoring() -> Scoring:
    """Shaped like conf/rubric/agent_output.yaml: tool_usage only for items listing expected tool calls."""
    return Scoring.from_config(rubric([crit("accuracy"), crit("completeness"),
                                       crit("tool_usage", when="expected_tool_calls")], pass_threshold=3.5))


@pytest.mark.parametrize("variables", [{"expected_tool_calls": ""}, {"expected_tool_calls": "  \n\t "}, {}])
def test_criterion_is_dropped_when_its_variable_is_empty_blank_or_absent(
        agent_scoring: Scoring, variables: dict[str, str]) -> None:
    assert [c.name for c in agent_scoring.for_item(item(variables))] == ["accuracy", "completeness"]


def test_criterion_applies_when_its_variable_has_text(agent_scoring: Scoring) -> None:
    names = [c.name for c in agent_scoring.for_item(item({"expected_tool_calls": "- refund ch_1"}))]
    assert names == ["accuracy", "completeness", "tool_usage"]


def test_category_weights_override_the_defaults_for_that_category_only() -> None:
    scoring = Scoring.from_config(reply_rubric())
    emotion = {c.name: c.weight for c in scoring.for_item(item(category="emotion"))}
    casual = {c.name: c.weight for c in scoring.for_item(item(category="casual"))}
    none = {c.name: c.weight for c in scoring.for_item(item())}
    assert emotion == EMOTION
    assert casual == none == dict(REPLY_CRITERIA)


def test_partial_category_weights_keep_the_other_defaults() -> None:
    scoring = Scoring.from_config(rubric([crit("a", weight=1.0), crit("b", weight=3.0)],
                                         category_weights={"support": {"a": 2.0}}))
    assert {c.name: c.weight for c in scoring.for_item(item(category="support"))} == {"a": 2.0, "b": 3.0}


# --- overall ----------------------------------------------------------------------------------------


def test_equal_weights_give_the_plain_mean(agent_scoring: Scoring) -> None:
    criteria = agent_scoring.for_item(item())
    assert agent_scoring.overall({"accuracy": 4, "completeness": 1}, criteria) == 2.5


def test_overall_ignores_scores_of_criteria_that_do_not_apply(agent_scoring: Scoring) -> None:
    criteria = agent_scoring.for_item(item())
    assert agent_scoring.overall({"accuracy": 4, "completeness": 2, "tool_usage": 1}, criteria) == 3.0


def test_unequal_weights_give_the_weighted_mean() -> None:
    scoring = Scoring.from_config(rubric([crit("a", weight=3.0), crit("b", weight=1.0)]))
    # (5*3 + 1*1) / 4 = 4.0, not the plain mean 3.0
    assert scoring.overall({"a": 5, "b": 1}, scoring.for_item(item())) == 4.0


def test_category_weights_change_the_overall_on_the_same_scores() -> None:
    scoring = Scoring.from_config(reply_rubric())
    scores = {"naturalness": 8, "appropriateness": 6, "intent_match": 4}
    default = scoring.overall(scores, scoring.for_item(item(category="casual")))
    emotion = scoring.overall(scores, scoring.for_item(item(category="emotion")))
    assert default == pytest.approx(0.4 * 8 + 0.3 * 6 + 0.3 * 4)  # 6.2
    assert default == pytest.approx(6.2)
    assert emotion == pytest.approx(0.5 * 8 + 0.3 * 6 + 0.2 * 4)  # 6.6
    assert emotion == pytest.approx(6.6)


def test_weights_not_summing_to_one_are_normalised() -> None:
    scoring = Scoring.from_config(rubric([crit("a", lo=0, hi=10, weight=4), crit("b", lo=0, hi=10, weight=1)]))
    assert scoring.overall({"a": 10, "b": 5}, scoring.for_item(item())) == pytest.approx(9.0)


def test_always_applied_criteria_weighted_zero_are_rejected() -> None:
    # items without x would be scored on a and b alone, which the author weighted 0
    with pytest.raises(RubricError, match="without `when`.*weights sum to 0"):
        Scoring.from_config(rubric([crit("a", weight=0.0), crit("b", weight=0.0), crit("c", when="x")]))


def test_category_weights_zeroing_the_always_applied_criteria_are_rejected() -> None:
    with pytest.raises(RubricError, match="category_weights.calm: weights sum to 0"):
        Scoring.from_config(rubric([crit("a"), crit("b"), crit("c", when="x")],
                                   category_weights={"calm": {"a": 0.0, "b": 0.0}}))


# --- passed ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("overall", "expected"), [(3.5, True), (3.6, True), (5.0, True), (3.49, False), (1.0, False)])
def test_passed_is_at_least_the_threshold(agent_scoring: Scoring, overall: float, expected: bool) -> None:
    assert agent_scoring.passed(overall) is expected


def test_passed_is_none_without_a_threshold_or_a_score(agent_scoring: Scoring) -> None:
    assert agent_scoring.passed(None) is None
    assert Scoring.from_config(reply_rubric()).passed(9.0) is None


def test_exact_threshold_from_equal_weight_criteria_passes(agent_scoring: Scoring) -> None:
    criteria = agent_scoring.for_item(item())
    assert agent_scoring.passed(agent_scoring.overall({"accuracy": 3, "completeness": 4}, criteria)) is True


@pytest.mark.parametrize(("category", "scores"), [
    (None, {"naturalness": 10, "appropriateness": 9, "intent_match": 1}),  # 4 + 2.7 + 0.3
    ("emotion", {"naturalness": 5, "appropriateness": 9, "intent_match": 9}),  # 2.5 + 2.7 + 1.8
])
def test_weighted_overall_exactly_at_threshold_passes(category: str | None, scores: dict[str, float]) -> None:
    # summed naively in floats these land an ulp below 7 (6.999999999999999)
    scoring = Scoring.from_config(reply_rubric(pass_threshold=7.0))
    overall = scoring.overall(scores, scoring.for_item(item(category=category)))
    assert overall == 7.0
    assert scoring.passed(overall) is True


# --- score aggregations ----------------------------------------------------------------------------


def test_registered_score_aggregations() -> None:
    assert SCORE_AGGREGATIONS.names() == ["mean", "median"]
    assert SCORE_AGGREGATIONS.get("mean")([1.0, 2.0, 6.0]) == 3.0
    assert SCORE_AGGREGATIONS.get("median")([1.0, 2.0, 6.0]) == 2.0
    assert SCORE_AGGREGATIONS.get("median")([1.0, 2.0, 3.0, 10.0]) == 2.5
    assert isinstance(SCORE_AGGREGATIONS.get("median")([1, 3, 2]), float)


def test_unknown_score_aggregation_names_the_known_ones() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown score aggregation 'mode'; known: mean, median"):
        SCORE_AGGREGATIONS.get("mode")
