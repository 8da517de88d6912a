"""Unit tests for runner.judging.aggregation: the majority vote and per-item grouping."""

from __future__ import annotations

import pytest

from runner.core.registry import UnknownNameError
from runner.core.types import (
    Order,
    Status,
)
from runner.judging.aggregation import AGGREGATIONS, aggregate_items, final_judgments
from runner.judging.aggregations.builtin import majority_vote, weighted_vote
from tests.builders import won as judgment


@pytest.mark.parametrize(
    ("votes", "final", "confidence"),
    [
        (["ours", "ours", "ours"], "ours", "unanimous"),
        (["ours", "base", "ours"], "ours", "majority"),
        (["base", "base", "ours"], "base", "majority"),
        (["ours", "base", "tie"], "tie", "no_consensus"),
        (["tie", "tie", "ours"], "tie", "majority"),
        (["tie", "tie", "tie"], "tie", "unanimous"),
        (["ours", "base"], "tie", "no_consensus"),
        (["ours", "ours", "base", "base"], "tie", "no_consensus"),
        (["ours", "ours", "base", "tie"], "tie", "no_consensus"),  # 2 of 4 is not more than half
        (["ours", "ours", "ours", "base"], "ours", "majority"),
        (["ours"], "ours", "unanimous"),
    ],
)
def test_majority_vote(votes: list[str], final: str, confidence: str) -> None:
    result = majority_vote("i1", votes)
    assert (result.final_verdict, result.confidence) == (final, confidence)
    assert result.item_id == "i1"
    assert result.verdicts == tuple(votes)
    assert sum(result.verdict_counts.values()) == len(votes)


def test_majority_vote_counts_are_a_plain_dict() -> None:
    result = majority_vote("i1", ["ours", "tie", "ours"])
    assert type(result.verdict_counts) is dict
    assert result.verdict_counts == {"ours": 2, "tie": 1}


def test_majority_vote_without_votes_is_a_failure_not_a_tie() -> None:
    result = majority_vote("i1", [])
    assert result.final_verdict is None
    assert result.confidence is None
    assert result.verdicts == ()
    assert result.verdict_counts == {}


def test_registry_knows_majority_vote_and_rejects_unknown_names() -> None:
    assert AGGREGATIONS.get("majority_vote") is majority_vote
    AGGREGATIONS.check_params("majority_vote", {}, fixed=2)
    with pytest.raises(TypeError):
        AGGREGATIONS.check_params("majority_vote", {"threshold": 0.5}, fixed=2)
    with pytest.raises(UnknownNameError, match="majority_vote"):
        aggregate_items([], ["i1"], "majority_vot", {})


def test_aggregate_items_keeps_failed_items_and_ignores_unscored_votes() -> None:
    judgments = [
        judgment("i1", "ours", repeat=0),
        judgment("i1", None, repeat=1),  # unscored: not a vote
        judgment("i1", "ours", repeat=2),
        judgment("i2", None, repeat=0),
        judgment("i2", None, repeat=1, status=Status.ERROR),
        judgment("i3", "base", repeat=0, order=Order.AB),
        judgment("i3", "tie", repeat=0, order=Order.BA),
        judgment("zz", "ours"),  # not a planned item: ignored
    ]
    results = aggregate_items(judgments, ["i1", "i2", "i3", "i4"], "majority_vote", {})
    assert [r.item_id for r in results] == ["i1", "i2", "i3", "i4"]
    by_id = {r.item_id: r for r in results}
    assert by_id["i1"].verdicts == ("ours", "ours")
    # issue 15: two agreeing votes beside an unscored one are a majority, not unanimous
    assert (by_id["i1"].final_verdict, by_id["i1"].confidence) == ("ours", "majority")
    for failed in ("i2", "i4"):
        assert by_id[failed].final_verdict is None
        assert by_id[failed].confidence is None
    assert by_id["i3"].verdicts == ("base", "tie")
    assert (by_id["i3"].final_verdict, by_id["i3"].confidence) == ("tie", "no_consensus")


def test_unanimous_means_every_vote_valid_and_equal() -> None:
    three = [judgment("all", "ours", repeat=r) for r in range(3)]
    two = [judgment("two", "ours", repeat=0), judgment("two", "ours", repeat=1),
           judgment("two", None, repeat=2, status=Status.ERROR)]  # a failed call is not a vote either
    by_id = {r.item_id: r for r in aggregate_items(three + two, ["all", "two"], "majority_vote", {})}
    assert (by_id["all"].final_verdict, by_id["all"].confidence) == ("ours", "unanimous")
    assert (by_id["two"].final_verdict, by_id["two"].confidence) == ("ours", "majority")
    assert by_id["two"].verdict_counts == {"ours": 2}


def test_synthesis_round_replaces_the_first_round() -> None:
    judgments = [
        judgment("i1", "ours", order=Order.AB),
        judgment("i1", "base", order=Order.BA),
        judgment("i1", "base", order=Order.AB, stage="synthesis"),
        judgment("i1", "base", order=Order.BA, stage="synthesis"),
    ]
    assert [j.request.stage for j in final_judgments(judgments)] == ["synthesis", "synthesis"]
    (result,) = aggregate_items(judgments, ["i1"], "majority_vote", {})
    assert result.verdicts == ("base", "base")
    assert result.confidence == "unanimous"


def test_label_votes_share_one_empty_details_mapping() -> None:
    # 50,000 items would otherwise hold 50,000 dicts that say nothing (issue 12: memory at the run's peak)
    first, second = majority_vote("i1", ["ours"]), weighted_vote("i2", ["tie"], [1.0])
    assert first.details == {} and first.details is second.details
    with pytest.raises(TypeError):
        first.details["x"] = 1  # type: ignore[index]
