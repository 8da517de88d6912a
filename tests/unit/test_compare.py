"""Unit tests for runner.outputs.compare (paired comparison of runs) and the table of runner.app.compare_cli.

Runs are hand-built results.jsonl rows; p-values are checked by hand (exact McNemar = 2 * 0.5^k when all
k discordant pairs go one way, the exact sign-flip p = 2 / 2^n when all n differences are positive,
Holm's step-down by hand) or against statsmodels (tests/unit/test_paired.py checks the tests and intervals).
The item is the unit: an item's orders and repeats are one outcome.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from rich.console import Console

from runner.app.compare_cli import render_table
from runner.outputs import compare, compare_outcomes
from runner.outputs.compare_outcomes import ComparisonError, RunResults


def pairwise_row(item: str, order: str, winner: str | None, gold: str | None = "output_1", stage: str = "judge",
                 status: str = "scored", repeat: int = 0) -> dict:
    """One results.jsonl row of a pairwise run."""
    return {"item_id": item, "repeat": repeat, "order": order, "stage": stage, "status": status,
            "winner": winner, "score": None, "gold": gold, "human_score": None}


def pointwise_row(item: str, score: float | None, repeat: int = 0, status: str = "scored") -> dict:
    """One results.jsonl row of a pointwise run."""
    return {"item_id": item, "repeat": repeat, "order": None, "stage": "judge", "status": status,
            "winner": None, "score": score}


def gold_run(run_id: str, correct: list[bool], dataset: str = "llmbar_natural", **choices: str) -> RunResults:
    """A pairwise run with gold on items i0..i(n-1), order ab, right where ``correct`` says."""
    rows = [pairwise_row(f"i{k}", "ab", "output_1" if ok else "output_2") for k, ok in enumerate(correct)]
    return RunResults(run_id=run_id, choices={"dataset": dataset, **choices}, rows=rows, ours="output_1")


def test_correctness_is_per_item_and_counts_unscored_and_errors_as_wrong():
    rows = [pairwise_row("x", "ab", "output_1"), pairwise_row("x", "ba", "output_2"),
            pairwise_row("y", "ab", None, status="unscored"), pairwise_row("y", "ba", None, status="error")]
    out = compare_outcomes.outcomes(RunResults("r", {"dataset": "d"}, rows, ours="output_1"))
    assert out.kind == compare_outcomes.CORRECT
    assert out.values == {("x",): 0.5, ("y",): 0.0}  # x right in one order of two
    other = compare_outcomes.outcomes(RunResults("s", {"dataset": "d"}, [pairwise_row("x", "ab", "output_1"),
                                                                          pairwise_row("y", "ab", "output_1")],
                                                 ours="output_1"))
    assert compare.compare_pair(out, other)["test"] == "sign_flip_exact"  # 0.5 is not a 0/1 outcome


def test_item_level_mcnemar_equals_statsmodels_and_an_order_consistent_item_counts_once():
    from statsmodels.stats.contingency_tables import mcnemar

    a_ok = [True] * 30 + [False] * 10 + [True] * 2 + [False] * 8
    b_ok = [True] * 30 + [True] * 10 + [False] * 2 + [False] * 8  # 10 items only B gets right, 2 only A
    single = compare.compare_pair(compare_outcomes.outcomes(gold_run("a", a_ok)),
                                  compare_outcomes.outcomes(gold_run("b", b_ok)))
    expected = mcnemar([[30, 2], [10, 8]], exact=True).pvalue
    assert single["test"] == "mcnemar_exact" and single["p_value"] == pytest.approx(expected)
    assert single["n"] == 50 and (single["test_details"]["b01"], single["test_details"]["b10"]) == (10, 2)

    def both_orders(run_id: str, ok: list[bool]) -> RunResults:  # each item judged in both orders, consistently
        rows = [pairwise_row(f"i{k}", order, "output_1" if good else "output_2")
                for k, good in enumerate(ok) for order in ("ab", "ba")]
        return RunResults(run_id, {"dataset": "llmbar_natural"}, rows, ours="output_1")

    doubled = compare.compare_pair(compare_outcomes.outcomes(both_orders("a", a_ok)),
                                   compare_outcomes.outcomes(both_orders("b", b_ok)))
    assert doubled["n"] == 50 and doubled["p_value"] == single["p_value"]  # not 24 discordant judgments


def test_synthesis_row_replaces_judge_row_in_either_file_order():
    judge = pairwise_row("x", "ab", "output_2")  # wrong first round
    synthesis = pairwise_row("x", "ab", "output_1", stage="synthesis")  # right after synthesis
    other_stage = pairwise_row("x", "ab", "output_2", stage="generation")
    for rows in ([judge, synthesis, other_stage], [synthesis, judge]):
        out = compare_outcomes.outcomes(RunResults("r", {}, rows, ours="output_1"))
        assert out.values == {("x",): 1.0}
        assert out.verdicts == {("x", 0, "ab"): "output_1"}


def test_pairwise_without_gold_scores_ours_per_item_and_uses_the_exact_sign_flip_test():
    rows = [pairwise_row("x", "ab", "ours", gold=None), pairwise_row("x", "ba", "tie", gold=None),
            pairwise_row("y", "ab", "base", gold=None), pairwise_row("y", "ba", None, gold=None, status="unscored"),
            pairwise_row("z", "ab", None, gold=None, status="error")]
    out = compare_outcomes.outcomes(RunResults("r", {}, rows, ours="ours"))
    assert out.kind == compare_outcomes.WIN_SCORE
    assert out.values == {("x",): 0.75, ("y",): 0.0}  # z has no scored judgment
    same = compare.compare_pair(out, out)
    assert same["test"] == "sign_flip_exact" and same["p_value"] is None  # every difference is 0


def test_pairwise_without_gold_needs_the_name_of_ours():
    with pytest.raises(ComparisonError, match="ours"):
        compare_outcomes.outcomes(RunResults("r", {}, [pairwise_row("x", "ab", "a", gold=None)], ours=None))


def test_pointwise_averages_repeats_per_item_and_the_permutation_p_is_exact():
    a = RunResults("a", {"dataset": "d", "judge": "j1"},
                   [pointwise_row(f"i{k}", float(k)) for k in range(5)]
                   + [pointwise_row("i0", 2.0, repeat=1), pointwise_row("i1", None, repeat=1, status="unscored")])
    b = RunResults("b", {"dataset": "d", "judge": "j2"}, [pointwise_row(f"i{k}", 2.0 * k + 1.5) for k in range(5)])
    out_a = compare_outcomes.outcomes(a)
    assert out_a.kind == compare_outcomes.SCORE and out_a.values[("i0",)] == 1.0 and out_a.values[("i1",)] == 1.0
    result = compare.compare_runs([a, b])
    pair = result["pairs"][0]
    assert pair["test"] == "sign_flip_exact" and pair["test_details"]["lattice"] == "1/2"
    # a = 1, 1, 2, 3, 4 and b = 1.5, 3.5, 5.5, 7.5, 9.5: the differences 0.5, 2.5, 3.5, 4.5, 5.5 are all
    # positive, so only all-plus and all-minus signs reach the observed mean: the exact two-sided p is 2 / 2^5
    assert pair["p_value"] == pytest.approx(2 / 32, rel=1e-12)
    assert pair["ci_method"] == "paired_t" and pair["ci_low"] <= pair["difference"] <= pair["ci_high"]
    assert pair["difference"] == pytest.approx((0.5 + 2.5 + 3.5 + 4.5 + 5.5) / 5)
    assert "verdict_agreement" not in pair


def test_pairing_drops_keys_only_one_run_has():
    a = gold_run("a", [True, True, False, True, False])  # items i0..i4
    b = RunResults("b", {"dataset": "llmbar_natural"},
                   [pairwise_row(f"i{k}", "ab", "output_1") for k in range(1, 7)], ours="output_1")  # i1..i6
    pair = compare.compare_pair(compare_outcomes.outcomes(a), compare_outcomes.outcomes(b))
    assert (pair["n"], pair["dropped_a"], pair["dropped_b"]) == (4, 1, 2)
    assert pair["metric_a"] == 0.5 and pair["metric_b"] == 1.0 and pair["difference"] == 0.5
    assert pair["test_details"]["b01"] == 2 and pair["test_details"]["b10"] == 0
    assert pair["verdict_n"] == 4 and pair["verdict_agreement"] == 0.5


def test_holm_over_three_pairs_by_hand():
    # A right on no item, B on 6 of 10, C on 9 of 10: all discordant pairs go one way, so the exact
    # McNemar p of k discordant pairs is 2 * 0.5^k: A-B k=6, A-C k=9, B-C k=3.
    runs = [gold_run("A", [False] * 10), gold_run("B", [True] * 6 + [False] * 4),
            gold_run("C", [True] * 9 + [False])]
    result = compare.compare_runs(runs)
    pairs = {(p["a"], p["b"]): p for p in result["pairs"]}
    assert list(pairs) == [("A", "B"), ("A", "C"), ("B", "C")]
    raw = {k: p["p_value"] for k, p in pairs.items()}
    assert raw == pytest.approx({("A", "B"): 2 / 2**6, ("A", "C"): 2 / 2**9, ("B", "C"): 2 / 2**3})
    # Holm: sorted p's times 3, 2, 1, each at least the previous one.
    step1 = 3 * 2 / 2**9
    step2 = max(step1, 2 * 2 / 2**6)
    step3 = max(step2, 1 * 2 / 2**3)
    holm = {k: p["p_holm"] for k, p in pairs.items()}
    assert holm == pytest.approx({("A", "C"): step1, ("A", "B"): step2, ("B", "C"): step3})
    assert [p["significant"] for p in pairs.values()] == [False, True, False]
    assert result["n_pairs"] == 3 and result["n_significant"] == 1
    assert result["metric"] == "accuracy" and result["kind"] == compare_outcomes.CORRECT


def test_runs_on_different_datasets_are_refused_naming_them():
    runs = [gold_run("r1", [True]), gold_run("r2", [True], dataset="llmbar_adversarial_neighbor")]
    with pytest.raises(ComparisonError, match="different datasets") as exc:
        compare.compare_runs(runs)
    assert "llmbar_natural: r1" in str(exc.value) and "llmbar_adversarial_neighbor: r2" in str(exc.value)


@pytest.mark.parametrize("runs, message", [
    ([gold_run("r1", [True])], "at least 2 runs"),
    ([gold_run("r1", [True]), gold_run("r1", [True])], "listed twice"),
    ([gold_run("r1", [True]), RunResults("r2", {"dataset": "llmbar_natural"}, [pointwise_row("i0", 3.0)])],
     "measure different things"),
    ([gold_run("r1", [True]), RunResults("r2", {"dataset": "llmbar_natural"}, [])], "no outcome to compare"),
])
def test_bad_input_is_refused(runs, message):
    with pytest.raises(ComparisonError, match=message):
        compare.compare_runs(runs)


def test_labels_use_only_the_choices_that_differ():
    runs = [gold_run("aaaaaaaa1", [True], judge="gpt4", prompt="vanilla", tracking="sqlite"),
            gold_run("bbbbbbbb2", [True], judge="gpt4", prompt="swap", tracking="off"),
            gold_run("cccccccc3", [True], judge="chatgpt", prompt="swap", tracking="sqlite")]
    assert compare.run_labels(runs) == {"aaaaaaaa1": "judge=gpt4,prompt=vanilla", "bbbbbbbb2": "judge=gpt4,prompt=swap",
                                        "cccccccc3": "judge=chatgpt,prompt=swap"}
    twins = [gold_run("aaaaaaaa1", [True], judge="x"), gold_run("bbbbbbbb2", [True], judge="x"),
             gold_run("cccccccc3", [True], judge="y")]
    assert compare.run_labels(twins) == {"aaaaaaaa1": "judge=x@aaaaaaaa", "bbbbbbbb2": "judge=x@bbbbbbbb",
                                         "cccccccc3": "judge=y"}
    assert compare.run_labels(twins[:2]) == {"aaaaaaaa1": "aaaaaaaa", "bbbbbbbb2": "bbbbbbbb"}


def test_table_has_the_columns_and_marks_holm_significance():
    runs = [gold_run("A", [False] * 10, judge="a"), gold_run("C", [True] * 9 + [False], judge="c")]
    console = Console(record=True, width=200)
    render_table(compare.compare_runs(runs), console)
    text = console.export_text()
    for header in ("A", "B", "n", "metric A", "metric B", "diff [CI]", "test", "p", "p Holm"):
        assert header in text
    assert "judge=a" in text and "judge=c" in text and "+0.900" in text and "McNemar exact" in text
    assert "0.004 *" in text and "1 of 1 pairs significant" in text


def test_importing_the_compare_cli_imports_neither_litellm_nor_mlflow():
    code = ("import sys, runner.app.compare_cli; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'litellm', 'mlflow'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_compares_pairwise_number_without_gold_is_named_win_score_not_win_rate():
    """README "One name, one number": compare averages an item's judgments (1 / 0.5 / 0), which is not the run's
    win rate (each item's final verdict), so it carries another name."""
    from runner.outputs.compare import METRICS
    from runner.outputs.compare_outcomes import WIN_SCORE

    assert METRICS[WIN_SCORE].startswith("win score") and "win rate" not in METRICS[WIN_SCORE]
