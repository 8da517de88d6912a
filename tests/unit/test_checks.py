"""Unit tests for runner.judging.checks: the ai_phrases check, running checks by name, and start-up validation."""

from __future__ import annotations

import pytest

from runner.core.registry import UnknownNameError
from runner.judging.checks import CHECKS, DEFAULT_AI_PHRASES, ai_phrases, check_params, run_checks

REQUIRED_DEFAULTS = (
    "I understand",
    "I'd be happy to",
    "Let me know",
    "Is there anything else",
    "As an AI",
    "I hope this helps",
    "Feel free to",
    "Great question",
    "Certainly!",
    "I apologize for any confusion",
)


def test_defaults_include_the_required_phrases() -> None:
    assert isinstance(DEFAULT_AI_PHRASES, tuple)
    assert set(REQUIRED_DEFAULTS) <= set(DEFAULT_AI_PHRASES)


@pytest.mark.parametrize("phrase", DEFAULT_AI_PHRASES)
def test_every_default_phrase_is_found_on_its_own(phrase: str) -> None:
    assert ai_phrases(f"Some answer. {phrase} more text") == [phrase]


def test_clean_text_has_no_violations() -> None:
    assert ai_phrases("The capital of France is Paris. Its population is about two million.") == []
    assert ai_phrases("") == []


def test_found_phrases_come_once_each_in_configured_order() -> None:
    text = "Let me know if this works. I hope this helps! Let me know again. I understand."
    assert ai_phrases(text) == ["I understand", "Let me know", "I hope this helps"]


@pytest.mark.parametrize(
    "text",
    ["I understand.", "i understand, but", "Yes, I understand", "(I understand)", "I  understand", "I understand's"],
)
def test_word_boundary_positives(text: str) -> None:
    assert ai_phrases(text, phrases=["I understand"]) == ["I understand"]


@pytest.mark.parametrize(
    "text",
    ["I understanding this", "AI understand", "I understands", "Kindly let me knowledge", "asian AIs"],
)
def test_substring_inside_a_longer_word_does_not_match(text: str) -> None:
    assert ai_phrases(text, phrases=["I understand", "Let me know", "As an AI"]) == []


def test_phrase_split_by_newline_or_tab_still_matches() -> None:
    assert ai_phrases("I hope this\nhelps") == ["I hope this helps"]
    assert ai_phrases("Feel\t \n free to ask.") == ["Feel free to"]


def test_phrase_ending_in_punctuation_matches_without_a_word_boundary() -> None:
    assert ai_phrases("Certainly! Here is the code.") == ["Certainly!"]
    assert ai_phrases("Certainly!Here is the code.") == ["Certainly!"]
    assert ai_phrases("Certainly, here is the code.") == []
    assert ai_phrases("Uncertainly! it goes") == []  # the word-character start still needs a boundary


def test_curly_and_straight_apostrophes_match_each_other() -> None:
    assert ai_phrases("I\u2019d be happy to help.") == ["I'd be happy to"]
    assert ai_phrases("I'd be happy to help.", phrases=["I\u2019d be happy to"]) == ["I\u2019d be happy to"]
    assert ai_phrases("Id be happy to help.") == []


def test_case_sensitivity() -> None:
    assert ai_phrases("AS AN AI language model") == ["As an AI"]
    assert ai_phrases("AS AN AI language model", case_sensitive=True) == []
    assert ai_phrases("As an AI language model", case_sensitive=True) == ["As an AI"]


def test_custom_phrase_list_replaces_the_defaults() -> None:
    text = "Great question! In summary, delve into the details."
    assert ai_phrases(text, phrases=["delve into", "In summary,", "tapestry"]) == ["delve into", "In summary,"]
    assert ai_phrases(text, phrases=[]) == []


def test_regex_characters_in_phrases_are_literal() -> None:
    assert ai_phrases("costs $5 (approx.)", phrases=["$5 (approx.)"]) == ["$5 (approx.)"]
    assert ai_phrases("a.b", phrases=["a*b"]) == []


def test_bad_phrase_configurations_raise() -> None:
    with pytest.raises(TypeError, match="list of strings"):
        ai_phrases("As an AI", phrases="As an AI")
    with pytest.raises(ValueError, match="empty phrase"):
        ai_phrases("anything", phrases=["  "])


def test_ai_phrases_is_registered() -> None:
    assert "ai_phrases" in CHECKS.names()
    assert CHECKS.get("ai_phrases") is ai_phrases


def test_run_checks_returns_violations_by_name() -> None:
    text = "Great question! The answer is 4."
    assert run_checks(text, [("ai_phrases", {})]) == {"ai_phrases": ["Great question"]}
    assert run_checks(text, [("ai_phrases", {"phrases": ["answer is 5"]})]) == {"ai_phrases": []}
    assert run_checks(text, []) == {}


def test_run_checks_rejects_unknown_and_duplicate_names() -> None:
    with pytest.raises(UnknownNameError, match="known: .*ai_phrases"):
        run_checks("text", [("no_such_check", {})])
    with pytest.raises(ValueError, match="twice"):
        run_checks("text", [("ai_phrases", {}), ("ai_phrases", {"case_sensitive": True})])


def test_check_params_accepts_valid_parameters() -> None:
    check_params("ai_phrases", {})
    check_params("ai_phrases", {"phrases": ["x"], "case_sensitive": True})


def test_check_params_rejects_unknown_name_and_bad_parameter() -> None:
    with pytest.raises(UnknownNameError, match="no_such_check"):
        check_params("no_such_check", {})
    with pytest.raises(TypeError, match="ai_phrases"):
        check_params("ai_phrases", {"phrase": ["typo"]})
    with pytest.raises(TypeError):
        check_params("ai_phrases", {"text": "passed twice"})
