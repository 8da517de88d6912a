"""runner.stats.dawid_skene against a reference EM written here from Dawid & Skene (1979), on LLMBar's real votes.

crowd-kit (the maintained implementation) cannot be a test dependency: it requires transformers, nltk and pyarrow.
So the reference below follows the paper's equations in plain Python, sharing no code with runner.stats (its
notation: T_ik the probability that item i's true class is k, p_k the class priors, pi^j_kl the probability that
annotator j says l when the truth is k, n^j_il = 1 when j said l on item i). It starts from the vote shares, as
the paper's section 3 suggests, and iterates to a far tighter tolerance than the default, so the test also shows
the default stops close enough. crowd-kit 1.4.2's DawidSkene, run by hand on the same votes, gave the same
posteriors and matrices to 4 decimals (see the module docstring of runner.stats.dawid_skene).
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import pytest

from runner.judging.parsers.labels import parse_verdict
from runner.stats.dawid_skene import dawid_skene

LLMBAR = Path(__file__).resolve().parents[2] / "runner" / "data" / "llmbar"
# (order, positional verdict) -> the output it names: in order "ba" output_2 is shown first, as "Output (a)".
SIDE = {("ab", "A"): "output_1", ("ab", "B"): "output_2", ("ba", "A"): "output_2", ("ba", "B"): "output_1"}
Votes = dict[str, dict[str, str]]


@cache
def replayed_votes(subset: str) -> Votes:
    """``<model>/<order>`` -> item -> the output GPT-4 / ChatGPT preferred with LLMBar's vanilla prompt: the
    replay judges' recorded answers (runner/data/llmbar/replay), the members of conf/judge/ensemble.yaml."""
    votes: Votes = {}
    for model in ("gpt-4", "chatgpt"):
        for line in (LLMBAR / "replay" / f"{model}.jsonl").read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            if rec["strategy"] == "vanilla" and rec["stage"] == "judge" and rec["item"].startswith(f"{subset}-"):
                said = parse_verdict("llmbar_output", rec["text"], ("A", "B"), {}).label
                assert said is not None
                votes.setdefault(f"{model}/{rec['order']}", {})[rec["item"]] = SIDE[(rec["order"], said)]
    return votes


def reference_em(votes: Votes, classes: list[str], tol: float = 1e-12, max_iter: int = 100_000
                 ) -> tuple[dict[str, list[float]], list[float], dict[str, list[list[float]]]]:
    """(T: item -> [T_ik], p: [p_k], pi: annotator -> [[pi_kl]]) by the paper's EM, from the vote shares."""
    items = sorted({item for by_item in votes.values() for item in by_item})
    said = {i: {j: by_item[i] for j, by_item in votes.items() if i in by_item} for i in items}
    t = {i: [sum(v == k for v in said[i].values()) / len(said[i]) for k in classes] for i in items}
    for _ in range(max_iter):
        # M-step (the paper's 2.3 and 2.4): maximum-likelihood priors and confusion rows given T
        p = [sum(t[i][k] for i in items) / len(items) for k in range(len(classes))]
        pi = {}
        for j in votes:
            rows = [[sum(t[i][k] for i in items if said[i].get(j) == label) for label in classes]
                    for k in range(len(classes))]
            pi[j] = [[cell / sum(row) for cell in row] for row in rows]
        # E-step (the paper's 2.5): T_ik proportional to p_k x prod_j pi^j_k,said
        new = {}
        for i in items:
            joint = [p[k] * math.prod(pi[j][k][classes.index(v)] for j, v in said[i].items())
                     for k in range(len(classes))]
            new[i] = [x / sum(joint) for x in joint]
        change = max(abs(a - b) for i in items for a, b in zip(new[i], t[i], strict=True))
        t = new
        if change < tol:
            return t, p, pi
    raise AssertionError("the reference EM did not converge")


@pytest.mark.parametrize("subset", ["natural", "neighbor"])
def test_default_dawid_skene_is_the_standard_em_to_4_decimals_on_llmbar(subset: str) -> None:
    votes = replayed_votes(subset)
    assert len(votes) == 4 and all(len(by_item) == len(next(iter(votes.values()))) for by_item in votes.values())
    classes = ["output_1", "output_2"]
    t, p, pi = reference_em(votes, classes)
    fit = dawid_skene(votes)  # the default: smoothing=0
    assert fit["smoothing"] == 0 and fit["converged"] and fit["labels"] == classes
    assert set(fit["posteriors"]) == set(t)
    for item, row in t.items():
        assert [fit["posteriors"][item][k] for k in classes] == pytest.approx(row, abs=1e-4), item
    assert [fit["priors"][k] for k in classes] == pytest.approx(p, abs=1e-4)
    for annotator, matrix in pi.items():
        for got, want in zip(fit["confusion"][annotator], matrix, strict=True):
            assert got == pytest.approx(want, abs=1e-4), annotator
    # the posteriors are not all 0/1, so the comparison above has teeth
    assert any(0.01 < row[0] < 0.99 for row in t.values())


def test_smoothing_pulls_the_estimates_away_from_the_standard_em() -> None:
    votes = replayed_votes("natural")
    standard, smoothed = dawid_skene(votes), dawid_skene(votes, smoothing=1.0)
    gaps = [abs(standard["accuracy"][j] - smoothed["accuracy"][j]) for j in votes]
    assert max(gaps) > 1e-3  # smoothing=1 is a different estimator, which is why it is no longer the default


@pytest.mark.parametrize(("params", "key"), [
    ({"smoothing": -1.0}, "smoothing"),
    ({"smoothing": float("nan")}, "smoothing"),
    ({"tol": -1e-6}, "tol"),
    ({"max_iter": 0}, "max_iter"),
])
def test_out_of_range_parameters_are_rejected_naming_them(params: dict, key: str) -> None:
    with pytest.raises(ValueError, match=f"dawid_skene: {key} must be"):
        dawid_skene(replayed_votes("natural"), **params)
