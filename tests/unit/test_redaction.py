"""The logging filter that redacts configured secret values from every record before any handler writes it."""

from __future__ import annotations

import io
import logging

import pytest

from runner.core import redaction

KEY = "sk-test-0123456789abcdef"


@pytest.fixture
def captured():
    """A logger with one handler writing to a buffer, the filter installed on it, and the key registered."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger = logging.getLogger("test_redaction")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    redaction.protect([KEY])
    redaction.install([handler])
    yield logger, buffer
    logger.removeHandler(handler)


def test_message_args_and_exception_text_are_redacted(captured) -> None:
    logger, buffer = captured
    logger.debug("request api_key='%s' headers=%r", KEY, {"authorization": f"Bearer {KEY}"})
    logger.info(f"inline {KEY}")
    try:
        raise ValueError(f"bad key {KEY}")
    except ValueError:
        logger.exception("failed")
    logger.warning("%(k)s in a mapping", {"k": KEY})
    text = buffer.getvalue()
    assert KEY not in text
    assert text.count("***") == 5
    assert "bad key ***" in text


def test_installing_twice_adds_one_filter() -> None:
    handler = logging.StreamHandler(io.StringIO())
    redaction.install([handler])
    redaction.install([handler])
    assert sum(isinstance(f, redaction.RedactSecrets) for f in handler.filters) == 1


def test_short_and_empty_values_are_not_registered() -> None:
    # a 3-character "key" would redact ordinary words everywhere; real keys are long
    redaction.protect(["", "abc"])
    assert "" not in redaction.protected() and "abc" not in redaction.protected()


def test_a_jobs_keys_and_mlflows_credentials_are_protected(monkeypatch) -> None:
    from runner.core.types import Secret
    from runner.run import job_context

    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "mlflow-password-42")
    job_context.protect_secrets({"JUDGE_KEY": Secret("sk-judge-key-1234")})
    assert {"mlflow-password-42", "sk-judge-key-1234"} <= redaction.protected()
    assert redaction.redact("u:mlflow-password-42 k:sk-judge-key-1234") == "u:*** k:***"
