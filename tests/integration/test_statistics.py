"""A registered statistic shows everywhere: pairwise win rate and agreement with gold per category and per tag
(runner/modes/pairwise/groups.py) in summary.json, MLflow, the console, report.html and the sweep table. And a
renamed metric is still found in a baseline run logged under its old name."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from runner.core.run_settings import TrackingConfig
from runner.outputs import sweep, tracking
from tests.integration.shared import by_topic, topic_overrides, write_topic_dataset


def test_per_category_and_per_tag_statistics_reach_every_output(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_topic_dataset(dataset)
    fake_server.reply = by_topic
    runs = [run_cli(*topic_overrides(fake_server, dataset, tmp_path, job), run_dir=tmp_path / "sweep" / str(job))
            for job in (0, 1)]
    for run in runs:
        assert run.proc.returncode == 0, run.output
    run = runs[0]

    stats = json.loads((run.run_dir / "summary.json").read_text())["statistics"]
    math, code = stats["by_category"]["math"], stats["by_category"]["code"]
    assert math["win_rate"]["value"] == 1.0 and code["win_rate"]["value"] == 0.0
    assert math["agreement"] == {**math["agreement"], "value": 0.5, "n": 2}
    assert math["agreement"]["ci_low"] is not None and math["agreement"]["ci_high"] is not None
    assert code["agreement"]["value"] == 0.0
    assert stats["by_tag"]["hard"]["win_rate"]["value"] == 0.5 and stats["by_tag"]["hard"]["win_rate"]["n"] == 2

    client = MlflowClient(tracking_uri=run.mlflow_uri)
    [logged] = [r for r in client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id])
                if r.data.params.get("seed") == "0"]
    metrics = logged.data.metrics
    assert metrics["by_category/math/win_rate"] == 1.0 and metrics["by_category/code/agreement"] == 0.0
    assert metrics["by_category/math/agreement_ci_low"] == math["agreement"]["ci_low"]
    assert metrics["by_category/math/n"] == 2.0 and metrics["by_tag/hard/win_rate"] == 0.5

    assert "category math (n=2): ties-half rate 100.0%" in run.output
    assert "tag hard (n=2): ties-half rate 50.0%" in run.output
    html = (run.run_dir / "report.html").read_text()
    assert "<h2>category</h2>" in html and "<td>math</td>" in html and "<h2>tag</h2>" in html

    [row, _] = sweep.collect(tmp_path / "sweep")
    assert row["by_category/math/win_rate"] == 1.0 and row["by_category/code/win_rate"] == 0.0
    assert row["by_category/math/agreement_ci_low"] == math["agreement"]["ci_low"]


def test_gwet_ac1_beside_kappa_reaches_every_output_from_one_registration(run_cli, fake_server, tmp_path):
    """Issue 32, Deliver 3: Gwet's AC1 is one function (runner/stats/clusters.py) and one registration
    (runner/modes/pairwise/groups.py) and shows in summary.json, MLflow, the console, report.html and the sweep
    table. The judge names the gold label on 1 of 4 items (q0); judge shares chat 1/2, simple 1/2, gold 3/4, 1/4;
    three categories offered (A, B, tie): pe = 2 * (5/8) * (3/8) / 2 = 15/64, AC1 = (1/4 - 15/64) / (49/64) = 1/49,
    where kappa = (1/4 - 1/2) / (1/2) = -1/2."""
    dataset = tmp_path / "pairs.jsonl"
    write_topic_dataset(dataset)
    fake_server.reply = by_topic
    run = run_cli(*topic_overrides(fake_server, dataset, tmp_path, 0), run_dir=tmp_path / "sweep" / "0")
    assert run.proc.returncode == 0, run.output

    ac1 = json.loads((run.run_dir / "summary.json").read_text())["statistics"]["chance_corrected"]["all"]["gwet_ac1"]
    assert ac1["value"] == pytest.approx(1 / 49) and ac1["n"] == 4
    client = MlflowClient(tracking_uri=run.mlflow_uri)
    [logged] = client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id])
    metrics = logged.data.metrics
    assert metrics["chance_corrected/gwet_ac1"] == pytest.approx(1 / 49) and metrics["chance_corrected/n"] == 4.0
    assert ac1["ci_low"] is not None and metrics["chance_corrected/gwet_ac1_ci_low"] == ac1["ci_low"]
    assert metrics["agreement/cohen_kappa"] == pytest.approx(-0.5)
    assert "chance-corrected agreement with gold (n=4): gwet ac1 0.020" in run.output
    html = (run.run_dir / "report.html").read_text()
    assert "<h2>chance-corrected agreement with gold</h2>" in html and "<td>0.020" in html
    [row] = sweep.collect(tmp_path / "sweep")
    assert row["chance_corrected/gwet_ac1"] == pytest.approx(1 / 49)


def test_a_baseline_logged_under_an_old_metric_name_is_found_in_a_real_store(tmp_path):
    cfg = TrackingConfig(uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    client = MlflowClient(tracking_uri=cfg.uri)
    experiment = client.create_experiment(cfg.experiment, artifact_location=str(tmp_path / "artifacts"))
    old = client.create_run(experiment, run_name="judge=a,prompt=b", tags={"git.branch": "main"})
    client.log_metric(old.info.run_id, "ci/average_overall_low", 6.5)  # as logged before the rename
    client.set_terminated(old.info.run_id, "FINISHED")
    assert tracking.find_baseline(cfg, old.info.run_id, "judge=a,prompt=b", "score/mean_ci_low") == (
        old.info.run_id, 6.5)
    assert tracking.find_baseline(cfg, "latest on main", "judge=a,prompt=b", "score/mean_ci_low") == (
        old.info.run_id, 6.5)


def test_a_gate_on_an_old_metric_name_fails_before_any_call_naming_the_new_one(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_topic_dataset(dataset)
    result = run_cli(*topic_overrides(fake_server, dataset, tmp_path, 0), "gate.baseline_run=latest on main",
                     "gate.metric=ci/average_overall_low")
    assert result.proc.returncode == 1, result.output
    assert "gate.metric='ci/average_overall_low' was renamed to 'score/mean_ci_low'" in result.output
    assert fake_server.requests == []


def by_topic_both_orders(body: dict) -> str:
    """Math: ours (chat) in both orders. Code: always the first answer shown, so the orders disagree."""
    text = " ".join(str(m.get("content")) for m in body["messages"])
    if "a code question" in text:
        return "[[A]]"
    return "[[A]]" if text.index("chat q") < text.index("simple q") else "[[B]]"


def test_one_name_per_number_in_every_output(run_cli, fake_server, tmp_path):
    """Issue 31 point 7: the win rate (ties as half), the wins share (strict wins) and the agreement (every final
    judgment) are one number each on the console, in summary.json, MLflow and the sweep table; a category's
    agreement is the headline's quantity, not the share of items whose combined verdict is right."""
    dataset = tmp_path / "pairs.jsonl"
    write_topic_dataset(dataset)
    fake_server.reply = by_topic_both_orders
    args = [a for a in topic_overrides(fake_server, dataset, tmp_path, 0) if a != "order=fixed"]
    run = run_cli(*args, "order=both", run_dir=tmp_path / "sweep" / "0")
    assert run.proc.returncode == 0, run.output
    summary = json.loads((run.run_dir / "summary.json").read_text())
    # math: ours won both orders (q0 right, q1 wrong); code: the orders disagree, a tie per item, half right
    assert summary["trust"]["win_rate"]["rate"] == 0.75  # (1 + 1 + 0.5 + 0.5) / 4
    assert summary["summary"]["ours_win_rate"] == 0.5  # the users' spelling of the wins share
    accuracy = summary["trust"]["gold_agreement"]["accuracy_all"]
    assert accuracy == 0.5  # 4 of the 8 judgments name the gold label
    by_category = summary["statistics"]["by_category"]
    assert by_category["code"]["agreement"]["value"] == 0.5  # 2 of 4 judgments; the combined verdicts (ties): 0
    assert by_category["math"]["agreement"]["value"] == 0.5 and by_category["code"]["agreement"]["n"] == 2

    client = MlflowClient(tracking_uri=run.mlflow_uri)
    [logged] = client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id])
    metrics = logged.data.metrics
    assert metrics["verdict/win_rate"] == 0.75 and "verdict/win_rate_with_ties" not in metrics
    assert metrics["verdict/ours_wins_share"] == 0.5 and "verdict/ours_win_rate" not in metrics
    assert metrics["agreement/accuracy_all"] == metrics["by_category/code/agreement"] == 0.5

    assert "wins share ours 50.0%" in run.output and "win rate ours" not in run.output
    assert "ties-half rate (ours, a tie half a win) 75.00" in run.output and "win rate (ties" not in run.output
    [row] = sweep.collect(tmp_path / "sweep")
    # issue 44 point 2: the users' ours_win_rate is a column of its own; the ties-half rate is not called a win rate
    assert row["ours_win_rate"] == summary["summary"]["ours_win_rate"] == 0.5 and "win rate" not in row
    assert row["ties-half rate"] == 0.75 and row["agreement"] == 0.5 and row["by_category/code/agreement"] == 0.5


def test_the_sweep_table_reads_a_job_written_before_the_win_rate_was_renamed(tmp_path):
    job = tmp_path / "0"
    job.mkdir()
    (job / "metrics.json").write_text(json.dumps({"verdict/win_rate_with_ties": 0.5556, "judge/calls": 6}))
    [row] = sweep.collect(tmp_path)
    assert row["ties-half rate"] == 0.5556 and row["calls"] == 6


def test_the_logged_position_p_is_the_reports_and_repeats_of_the_same_answers_do_not_shrink_it(
        run_cli, fake_server, tmp_path):
    """Issue 44 point 4: a judge that always names the first slot, 4 items in both orders, ``repeats=3``:
    ``bias/first_position_p`` in MLflow and metrics.json is the report's sign test over items, 2 / 2^4, the p-value
    of one repeat (counting every verdict gave 2 / 2^24; tests/unit/test_bias.py compares with repeats=1)."""
    dataset = tmp_path / "pairs.jsonl"
    write_topic_dataset(dataset)
    fake_server.reply = lambda body: "[[A]]"
    args = [a for a in topic_overrides(fake_server, dataset, tmp_path, 0)
            if a != "order=fixed" and not a.startswith("hydra.run.dir=")]
    run = run_cli(*args, "order=both", "repeats=3", "output.plots=false")
    assert run.proc.returncode == 0, run.output
    client = MlflowClient(tracking_uri=run.mlflow_uri)
    [logged] = client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id])
    p_value = logged.data.metrics["bias/first_position_p"]
    position = run.summary()["bias"]["position"]
    assert p_value == position["sign_test_p"] == 2 / 2**4 and position["binomial_p"] == 2 / 2**24
    assert f"(sign test over items p={p_value:.2g})" in run.output
    assert json.loads((run.run_dir / "metrics.json").read_text())["bias/first_position_p"] == p_value
    assert "<td>bias/first_position_p</td><td>0.125</td>" in (run.run_dir / "report.html").read_text()
