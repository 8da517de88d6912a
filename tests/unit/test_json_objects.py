"""Unit tests for runner.judging.parsers.json_objects: the one JSON extractor behind the label and score parsers."""

from __future__ import annotations

import json

import pytest

from runner.judging.parsers.json_objects import MALFORMED, json_objects, scan_objects


def every_start(text: str) -> list[dict]:
    """What the label parser's extractor did before it was shared: ``raw_decode`` at every brace."""
    decoder, found, start = json.JSONDecoder(), [], text.find("{")
    while start != -1:
        try:
            obj, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            start = text.find("{", start + 1)
            continue
        found.append(obj)
        start = text.find("{", end)
    return found


CASES = [
    "",
    "no braces at all",
    '{"winner": "A"}',
    'Sure.\n```json\n{"reasoning": "A is right", "winner": "A"}\n```\nHope that helps.',
    'Here: {"winner": "A", "scores": {"a": {"acc": 9}, "b": {"acc": 3}}} -- done',
    '{"reason": "braces {like this} and \\"quotes\\" inside", "winner": "A"}',
    '{"winner": "B"}\nOn second thought:\n{"winner": "A"}',
    '{"winner": "B", oops\n{"winner": "A"}',
    '{"scores": {"accuracy": 4}, "reasoning": "ok",}',
    "{'winner': 'A'} then {\"winner\": \"B\"}",
    '{"winner": "A"',
    '{"a": "x} {"winner": "A"}',
    '{ "a" : { } }{}{"b":[{"c":null}]}',
    '{"a": "{\\"b\\": 1}"} {"n": -Infinity, "m": NaN}',
    '{"a": "unterminated } {"b": 2}',
    "The code uses `if (x) { return y; }` correctly.\n{\"ok\": true}",
    "{" * 2000,
    '{"a":' * 2000,
    '{"a":' * 2000 + '{"winner": "A"}',
    '{"a":[' * 500 + '{"winner": "A"}',
    '{"k": "{"' * 300,
]


@pytest.mark.parametrize("text", CASES)
def test_json_objects_finds_what_decoding_at_every_brace_found(text: str) -> None:
    assert json_objects(text) == every_start(text)


def test_an_object_nested_in_a_malformed_one_is_found_by_labels_but_not_by_scores() -> None:
    text = '{"scores": {"accuracy": 4}, "reasoning": "ok",}'
    assert json_objects(text) == [{"accuracy": 4}]
    assert list(scan_objects(text)) == [MALFORMED]


def test_scan_marks_each_malformed_object_in_order() -> None:
    text = 'Format: {"a": <1-5>}\n{"a": 4}\n{"b": oops}\n{"c": 1}'
    assert list(scan_objects(text)) == [MALFORMED, {"a": 4}, MALFORMED, {"c": 1}]


def test_a_truncated_object_hides_everything_after_it_from_the_scan() -> None:
    text = '{"a": 3}\n\n{"reasoning": "cut off here {"a": 5}'
    assert list(scan_objects(text)) == [{"a": 3}, MALFORMED]
    assert json_objects(text) == [{"a": 3}, {"a": 5}]


def test_prose_braces_are_not_candidates() -> None:
    assert list(scan_objects("{x} {{y}} \\frac{a}{b} {1: 2}")) == []


def test_many_unclosed_braces_are_no_objects() -> None:
    assert json_objects("{" * 20_000) == []
    assert list(scan_objects('{"a":' * 20_000)) == [MALFORMED]
    assert json_objects('{"a":' * 20_000 + '{"winner": "A"}') == [{"winner": "A"}]


def test_an_object_nested_deeper_than_the_decoder_can_read_is_malformed_not_an_error() -> None:
    # Which nested object is shallow enough to decode depends on the caller's stack depth, so only the
    # outcome for the whole text is checked: the scan refuses it, the label view finds no crash.
    text = '{"a":' * 1500 + "1" + "}" * 1500
    assert list(scan_objects(text)) == [MALFORMED]
    assert all(isinstance(obj, dict) for obj in json_objects(text))
