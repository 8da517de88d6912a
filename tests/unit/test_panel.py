"""Unit tests for runner.modes.panel: an ensemble judge's checks, votes, aggregations and summary, on hand-built
judgments of the real composed config (judge=ensemble)."""

from __future__ import annotations

import dataclasses

import pytest

from runner.core.choices import OrderPolicy
from runner.core.errors import ConfigurationError
from runner.modes import ensemble_check, panel, panel_views
from runner.modes.pairwise import views as pairwise_views
from tests.builders import AB, BA, BASE, OURS, ensemble_cfg, judgment, picking, ref

pytestmark = pytest.mark.usefixtures("hydra_conf")


def test_the_shipped_ensemble_composes_two_replay_members() -> None:
    cfg = ensemble_cfg()
    assert ensemble_check.is_ensemble(cfg)
    assert list(cfg.judge.members) == ["replay_gpt4", "replay_chatgpt"]
    assert cfg.judge.members["replay_gpt4"].model == "replay/gpt-4"
    ensemble_check.check(cfg)


@pytest.mark.parametrize(("overrides", "message"), [
    (["~judge@judge.members.replay_chatgpt", "~judge.weights.replay_chatgpt"], "two or more judge.members"),
    (["+judge.weights.nobody=1"], "judge.weights.nobody: not a member of the ensemble"),
    (["judge.combine=vote"], "judge.combine='vote' is not one of"),
    (["judge.weights={replay_gpt4: 0, replay_chatgpt: 0}"], "not all 0"),
    (["judge.combine=dawid_skene", "order=fixed"], "three or more annotators"),
    (["prompt=agent_output", "rubric=agent_output", "dataset=agent_examples"], "a pointwise ensemble combines scores"),
])
def test_bad_ensembles_fail_naming_the_key(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigurationError) as err:
        ensemble_check.check(ensemble_cfg(*overrides))
    assert message in str(err.value)


def test_a_member_cannot_be_an_ensemble() -> None:
    cfg = ensemble_cfg()
    members = dict(cfg.judge.members)
    members["replay_chatgpt"] = dataclasses.replace(members["replay_chatgpt"], model="ensemble")
    with pytest.raises(ConfigurationError, match="judge.members.replay_chatgpt: a member cannot itself"):
        ensemble_check.check(dataclasses.replace(cfg, judge=dataclasses.replace(cfg.judge, members=members)))


def test_each_member_order_and_repeat_is_an_annotator() -> None:
    by_member = {"a": [picking("1", OURS, AB), judgment("1", BA, None)], "b": [picking("1", BASE, AB)]}
    assert panel.annotator_votes(by_member, ensemble_cfg()) == {
        "a/ab": {"1": OURS}, "a/ba": {"1": None}, "b/ab": {"1": BASE}}
    fixed = dataclasses.replace(ensemble_cfg(), order=OrderPolicy.fixed, repeats=2)
    by_member = {"a": [picking("1", OURS, AB), picking("1", BASE, AB, repeat=1)]}
    assert panel.annotator_votes(by_member, fixed) == {"a/r0": {"1": OURS}, "a/r1": {"1": BASE}}


def votes_of(*labels: str | None) -> dict:
    return {f"m{n}/ab": {"1": label} for n, label in enumerate(labels)}


def test_mean_and_median_average_each_members_preference_for_ours() -> None:
    cfg = ensemble_cfg()
    # member a: ours in both orders (1.0); member b: split (0.5); member c: base (0.0)
    votes = {"a/ab": {"1": OURS}, "a/ba": {"1": OURS}, "b/ab": {"1": OURS}, "b/ba": {"1": BASE},
             "c/ab": {"1": BASE}, "c/ba": {"1": BASE}}
    (mean,), _ = panel.combine("mean", votes, cfg, ["1"])
    (median,), _ = panel.combine("median", votes, cfg, ["1"])
    (majority,), _ = panel.combine("majority_vote", votes, cfg, ["1"])
    assert (mean.final_verdict, median.final_verdict, majority.final_verdict) == ("tie", "tie", "tie")
    votes["c/ba"] = {"1": "tie"}  # c: 0.25, so the mean is 1.75 / 3 > 1/2 while the median stays 0.5
    (mean,), _ = panel.combine("mean", votes, cfg, ["1"])
    (median,), _ = panel.combine("median", votes, cfg, ["1"])
    assert (mean.final_verdict, median.final_verdict) == (OURS, "tie")
    assert mean.confidence == "no_consensus" and mean.details["num_votes"] == 6


def test_weighted_multiplies_each_members_votes_by_its_weight() -> None:
    cfg = ensemble_cfg("judge.weights={replay_gpt4: 3, replay_chatgpt: 1}")
    votes = {"replay_gpt4/ab": {"1": OURS}, "replay_chatgpt/ab": {"1": BASE}, "replay_chatgpt/ba": {"1": BASE}}
    (weighted,), _ = panel.combine("weighted", votes, cfg, ["1"])
    (majority,), _ = panel.combine("majority_vote", votes, cfg, ["1"])
    assert (weighted.final_verdict, majority.final_verdict) == (OURS, BASE)


def test_an_item_nobody_could_judge_has_no_verdict_under_any_aggregation() -> None:
    cfg = ensemble_cfg()
    votes = {"a/ab": {"1": OURS, "2": None}, "a/ba": {"1": OURS, "2": None}, "b/ab": {"1": OURS, "2": None}}
    for method in ("majority_vote", "mean", "median", "dawid_skene"):
        results, _ = panel.combine(method, votes, cfg, ["1", "2"])
        assert [r.final_verdict for r in results] == [OURS, None], method
        assert results[1].confidence is None


def member_judgments(picks: dict[str, tuple[str, str]]) -> list:
    """item -> (winner shown first, winner shown second): one judgment per order."""
    return [j for item, (ab, ba) in picks.items() for j in (picking(item, ab, AB), picking(item, ba, BA))]


def test_build_scores_every_aggregation_each_member_and_dawid_skene_against_gold() -> None:
    cfg = ensemble_cfg()
    items = [str(n) for n in range(12)]
    refs = [ref(i, gold=OURS if int(i) % 2 == 0 else BASE) for i in items]
    gold = {r.id: r.gold for r in refs}
    # gpt4 always right; chatgpt right when ours is shown first's better... i.e. always picks the first shown
    good = {i: (gold[i], gold[i]) for i in items}
    first_shown = {i: (OURS, BASE) for i in items}
    by_member = {"replay_gpt4": member_judgments(good), "replay_chatgpt": member_judgments(first_shown)}
    report, metrics, members = panel.build(cfg, refs, by_member)
    section = report.to_json()["ensemble"]
    assert set(section["by_combine"]) == {"majority_vote", "weighted", "mean", "median", "dawid_skene"}
    # majority: 3 of 4 votes right on every item -> all right; each member's own per-judgment agreement
    assert section["by_combine"]["majority_vote"]["accuracy_all"] == 1.0
    assert section["member_agreement"]["replay_gpt4"]["accuracy_all"] == 1.0
    assert section["member_agreement"]["replay_chatgpt"]["accuracy_all"] == 0.5
    assert section["dawid_skene"]["true_accuracy"] == {"replay_gpt4": 1.0, "replay_chatgpt": 0.5}
    assert section["dawid_skene"]["estimated_accuracy"]["replay_gpt4"] > 0.85
    # two judges: each member/order column is an annotator, each estimate with its bootstrap interval (issue 31)
    assert section["dawid_skene"]["annotators"] == "vote"
    for annotator, (low, high) in section["dawid_skene"]["intervals"]["accuracy"].items():
        assert metrics[f"dawid_skene/{annotator}/estimated_accuracy_ci_low"] == low <= high
    assert metrics["agreement/accuracy_all"] == 1.0
    assert metrics["member/replay_chatgpt/agreement/accuracy_all"] == 0.5
    assert metrics["ensemble/weighted/accuracy_all"] == 1.0
    assert "dawid_skene/replay_gpt4/estimated_accuracy" in metrics and "interjudge/fleiss_kappa" in metrics
    assert report.to_json()["summary"]["final_verdict_distribution"] == {OURS: 6, BASE: 6, "tie": 0}
    assert set(members) == {"replay_gpt4", "replay_chatgpt"}
    assert any("dawid_skene replay_chatgpt: estimated accuracy" in line for line in panel_views.console_lines(section))


def test_two_judges_dawid_skene_says_beside_its_estimates_that_the_order_columns_are_its_annotators() -> None:
    """Issue 44 point 4: with the shipped two-member ensemble Dawid-Skene's annotators are the four order columns; the
    members' estimates have no judge-level interval, and the console, summary.json and report.html say so."""
    items = [str(n) for n in range(12)]
    refs = [ref(i, gold=OURS if int(i) % 2 == 0 else BASE) for i in items]
    good = {r.id: (r.gold, r.gold) for r in refs}
    by_member = {"replay_gpt4": member_judgments(good), "replay_chatgpt": member_judgments({i: (OURS, BASE)
                                                                                           for i in items})}
    report, metrics, _ = panel.build(ensemble_cfg(), refs, by_member)
    section = report.to_json()["ensemble"]
    caveat = section["dawid_skene"]["caveat"]
    assert caveat.startswith("the 4 vote columns (member x order x repeat) are the annotators") and "2 judges" in caveat
    assert "no judge-level interval" in caveat
    assert not any(key.startswith("dawid_skene/replay_gpt4/estimated_accuracy_ci") for key in metrics)
    assert f"  dawid_skene: {caveat}" in panel_views.console_lines(section)
    [members_view] = [v for v in pairwise_views.ensemble_views(report.ensemble) if v.title == "Ensemble members"]
    assert members_view.notes == (f"Dawid-Skene: {caveat}",)


def test_a_judge_level_dawid_skene_fit_has_no_caveat() -> None:
    fit = {"annotators": "judge"}
    assert panel.vote_columns_caveat(fit, {"a/ab": {}, "b/ab": {}, "c/ab": {}}) is None
