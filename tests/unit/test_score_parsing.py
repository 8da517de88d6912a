"""Unit tests for runner.judging.parsers.scores: pointwise judge answers as judges actually write them."""

from __future__ import annotations

import json

import pytest

from runner.core.registry import UnknownNameError
from runner.core.types import Criterion, Verdict
from runner.judging.parsers.labels import EMPTY, INVALID_JSON, MISSING_KEY
from runner.judging.parsers.scores import (
    AMBIGUOUS_KEY,
    NOT_A_NUMBER,
    OUT_OF_RANGE,
    SCORE_PARSERS,
    parse_json_scores,
    parse_scores,
    score_schema,
)

ACCURACY = Criterion("accuracy", 1, 5, description="Facts are correct.")
HELPFULNESS = Criterion("helpfulness", 1, 5)
FORMAT = Criterion("format_compliance", 1, 5)
CRITERIA = (ACCURACY, HELPFULNESS, FORMAT)
TEN = (Criterion("relevance", 0, 10), Criterion("depth", 0, 10))


def scores(text: str | None, criteria: tuple[Criterion, ...] = CRITERIA, **params: object) -> Verdict:
    return parse_scores("json_scores", text, criteria, params)


# --- registry and dispatch -------------------------------------------------------------------------


def test_json_scores_is_registered_and_dispatched() -> None:
    assert "json_scores" in SCORE_PARSERS.names()
    assert SCORE_PARSERS.get("json_scores") is parse_json_scores


def test_unknown_score_parser_lists_known_names() -> None:
    with pytest.raises(UnknownNameError, match="json_scores"):
        parse_scores("json_score", "{}", CRITERIA, {})


def test_params_are_checked_against_signature() -> None:
    SCORE_PARSERS.check_params("json_scores", {"scores_key": "ratings", "extra_keys": ["notes"]}, fixed=2)
    with pytest.raises(TypeError, match="score_key"):
        SCORE_PARSERS.check_params("json_scores", {"score_key": "ratings"}, fixed=2)


def test_extra_keys_as_one_string_is_a_config_error() -> None:
    with pytest.raises(TypeError, match="extra_keys"):
        scores('{"accuracy": 4}', extra_keys="reasoning")


@pytest.mark.parametrize("criteria", [(), (ACCURACY, ACCURACY)])
def test_no_or_repeated_criteria_are_a_caller_error(criteria: tuple[Criterion, ...]) -> None:
    with pytest.raises(ValueError, match="criteri"):
        scores('{"accuracy": 4}', criteria)


# --- where the answer is ---------------------------------------------------------------------------

FENCED = """I'll evaluate the response against each criterion.

The answer correctly states that the Treaty of Westphalia was signed in 1648, but it omits the
second treaty signed at Osnabrück. The structure follows the requested bullet format.

```json
{
  "scores": {"accuracy": 4, "helpfulness": 3, "format_compliance": 5},
  "reasoning": "Mostly accurate; misses Osnabrück.",
  "improvement_suggestions": ["Mention both treaties", "Cite a source"]
}
```

Let me know if you need anything else."""


def test_fenced_nested_with_prose_before_and_after() -> None:
    verdict = scores(FENCED)
    assert verdict == Verdict(
        label=None,
        scores={"accuracy": 4.0, "helpfulness": 3.0, "format_compliance": 5.0},
        extras={"reasoning": "Mostly accurate; misses Osnabrück.",
                "improvement_suggestions": ["Mention both treaties", "Cite a source"]},
    )
    assert verdict.ok and verdict.label is None
    assert all(type(v) is float for v in verdict.scores.values())


def test_flat_scores_at_top_level() -> None:
    text = '{"accuracy": 2, "helpfulness": 2, "format_compliance": 4, "reasoning": "Wrong date given."}'
    verdict = scores(text)
    assert dict(verdict.scores) == {"accuracy": 2.0, "helpfulness": 2.0, "format_compliance": 4.0}
    assert dict(verdict.extras) == {"reasoning": "Wrong date given."}


def test_per_criterion_objects_keep_their_reasons() -> None:
    text = """```json
{"scores": {
  "accuracy": {"score": 5, "reason": "All figures match the source."},
  "helpfulness": {"score": 4, "reason": "Answers the question but is terse."},
  "format_compliance": {"score": 3}
}, "reasoning": "Good overall."}
```"""
    verdict = scores(text)
    assert dict(verdict.scores) == {"accuracy": 5.0, "helpfulness": 4.0, "format_compliance": 3.0}
    assert verdict.extras["criterion_reasons"] == {
        "accuracy": "All figures match the source.",
        "helpfulness": "Answers the question but is terse.",
    }
    assert verdict.extras["reasoning"] == "Good overall."


def test_flat_per_criterion_objects() -> None:
    text = '{"accuracy": {"score": 1, "reason": "invented"}, "helpfulness": {"score": 2}, "format_compliance": 2}'
    verdict = scores(text)
    assert dict(verdict.scores) == {"accuracy": 1.0, "helpfulness": 2.0, "format_compliance": 2.0}
    assert verdict.extras["criterion_reasons"] == {"accuracy": "invented"}


def test_restated_example_then_real_answer_last_wins() -> None:
    text = """You asked me to answer in the form
{"scores": {"accuracy": 3, "helpfulness": 3, "format_compliance": 3}, "reasoning": "..."}
so here is my evaluation.

The response is accurate and well formatted but does not address the follow-up question.

{"scores": {"accuracy": 5, "helpfulness": 2, "format_compliance": 5}, "reasoning": "Skips the follow-up."}"""
    verdict = scores(text)
    assert dict(verdict.scores) == {"accuracy": 5.0, "helpfulness": 2.0, "format_compliance": 5.0}
    assert verdict.extras["reasoning"] == "Skips the follow-up."


def test_placeholder_template_restated_then_real_answer() -> None:
    text = """Format: {"accuracy": <1-5>, "helpfulness": <1-5>, "format_compliance": <1-5>}

{"accuracy": 4, "helpfulness": 4, "format_compliance": 1}"""
    assert dict(scores(text).scores) == {"accuracy": 4.0, "helpfulness": 4.0, "format_compliance": 1.0}


def test_later_object_without_criteria_does_not_hide_the_answer() -> None:
    text = FENCED + '\n\nFor reference the user asked: {"question": "When was Westphalia signed?"}'
    assert scores(text).scores["accuracy"] == 4.0


def test_braces_and_escaped_quotes_inside_strings_do_not_end_the_answer() -> None:
    text = r'''{"scores": {"accuracy": 4, "helpfulness": 4, "format_compliance": 2},
 "reasoning": "Returns {\"ok\": true} but a stray } and \"{\" break the template"}'''
    verdict = scores(text)
    assert dict(verdict.scores) == {"accuracy": 4.0, "helpfulness": 4.0, "format_compliance": 2.0}
    assert verdict.extras["reasoning"] == 'Returns {"ok": true} but a stray } and "{" break the template'


def test_prose_braces_are_not_objects() -> None:
    text = 'The code uses `if (x) { return y; }` correctly.\n{"accuracy": 5, "helpfulness": 5, "format_compliance": 5}'
    assert scores(text).ok


# --- what is not JSON is not guessed -----------------------------------------------------------------


@pytest.mark.parametrize("text", [
    '{"accuracy": 4, "helpfulness": 3, "format_compliance": 5,}',
    "{'accuracy': 4, 'helpfulness': 3, 'format_compliance': 5}",
    '```json\n{"scores": {"accuracy": 4, "helpfulness": 3, "format_compliance": 5}, "reasoning": "Mostly',
    "Accuracy: 4/5\nHelpfulness: 3/5\nFormat compliance: 5/5",
])
def test_malformed_or_missing_json_is_invalid(text: str) -> None:
    assert scores(text) == Verdict(label=None, reason=INVALID_JSON)


def test_trailing_comma_in_outer_object_does_not_expose_inner_scores() -> None:
    # The inner scores object decodes on its own; reading it would silently drop the broken answer.
    text = '{"scores": {"accuracy": 4, "helpfulness": 3, "format_compliance": 5}, "reasoning": "ok",}'
    assert scores(text).reason == INVALID_JSON


def test_truncated_answer_after_example_does_not_fall_back_to_the_example() -> None:
    text = """Expected format: {"accuracy": 3, "helpfulness": 3, "format_compliance": 3}

{"reasoning": "The response explains the algorithm step by step but the complexity analysis is"""
    assert scores(text).reason == INVALID_JSON


def test_objects_without_any_criterion_are_missing_key() -> None:
    text = '{"score": 4, "reasoning": "fine"}'
    assert scores(text) == Verdict(label=None, reason=MISSING_KEY)


@pytest.mark.parametrize("text", [None, "", "   \n\t "])
def test_empty_text(text: str | None) -> None:
    assert scores(text) == Verdict(label=None, reason=EMPTY)


# --- values --------------------------------------------------------------------------------------------


def test_scores_as_strings_are_read_when_exactly_numbers() -> None:
    verdict = scores('{"accuracy": "4", "helpfulness": " 4.5 ", "format_compliance": "5"}')
    assert dict(verdict.scores) == {"accuracy": 4.0, "helpfulness": 4.5, "format_compliance": 5.0}


@pytest.mark.parametrize(("value", "shown"), [
    ('"4/5"', "4/5"),
    ('"high"', "high"),
    ('"4 points"', "4 points"),
    ('"N/A"', "N/A"),
    ("null", "null"),
    ("[4, 5]", "[4, 5]"),
    ("true", "true"),
    ("false", "false"),
    ("NaN", "NaN"),
    ("Infinity", "Infinity"),
    ('"nan"', "nan"),
    ('"1e999"', "1e999"),
    ('{"rating": 4}', '{"rating": 4}'),
])
def test_non_numbers_are_rejected_naming_the_criterion(value: str, shown: str) -> None:
    text = f'{{"accuracy": {value}, "helpfulness": 3, "format_compliance": 3}}'
    assert scores(text).reason == f"{NOT_A_NUMBER}: accuracy={shown}"


def test_long_non_number_is_clipped_in_the_reason() -> None:
    text = json.dumps({"accuracy": "excellent " * 20, "helpfulness": 3, "format_compliance": 3})
    reason = scores(text).reason
    assert reason.startswith(f"{NOT_A_NUMBER}: accuracy=excellent") and reason.endswith("...")
    assert len(reason) < 80


def test_seven_on_a_one_to_five_scale_is_out_of_range() -> None:
    verdict = scores('{"scores": {"accuracy": 4, "helpfulness": 7, "format_compliance": 5}}')
    assert verdict == Verdict(label=None, reason=f"{OUT_OF_RANGE}: helpfulness=7 not in [1, 5]")
    assert not verdict.ok and not verdict.scores


def test_zero_on_a_one_to_five_scale_is_out_of_range() -> None:
    verdict = scores('{"accuracy": 0, "helpfulness": 3, "format_compliance": 3}')
    assert verdict.reason == f"{OUT_OF_RANGE}: accuracy=0 not in [1, 5]"


def test_out_of_range_string_and_huge_integer_are_shown_as_sent() -> None:
    assert scores('{"accuracy": "5.5", "helpfulness": 3, "format_compliance": 3}').reason == (
        f"{OUT_OF_RANGE}: accuracy=5.5 not in [1, 5]")
    huge = "9" * 400  # float() of this overflows; it is still just out of range
    reason = scores(f'{{"accuracy": {huge}, "helpfulness": 3, "format_compliance": 3}}').reason
    assert reason.startswith(f"{OUT_OF_RANGE}: accuracy=999") and reason.endswith("not in [1, 5]")


def test_fractional_bounds_are_shown_exactly() -> None:
    half = (Criterion("accuracy", 0.5, 4.5),)
    assert scores('{"accuracy": 5}', half).reason == f"{OUT_OF_RANGE}: accuracy=5 not in [0.5, 4.5]"


def test_half_points_and_bounds_are_accepted_unrounded() -> None:
    verdict = scores('{"accuracy": 3.5, "helpfulness": 1, "format_compliance": 5.0}')
    assert dict(verdict.scores) == {"accuracy": 3.5, "helpfulness": 1.0, "format_compliance": 5.0}


def test_zero_to_ten_criteria() -> None:
    text = 'Scores below.\n```json\n{"relevance": 0, "depth": 10, "reasoning": "Off topic but thorough."}\n```'
    verdict = scores(text, TEN)
    assert dict(verdict.scores) == {"relevance": 0.0, "depth": 10.0}
    assert scores('{"relevance": 11, "depth": 5}', TEN).reason == f"{OUT_OF_RANGE}: relevance=11 not in [0, 10]"
    assert scores('{"relevance": -1, "depth": 5}', TEN).reason == f"{OUT_OF_RANGE}: relevance=-1 not in [0, 10]"


# --- which keys ------------------------------------------------------------------------------------------


def test_first_missing_criterion_is_named() -> None:
    verdict = scores('{"scores": {"helpfulness": 4}, "reasoning": "no accuracy or format given"}')
    assert verdict == Verdict(label=None, reason=f"{MISSING_KEY}: accuracy")


def test_criteria_split_between_nested_and_flat_are_not_merged() -> None:
    text = '{"scores": {"accuracy": 4, "helpfulness": 3}, "format_compliance": 5}'
    assert scores(text).reason == f"{MISSING_KEY}: format_compliance"


def test_unasked_criterion_is_ignored_but_kept() -> None:
    criteria = (ACCURACY, HELPFULNESS)  # the example has no expected tool calls: tool_usage does not apply
    nested = '{"scores": {"accuracy": 4, "helpfulness": 5, "tool_usage": 1}, "reasoning": "No tools needed."}'
    verdict = scores(nested, criteria)
    assert dict(verdict.scores) == {"accuracy": 4.0, "helpfulness": 5.0}
    assert verdict.extras["ignored_scores"] == {"tool_usage": 1}
    flat = '{"accuracy": 4, "helpfulness": 5, "tool_usage": "N/A", "overall": 4.5, "reasoning": "x", "pass": true}'
    verdict = scores(flat, criteria)
    assert dict(verdict.scores) == {"accuracy": 4.0, "helpfulness": 5.0}
    assert verdict.extras["ignored_scores"] == {"overall": 4.5}  # only score-like values at the top level
    assert verdict.extras["pass"] is True


def test_judges_own_pass_is_recorded_not_interpreted() -> None:
    text = '{"scores": {"accuracy": 1, "helpfulness": 1, "format_compliance": 1}, "pass": true}'
    verdict = scores(text)
    assert verdict.ok and verdict.extras == {"pass": True}
    assert scores(text.replace("true", '"yes"')).extras == {"pass": "yes"}


def test_loose_key_matching() -> None:
    text = '{"Scores": {"Accuracy": 4, "HELPFULNESS": 3, "Format Compliance": 5}}'
    assert dict(scores(text).scores) == {"accuracy": 4.0, "helpfulness": 3.0, "format_compliance": 5.0}
    text = '{"accuracy": 4, "helpfulness": 3, "format-compliance": 2}'
    assert scores(text).scores["format_compliance"] == 2.0


def test_exact_key_wins_over_loose_match() -> None:
    text = '{"accuracy": 4, "Accuracy": 1, "helpfulness": 3, "format_compliance": 5}'
    verdict = scores(text)
    assert verdict.scores["accuracy"] == 4.0
    assert verdict.extras["ignored_scores"] == {"Accuracy": 1}


def test_two_loose_matches_are_ambiguous() -> None:
    text = '{"Accuracy": 4, "ACCURACY": 1, "helpfulness": 3, "format_compliance": 5}'
    assert scores(text).reason == f"{AMBIGUOUS_KEY}: accuracy"


def test_custom_scores_key_and_extra_keys() -> None:
    text = '{"ratings": {"accuracy": 4, "helpfulness": 3, "format_compliance": 5}, "notes": "n", "reasoning": "r"}'
    verdict = scores(text, scores_key="ratings", extra_keys=["notes"])
    assert verdict.ok and dict(verdict.extras) == {"notes": "n"}


# --- the verdict itself -----------------------------------------------------------------------------------


def test_unicode_text_and_values() -> None:
    text = """评估如下 — the answer is in 日本語 as requested. ✅
```json
{"scores": {"accuracy": 5, "helpfulness": 4, "format_compliance": 5},
 "reasoning": "正確で、丁寧な説明。Emoji 👍 kept.", "improvement_suggestions": ["Añadir un ejemplo"]}
```"""
    verdict = scores(text)
    assert verdict.scores["accuracy"] == 5.0
    assert verdict.extras["reasoning"] == "正確で、丁寧な説明。Emoji 👍 kept."
    assert verdict.extras["improvement_suggestions"] == ["Añadir un ejemplo"]


def test_scores_and_extras_are_read_only_and_json_serialisable() -> None:
    verdict = scores(FENCED)
    with pytest.raises(TypeError):
        verdict.scores["accuracy"] = 1.0  # type: ignore[index]
    with pytest.raises(TypeError):
        verdict.extras["pass"] = True  # type: ignore[index]
    json.dumps({"scores": dict(verdict.scores), "extras": dict(verdict.extras)})


def test_deeply_nested_garbage_does_not_raise() -> None:
    text = '{"a": ' * 50_000 + "1" + "}" * 50_000
    assert scores(text).reason in (INVALID_JSON, MISSING_KEY)


# --- score_schema ------------------------------------------------------------------------------------------


def test_score_schema_is_strict_and_lists_every_criterion() -> None:
    schema = score_schema(CRITERIA)
    assert json.loads(json.dumps(schema)) == schema
    scores_schema = schema["properties"]["scores"]
    assert scores_schema["required"] == ["accuracy", "helpfulness", "format_compliance"]
    assert set(scores_schema["properties"]) == set(scores_schema["required"])
    assert scores_schema["additionalProperties"] is False
    assert schema["required"] == ["scores", "reasoning", "improvement_suggestions"]
    assert set(schema["properties"]) == set(schema["required"])
    assert schema["additionalProperties"] is False
    assert schema["properties"]["improvement_suggestions"] == {"type": "array", "items": {"type": "string"}}
    accuracy = scores_schema["properties"]["accuracy"]
    assert accuracy == {"type": "number", "description": "Facts are correct. Score from 1 to 5."}
    assert "minimum" not in json.dumps(schema) and "maximum" not in json.dumps(schema)


def test_score_schema_returns_a_fresh_schema_each_time() -> None:
    first = score_schema(CRITERIA)
    first["properties"]["improvement_suggestions"]["items"]["type"] = "integer"
    assert score_schema(CRITERIA)["properties"]["improvement_suggestions"]["items"] == {"type": "string"}


def test_score_schema_answer_round_trips_through_the_parser() -> None:
    schema = score_schema(TEN, extra_keys=("reasoning", "pass"), scores_key="ratings")
    assert schema["properties"]["pass"] == {"type": "boolean"}
    assert schema["properties"]["ratings"]["properties"]["depth"]["description"] == "Score from 0 to 10."
    answer = {"ratings": {"relevance": 7, "depth": 2.5}, "reasoning": "ok", "pass": False}
    verdict = scores(json.dumps(answer), TEN, scores_key="ratings")
    assert dict(verdict.scores) == {"relevance": 7.0, "depth": 2.5}
    assert dict(verdict.extras) == {"reasoning": "ok", "pass": False}
