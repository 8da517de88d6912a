"""runner.modes.ensemble: combining member judges' verdicts, Dawid-Skene, and the ensemble against gold labels."""

from __future__ import annotations

import json
import random
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from runner.core.registry import UnknownNameError
from runner.judging.aggregations.builtin import majority_vote
from runner.judging.parsers.labels import parse_verdict
from runner.modes.ensemble import (
    LABEL_COMBINERS,
    SCORE_COMBINERS,
    combine_labels,
    combine_scores,
    inter_judge_agreement,
    member_comparison,
)
from runner.stats.coefficients import cohen_kappa
from runner.stats.dawid_skene import dawid_skene

LLMBAR = Path(__file__).resolve().parents[2] / "runner" / "data" / "llmbar"
SUBSETS = ("natural", "neighbor", "gptinst", "gptout", "manual")
# (order, positional verdict) -> the output it names: in order "ba" output_2 is shown first, as "Output (a)".
SIDE = {("ab", "A"): "output_1", ("ab", "B"): "output_2", ("ba", "A"): "output_2", ("ba", "B"): "output_1"}


def biased_panel() -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """60 items (30 truly A, 30 truly B) and four judges; ``biased`` always says B, so it is wrong on every A.

    ``good`` errs on a0 and b0, ``fair1`` on a1-a3 and b1-b3, ``fair2`` on a4-a6 and b4-b6: at most one of
    them errs on any item. Majority vote ties 2-2 on a0-a6 (``biased`` supplies the second wrong vote).
    Dawid-Skene learns that ``biased`` carries no information and follows the other three: no error.
    (With only two informative judges left the model could not tell them apart; it needs three.)
    """
    gold = {f"a{i}": "A" for i in range(30)} | {f"b{i}": "B" for i in range(30)}
    flip = {"A": "B", "B": "A"}

    def erring_on(numbers: set[int]) -> dict[str, str]:
        return {key: flip[label] if int(key[1:]) in numbers else label for key, label in gold.items()}

    votes = {"good": erring_on({0}), "fair1": erring_on({1, 2, 3}), "fair2": erring_on({4, 5, 6})}
    return votes | {"biased": {key: "B" for key in gold}}, gold


def accuracy(labels: dict, gold: dict) -> float:
    return sum(labels[key] == label for key, label in gold.items()) / len(gold)


def test_dawid_skene_discounts_a_judge_that_always_says_one_class_and_beats_majority_vote() -> None:
    votes, gold = biased_panel()
    mv = combine_labels(votes, "majority_vote")
    ds = combine_labels(votes, "dawid_skene")
    assert accuracy(mv.labels, gold) == pytest.approx(53 / 60)
    assert {key for key, label in mv.labels.items() if label == "tie"} == {f"a{i}" for i in range(7)}
    assert accuracy(ds.labels, gold) == 1.0
    # biased votes B whatever the truth: both rows of its confusion matrix (rows = true class) put ~all on B
    assert ds.fit["labels"] == ["A", "B"]
    assert np.array(ds.fit["confusion"]["biased"])[:, 1] == pytest.approx([1, 1], abs=0.04)
    true_accuracy = {"good": 58 / 60, "fair1": 0.9, "fair2": 0.9, "biased": 0.5}
    # unsmoothed (the default) it is the maximum-likelihood fit, which follows soft posteriors, not gold: ~1 point off
    assert ds.estimated_accuracy == pytest.approx(true_accuracy, abs=0.015)
    # Laplace smoothing shrinks toward chance: ~(correct + 1) / (n + 2) per row, 3.5 points on 30 items a class
    assert dawid_skene(votes, smoothing=1.0)["accuracy"] == pytest.approx(true_accuracy, abs=0.04)
    a0 = ds.items["a0"]  # good and biased say B, fair1 and fair2 say A
    assert (a0.label, a0.confidence) == ("A", "majority") and 0.6 < a0.posterior["A"] < 0.7
    smoothed = combine_labels(votes, "dawid_skene", smoothing=1.0).items["a0"]
    assert smoothed.label == "A" and 0.7 < smoothed.posterior["A"] < 0.8  # shrinkage: the good judge counts less
    assert ds.fit["converged"] and ds.fit["iterations"] < 100
    assert ds.weights is None and mv.weights == dict.fromkeys(votes, 1.0)


def test_dawid_skene_is_deterministic_and_its_posteriors_are_distributions() -> None:
    votes, _ = biased_panel()
    first, second = dawid_skene(votes), dawid_skene(votes)
    assert first == second
    for posterior in first["posteriors"].values():
        assert sum(posterior.values()) == pytest.approx(1.0)
    assert sum(first["priors"].values()) == pytest.approx(1.0)
    assert not dawid_skene(votes, max_iter=1)["converged"]


def test_dawid_skene_recovers_known_accuracies_when_judges_err_independently() -> None:
    rng = np.random.default_rng(7)
    truth = rng.integers(0, 3, size=1500)
    true_accuracy = {"j1": 0.9, "j2": 0.8, "j3": 0.7, "j4": 0.6, "j5": 0.55}
    votes = {}
    for judge, acc in true_accuracy.items():
        wrong = (truth + rng.integers(1, 3, size=truth.size)) % 3  # uniformly one of the two other classes
        said = np.where(rng.random(truth.size) < acc, truth, wrong)
        votes[judge] = {f"i{i}": "xyz"[c] if rng.random() > 0.1 else None for i, c in enumerate(said)}
    fit = dawid_skene(votes)
    for judge, by_item in votes.items():
        realised = np.mean([label == "xyz"[truth[int(key[1:])]] for key, label in by_item.items() if label])
        assert fit["accuracy"][judge] == pytest.approx(realised, abs=0.03), judge
    assert fit["converged"]


def test_weighted_vote_needs_more_than_half_of_the_weight() -> None:
    votes = {"a": {"i": "x"}, "b": {"i": "y"}, "c": {"i": "y"}}
    assert combine_labels(votes, "majority_vote").items["i"].label == "y"
    heavy = combine_labels(votes, "weighted", weights={"a": 3, "b": 1, "c": 1}).items["i"]
    assert (heavy.label, heavy.confidence) == ("x", "majority")
    even = combine_labels(votes, "weighted", weights={"a": 2, "b": 1, "c": 1}).items["i"]
    assert (even.label, even.confidence) == ("tie", "no_consensus")
    floats = combine_labels(votes, "weighted", weights={"a": 0.3, "b": 0.1, "c": 0.2}).items["i"]
    assert (floats.label, floats.confidence) == ("tie", "no_consensus")  # 0.1 + 0.2 is not more than 0.3
    muted = combine_labels(votes, "weighted", weights={"a": 0, "b": 1, "c": 1})
    assert muted.items["i"].label == "y" and muted.weights == {"a": 0.0, "b": 1.0, "c": 1.0}


@pytest.mark.parametrize(
    ("weights", "error"),
    [
        (None, TypeError),  # weighted needs weights
        ({"a": 1.0}, ValueError),  # b has no weight
        ({"a": 1.0, "b": 1.0, "zz": 1.0}, ValueError),  # zz is not a member
        ({"a": 1.0, "b": -1.0}, ValueError),
        ({"a": 1.0, "b": float("nan")}, ValueError),
    ],
)
def test_weighted_rejects_bad_weights(weights: dict | None, error: type[Exception]) -> None:
    votes = {"a": {"i": "x"}, "b": {"i": "y"}}
    with pytest.raises(error):
        combine_labels(votes, "weighted", weights=weights)


def test_config_errors_name_what_is_known() -> None:
    votes = {"a": {"i": "x"}}
    with pytest.raises(UnknownNameError, match="dawid_skene, majority_vote, weighted"):
        combine_labels(votes, "mode")
    with pytest.raises(TypeError):
        combine_labels(votes, "majority_vote", weights={"a": 1.0})
    with pytest.raises(TypeError):
        combine_labels(votes, "dawid_skene", iterations=5)
    with pytest.raises(ValueError, match="not among the labels"):
        combine_labels(votes, "dawid_skene", labels=["y", "z"])
    with pytest.raises(ValueError, match="smoothing"):
        dawid_skene(votes, smoothing=-1)
    assert SCORE_COMBINERS.names() == ["mean", "median", "weighted"]
    assert LABEL_COMBINERS.names() == ["dawid_skene", "majority_vote", "weighted"]


def test_ties_and_confidences() -> None:
    votes = {
        "a": {"split": "x", "three_way": "x", "all": "x", "most": "x", "tie_wins": "tie"},
        "b": {"split": "y", "three_way": "y", "all": "x", "most": "x", "tie_wins": "tie"},
        "c": {"three_way": "tie", "all": "x", "most": "y", "tie_wins": "x"},
    }
    items = combine_labels(votes, "majority_vote").items
    got = {key: (entry.label, entry.confidence) for key, entry in items.items()}
    assert got == {
        "split": ("tie", "no_consensus"),
        "three_way": ("tie", "no_consensus"),
        "all": ("x", "unanimous"),
        "most": ("x", "majority"),
        "tie_wins": ("tie", "majority"),
    }
    assert items["split"].votes == {"a": "x", "b": "y"}


def test_majority_vote_matches_the_run_level_majority_vote() -> None:
    rng = random.Random(3)
    judges = ("j1", "j2", "j3", "j4", "j5")
    votes = {j: {f"i{n}": rng.choice(["x", "y", "tie", None]) for n in range(300)} for j in judges}
    result = combine_labels(votes, "majority_vote")
    for key, entry in result.items.items():
        reference = majority_vote(key, [votes[j][key] for j in judges if votes[j][key] is not None])
        assert (entry.label, entry.confidence) == (reference.final_verdict, reference.confidence), key


def test_missing_votes_are_left_out_and_an_unjudged_item_has_no_label() -> None:
    votes = {
        "a": {"i1": "x", "i2": None, "i3": None, "i4": "x"},
        "b": {"i1": "y", "i2": "y", "i3": None, "i4": "x"},
        "c": {"i1": "x", "i2": None, "i4": "y"},
    }
    for method in ("majority_vote", "dawid_skene"):
        items = combine_labels(votes, method).items
        assert list(items) == ["i1", "i2", "i3", "i4"]
        assert (items["i2"].label, items["i2"].confidence) == ("y", "unanimous"), method
        assert (items["i3"].label, items["i3"].confidence, items["i3"].votes) == (None, None, {}), method
    fit = dawid_skene(votes)
    assert set(fit["posteriors"]) == {"i1", "i2", "i4"}
    assert dawid_skene({"a": {"i": None}, "b": {}, "c": {"i": "x"}})["accuracy"]["a"] is None
    nobody = combine_labels({"a": {"i": None}, "b": {}, "c": {"i": None}}, "dawid_skene")
    assert (nobody.items["i"].label, nobody.fit["posteriors"], nobody.estimated_accuracy["a"]) == (None, {}, None)


def test_dawid_skene_keeps_a_class_nobody_voted_when_labels_are_given() -> None:
    votes, _ = biased_panel()
    fit = dawid_skene(votes, labels=["A", "B", "tie"])
    assert fit["labels"] == ["A", "B", "tie"]
    assert np.array(fit["confusion"]["good"]).shape == (3, 3)
    assert fit["priors"]["tie"] < 0.05


def test_combine_scores() -> None:
    votes = {
        "a": {"i1": 1.0, "i2": 4.0, "i3": None, "i4": 2.0},
        "b": {"i1": 2.0, "i2": None, "i3": None, "i4": 4.0},
        "c": {"i1": 6.0, "i2": 5.0, "i4": 9.0},
    }
    weights = {"a": 3.0, "b": 1.0, "c": 0.0}
    assert combine_scores(votes, "mean") == {"i1": 3.0, "i2": 4.5, "i3": None, "i4": 5.0}
    assert combine_scores(votes, "median") == {"i1": 2.0, "i2": 4.5, "i3": None, "i4": 4.0}
    assert combine_scores(votes, "weighted", weights) == {"i1": 1.25, "i2": 4.0, "i3": None, "i4": 2.5}
    assert combine_scores({"a": {"i": 1.0}, "c": {"i": 2.0}}, "weighted", {"a": 0, "c": 0}) == {"i": None}
    with pytest.raises(TypeError):
        combine_scores(votes, "median", weights)
    with pytest.raises(ValueError):
        combine_scores(votes, "weighted", {"a": 1.0})


def test_member_comparison_against_gold() -> None:
    votes = {"a": {"i1": "x", "i2": "y", "i3": "x", "i4": None}, "b": {"i1": "y", "i2": "y", "i3": "y", "i4": "x"}}
    final = {"i1": "x", "i2": "y", "i3": "tie", "i4": "x"}
    gold = {"i1": "x", "i2": "y", "i3": "y", "i4": "x", "i5": None}
    result = member_comparison(votes, final, gold)
    assert result["n_gold"] == 4
    a = result["members"]["a"]
    assert (a["n"], a["unscored"], a["accuracy"], a["accuracy_all"]) == (3, 1, 2 / 3, 2 / 4)
    assert a["cohen_kappa"] == pytest.approx(cohen_kappa(["x", "y", "x"], ["x", "y", "y"]))
    assert result["members"]["b"]["accuracy"] == 3 / 4
    assert result["ensemble"]["accuracy"] == 3 / 4
    assert result["ensemble_minus_best_member"] == 0.0


def test_ensemble_minus_best_member_with_ties_counted_half_for_members_and_ensemble_alike() -> None:
    # each member ties where its two orders disagree; the ensemble never ties
    gold = {"i1": "x", "i2": "y", "i3": "x", "i4": "x"}
    members = {"a": {"i1": "x", "i2": "tie", "i3": "tie", "i4": "y"},
               "b": {"i1": "x", "i2": "y", "i3": "tie", "i4": "tie"}}
    result = member_comparison(members, {"i1": "x", "i2": "y", "i3": "y", "i4": "x"}, gold)
    assert (result["members"]["a"]["accuracy"], result["members"]["a"]["accuracy_ties_half"]) == (1 / 4, 2 / 4)
    assert (result["members"]["b"]["accuracy"], result["members"]["b"]["accuracy_ties_half"]) == (2 / 4, 3 / 4)
    assert result["ensemble"]["accuracy"] == result["ensemble"]["accuracy_ties_half"] == 3 / 4
    # ties as wrong, the ensemble gains 25 points on b; a fair coin for every tie, it gains nothing
    assert result["ensemble_minus_best_member"] == 1 / 4
    assert result["ensemble_minus_best_member_ties_half"] == 0.0
    # a tie is right where gold itself is a tie, and an ensemble's own ties count half too
    tied = member_comparison({"a": {"i": "tie", "j": "tie"}}, {"i": "tie", "j": "x"}, {"i": "tie", "j": "y"})
    assert tied["members"]["a"]["accuracy_ties_half"] == 0.75 and tied["ensemble"]["accuracy_ties_half"] == 0.5


def test_inter_judge_agreement_aligns_items() -> None:
    votes = {"a": {"i1": "x", "i2": "y"}, "b": {"i2": "y", "i1": "x", "i3": "x"}}
    result = inter_judge_agreement(votes)
    assert result["n_items"] == 3
    assert (result["pairwise"][0]["n"], result["pairwise"][0]["accuracy"]) == (2, 1.0)


# --- Real data: GPT-4 and ChatGPT judging LLMBar (419 items), replayed from the shipped recordings. ---


@cache
def llmbar_gold() -> dict[str, str]:
    """Item id -> the better output of every LLMBar row."""
    gold = {}
    for subset in SUBSETS:
        for line in (LLMBAR / f"{subset}.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            gold[row["id"]] = f"output_{row['label']}"
    return gold


@cache
def llmbar_votes() -> dict[str, dict[str, str | None]]:
    """``<model>/<strategy>/<order>`` -> item id -> the output that judge preferred (None if unparsed)."""
    votes: dict[str, dict[str, str | None]] = {}
    for model in ("gpt-4", "chatgpt"):
        for line in (LLMBAR / "replay" / f"{model}.jsonl").read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            if rec["strategy"] in ("vanilla", "vanilla_norules") and rec["stage"] == "judge":
                said = parse_verdict("llmbar_output", rec["text"], ("A", "B"), {}).label
                side = None if said is None else SIDE[(rec["order"], said)]
                votes.setdefault(f"{model}/{rec['strategy']}/{rec['order']}", {})[rec["item"]] = side
    return votes


def annotators(strategies: tuple[str, ...], subset: str | None = None) -> dict[str, dict[str, str | None]]:
    """Each (model, strategy, order) as one annotator, restricted to one subset when given."""
    return {
        name: {key: label for key, label in by_item.items() if subset is None or key.startswith(f"{subset}-")}
        for name, by_item in llmbar_votes().items()
        if name.split("/")[1] in strategies
    }


def ds_versus_truth(votes: dict) -> dict[str, tuple[float, float]]:
    """Annotator -> (Dawid-Skene estimated accuracy, true accuracy against gold)."""
    fit = dawid_skene(votes)
    assert fit["converged"]
    truth = member_comparison(votes, {}, {key: llmbar_gold()[key] for key in next(iter(votes.values()))})
    return {name: (fit["accuracy"][name], truth["members"][name]["accuracy"]) for name in votes}


def test_llmbar_replay_has_a_parsed_verdict_from_every_annotator() -> None:
    votes = llmbar_votes()
    assert len(votes) == 8
    for name, by_item in votes.items():
        assert set(by_item) == set(llmbar_gold()), name
        assert all(label is not None for label in by_item.values()), name


@pytest.mark.parametrize("strategies", [("vanilla",), ("vanilla", "vanilla_norules")])
def test_llmbar_natural_dawid_skene_accuracies_within_five_points(strategies: tuple[str, ...]) -> None:
    # Natural holds few items built to mislead: 4 annotators land within 1.7 points, 8 within 2.3 points.
    table = ds_versus_truth(annotators(strategies, "natural"))
    gaps = {name: round(est - true, 3) for name, (est, true) in table.items()}
    assert all(abs(gap) <= 0.05 for gap in gaps.values()), gaps


@pytest.mark.parametrize("strategies", [("vanilla",), ("vanilla", "vanilla_norules")])
def test_llmbar_all_subsets_dawid_skene_overestimates_because_errors_are_shared(strategies: tuple[str, ...]) -> None:
    # The adversarial subsets hold items built to mislead judges, and GPT-4 and ChatGPT (in both orders) are
    # misled together. Dawid-Skene assumes independent errors, so it reads their shared mistakes as the truth:
    # every accuracy comes out too high (by 6-19 points), while the ranking of the annotators holds.
    table = ds_versus_truth(annotators(strategies))
    gaps = {name: round(est - true, 3) for name, (est, true) in table.items()}
    assert all(gap > 0 for gap in gaps.values()), gaps
    assert max(gaps.values()) > 0.10, gaps
    gpt4 = [est for name, (est, _) in table.items() if name.startswith("gpt-4")]
    chatgpt = [est for name, (est, _) in table.items() if name.startswith("chatgpt")]
    assert min(gpt4) > max(chatgpt) + 0.3


def test_llmbar_ensemble_of_gpt4_and_chatgpt_with_every_aggregation() -> None:
    votes = annotators(("vanilla",))
    gold = llmbar_gold()
    weights = {name: 2.0 if name.startswith("gpt-4") else 1.0 for name in votes}
    finals = {
        method: combine_labels(votes, method, weights if method == "weighted" else None).labels
        for method in ("majority_vote", "weighted", "dawid_skene")
    }
    prefers_output_1 = {
        name: {k: float(v == "output_1") for k, v in by_item.items()} for name, by_item in votes.items()
    }
    for method in ("mean", "median"):
        scores = combine_scores(prefers_output_1, method)
        finals[method] = {k: "output_1" if s > 0.5 else "output_2" if s < 0.5 else "tie" for k, s in scores.items()}
    accuracies = {
        method: member_comparison(votes, final, gold)["ensemble"]["accuracy"] for method, final in finals.items()
    }
    # ChatGPT is below chance on LLMBar and prefers the first position, so its two orders cancel and leave
    # GPT-4's ab/ba disagreements as ties (132 of them): majority vote, mean and median fall to 52.5 %.
    assert accuracies == {
        "majority_vote": pytest.approx(220 / 419),
        "mean": pytest.approx(220 / 419),
        "median": pytest.approx(220 / 419),
        "weighted": pytest.approx(341 / 419),
        "dawid_skene": pytest.approx(347 / 419),
    }
    comparison = member_comparison(votes, finals["dawid_skene"], gold)
    assert comparison["members"]["gpt-4/vanilla/ba"]["accuracy"] == pytest.approx(361 / 419)
    assert comparison["ensemble_minus_best_member"] == pytest.approx((347 - 361) / 419)
