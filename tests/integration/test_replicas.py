"""A judge served by two replicas through litellm's Router, driven through the real CLI over loopback HTTP:
the calls are shared, a replica that fails with a 5xx or is down is failed over to the other within the
same attempt, and a replica that refuses its key shows up as failed calls, its key written nowhere."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from tests.fakes.openai_server import FakeOpenAIServer, Reply

pytestmark = pytest.mark.integration

CANARY = "sk-replica-canary-4b8d2e6f0a1c3e5f"
ITEMS = 20
CALLS = ITEMS * 2  # order=both: each item judged in both orders


def replicas(*bases: str, rpm: int = 60_000, key_env: str | None = None) -> str:
    """A Hydra override listing the replicas (the last one with its own key variable, if given). Equal rpm, so
    equal shares; high enough that the client's pacing never waits (at 600 rpm each, 40 calls waited ~1.7 s):
    these tests are about routing, pacing has its own (test_hardening, test_rate_limits)."""
    entries = [f"{{api_base:{base},rpm:{rpm}}}" for base in bases]
    if key_env:
        entries[-1] = f"{{api_base:{bases[-1]},rpm:{rpm},api_key_env:{key_env}}}"
    return f"judge.replicas=[{','.join(entries)}]"


def run_replicas(run_cli, *bases: str, extra: tuple[str, ...] = (), env: dict[str, str] | None = None):
    """Run the CLI with the local_openai judge served by ``bases``."""
    return run_cli("judge=local_openai", "judge.api_base=null", "judge.model=openai/fake-judge",
                   replicas(*bases, key_env="REPLICA_KEY" if env else None), "prompt=mtbench_pair",
                   "rubric=mtbench_verdict", f"max_items={ITEMS}", "order=both",
                   "cache.mode=off", "judge.retry_base_s=0.05", *extra, env=env)


def metrics(result) -> dict[str, float]:
    """The run's metrics in MLflow."""
    mlflow = MlflowClient(tracking_uri=result.mlflow_uri)
    runs = mlflow.search_runs([mlflow.get_experiment_by_name("judgesweep").experiment_id])
    assert len(runs) == 1
    return runs[0].data.metrics


def test_two_replicas_share_the_calls(run_cli):
    with FakeOpenAIServer() as one, FakeOpenAIServer() as two:
        result = run_replicas(run_cli, one.base_url, two.base_url)
        served = len(one.requests), len(two.requests)
    assert result.proc.returncode == 0, result.output
    m = metrics(result)
    assert m["judge/calls"] == CALLS and m["calls/made"] == CALLS and m["judge/errors"] == 0
    assert sum(served) == CALLS  # every call reached exactly one replica: nothing sent twice
    assert min(served) > 0, served  # both took a share (40 fair coins all landing one way: p = 2e-12)
    assert all(row["error_type"] is None and row["attempts"] == 1 for row in result.journal())


@pytest.mark.parametrize("failure", ["500", "down"])
def test_a_failing_replica_is_failed_over_within_the_attempt(run_cli, failure):
    with FakeOpenAIServer() as healthy, FakeOpenAIServer(reply=lambda body: Reply(status=500)) as broken:
        broken_base = broken.base_url
        if failure == "down":
            broken.stop()  # connection refused from now on
        result = run_replicas(run_cli, healthy.base_url, broken_base)
        healthy_served = len(healthy.requests)
        broken_served = len(broken.requests)
    assert result.proc.returncode == 0, result.output
    m = metrics(result)
    assert m["judge/calls"] == CALLS and m["judge/errors"] == 0
    # Every call was answered by the healthy replica, and none needed one of our (slow) retries: the Router
    # moved each call the broken replica drew to the healthy one at once.
    assert healthy_served == CALLS
    assert m["calls/retries"] == 0
    assert all(row["error_type"] is None and row["attempts"] == 1 for row in result.journal())
    if failure == "500":
        assert broken_served > 0  # it did draw calls (p of none: 1e-12)


def test_a_replica_refusing_its_key_fails_its_calls_and_never_writes_the_key(run_cli, tmp_path):
    # An error not worth retrying is not failed over: the refused calls are recorded as such, not hidden
    # behind the other replica's answers; the provider echoes the key, as some do on a 401.
    with FakeOpenAIServer() as open_one, FakeOpenAIServer(
            reply=lambda body: Reply(status=401, error_message=f"Incorrect API key provided: {CANARY}")) as keyed:
        result = run_replicas(run_cli, open_one.base_url, keyed.base_url,
                              extra=("max_error_rate=1.0", "max_unscored_rate=1.0"), env={"REPLICA_KEY": CANARY})
        refused = len(keyed.requests)
        keys_sent = {h.get("authorization") for h in keyed.headers_seen}
        answered = len(open_one.requests)
    assert result.proc.returncode == 0, result.output
    assert keys_sent == {f"Bearer {CANARY}"}
    rows = result.journal()
    errors = [row for row in rows if row["error_type"]]
    assert {row["error_type"] for row in errors} == {"AuthenticationError"}
    assert len(errors) == refused > 0 and answered == CALLS - refused  # one request per call: no failover
    assert all(row["attempts"] == 1 for row in errors)  # and no retry
    assert CANARY not in result.output
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert [str(p) for p in written if CANARY.encode() in p.read_bytes()] == []
