"""The 6-job replay sweep reproduces every published LLMBar statistics.json, and its Swap jobs call the synthesis
stage only on conflicts (the sweep: conftest.replay_sweep, run once per session and read by test_sweep_best,
test_compare and test_results_api too)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.integration.conftest import replay_sweep
from tests.integration.shared import ours, published, sweep_items_blob

NATURAL = Path(__file__).resolve().parents[2] / "runner" / "data" / "llmbar" / "natural.jsonl"
JOBS = {
    ("replay_gpt4", "llmbar_vanilla"): "gpt-4_vanilla",
    ("replay_gpt4", "llmbar_vanilla_norules"): "gpt-4_vanilla_norules",
    ("replay_gpt4", "llmbar_swap"): "gpt-4_swap",
    ("replay_chatgpt", "llmbar_vanilla"): "chatgpt_vanilla",
    ("replay_chatgpt", "llmbar_vanilla_norules"): "chatgpt_vanilla_norules",
    ("replay_chatgpt", "llmbar_swap"): "chatgpt_swap",
}


@pytest.mark.plots  # looks at the figures (drawn: a process keeps output.plots on)
def test_six_job_sweep_reproduces_all_published_statistics(tmp_path_factory):
    # judge=replay_gpt4,replay_chatgpt prompt=llmbar_vanilla,llmbar_vanilla_norules,llmbar_swap
    result = replay_sweep(tmp_path_factory)
    assert result.proc.returncode == 0, result.output
    seen = {}
    for summary_path in result.run_dir.glob("*/summary.json"):
        job_overrides = yaml.safe_load((summary_path.parent / ".hydra" / "overrides.yaml").read_text())
        overrides = dict(kv.split("=", 1) for kv in job_overrides)
        seen[(overrides["judge"], overrides["prompt"])] = json.loads(summary_path.read_text())["gold"]
    assert set(seen) == set(JOBS)
    for job, stats_name in JOBS.items():
        assert ours(seen[job]) == published(stats_name), job
    client = MlflowClient(tracking_uri=result.mlflow_uri)
    runs = client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id])
    jobs = [r for r in runs if "judgesweep.kind" not in r.data.tags]
    assert len(jobs) == 6
    # the sweep is grouped by its tag: the six jobs and the sweep's own run with the table share it
    sweep_tag = {r.data.tags["judgesweep.sweep"] for r in runs}
    assert sweep_tag == {str(result.run_dir.resolve())}
    (table_run,) = [r for r in runs if r.data.tags.get("judgesweep.kind") == "sweep"]
    assert table_run.data.metrics["sweep/jobs"] == 6 and table_run.data.metrics["sweep/failed"] == 0
    artifacts = {a.path for a in client.list_artifacts(table_run.info.run_id)}
    assert {"sweep_table.csv", "sweep_table.json", "frontier.csv", "frontier.png", "report.html"} <= artifacts
    assert all((result.run_dir / name).is_file() for name in ("frontier.csv", "frontier.png", "report.html"))
    assert (result.run_dir / "frontier.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    # replayed calls are worth their recorded model's list price (judge.price_as: gpt-4, gpt-3.5-turbo) though
    # the sweep paid nothing: ChatGPT is the cheap end of the frontier, GPT-4 the accurate end, and the Swap
    # prompt (about 1.7x the calls of vanilla) is dominated for both judges
    frontier = {r["config"]: r for r in csv.DictReader((result.run_dir / "frontier.csv").open())}
    assert {c for c, r in frontier.items() if r["pareto"] == "False"} == {
        "judge=replay_gpt4, prompt=llmbar_swap", "judge=replay_chatgpt, prompt=llmbar_swap"}
    assert all(float(r["cost $"]) == 0.0 and float(r["unpriced calls"]) == 0.0 for r in frontier.values())
    per_1k = {c: float(r["cost/1k items"]) for c, r in frontier.items()}
    assert 20 < per_1k["judge=replay_gpt4, prompt=llmbar_vanilla"] / per_1k[
        "judge=replay_chatgpt, prompt=llmbar_vanilla"] < 100  # $30/$60 vs $0.5/$1.5 per million tokens
    sweep_html = (result.run_dir / "report.html").read_text()
    assert sweep_html.count("data:image/png;base64,") == 1 and "<td>replay_chatgpt</td>" in sweep_html
    assert f"report: {result.run_dir / 'report.html'}" in result.output
    # each job has its report, logged with its run
    assert all((p.parent / "report.html").is_file() for p in result.run_dir.glob("*/summary.json"))
    assert all("report.html" in {a.path for a in client.list_artifacts(r.info.run_id)} for r in jobs)
    table = json.loads((result.run_dir / "sweep_table.json").read_text())
    by_job = {(row["judge"], row["prompt"]): row for row in table}
    assert set(by_job) == set(JOBS)
    assert by_job[("replay_gpt4", "llmbar_vanilla")]["accuracy"] == 0.955
    assert all(row["status"] == "ok" and row["calls"] >= 200 and row["wall s"] > 0 for row in table)
    assert "sweep: 6 jobs" in result.output


def test_swap_strategy_makes_synthesis_calls_only_on_conflicts(tmp_path_factory):
    result = replay_sweep(tmp_path_factory)  # its job judge=replay_gpt4 prompt=llmbar_swap
    assert result.proc.returncode == 0, result.output
    (job,) = [path.parent.parent for path in result.run_dir.glob("*/.hydra/overrides.yaml")
              if {"judge=replay_gpt4", "prompt=llmbar_swap"} <= set(yaml.safe_load(path.read_text()))]
    stages = [json.loads(line)["stage"] for line in (job / "journal.jsonl").read_text().splitlines()]
    # GPT-4's first round disagreed with itself on 7 Natural items: 7 x 2 synthesis calls.
    assert stages.count("judge") == 200 and stages.count("synthesis") == 14


def test_sweep_report_shows_every_item_with_each_jobs_verdict_and_each_run_links_its_mlflow_run(tmp_path_factory):
    """Issue 33, done when: the replay sweep's report (6 jobs) shows every item of the dataset with each job's verdict
    and chip, each cell opening the item in the job's report.html; each job's report.html links to its MLflow run
    (mlflow.json, by the judgesweep.run_uid the report names) and back to the sweep's report."""
    result = replay_sweep(tmp_path_factory)
    assert result.proc.returncode == 0, result.output
    data = sweep_items_blob((result.run_dir / "report.html").read_text(encoding="utf-8"))
    dataset = [json.loads(line)["id"] for line in NATURAL.read_text().splitlines()]
    assert data["items"] == dataset
    client = MlflowClient(tracking_uri=result.mlflow_uri)
    assert sorted(j["job"] for j in data["jobs"]) == list(range(6))
    for job in data["jobs"]:
        job_dir = result.run_dir / str(job["job"])
        finals = json.loads((job_dir / "summary.json").read_text())["aggregated_results"]
        gold = {json.loads(line)["item_id"]: json.loads(line)["gold"]
                for line in (job_dir / "results.jsonl").read_text().splitlines()}
        for n, item in enumerate(data["items"]):
            final = finals[item]["final_verdict"]
            assert data["s"][job["t"][n]] == f"{final} ({finals[item]['confidence']})", (job["job"], item)
            assert data["s"][job["v"][n]] == final and job["st"][n] == ("c" if final == gold[item] else "w")
        assert job["href"] == f"{job['job']}/report.html" and job["head"].startswith("agreement ")

        report = (job_dir / "report.html").read_text(encoding="utf-8")
        assert f'id="item-{dataset[0]}"' in report  # the anchor a cell links to
        assert '<a href="../report.html" data-back>' in report and '<a href="mlflow.json">' in report
        uid = re.search(r"tagged judgesweep.run_uid = ([0-9a-f]{32})", report).group(1)
        (run_id,) = json.loads((job_dir / "mlflow.json").read_text()).values()
        run = client.get_run(run_id)
        assert run.data.tags["judgesweep.run_uid"] == uid
        # issue 44.8: the page names its MLflow run by id under its title, and how to open it (a sqlite store)
        page = f"http://127.0.0.1:5000/#/experiments/{run.info.experiment_id}/runs/{run_id}"
        assert re.search(f"<!--mlflow-run-->MLflow run {run_id} in experiment .*?`mlflow ui --backend-store-uri "
                         f"{re.escape(result.mlflow_uri)}` serves it, then the run is at {re.escape(page)}"
                         "<!--/mlflow-run-->", report), report[:3000]
        # what it is, with its gates' verdict first: judge, prompt, rubric, dataset, date
        for fact in ("<td>judge</td>", "<td>prompt</td>", "<td>rubric</td>", "<td>dataset</td>", "<td>date</td>"):
            assert fact in report
        assert report.index("This run") < report.index("Headline")
        assert "<summary>prompt sent</summary><pre>system: " in report  # each call's prompt, from messages.sqlite


def test_the_sweep_report_links_its_mlflow_run_and_shows_each_items_text(tmp_path_factory):
    """Issue 44.8: the sweep's report names the sweep's MLflow run (the one its table was logged to) under its title,
    and its item view holds each item's instruction and both outputs, as the dataset has them (cut at
    TEXT_CHARS), for the row to show and the search to find."""
    from runner.outputs.sweep_items import TEXT_CHARS
    from runner.outputs.trace_inputs import cut

    result = replay_sweep(tmp_path_factory)
    report = (result.run_dir / "report.html").read_text(encoding="utf-8")
    client = MlflowClient(tracking_uri=result.mlflow_uri)
    (sweep_run,) = client.search_runs([e.experiment_id for e in client.search_experiments()],
                                      filter_string="tags.`judgesweep.kind` = 'sweep'")
    assert re.search(f"<!--mlflow-run-->MLflow run {sweep_run.info.run_id} in experiment .*?/#/experiments/"
                     f"{sweep_run.info.experiment_id}/runs/{sweep_run.info.run_id}<!--/mlflow-run-->", report)
    assert "report.html" in [a.path for a in client.list_artifacts(sweep_run.info.run_id)]
    data = sweep_items_blob(report)
    rows = {r["id"]: r for r in map(json.loads, NATURAL.read_text().splitlines())}
    for item, texts in zip(data["items"], data["x"], strict=True):
        shown = {data["s"][name]: text for name, text in texts}
        row = rows[item]
        assert shown == {"instruction": cut(row["input"], TEXT_CHARS), "output_1": cut(row["output_1"], TEXT_CHARS),
                         "output_2": cut(row["output_2"], TEXT_CHARS)}, item
