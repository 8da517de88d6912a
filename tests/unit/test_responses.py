"""What a paid 2xx body is read into (runner.llm.responses): its answer kept whatever else in it is wrong, lone
surrogates replaced and noted, a usage that is not a token count recorded as unknown, an unreadable body as the
reason it has no text."""

from __future__ import annotations

import json

import pytest

from runner.llm.responses import EMPTY_CHOICES, UNDECODABLE_BODY, clean_text, failure, malformed


def body(content: object = "Verdict: [[A]]", usage: object = None, choices: bool = True) -> str:
    answer = [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]
    return json.dumps({"choices": answer if choices else [],
                       "usage": usage if usage is not None else {"prompt_tokens": 10, "completion_tokens": 2}})


def test_clean_text_replaces_only_lone_surrogates_and_says_how_many():
    assert clean_text("ok \x00 \U0001f600", "text") == ("ok \x00 \U0001f600", ())  # NUL and emoji are kept
    cleaned, notes = clean_text(json.loads('"a \\ud800 b \\udfff"'), "text")
    assert cleaned == "a \ufffd b \ufffd"
    assert notes == ("substituted: 2 lone surrogate(s) in the text replaced by U+FFFD",)
    assert clean_text(None, "text") == (None, ())


@pytest.mark.parametrize("usage", [{"prompt_tokens": -50, "completion_tokens": 2}, {"prompt_tokens": 1e18},
                                   {"prompt_tokens": 10**18}, {"prompt_tokens": "lots"}, "lots", [1, 2]])
def test_a_usage_that_is_not_a_token_count_keeps_the_answer_with_tokens_unknown(usage):
    r = malformed(body(usage=usage), 0.0, 1, 0)
    assert r.text == "Verdict: [[A]]" and r.finish_reason == "stop"
    assert not r.tokens_known and r.prompt_tokens == 0 and r.notes[0].startswith("usage_unknown: usage")


def test_a_body_without_choices_is_empty_choices_with_its_usage():
    r = malformed(body(choices=False), 0.0, 1, 0)
    assert (r.text, r.finish_reason, r.prompt_tokens, r.completion_tokens, r.tokens_known) == (
        None, EMPTY_CHOICES, 10, 2, True)


@pytest.mark.parametrize(("raw", "error"), [("[" * 200_000 + "]" * 200_000, "RecursionError"),
                                            ("not json", "JSONDecodeError"), ("[1, 2]", "a list, not an object")])
def test_a_body_that_cannot_be_read_is_undecodable_with_the_reason(raw, error):
    r = malformed(raw, 0.0, 1, 0)
    assert r.text is None and r.finish_reason == UNDECODABLE_BODY and not r.tokens_known
    assert r.notes[0].startswith(f"{UNDECODABLE_BODY}: ") and error in r.notes[0]


def test_a_body_litellm_could_not_decode_keeps_the_decoders_error():
    error = UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
    r = malformed(None, 0.0, 1, 0, error)
    assert r.finish_reason == UNDECODABLE_BODY and "UnicodeDecodeError" in r.notes[0]


def test_a_lone_surrogate_in_an_answer_or_an_error_is_replaced_and_noted():
    r = malformed(body(content="[[A]] \ud800", usage={"prompt_tokens": 1}).replace('"stop"', '"st\\ud800"'),
                  0.0, 1, 0)
    assert r.text == "[[A]] \ufffd" and r.finish_reason == "st\ufffd" and r.substituted and r.tokens_known
    assert len(r.notes) == 2  # one for the text, one for the finish_reason
    failed = failure(RuntimeError("overloaded \ud800"), (), 0.0, 1, 0)
    assert failed.error == "overloaded \ufffd" and failed.substituted
