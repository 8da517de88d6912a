"""`make run` = judgesweep with no overrides: LLMBar Natural, replayed GPT-4 Vanilla, both orders. Its output piped
(no terminal): progress log records, never a bar."""

from __future__ import annotations

import re

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from tests.integration.conftest import REPO
from tests.integration.shared import assert_only_what_a_user_reads, ours, published


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    """One default run shared by the tests below (it takes a few seconds)."""
    import subprocess
    import sys

    from tests.integration.conftest import CliRun, offline_env  # noqa: F401

    tmp = tmp_path_factory.mktemp("default")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    proc = subprocess.run([sys.executable, "-m", "runner", f"hydra.run.dir={tmp / 'run'}", f"tracking.uri={uri}",
                           f"tracking.artifact_location={tmp / 'mlartifacts'}", f"cache.path={tmp / 'cache.sqlite'}"],
                          cwd=REPO, env=offline_env(), capture_output=True, text=True, timeout=600)
    return CliRun(proc=proc, run_dir=tmp / "run", mlflow_uri=uri)


def test_default_run_prints_the_published_llmbar_numbers(default_run):
    assert default_run.proc.returncode == 0, default_run.output
    assert "accuracy AB 95.0% / BA 96.0% / mean 95.5% / both 93.0% / positional agreement 95.0%" in \
        default_run.proc.stdout


def test_default_run_summary_matches_statistics_json(default_run):
    summary = default_run.summary()
    assert ours(summary["gold"]) == published("gpt-4_vanilla")
    s = summary["summary"]
    assert s["total_subsets"] == 100 and s["successful_evaluations"] == 100
    assert set(s["final_verdict_distribution"]) == {"output_1", "output_2", "tie"}
    assert len(summary["aggregated_results"]) == 100
    assert len(default_run.journal()) == 200  # 100 items x 2 orders, every call journaled


def test_default_run_is_in_mlflow_with_params_metrics_and_raw_responses(default_run, monkeypatch):
    # MlflowClient.load_table searches runs through the fluent API, i.e. the process-wide tracking URI, which another
    # test of this process may have set (mlflow.set_tracking_uri wins over the environment variable).
    monkeypatch.setenv("MLFLOW_TRACKING_URI", default_run.mlflow_uri)
    mlflow.set_tracking_uri(default_run.mlflow_uri)
    client = MlflowClient(tracking_uri=default_run.mlflow_uri)
    exp = client.get_experiment_by_name("judgesweep")
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1
    run = runs[0]
    p, m = run.data.params, run.data.metrics
    assert p["choice.judge"] == "replay_gpt4" and p["choice.prompt"] == "llmbar_vanilla"
    assert p["judge.model"] == "replay/gpt-4" and p["judge.temperature"] == "0.0"
    assert len(p["prompt_sha256"]) == 64 and p["litellm_version"]
    assert "git_sha" in p
    assert m["accuracy/ab"] == pytest.approx(0.95) and m["accuracy/ba"] == pytest.approx(0.96)
    assert m["agreement/positional"] == pytest.approx(0.95)
    # trust and bias: LLMBar's positional agreement again, through the bias report; agreement with gold + CIs
    assert m["bias/position_consistency"] == pytest.approx(0.95)
    assert m["agreement/accuracy_all"] == pytest.approx(0.955) and m["agreement/cohen_kappa"] > 0.9
    assert m["agreement/accuracy_all_ci_low"] < 0.955 < m["agreement/accuracy_all_ci_high"]
    assert 0 <= m["bias/first_position_p"] <= 1 and "bias/length_excess" in m
    assert m["judge/parse_failure_rate"] == 0.0 and m["judge/calls"] == 200
    assert "latency/p95_s" in m and "tokens/total" in m
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.yaml", "summary.json", "results.jsonl", "journal.jsonl", "results_table.json"} <= artifacts
    table = client.load_table(exp.experiment_id, "results_table.json", run_ids=[run.info.run_id])
    assert len(table) == 200
    assert set(table["raw_response"]) == {"Output (a)", "Output (b)"}


def test_default_run_prints_only_what_a_user_reads(default_run):
    # `make run`'s run step (tests/integration/test_make_run.py runs the Makefile itself): a new MLflow store, no
    # warning from litellm, MLflow or alembic, nothing on stderr
    assert default_run.proc.returncode == 0, default_run.output
    assert default_run.proc.stderr == ""
    assert_only_what_a_user_reads(default_run.proc.stdout)
    assert not (default_run.run_dir / "users_summary.json").exists()  # the users' presets' option, not ours


def test_without_a_terminal_no_bar_is_drawn_only_progress_log_records(default_run):
    # issue 14: piped output gets a one-line progress record (every progress_interval_s and at the stage's end)
    # instead of nothing; the bar itself (cursor movement, bar glyphs) is still never drawn. (Was
    # test_hardening's own process, max_items=3: this process's output is as piped.)
    assert default_run.proc.returncode == 0, default_run.output
    assert "\x1b[" not in default_run.output and "\r" not in default_run.output and "━" not in default_run.output
    progress = [line for line in default_run.output.splitlines() if "calls/s" in line]
    assert progress and all(re.search(r"\[runner\.judging\.progress\]\[INFO\] - judging \d+/200 ", line)
                            for line in progress)
    assert re.search(r"\[runner\.judging\.progress\]\[INFO\] - judging 200/200 \(100%\)", progress[-1])
