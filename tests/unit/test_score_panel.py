"""Unit tests for runner.modes.score_panel: a pointwise ensemble's combined scores, agreement and pass/fail votes."""

from __future__ import annotations

import pytest

from runner.inputs.datasets import ItemRef
from runner.judging.scoring import Scoring
from runner.modes import score_panel
from runner.modes.scorecard import SCORED, UNSCORED, ItemScore, scorecard

SCORING = Scoring(criteria=(), category_weights={}, pass_threshold=3.5, low=1.0, high=5.0)


def item(item_id: str, overall: float | None, human: float | None = None, **criteria: float) -> ItemScore:
    ref = ItemRef(item_id, None, f"test:{item_id}", human_score=human)
    if overall is None:
        return ItemScore(ref, UNSCORED, reasons=("no_json",))
    return ItemScore(ref, SCORED, overall=overall, criteria=criteria, passed=overall >= 3.5)


def members(table: dict[str, list[float | None]], humans: list[float | None] | None = None) -> dict:
    humans = humans or [None] * len(next(iter(table.values())))
    return {m: [item(str(n), v, humans[n], accuracy=v) if v is not None else item(str(n), None, humans[n])
                for n, v in enumerate(values)] for m, values in table.items()}


@pytest.mark.parametrize(("method", "weights", "expected"), [
    ("mean", {}, [3.0, 4.0]),
    ("median", {}, [2.0, 4.0]),
    ("weighted", {"a": 2.0, "b": 1.0, "c": 1.0}, [2.75, 4.0]),
])
def test_members_scores_combine_per_item_and_per_criterion(method, weights, expected) -> None:
    by_member = members({"a": [2.0, 4.0], "b": [2.0, None], "c": [5.0, 4.0]})
    combined = score_panel.combine_items(by_member, SCORING, method, weights)
    assert [i.overall for i in combined] == expected
    assert [i.criteria["accuracy"] for i in combined] == expected
    assert [i.passed for i in combined] == [e >= 3.5 for e in expected]
    assert combined[1].extras["member_scores"] == {"a": 4.0, "b": None, "c": 4.0}
    assert combined[1].reasons == ("b: no_json",)


def test_an_item_no_member_scored_stays_unscored_with_every_reason() -> None:
    (only,) = score_panel.combine_items(members({"a": [None], "b": [None]}), SCORING, "mean", {})
    assert only.status == UNSCORED and only.overall is None
    assert only.reasons == ("a: no_json", "b: no_json")


def test_pass_votes_majority_and_dawid_skene_with_human_agreement() -> None:
    # three members; c fails everything; humans pass items 0-2 and fail item 3
    by_member = members({"a": [4.0, 4.0, 4.0, 2.0], "b": [4.0, 4.0, 2.0, 2.0], "c": [2.0, 2.0, 2.0, 2.0]},
                        humans=[5.0, 4.0, 4.0, 1.0])
    human = {"0": "pass", "1": "pass", "2": "pass", "3": "fail"}
    section = score_panel.pass_vote_section(score_panel.pass_votes(by_member), human)
    assert section["majority_vote"]["pass_rate"] == 0.5  # items 0, 1 pass 2 of 3
    assert section["majority_vote"]["human_pass_agreement"] == 0.75
    assert set(section["dawid_skene"]["estimated_accuracy"]) == {"a", "b", "c"}
    assert section["inter_judge"]["judges"] == ["a", "b", "c"]


def test_score_agreement_pairwise_pearson_and_alpha() -> None:
    by_member = members({"a": [1.0, 2.0, 3.0, 4.0], "b": [2.0, 3.0, 4.0, 5.0]})
    agreement = score_panel.score_agreement(by_member)
    (pair,) = agreement["pairwise"]
    assert pair["pearson"] == pytest.approx(1.0) and pair["mean_abs_diff"] == 1.0 and pair["n"] == 4
    assert agreement["krippendorff_alpha_interval"] < 1.0  # perfectly correlated, yet one point apart


def test_build_adds_the_ensemble_section_and_metrics() -> None:
    by_member = members({"a": [4.0, 2.0, 4.0], "b": [4.0, 4.0, 2.0], "c": [5.0, 2.0, 2.0]})
    reports = {m: scorecard(scores, SCORING, 1, 0.5, []) for m, scores in by_member.items()}
    report, items = score_panel.build(reports, by_member, SCORING, "median", {},
                                      lambda xs: scorecard(xs, SCORING, 1, 0.5, []))
    assert [i.overall for i in items] == [4.0, 2.0, 2.0]
    section = report.to_json()["ensemble"]
    assert section["combine"] == "median" and section["members"] == ["a", "b", "c"]
    metrics = score_panel.ensemble_metrics(section)
    assert metrics["member/a/headline/average_overall"] == pytest.approx(10 / 3)
    assert "ensemble/majority_vote/pass_rate" in metrics and "interjudge/fleiss_kappa" in metrics
    assert any("median" in line for line in score_panel.console_lines(section))
