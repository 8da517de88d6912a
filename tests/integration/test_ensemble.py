"""judge=ensemble through the real CLI: replayed GPT-4 + ChatGPT on LLMBar Natural (every aggregation,
Dawid-Skene against the truth, read back from MLflow), and two live members on the loopback server."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from runner.outputs import results
from runner.stats.dawid_skene import dawid_skene
from tests.integration.launching import Rendezvous
from tests.integration.shared import live_members

COMBINES = ("majority_vote", "weighted", "mean", "median", "dawid_skene")


def test_replayed_gpt4_and_chatgpt_ensemble_on_llmbar_with_every_aggregation(run_cli):
    result = run_cli("judge=ensemble", "judge.combine=dawid_skene", "dataset=llmbar_natural")
    assert result.proc.returncode == 0, result.output
    section = result.summary()["ensemble"]
    assert section["members"] == ["replay_gpt4", "replay_chatgpt"]
    assert section["annotators"] == ["replay_chatgpt/ab", "replay_chatgpt/ba", "replay_gpt4/ab", "replay_gpt4/ba"]
    assert set(section["by_combine"]) == set(COMBINES)
    # Dawid-Skene, from the four annotators' agreement alone, lands within a few points of each judge's true
    # accuracy on Natural (GPT-4 95.5 %, ChatGPT 81.5 % of their verdicts)
    ds = section["dawid_skene"]
    assert ds["converged"]
    for member, truth in ds["true_accuracy"].items():
        assert abs(ds["estimated_accuracy"][member] - truth) < 0.03, (member, ds)
    assert ds["true_accuracy"]["replay_gpt4"] > ds["true_accuracy"]["replay_chatgpt"]
    for line in ("ensemble of replay_gpt4, replay_chatgpt: combine=dawid_skene", "dawid_skene replay_gpt4: estimated"):
        assert line in result.output

    client = MlflowClient(tracking_uri=result.mlflow_uri)
    (run,) = client.search_runs(client.search_experiments()[0].experiment_id)
    metrics = run.data.metrics
    for method in COMBINES:
        assert 0.5 < metrics[f"ensemble/{method}/accuracy_all"] <= 1.0, method
    # the headline is the chosen aggregation's; every member keeps its own metrics
    assert metrics["agreement/accuracy_all"] == metrics["ensemble/dawid_skene/accuracy_all"]
    assert metrics["member/replay_gpt4/judge/calls"] == metrics["member/replay_chatgpt/judge/calls"] == 200
    assert metrics["judge/calls"] == 400
    assert abs(metrics["dawid_skene/replay_chatgpt/estimated_accuracy"]
               - metrics["dawid_skene/replay_chatgpt/true_accuracy"]) < 0.03
    assert run.data.params["judge.combine"] == "dawid_skene"

    for member in ("replay_gpt4", "replay_chatgpt"):
        member_dir = result.run_dir / "members" / member
        assert len((member_dir / "journal.jsonl").read_text().splitlines()) == 200
        assert json.loads((member_dir / "summary.json").read_text())["trust"]["gold_agreement"]["n"] == 200
    rows = [json.loads(line) for line in (result.run_dir / "results.jsonl").read_text().splitlines()]
    assert {r["judge"] for r in rows} == {"replay_gpt4", "replay_chatgpt"} and len(rows) == 400
    assert "Ensemble aggregations" in (result.run_dir / "report.html").read_text()

    # the results API: every member's calls with a judge column, from results.jsonl or, for a run that never
    # finished, from the members' journals
    loaded = results.load(result.run_dir)
    assert loaded.judgments.groupby("judge").size().to_dict() == {"replay_chatgpt": 200, "replay_gpt4": 200}
    assert loaded.metrics.iloc[0]["ensemble/dawid_skene/accuracy_all"] == pytest.approx(
        metrics["ensemble/dawid_skene/accuracy_all"])
    (result.run_dir / "results.jsonl").unlink()
    unfinished = results.load(result.run_dir)
    assert unfinished.judgments.groupby("judge").size().to_dict() == {"replay_chatgpt": 200, "replay_gpt4": 200}


def test_an_ensemble_s_report_shows_each_member_s_answers_per_item(run_cli):
    result = run_cli("judge=ensemble", "dataset=llmbar_natural", "max_items=5", "tracking=off")
    assert result.proc.returncode == 0, result.output
    report = (result.run_dir / "report.html").read_text()
    assert "<h2>Items (5)</h2>" in report
    for member in ("replay_gpt4", "replay_chatgpt"):  # 5 items x 2 orders each
        assert report.count(f"<td>member {member}, order ab, repeat 0</td>") == 5


def test_live_members_judge_at_the_same_time_and_a_resumed_run_pays_for_nothing(run_cli, fake_server):
    rendezvous = Rendezvous({1, 2})  # opens only when both members have a request in flight
    fake_server.reply = rendezvous
    overrides = (*live_members(fake_server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "max_items=6",
                 "tracking=off", "cache.mode=off")
    result = run_cli(*overrides)
    assert result.proc.returncode == 0, result.output
    assert rendezvous.met.is_set(), f"the members never overlapped; seeds seen: {rendezvous.seen}"
    seeds = [body.get("seed") for body in fake_server.requests]
    assert sorted(seeds) == [1] * 12 + [2] * 12
    summary = result.summary()
    assert summary["summary"]["final_verdict_distribution"]  # every item got the ensemble's verdict
    assert summary["summary"]["successful_evaluations"] == 6
    assert "dawid_skene" in summary["ensemble"]["by_combine"]

    # a member's rate limit is operational: a resume may change it (its prompt or model may not)
    again = run_cli(*overrides, "judge.members.a.rpm=6000", f"resume={result.run_dir}", run_dir=result.run_dir)
    assert again.proc.returncode == 0, again.output
    assert len(fake_server.requests) == 24  # every answer came from the members' journals


def test_an_ensemble_with_one_member_fails_before_any_call(run_cli, fake_server):
    result = run_cli("judge=ensemble", "~judge@judge.members.replay_chatgpt", "~judge.weights.replay_chatgpt",
                     "tracking=off")
    assert result.proc.returncode == 1
    assert "two or more judge.members" in result.output


def test_pointwise_ensemble_scores_each_reply_with_the_mean_of_its_members(run_cli, fake_server):
    fixed = {1: 8, 2: 6}  # member a always scores 8 on every criterion, member b always 6

    def reply(body: dict) -> str:
        score = fixed[body["seed"]]
        scores = {"naturalness": score, "appropriateness": score, "intent_match": score}
        return json.dumps({"scores": scores, "reasoning": f"seed {body['seed']}"})

    fake_server.reply = reply
    result = run_cli("experiment=reply_quality", *live_members(fake_server), "judge.combine=mean", "repeats=1",
                     "gate.min_mean_score=7.5", "tracking=off")
    # the ensemble's mean (7.0) is what the gate sees: below 7.5, exit 1 with the gate's line
    assert result.proc.returncode == 1, result.output
    assert "gate.min_mean_score: mean score 7.000 < 7.5" in result.output
    summary = result.summary()
    assert summary["summary"]["average_overall"] == 7.0
    assert {d["overall"] for d in summary["detailed_results"]} == {7.0}
    assert all(d["scores"] == {"naturalness": 7.0, "appropriateness": 7.0, "intent_match": 7.0}
               for d in summary["detailed_results"])
    section = summary["ensemble"]
    assert {m: h["average_overall"] for m, h in section["member_headline"].items()} == {"a": 8.0, "b": 6.0}
    assert section["score_agreement"]["pairwise"][0]["mean_abs_diff"] == 2.0
    assert "human_correlation" in summary["summary"]  # the ensemble's scores against the human ratings
    assert "member a: mean 8.00" in result.output
    metrics = json.loads((result.run_dir / "metrics.json").read_text())
    assert metrics["score/mean"] == 7.0 and metrics["member/a/score/mean"] == 8.0
    assert metrics["member/b/judge/calls"] == metrics["member/a/judge/calls"] == len(summary["detailed_results"])


def test_dawid_skene_posteriors_per_item_in_results_summary_and_report(run_cli):
    result = run_cli("judge=ensemble", "+aggregation@judge.combine=dawid_skene", "dataset=llmbar_natural")
    assert result.proc.returncode == 0, result.output
    aggregated = result.summary()["aggregated_results"]
    rows = [json.loads(line) for line in (result.run_dir / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 400 and len(aggregated) == 100
    # recomputed from the rows alone: each member/order is an annotator, its vote the output it preferred
    votes: dict[str, dict[str, str | None]] = {}
    for r in rows:
        vote = r["winner"] if r["status"] == "scored" else None
        votes.setdefault(f"{r['judge']}/{r['order']}", {})[r["item_id"]] = vote
    fit = dawid_skene(votes)
    assert any(0.05 < p["output_1"] < 0.95 for p in fit["posteriors"].values())  # not all certain: a real check
    for item, entry in aggregated.items():
        posterior = entry["details"]["posterior"]
        assert posterior == pytest.approx(fit["posteriors"][item], abs=1e-6), item
        assert entry["final_verdict"] == max(posterior, key=posterior.get)
        # every row of the item carries the same posterior in results.jsonl
        assert all(r["posterior"] == posterior for r in rows if r["item_id"] == item)
    # the report's drill-down says it per item, ours first
    html = (result.run_dir / "report.html").read_text()
    shown = [item for item in aggregated if f'data-id="{item}"' in html]
    assert shown
    p = aggregated[shown[0]]["details"]["posterior"]
    assert f"posterior: output_1 {p['output_1']:.2f}, output_2 {p['output_2']:.2f}" in html


def test_a_single_judge_run_writes_no_posterior(run_cli):
    result = run_cli("judge=replay_gpt4", "dataset=llmbar_natural", "max_items=5")
    assert result.proc.returncode == 0, result.output
    assert all("details" not in entry for entry in result.summary()["aggregated_results"].values())
    rows = [json.loads(line) for line in (result.run_dir / "results.jsonl").read_text().splitlines()]
    assert rows and all("posterior" not in r for r in rows)
