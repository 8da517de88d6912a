"""Issue 31 point 6: one judge's two orders are one annotator in Dawid-Skene by default, with intervals."""

from __future__ import annotations

import numpy as np
import pytest

from runner.judging.aggregations.builtin import dawid_skene_vote
from runner.stats.dawid_skene import dawid_skene, param_problems


def correlated_orders(n_items: int = 2000, accuracy: float = 0.8, seed: int = 7) -> tuple[dict, dict]:
    """Three judges, each right with ``accuracy`` per item and giving that same verdict in both orders (their two
    orders' errors correlate fully), so the orders add no evidence beyond the first."""
    rng = np.random.default_rng(seed)
    truth = {f"i{i}": str(rng.choice(["A", "B"])) for i in range(n_items)}
    votes: dict[str, dict[str, str]] = {}
    for judge in ("j1", "j2", "j3"):
        for item, label in truth.items():
            verdict = label if rng.random() < accuracy else ("B" if label == "A" else "A")
            for order in ("first", "second"):
                votes.setdefault(f"{judge}/{order}", {})[item] = verdict
    return votes, truth


def calibration(fit: dict, truth: dict) -> tuple[float, float]:
    """(mean maximum posterior, accuracy of the posterior's argmax against the truth)."""
    tops = [max(post.items(), key=lambda kv: kv[1]) for post in fit["posteriors"].values()]
    keys = list(fit["posteriors"])
    return (float(np.mean([p for _, p in tops])),
            float(np.mean([label == truth[key] for key, (label, _) in zip(keys, tops, strict=True)])))


def test_one_annotator_per_judge_is_not_overconfident_where_the_orders_correlate():
    votes, truth = correlated_orders()
    default = dawid_skene_vote(votes, resamples=0).fit
    assert default["annotators"] == "judge" and sorted(default["accuracy"]) == ["j1", "j2", "j3"]
    confidence, accuracy = calibration(dict(default), truth)
    assert abs(confidence - accuracy) < 0.02  # posteriors say how often the label is right
    old = dawid_skene_vote(votes, annotators="vote", resamples=0).fit
    old_confidence, old_accuracy = calibration(dict(old), truth)
    assert old_accuracy == accuracy  # the same labels, stated with confidence the data do not support
    assert old_confidence - old_accuracy > 0.06
    for judge, estimate in default["accuracy"].items():
        true = np.mean([votes[f"{judge}/first"][k] == t for k, t in truth.items()])
        assert abs(estimate - true) < 0.05


def test_the_vote_option_reproduces_the_column_per_annotator_fit():
    votes, _ = correlated_orders(n_items=60)
    old = dawid_skene_vote(votes, annotators="vote", resamples=0).fit
    paper = dawid_skene(votes)
    for key in ("priors", "confusion", "accuracy", "posteriors", "iterations", "log_likelihood"):
        assert old[key] == paper[key]
    assert sorted(old["accuracy"]) == sorted(votes)


def test_bootstrap_intervals_are_seeded_and_hold_the_estimate():
    votes, _ = correlated_orders(n_items=120)
    first = dawid_skene_vote(votes, resamples=50, seed=3).fit
    again = dawid_skene_vote(votes, resamples=50, seed=3).fit
    intervals = first["intervals"]
    assert intervals == again["intervals"]
    assert (intervals["unit"], intervals["resamples"], intervals["level"]) == ("item", 50, 0.95)
    for judge, (low, high) in intervals["accuracy"].items():
        assert low < first["accuracy"][judge] < high and high - low < 0.3
    for label, (low, high) in intervals["priors"].items():
        assert low < first["priors"][label] < high


@pytest.mark.parametrize(("params", "key"), [({"annotators": "member"}, "annotators"),
                                             ({"resamples": -1}, "resamples"), ({"level": 1.5}, "level")])
def test_bad_parameters_are_named(params, key):
    assert key in param_problems(**params)


def test_fewer_than_three_judges_keep_a_column_per_annotator_and_say_so():
    votes, _ = correlated_orders(n_items=60)
    two = {column: by_item for column, by_item in votes.items() if not column.startswith("j3")}
    fit = dawid_skene_vote(two, resamples=0).fit
    assert fit["annotators"] == "vote" and sorted(fit["accuracy"]) == sorted(two)
    assert fit["posteriors"] == dawid_skene(two)["posteriors"]
