"""A planted API key reaches the provider and nothing else: no log, journal, result, MLflow record or message."""

from __future__ import annotations

import json
import threading

import pytest

from tests.fakes.openai_server import Reply
from tests.integration.conftest import live_judge

CANARY = "sk-canary-7f3a9c1e5b2d4f6a8c0e"


# A key of no provider's shape (a self-hosted server's --api-key). litellm's own filter redacts what looks like a key
# (sk-..., api_key=...) unless LITELLM_DISABLE_REDACT_SECRETS=true; judgesweep's redacts the configured values either
# way, so the guarantee does not rest on litellm's patterns or on that variable.
PLAIN_CANARY = "canary-7f3a9c1e5b2d4f6a8c0e"


class EchoesTheKeyOnce:
    """A provider that echoes the key in its 401 message, as some do: the first call with each key is answered 401
    "Incorrect API key provided: <that key>", every other call [[A]]. (The key is the one of the latest request
    received: a multirun's jobs run one after the other, each with one key.)"""

    def __init__(self, server) -> None:
        self.server, self.lock, self.refused = server, threading.Lock(), set()

    def __call__(self, body: dict) -> Reply:
        key = self.server.headers_seen[-1]["authorization"].removeprefix("Bearer ")
        with self.lock:
            if key in self.refused:
                return Reply(content="[[A]]")
            self.refused.add(key)
        return Reply(status=401, error_message=f"Incorrect API key provided: {key}")


# litellm's own redaction off is what tests judgesweep's filter (with it on, litellm masks both canaries itself);
# on, once, that the two together still leave nothing. litellm reads LITELLM_DISABLE_REDACT_SECRETS when it is
# imported, so one process per setting: with it off, a multirun of one job per canary (each key in a variable of its
# own: judge.api_key_env=A,B), which is also a sweep's logging, one handler set per job; with it on, a single run. The
# key is used (the Authorization header), the failed call journaled, and the key written nowhere: no log (every
# logger at DEBUG logs more than a run's default INFO: what was test_canary_key_is_used_but_never_written, a run at
# INFO, is covered by the (CANARY, "on") case), journal, result, MLflow store or message.
@pytest.mark.parametrize(("canaries", "litellm_redaction"), [((CANARY, PLAIN_CANARY), "off"), ((CANARY,), "on")],
                         ids=["both-canaries-litellm-redaction-off", "sk-canary-litellm-redaction-on"])
def test_canary_key_never_reaches_a_log_with_litellm_and_httpx_at_debug(run_process, fake_server, tmp_path, canaries,
                                                                        litellm_redaction):
    # a process: Hydra's file handler and stdout are the point. litellm's DEBUG logger prints the call it was given
    # (api_key='...') and httpx's logs requests; the filter on every handler redacts the key from all of them.
    fake_server.reply = EchoesTheKeyOnce(fake_server)
    names = [f"JUDGESWEEP_CANARY_KEY_{n}" for n in range(len(canaries))]
    multirun = len(canaries) > 1
    result = run_process(*live_judge(fake_server), f"judge.api_key_env={','.join(names)}", "prompt=mtbench_pair",
                         "rubric=mtbench_verdict", "dataset=chat_vs_simple", "max_items=2", "max_error_rate=1.0",
                         "output.plots=false",  # figures hold no text a key could be in
                         "hydra.job_logging.loggers.LiteLLM.level=DEBUG", "hydra.job_logging.loggers.httpx.level=DEBUG",
                         "+hydra.job_logging.loggers.httpcore.level=DEBUG", "hydra.job_logging.root.level=DEBUG",
                         env={**dict(zip(names, canaries, strict=True)),
                              "LITELLM_DISABLE_REDACT_SECRETS": str(litellm_redaction == "off").lower()},
                         multirun=multirun)
    assert result.proc.returncode == 0, result.output
    jobs = [result.run_dir / str(n) for n in range(len(canaries))] if multirun else [result.run_dir]
    for job, canary in zip(jobs, canaries, strict=True):
        assert any(h.get("authorization") == f"Bearer {canary}" for h in fake_server.headers_seen)
        logged = (job / "judgesweep.log").read_text()
        assert "litellm.acompletion(" in logged  # litellm's DEBUG record of the call and its arguments is there
        journal = [json.loads(line) for line in (job / "journal.jsonl").read_text().splitlines()]
        assert any(row["error_type"] == "AuthenticationError" for row in journal)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "mlflow.db" for p in written) and any(p.name == "journal.jsonl" for p in written)
    for canary in canaries:
        assert canary not in result.output
        leaks = [str(p) for p in written if canary.encode() in p.read_bytes()]
        assert leaks == []
