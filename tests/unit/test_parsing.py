"""Unit tests for runner.judging.parsers.labels: hand-written edge cases and real judge outputs from the fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.core.registry import UnknownNameError
from runner.core.types import TIE, Verdict
from runner.judging.parsers.labels import (
    EMPTY,
    INVALID_JSON,
    LABEL_NOT_OFFERED,
    MISSING_KEY,
    NO_MATCH,
    PARSERS,
    parse_verdict,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "judge_outputs"
AB = ("A", "B")
ABT = ("A", "B", TIE)
ALL_PARSERS = ("llmbar_output", "mtbench_brackets", "json_winner")
COT_PATTERNS = [r"Output \(([ab])\) is better"]


def load_fixture(name: str) -> list[dict]:
    """Rows of one fixture file."""
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def llmbar(text: str | None, labels: tuple[str, ...] = AB, **params: object) -> Verdict:
    return parse_verdict("llmbar_output", text, labels, params)


def mtbench(text: str | None, labels: tuple[str, ...] = ABT) -> Verdict:
    return parse_verdict("mtbench_brackets", text, labels, {})


def json_winner(text: str | None, labels: tuple[str, ...] = ABT, **params: object) -> Verdict:
    return parse_verdict("json_winner", text, labels, params)


# --- registry and dispatch -------------------------------------------------------------------------


def test_all_parsers_registered() -> None:
    assert set(ALL_PARSERS) <= set(PARSERS.names())


def test_unknown_parser_lists_known_names() -> None:
    with pytest.raises(UnknownNameError, match="mtbench_brackets"):
        parse_verdict("mtbench_bracket", "[[A]]", AB, {})


def test_params_are_checked_against_signature() -> None:
    PARSERS.check_params("llmbar_output", {"patterns": COT_PATTERNS}, fixed=2)
    PARSERS.check_params("json_winner", {"key": "verdict"}, fixed=2)
    with pytest.raises(TypeError):
        PARSERS.check_params("mtbench_brackets", {"patterns": COT_PATTERNS}, fixed=2)
    with pytest.raises(TypeError):
        PARSERS.check_params("json_winner", {"keys": "winner"}, fixed=2)


# --- every parser ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_PARSERS)
@pytest.mark.parametrize("text", [None, "", "   ", "\n\t \n"])
def test_empty_text_is_unscored(name: str, text: str | None) -> None:
    assert parse_verdict(name, text, ABT, {}) == Verdict(label=None, reason=EMPTY)


GARBAGE = [
    "I cannot decide.",
    "{",
    "}{",
    "[[",
    "]]",
    "[[D]]",
    "Output (",
    "Output (c) is better",
    "\x00\ufffd\u202e",
    "{" * 5000,
    "[" * 5000 + "{",
    '{"winner": ' * 3000,
    "A" * 100_000,
    '```json\n{"winner": "A",\n```',
]


@pytest.mark.parametrize("name", ALL_PARSERS)
@pytest.mark.parametrize("text", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_never_raises_nor_scores(name: str, text: str) -> None:
    verdict = parse_verdict(name, text, ABT, {})
    assert verdict.label is None
    assert verdict.reason


# --- llmbar_output ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("Output (a)", "A"),
        ("Output (b)", "B"),
        (" Output (b)", "B"),
        ("\n\nOutput (a)\n", "A"),
        ("Output (a) is concise.\n\nOutput (b) is better.", "B"),
        ("Output (b) is better. On reflection, Output (a) is better.", "A"),
        # the first pattern that matches anywhere wins over a later line-start mention
        ("Output (a) is better.\nOutput (b) has typos.", "A"),
    ],
)
def test_llmbar_default_patterns(text: str, label: str) -> None:
    assert llmbar(text) == Verdict(label=label)


def test_llmbar_last_match_wins() -> None:
    assert llmbar("Output (a)\nWait, no.\nOutput (b)").label == "B"


def test_llmbar_no_match() -> None:
    assert llmbar("Both outputs are equally good.") == Verdict(label=None, reason=NO_MATCH)
    assert llmbar("The output (a) is fine").reason == NO_MATCH  # lower-case, mid-line: not a verdict


def test_llmbar_cot_patterns_leave_neither_unscored() -> None:
    text = "Output (a) ignores the format.\n\nTherefore neither Output (a) nor Output (b) is right."
    assert llmbar(text, patterns=COT_PATTERNS) == Verdict(label=None, reason=NO_MATCH)
    assert llmbar(text + " Output (b) is better.", patterns=COT_PATTERNS).label == "B"


def test_llmbar_custom_pattern_and_case() -> None:
    verdict = llmbar("Winner: RESPONSE B", patterns=[r"(?i)winner: response ([ab])"])
    assert verdict == Verdict(label="B")


def test_llmbar_capture_outside_a_b_is_no_match() -> None:
    verdict = llmbar("Winner: Z", patterns=[r"Winner: (\w)"])
    assert verdict == Verdict(label=None, reason=f"{NO_MATCH}: Z")


def test_llmbar_label_not_offered() -> None:
    assert llmbar("Output (a)", labels=("B",)) == Verdict(label=None, reason=f"{LABEL_NOT_OFFERED}: A")


@pytest.mark.parametrize("pattern", [r"Output \([ab]\)", r"(Output) \(([ab])\)"])
def test_llmbar_pattern_needs_one_group(pattern: str) -> None:
    with pytest.raises(ValueError, match="capture group"):
        llmbar("Output (a)", patterns=[pattern])


def test_llmbar_patterns_must_be_a_list() -> None:
    with pytest.raises(TypeError, match="list"):
        llmbar("Output (a)", patterns=r"Output \(([ab])\)")


# --- mtbench_brackets ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("[[A]]", "A"),
        ("My final verdict is [[B]].", "B"),
        ("[[C]]", TIE),
        ("Not [[A]], not [[B]]; final verdict: [[C]]", TIE),
        ("[[C]] at first, but after all [[A]]", "A"),
    ],
)
def test_mtbench_reads_last_bracket(text: str, label: str) -> None:
    assert mtbench(text) == Verdict(label=label)


@pytest.mark.parametrize("text", ["[[A>B]]", "[[A>>B]]", "[[a]]", "[A]", "[[ A ]]", "Assistant A is better"])
def test_mtbench_near_misses_are_no_match(text: str) -> None:
    assert mtbench(text) == Verdict(label=None, reason=NO_MATCH)


def test_mtbench_tie_not_offered() -> None:
    assert mtbench("[[C]]", labels=AB) == Verdict(label=None, reason=f"{LABEL_NOT_OFFERED}: tie")


# --- json_winner -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"winner": "A"}',
        'Sure.\n```json\n{"reasoning": "A is right", "winner": "A"}\n```\nHope that helps.',
        'Here: {"winner": "A", "scores": {"a": {"acc": 9}, "b": {"acc": 3}}} -- done',
        '{"reason": "braces {like this} and \\"quotes\\" inside", "winner": "A"}',
        '{"winner": "B"}\nOn second thought:\n{"winner": "A"}',
        '{"winner": "B", oops\n{"winner": "A"}',
        '[{"winner": "A"}]',
        '{"winner": "A"}\n{"confidence": 0.9}',
    ],
)
def test_json_reads_last_object_with_key(text: str) -> None:
    assert json_winner(text) == Verdict(label="A")


@pytest.mark.parametrize(
    ("value", "label"),
    [
        ("A", "A"),
        ("a", "A"),
        ("Output (a)", "A"),
        ("Response A", "A"),
        ("assistant a", "A"),
        ("model_a", "A"),
        (" B ", "B"),
        ("Output (B)", "B"),
        ("MODEL_B", "B"),
        ("tie", TIE),
        ("TIE", TIE),
        ("C", TIE),
        ("draw", TIE),
        ("Equal", TIE),
        ("both", TIE),
    ],
)
def test_json_value_aliases(value: str, label: str) -> None:
    assert json_winner(json.dumps({"winner": value})) == Verdict(label=label)


@pytest.mark.parametrize(
    ("value", "shown"),
    [("Output (c)", "Output (c)"), ("A or B", "A or B"), (1, "1"), (None, "null"), (["A"], '["A"]')],
)
def test_json_unknown_value_is_no_match_with_value(value: object, shown: str) -> None:
    verdict = json_winner(json.dumps({"winner": value}))
    assert verdict == Verdict(label=None, reason=f"{NO_MATCH}: {shown}")


def test_json_long_value_is_truncated_in_reason() -> None:
    verdict = json_winner(json.dumps({"winner": "x" * 500}))
    assert verdict.label is None
    assert verdict.reason.startswith(f"{NO_MATCH}: xxx")
    assert len(verdict.reason) < 60


@pytest.mark.parametrize("text", ["The winner is A.", "{winner: A}", "{'winner': 'A'}", '{"winner": "A"'])
def test_json_without_object_is_invalid_json(text: str) -> None:
    assert json_winner(text) == Verdict(label=None, reason=INVALID_JSON)


@pytest.mark.parametrize("text", ['{"verdict": "A"}', '{"result": {"winner": "A"}}', "{}"])
def test_json_without_key_is_missing_key(text: str) -> None:
    assert json_winner(text) == Verdict(label=None, reason=MISSING_KEY)


def test_json_custom_key() -> None:
    assert json_winner('{"winner": "B", "verdict": "A"}', key="verdict").label == "A"
    assert json_winner('{"winner": "B"}', key="verdict").reason == MISSING_KEY


def test_json_tie_not_offered() -> None:
    assert json_winner('{"winner": "draw"}', labels=AB) == Verdict(
        label=None, reason=f"{LABEL_NOT_OFFERED}: tie"
    )


# --- real judge outputs (tests/fixtures/judge_outputs, see its README.md) ----------------------------


def test_llmbar_reproduces_every_recorded_winner() -> None:
    rows = load_fixture("llmbar.jsonl")
    assert len(rows) >= 300
    assert {r["expected"] for r in rows} == {"A", "B", None}
    mismatches = []
    for row in rows:
        verdict = parse_verdict("llmbar_output", row["text"], AB, row["params"])
        if verdict.label != row["expected"]:
            mismatches.append((row["source"], row["expected"], verdict))
    assert mismatches == []


def test_llmbar_unscored_rows_say_why() -> None:
    unscored = [r for r in load_fixture("llmbar.jsonl") if r["expected"] is None]
    reasons = {parse_verdict("llmbar_output", r["text"], AB, r["params"]).reason for r in unscored}
    assert reasons == {EMPTY, NO_MATCH}  # empty completions, and "both"/"neither" answers


@pytest.mark.parametrize("name", ALL_PARSERS)
def test_foreign_formats_are_never_scored(name: str) -> None:
    rows = load_fixture("foreign_formats.jsonl")
    assert len(rows) >= 20
    scored = [(r["source"], v) for r in rows if (v := parse_verdict(name, r["text"], ABT, {})).ok]
    assert scored == []
