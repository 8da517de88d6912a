"""A planted API key reaches the provider and nothing else: no log, journal, result, MLflow record or message."""

from __future__ import annotations

import pytest

from tests.fakes.openai_server import Reply
from tests.integration.conftest import live_judge

CANARY = "sk-canary-7f3a9c1e5b2d4f6a8c0e"


# A key of no provider's shape (a self-hosted server's --api-key). litellm's own filter redacts what looks like a key
# (sk-..., api_key=...) unless LITELLM_DISABLE_REDACT_SECRETS=true; judgesweep's redacts the configured values either
# way, so the guarantee does not rest on litellm's patterns or on that variable.
PLAIN_CANARY = "canary-7f3a9c1e5b2d4f6a8c0e"


# litellm's own redaction off is what tests judgesweep's filter (with it on, litellm masks both canaries itself);
# on, once, that the two together still leave nothing. A provider that echoes the key in its 401 message, as some do:
# the key is used (the Authorization header), the failed call journaled, and the key written nowhere: no log (every
# logger at DEBUG logs more than a run's default INFO: what was test_canary_key_is_used_but_never_written, a run at
# INFO, is covered by the (CANARY, "on") case), journal, result, MLflow store or message.
@pytest.mark.parametrize(("canary", "litellm_redaction"), [(CANARY, "off"), (PLAIN_CANARY, "off"), (CANARY, "on")])
def test_canary_key_never_reaches_a_log_with_litellm_and_httpx_at_debug(run_process, fake_server, tmp_path, canary,
                                                                        litellm_redaction):
    # a process: Hydra's file handler and stdout are the point. litellm's DEBUG logger prints the call it was given
    # (api_key='...') and httpx's logs requests; the filter on every handler redacts the key from all of them.
    fake_server.enqueue(Reply(status=401, error_message=f"Incorrect API key provided: {canary}"))
    fake_server.reply = lambda body: "[[A]]"
    result = run_process(*live_judge(fake_server), "judge.api_key_env=JUDGESWEEP_CANARY_KEY", "prompt=mtbench_pair",
                         "rubric=mtbench_verdict", "dataset=chat_vs_simple", "max_items=2", "max_error_rate=1.0",
                         "hydra.job_logging.loggers.LiteLLM.level=DEBUG", "hydra.job_logging.loggers.httpx.level=DEBUG",
                         "+hydra.job_logging.loggers.httpcore.level=DEBUG", "hydra.job_logging.root.level=DEBUG",
                         env={"JUDGESWEEP_CANARY_KEY": canary,
                              "LITELLM_DISABLE_REDACT_SECRETS": str(litellm_redaction == "off").lower()})
    assert result.proc.returncode == 0, result.output
    assert any(h.get("authorization") == f"Bearer {canary}" for h in fake_server.headers_seen)
    logged = (result.run_dir / "judgesweep.log").read_text()
    assert "litellm.acompletion(" in logged  # litellm's DEBUG record of the call and its arguments is there
    assert any(row["error_type"] == "AuthenticationError" for row in result.journal())
    assert canary not in result.output
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "mlflow.db" for p in written) and any(p.name == "journal.jsonl" for p in written)
    leaks = [str(p) for p in written if canary.encode() in p.read_bytes()]
    assert leaks == []
