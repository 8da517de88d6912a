"""`judgesweep-compare` over the 6-job LLMBar replay sweep, read from and logged to a real MLflow store (a copy of
the sweep's: the sweep is run once per session, test_replay_sweep checks it too)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from runner.app import compare_cli as compare_main
from runner.outputs.compare_outcomes import RunResults, outcomes, read_rows
from tests.integration.conftest import REPO, CliRun, copy_store, offline_env, replay_sweep
from tests.integration.shared import exact_sign_flip_p, published


def compare_cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """Run ``python -m runner.app.compare_cli`` offline."""
    return subprocess.run([sys.executable, "-m", "runner.app.compare_cli", *args], cwd=cwd, env=offline_env(),
                          capture_output=True, text=True, timeout=600)


def compare_here(*args: str) -> subprocess.CompletedProcess:
    """``judgesweep-compare`` in this process (its main() with these arguments): exit code, stdout and stderr as the
    command would give them."""
    out, err, saved = io.StringIO(), io.StringIO(), dict(os.environ)
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            compare_main.main(list(args))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["judgesweep-compare", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> CliRun:
    """The replay sweep (6 jobs, no network: conftest.REPLAY_SWEEP, the one test_replay_sweep checks, run once per
    session), shared by the tests below, with a copy of its MLflow store that the comparisons are logged to."""
    shared = replay_sweep(tmp_path_factory)
    assert shared.proc.returncode == 0, shared.output
    store = copy_store(shared.mlflow_uri, tmp_path_factory.mktemp("compare"))
    return CliRun(proc=shared.proc, run_dir=shared.run_dir, mlflow_uri=store)


@pytest.fixture(scope="module")
def compared(sweep, tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict]:
    """The comparison of the sweep, given as a directory relative to the working directory."""
    out = tmp_path_factory.mktemp("compared") / "out.json"
    proc = compare_cli("--sweep", sweep.run_dir.name, "--tracking-uri", sweep.mlflow_uri, "--json", str(out),
                       cwd=sweep.run_dir.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, json.loads(out.read_text())


def test_the_sweep_comparison_prints_a_table_with_holm_corrected_p_values(compared):
    proc, comparison = compared
    header = next(line for line in proc.stdout.splitlines() if "metric A" in line)
    for column in ("A", "B", "n", "metric A", "metric B", "diff [CI]", "simultaneous CI", "test", "p", "p Holm"):
        assert column in header
    assert "Holm over 15 pairs" in proc.stdout
    assert proc.stdout.count("judge=replay_gpt4,prompt=llmbar_vanilla_norules") == 5  # each run is in 5 pairs
    assert comparison["n_pairs"] == 15 and len(comparison["pairs"]) == 15
    assert comparison["dataset"] == "llmbar_natural" and comparison["unit"] == "item"
    # the item is the unit: 100 items, each one outcome (its two orders averaged), not 200 judgments
    assert all(pair["n"] == 100 and pair["dropped_a"] == pair["dropped_b"] == 0 for pair in comparison["pairs"])
    # inter-judge agreement over all six runs' verdicts
    inter = comparison["inter_judge"]
    assert len(inter["judges"]) == 6 and inter["fleiss_n"] == 200 and 0 < inter["fleiss_kappa"] < 1
    assert "agreement among all 6 runs' verdicts: Fleiss kappa" in proc.stdout


def test_holm_p_values_follow_the_step_down_rule(compared):
    pairs = sorted(compared[1]["pairs"], key=lambda pair: pair["p_value"])
    m = len(pairs)
    assert m == 15 and all(pair["p_value"] is not None for pair in pairs)
    expected, running = [], 0.0
    for rank, pair in enumerate(pairs):
        running = max(running, min(1.0, (m - rank) * pair["p_value"]))
        expected.append(running)
    holm = [pair["p_holm"] for pair in pairs]
    assert holm == pytest.approx(expected)
    assert all(h >= pair["p_value"] for h, pair in zip(holm, pairs, strict=True))
    assert holm == sorted(holm)  # monotone in the raw p-values
    assert compared[1]["n_significant"] == sum(h < 0.05 for h in holm)


def test_gpt4_vs_chatgpt_vanilla_matches_the_published_accuracies(compared):
    by_label = {(p["label_a"], p["label_b"]): p for p in compared[1]["pairs"]}
    gpt4, chatgpt = "judge=replay_gpt4,prompt=llmbar_vanilla", "judge=replay_chatgpt,prompt=llmbar_vanilla"
    pair = by_label.get((gpt4, chatgpt)) or by_label[(chatgpt, gpt4)]
    accuracy = {gpt4: published("gpt-4_vanilla")["accuracy_mean"],
                chatgpt: published("chatgpt_vanilla")["accuracy_mean"]}
    # Over both orders, the accuracy is the mean of the two order accuracies LLMBar publishes.
    assert pair["metric_a"] == pytest.approx(accuracy[pair["label_a"]])
    assert pair["metric_b"] == pytest.approx(accuracy[pair["label_b"]])
    assert pair["difference"] == pytest.approx(accuracy[pair["label_b"]] - accuracy[pair["label_a"]])
    assert pair["ci_low"] <= pair["difference"] <= pair["ci_high"]
    # an item right in one order of two is half right: not a 0/1 outcome, so the permutation test, per item
    assert pair["test"] == "sign_flip_exact" and pair["p_value"] < 0.05 and pair["significant"]
    assert pair["ci_method"] == "paired_t" and (pair["ci_low"] > 0 or pair["ci_high"] < 0)


def test_every_p_value_is_the_exact_one_and_not_floored_by_a_resample_count(sweep, compared, tmp_path):
    client = MlflowClient(tracking_uri=sweep.mlflow_uri)
    comparison = compared[1]
    values = {}
    for run in comparison["runs"]:
        path = Path(client.download_artifacts(run["run_id"], "results.jsonl", str(tmp_path / run["run_id"])))
        values[run["run_id"]] = outcomes(RunResults(run["run_id"], run["choices"], read_rows(path))).values
    for pair in comparison["pairs"]:
        a, b = values[pair["a"]], values[pair["b"]]
        expected = exact_sign_flip_p([b[key] - a[key] for key in sorted(a, key=repr)])
        assert pair["test"] == "sign_flip_exact" and pair["test_details"]["lattice"] == "1/2"
        assert pair["p_value"] == pytest.approx(float(expected), rel=1e-9), pair["label_a"] + " vs " + pair["label_b"]
    smallest = min(pair["p_value"] for pair in comparison["pairs"])
    assert smallest < 1 / 2001  # below the old floor of 2,000 sign-flip draws


def test_the_comparison_is_logged_as_an_mlflow_run_with_its_artifact(sweep, compared, tmp_path):
    client = MlflowClient(tracking_uri=sweep.mlflow_uri)
    runs = client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id],
                              filter_string="tags.`judgesweep.kind` = 'comparison'")
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.data.metrics["compare/pairs"] == 15 and run.data.metrics["compare/runs"] == 6
    assert run.data.metrics["compare/significant_holm"] == compared[1]["n_significant"]
    compared_ids = set(run.data.tags["judgesweep.compared_runs"].split(","))
    assert compared_ids == {r["run_id"] for r in compared[1]["runs"]} and len(compared_ids) == 6
    assert f"logged comparison run {run.info.run_id}" in compared[0].stdout
    local = Path(client.download_artifacts(run.info.run_id, "comparison.json", str(tmp_path)))
    logged = json.loads(local.read_text())
    assert logged["pairs"] == compared[1]["pairs"]


def test_run_ids_compare_like_the_sweep_and_bad_input_exits_1(sweep, compared, tmp_path):
    ids = [run["run_id"] for run in compared[1]["runs"][:2]]
    proc = compare_here(*ids, "--tracking-uri", sweep.mlflow_uri, "--no-log")
    assert proc.returncode == 0, proc.stderr
    assert "Holm over 1 pairs" in proc.stdout and "items needed" not in proc.stdout
    planned = compare_here(*ids, "--tracking-uri", sweep.mlflow_uri, "--no-log", "--plan", "--plan-diff", "0.05",
                           "--power", "0.9")
    assert planned.returncode == 0, planned.stderr
    assert "items needed" in planned.stdout and "to detect a difference of 0.05 with power 0.9" in planned.stdout
    bad = {
        "no MLflow run 'not-a-run'": [ids[0], "not-a-run"],
        "need at least 2 runs": [ids[0]],
        "no MLflow run of the sweep": ["--sweep", str(sweep.run_dir / "0")],
    }
    for message, args in bad.items():
        proc = compare_here(*args, "--tracking-uri", sweep.mlflow_uri, "--no-log")
        assert proc.returncode == 1 and message in proc.stderr, (args, proc.stderr)
    # the exit code of the process itself, once: on a store that is not there (refused before MLflow is imported)
    missing = f"sqlite:///{tmp_path / 'none.db'}"
    proc = compare_cli(*ids, "--tracking-uri", missing, "--no-log")
    assert proc.returncode == 1 and f"no MLflow store at {missing}" in proc.stderr, proc.stderr
    assert not (tmp_path / "none.db").exists()
