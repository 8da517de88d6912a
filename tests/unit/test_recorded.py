"""runner.llm.recorded: reading a user's recordings file and checking it covers a run's calls (no sockets)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.llm import recorded


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "rec.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def line(**fields: object) -> str:
    return json.dumps(fields)


def test_a_line_that_does_not_parse_names_file_and_line(tmp_path):
    path = write(tmp_path, line(id=1, output="x"), '{"id": 2, "output": ')
    with pytest.raises(recorded.RecordingsError, match=rf"{path}:2: not a JSON object"):
        recorded.load(path)


@pytest.mark.parametrize(("fields", "message"), [
    ({"output": "x"}, "'id' must be a string or an integer"),
    ({"id": 1}, "'output' .* must be a string"),
    ({"id": 1, "output": "x", "order": "AB"}, "'order' must be one of"),
    ({"id": 1, "output": "x", "repeat": -1}, "'repeat' must be an integer >= 0"),
])
def test_a_line_with_a_bad_field_names_file_line_and_field(tmp_path, fields, message):
    path = write(tmp_path, json.dumps(fields))
    with pytest.raises(recorded.RecordingsError, match=rf"{path}:1: {message}"):
        recorded.load(path)


def test_a_key_recorded_twice_names_both_lines(tmp_path):
    path = write(tmp_path, line(id="a", order="ab", output="1"), line(id="b", output="2"),
                 line(id="a", order="ab", repeat=0, output="3"))
    with pytest.raises(recorded.RecordingsError, match=r"lines 1 and 3 both record id a, order ab, repeat 0"):
        recorded.load(path)


def test_missing_repeat_is_0_ids_are_text_and_order_ab_falls_back_to_a_line_without_order(tmp_path):
    path = write(tmp_path, line(id=7, output="first"), line(id=7, order="ba", output="swapped", finish_reason="length"))
    assert recorded.lookup(path, ("7", "ab", 0)).output == "first"
    assert recorded.lookup(path, ("7", None, 0)).output == "first"
    assert recorded.lookup(path, ("7", "ba", 0)).finish_reason == "length"
    with pytest.raises(recorded.RecordingMiss, match="no recorded output for id 7, order ba, repeat 1"):
        recorded.lookup(path, ("7", "ba", 1))


def test_coverage_names_the_first_missing_calls_and_how_many_are_missing(tmp_path):
    path = write(tmp_path, line(id="a", output="x"))
    keys = [("a", None, 0)] + [(f"i{n}", None, 0) for n in range(7)]
    with pytest.raises(recorded.RecordingsError, match=(
            rf"recordings file {path} has no output for 7 planned judge call\(s\): id i0, order none, repeat 0; .*"
            r"id i4, order none, repeat 0 \(and 2 more\)")):
        recorded.check_coverage(path, keys)
    assert recorded.check_coverage(path, keys[:1]) == 1


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(recorded.RecordingsError, match=rf"recordings file {tmp_path / 'no.jsonl'} does not exist"):
        recorded.load(tmp_path / "no.jsonl")


def test_a_recorded_failure_covers_its_call_and_keeps_its_error(tmp_path):
    # issue 30: recordings_export writes failed calls as failures; they cover the call and replay as failures
    path = write(tmp_path, line(id="a", output="[[A]]"), line(id="b", error="fake error 500",
                                                             error_type="InternalServerError"))
    assert recorded.check_coverage(path, [("a", None, 0), ("b", None, 0)]) == 2
    failure = recorded.lookup(path, ("b", None, 0))
    assert failure.output is None
    assert failure.failure_message() == "recorded failure: InternalServerError: fake error 500"
    assert recorded.lookup(path, ("a", None, 0)).failure_message() is None
    bad = write(tmp_path, line(id="c", error=5))
    with pytest.raises(recorded.RecordingsError, match=rf"{bad}:1: 'error' .* must be strings"):
        recorded.load(bad)
