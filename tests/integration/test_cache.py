"""The response cache: an identical rerun makes no HTTP call; repeats stay independent samples;
read_only never writes; hits and dollars saved are reported and logged."""

from __future__ import annotations

import json

from mlflow.tracking import MlflowClient


def write_dataset(path, n: int = 4) -> None:
    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"q{i}", "prompt": f"question {i}", "chat": f"chat {i}",
                                 "simple_chat": f"simple {i}"}) + "\n")


def overrides(server, dataset) -> list[str]:
    # A priced model name (litellm's local cost map knows gpt-4o-mini) served by the loopback server.
    return ["judge=local_openai", f"judge.api_base={server.base_url}", "judge.model=openai/gpt-4o-mini",
            "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple", f"dataset.path={dataset}",
            "repeats=3", "order=both"]


def metrics(result) -> dict[str, float]:
    client = MlflowClient(tracking_uri=result.mlflow_uri)
    runs = client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id],
                              order_by=["attributes.start_time DESC"])
    return runs[0].data.metrics


def test_identical_rerun_is_served_from_the_cache(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    first = run_cli(*overrides(fake_server, dataset))
    assert first.proc.returncode == 0, first.output
    assert len(fake_server.requests) == 4 * 3 * 2  # repeats are independent samples: not served from cache
    spent = metrics(first)["cost/usd_total"]
    assert spent > 0 and metrics(first)["calls/made"] == 24

    fake_server.reset()
    second = run_cli(*overrides(fake_server, dataset))
    assert second.proc.returncode == 0, second.output
    assert fake_server.requests == []
    assert {row["source"] for row in second.journal()} == {"cache"}
    m = metrics(second)
    assert m["calls/cache_hits"] == 24 and m["calls/made"] == 0
    assert m["cost/usd_saved"] == spent and m["cost/usd_total"] == 0.0
    assert "cache hits 24" in second.proc.stdout
    assert (second.run_dir / "results.jsonl").read_bytes() == (first.run_dir / "results.jsonl").read_bytes()


def test_read_only_cache_reads_but_never_writes_and_off_ignores_it(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset, n=2)
    run_cli(*overrides(fake_server, dataset), "cache.mode=read_only", "tracking=off")
    assert len(fake_server.requests) == 12
    fake_server.reset()
    run_cli(*overrides(fake_server, dataset), "cache.mode=read_only", "tracking=off")
    assert len(fake_server.requests) == 12  # nothing was written the first time
    fake_server.reset()
    run_cli(*overrides(fake_server, dataset), "tracking=off")  # read_write fills it
    fake_server.reset()
    hit = run_cli(*overrides(fake_server, dataset), "cache.mode=read_only", "tracking=off")
    assert fake_server.requests == [] and hit.proc.returncode == 0
    off = run_cli(*overrides(fake_server, dataset), "cache.mode=off", "tracking=off")
    assert len(fake_server.requests) == 12 and off.proc.returncode == 0


def test_a_different_decoding_parameter_misses_the_cache(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset, n=2)
    run_cli(*overrides(fake_server, dataset), "tracking=off")
    fake_server.reset()
    run_cli(*overrides(fake_server, dataset), "judge.temperature=0.5", "tracking=off")
    assert len(fake_server.requests) == 12
