"""Unit tests for runner.outputs.tracking.safe_params: credentials never reach MLflow params; values are clipped."""

from __future__ import annotations

import pytest

from runner.outputs.tracking import MAX_PARAM_CHARS, safe_params


@pytest.mark.parametrize(
    "key",
    [
        "judge.api_key",
        "api_key",
        "JUDGE.API_KEY",
        "x.token",
        "token",
        "tracking.access_token",
        "secret",
        "db.secret",
        "password",
        "proxy.password",
        "openai_api_key",
    ],
)
def test_credential_keys_are_dropped(key: str) -> None:
    params = safe_params({key: "sk-live-123", "judge.name": "gpt4o_mini"})
    assert params == {"judge.name": "gpt4o_mini"}


@pytest.mark.parametrize(
    "key",
    [
        "judge.max_tokens",
        "judge.api_key_env",
        "judge.model",
        "dataset.id_field",
        "tokens.prompt",
        "judge.tpm",
        "choice.judge",
        "secretary",
    ],
)
def test_ordinary_keys_are_kept(key: str) -> None:
    assert safe_params({key: "value"}) == {key: "value"}


def test_values_become_text_and_none_becomes_empty() -> None:
    params = safe_params({"seed": 0, "max_items": None, "temperature": 0.5, "enabled": True, "labels": ["A", "B"]})
    assert params == {"seed": "0", "max_items": "", "temperature": "0.5", "enabled": "True", "labels": "['A', 'B']"}


def test_long_values_are_clipped_to_mlflows_limit() -> None:
    long = "x" * (MAX_PARAM_CHARS + 500)
    params = safe_params({"rubric.parser.params.patterns": long, "short": "y" * MAX_PARAM_CHARS})
    assert params["rubric.parser.params.patterns"] == "x" * MAX_PARAM_CHARS
    assert params["short"] == "y" * MAX_PARAM_CHARS


def test_input_mapping_is_not_modified() -> None:
    params = {"judge.api_key": "sk", "judge.model": "m"}
    safe_params(params)
    assert params == {"judge.api_key": "sk", "judge.model": "m"}


def test_json_verdict_parser_key_param_is_kept() -> None:
    assert safe_params({"rubric.parser.params.key": "winner"}) == {"rubric.parser.params.key": "winner"}


def test_keys_mlflow_refuses_are_spelled_in_its_characters_and_stay_distinct() -> None:
    """Issue 44 point 4: rubric=arena_hard's verdict tokens and a gold map's keys (``A>B``) are config keys; MLflow
    refuses ``>`` and ``=`` in a param name, and the run's tracking failed on them."""
    tokens = {f"rubric.parser.params.tokens.{token}.label": token for token in ("A>>B", "A>B", "A=B", "B>A")}
    logged = safe_params(tokens)
    assert list(logged) == ["rubric.parser.params.tokens.A_3e__3e_B.label", "rubric.parser.params.tokens.A_3e_B.label",
                            "rubric.parser.params.tokens.A_3d_B.label", "rubric.parser.params.tokens.B_3e_A.label"]
    assert list(logged.values()) == list(tokens.values())
    kept = ["choice.dataset", "a-b c:d/e_f.g", "gold_map.très_bien"]  # what MLflow takes is kept as it is
    assert list(safe_params(dict.fromkeys(kept, "x"))) == kept
