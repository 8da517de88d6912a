"""Unit tests for runner.stats.agreement: judge-vs-gold, inter-judge and human-ceiling agreement.

Expected numbers are textbook worked examples (Wikipedia's Cohen and Fleiss kappa examples, the
`krippendorff` package's documented example) or computed here from the statistics' definitions, never by
calling the library the module wraps. Warnings are errors: degenerate data must give None quietly.
"""

from __future__ import annotations

import itertools
import json

import pytest

from runner.stats import scores as stats
from runner.stats.agreement import label_agreement, ordinal_agreement
from runner.stats.coefficients import cohen_kappa
from runner.stats.inter_rater import human_ceiling, inter_judge, majority

pytestmark = pytest.mark.filterwarnings("error")


def weighted_kappa_by_definition(pred: list[int], gold: list[int], power: int) -> float:
    """Weighted kappa 1 - sum(w * observed) / sum(w * expected), with w = |i - j| ** power on the values."""
    n = len(pred)
    scale = range(min(pred + gold), max(pred + gold) + 1)
    observed = sum(abs(p - g) ** power for p, g in zip(pred, gold, strict=True)) / n
    expected = sum(pred.count(i) * gold.count(j) * abs(i - j) ** power for i in scale for j in scale) / n**2
    return 1 - observed / expected


def interval_alpha_by_definition(x: list[float], y: list[float]) -> float:
    """Krippendorff's interval alpha for two coders and no missing values, from its definition."""
    values = x + y
    total = len(values)
    observed = sum((a - b) ** 2 for a, b in zip(x, y, strict=True)) / len(x)
    expected = sum((a - b) ** 2 for a, b in itertools.permutations(values, 2)) / (total * (total - 1))
    return 1 - observed / expected


def assert_json_plain(result: dict) -> None:
    """The result survives strict JSON (no NaN, no numpy scalars)."""
    json.dumps(result, allow_nan=False)


class TestLabelAgreement:
    def test_perfect_agreement(self) -> None:
        gold = ["A", "B", "tie", "A", "B"]
        result = label_agreement(list(gold), gold)
        assert result["accuracy"] == 1.0
        assert result["cohen_kappa"] == pytest.approx(1.0)
        assert result["macro_f1"] == pytest.approx(1.0)
        assert result["krippendorff_alpha"] == pytest.approx(1.0)
        assert result["confusion"] == {"labels": ["A", "B", "tie"], "matrix": [[2, 0, 0], [0, 2, 0], [0, 0, 1]]}
        assert_json_plain(result)

    def test_wikipedia_cohen_example_gives_kappa_0_4(self) -> None:
        # 50 grant proposals: both yes 20, A yes / B no 5, A no / B yes 10, both no 15 -> p_o 0.7, p_e 0.5.
        gold = ["yes"] * 25 + ["no"] * 25  # reader A
        pred = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15  # reader B
        result = label_agreement(pred, gold)
        assert result["accuracy"] == pytest.approx(0.7)
        assert result["cohen_kappa"] == pytest.approx(0.4)
        # rows = gold (A), columns = pred (B), labels sorted: no, yes
        assert result["confusion"]["matrix"] == [[15, 10], [5, 20]]

    def test_chance_level_data_gives_kappa_0(self) -> None:
        gold = ["a", "a", "b", "b"] * 5
        pred = ["a", "b", "a", "b"] * 5  # independent of gold: p_o = p_e = 0.5
        assert label_agreement(pred, gold)["cohen_kappa"] == pytest.approx(0.0, abs=1e-12)

    def test_unscored_items_are_counted_not_dropped(self) -> None:
        result = label_agreement(["A", None, "B", None], ["A", "A", "A", "B"])
        assert (result["n"], result["n_total"], result["unscored"]) == (2, 4, 2)
        assert result["accuracy"] == pytest.approx(0.5)
        assert result["accuracy_all"] == pytest.approx(0.25)
        assert sum(map(sum, result["confusion"]["matrix"])) == 2

    def test_macro_f1_over_given_labels_and_confusion_keeps_the_rest(self) -> None:
        result = label_agreement(["A", "B", "B", "A"], ["A", "A", "B", "tie"], labels=["A", "B"])
        # F1(A): P 1/2, R 1/2 -> 1/2. F1(B): P 1/2, R 1 -> 2/3. "tie" is left out of the average.
        assert result["macro_f1"] == pytest.approx((1 / 2 + 2 / 3) / 2)
        assert result["labels"] == ["A", "B"]
        assert result["confusion"] == {"labels": ["A", "B", "tie"], "matrix": [[1, 1, 0], [0, 1, 0], [1, 0, 0]]}

    def test_macro_f1_averages_over_the_gold_classes_only(self) -> None:
        """Issue 31 point 7: a tie no gold label has is not a class (it scored 0 and halved macro-F1)."""
        gold = ["A"] * 6 + ["B"] * 6
        pred = ["A"] * 5 + ["tie"] + ["B"] * 4 + ["tie", "A"]
        result = label_agreement(pred, gold)
        f1_a, f1_b = 2 * 5 / (2 * 5 + 1 + 1), 2 * 4 / (2 * 4 + 0 + 2)  # 2TP / (2TP + FP + FN)
        assert result["labels"] == ["A", "B"]
        assert result["macro_f1"] == pytest.approx((f1_a + f1_b) / 2)
        assert result["confusion"] == {"labels": ["A", "B", "tie"], "matrix": [[5, 0, 1], [1, 4, 1], [0, 0, 0]]}

    def test_single_class_gives_none_for_chance_corrected_statistics(self) -> None:
        result = label_agreement(["A", "A", "A"], ["A", "A", "A"])
        assert result["accuracy"] == 1.0
        assert result["cohen_kappa"] is None
        assert result["krippendorff_alpha"] is None
        assert result["confusion"] == {"labels": ["A"], "matrix": [[3]]}
        assert_json_plain(result)

    @pytest.mark.parametrize(("pred", "gold"), [([], []), ([None, None], ["A", "B"])])
    def test_no_scored_pair_gives_none(self, pred: list, gold: list) -> None:
        result = label_agreement(pred, gold)
        assert result["n"] == 0
        for key in ("accuracy", "cohen_kappa", "macro_f1", "krippendorff_alpha"):
            assert result[key] is None, key
        assert result["accuracy_all"] == (0.0 if gold else None)
        assert_json_plain(result)

    def test_malformed_input_raises(self) -> None:
        with pytest.raises(ValueError, match="differ in length"):
            label_agreement(["A"], ["A", "B"])
        with pytest.raises(ValueError, match="gold"):
            label_agreement(["A"], [None])

    def test_integer_labels_sort_numerically(self) -> None:
        result = label_agreement([0, 1, 2, 10], [0, 1, 2, 10])
        assert result["confusion"]["labels"] == [0, 1, 2, 10]


class TestCohenKappa:
    def test_matches_the_report_and_is_none_when_undefined(self) -> None:
        pred, gold = ["A", "B", "B", "A", "A"], ["A", "B", "A", "A", "B"]
        assert cohen_kappa(pred, gold) == label_agreement(pred, gold)["cohen_kappa"]
        # p_o = 3/5, p_e = (3/5)(3/5) + (2/5)(2/5) = 13/25 -> kappa = (15/25 - 13/25) / (12/25) = 1/6
        assert cohen_kappa(pred, gold) == pytest.approx(1 / 6)
        assert cohen_kappa(["A", "A"], ["A", "A"]) is None
        assert cohen_kappa([], []) is None


class TestOrdinalAgreement:
    def test_weighted_kappas_match_their_definition_with_a_gap_in_the_scale(self) -> None:
        # Score 3 and 4 are never used: sklearn must still see them, or 2-vs-5 would count as adjacent.
        gold = [1, 2, 5, 5, 1, 2]
        pred = [2, 2, 5, 1, 1, 5]
        result = ordinal_agreement(pred, gold)
        assert result["kappa_linear"] == pytest.approx(weighted_kappa_by_definition(pred, gold, 1))
        assert result["kappa_quadratic"] == pytest.approx(weighted_kappa_by_definition(pred, gold, 2))

    def test_kappas_round_half_up_while_alpha_uses_raw_scores(self) -> None:
        pred = [2.5, 1.4, 3.5]
        gold = [3.0, 1.0, 4.0]
        result = ordinal_agreement(pred, gold)
        assert result["kappa_linear"] == pytest.approx(1.0)
        assert result["krippendorff_alpha_interval"] == pytest.approx(interval_alpha_by_definition(pred, gold))
        assert result["krippendorff_alpha_interval"] < 1.0

    def test_includes_human_correlation_fields_and_counts_unscored(self) -> None:
        pred = [1.0, None, 3.0, 4.0, 2.0]
        gold = [1.0, 5.0, 2.0, 4.0, 3.0]
        result = ordinal_agreement(pred, gold, tolerance=0.5)
        expected = stats.human_correlation([1.0, 3.0, 4.0, 2.0], [1.0, 2.0, 4.0, 3.0], tolerance=0.5).to_dict()
        assert {key: result[key] for key in expected} == expected
        assert (result["n"], result["unscored"]) == (4, 1)
        assert result["krippendorff_alpha_ordinal"] is not None
        assert_json_plain(result)

    @pytest.mark.parametrize(("pred", "gold"), [([], []), ([3.0, 3.0], [3.0, 3.0]), ([None], [2.0])])
    def test_degenerate_scores_give_none(self, pred: list, gold: list) -> None:
        result = ordinal_agreement(pred, gold)
        for key in ("kappa_linear", "kappa_quadratic", "krippendorff_alpha_ordinal", "krippendorff_alpha_interval"):
            assert result[key] is None, key
        assert_json_plain(result)


class TestMajority:
    @pytest.mark.parametrize(
        ("labels", "expected"),
        [
            (["b", "a", "a"], "a"),
            (["b", "a", "c"], "b"),  # all differ: the first-seen wins
            (["a", "b", "b", "a"], "a"),  # tied counts: the first-seen among the tied
            (["c", "b", "b", "a", "a"], "b"),  # c is first-seen but not among the tied
            ([None, "x", None], "x"),
            ([2, 1, 0], 2),
            ([], None),
            ([None], None),
        ],
    )
    def test_mode_with_first_seen_tie_rule(self, labels: list, expected: object) -> None:
        assert majority(labels) == expected


class TestInterJudge:
    def test_krippendorff_package_docs_example(self) -> None:
        # The `krippendorff` package's documented example (Krippendorff's own), nominal alpha 0.691358.
        data = [
            [None, None, None, None, None, 3, 4, 1, 2, 1, 1, 3, 3, None, 3],
            [1, None, 2, 1, 3, 3, 4, 3, None, None, None, None, None, None, None],
            [None, None, 2, 1, 3, 4, 4, None, 2, 1, 1, 3, 3, None, 4],
        ]
        result = inter_judge({"a": data[0], "b": data[1], "c": data[2]})
        assert result["krippendorff_alpha"] == pytest.approx(0.691358, abs=1e-6)
        # Only items 6 (3, 3, 4) and 7 (4, 4, 4) were labelled by all three: P-bar = (1/3 + 1) / 2 = 2/3,
        # P_e = (2/6)**2 + (4/6)**2 = 5/9, so Fleiss kappa = (2/3 - 5/9) / (1 - 5/9) = 1/4.
        assert result["fleiss_n"] == 2
        assert result["fleiss_kappa"] == pytest.approx(0.25)
        assert_json_plain(result)

    def test_pairwise_uses_items_both_judges_labelled(self) -> None:
        result = inter_judge({"x": ["A", "B", None, "A"], "y": ["A", "B", "B", None], "z": ["A", "A", "B", "A"]})
        pairs = {(pair["a"], pair["b"]): pair for pair in result["pairwise"]}
        assert list(pairs) == [("x", "y"), ("x", "z"), ("y", "z")]
        assert (pairs["x", "y"]["n"], pairs["x", "y"]["accuracy"], pairs["x", "y"]["cohen_kappa"]) == (2, 1.0, 1.0)
        assert (pairs["x", "z"]["n"], pairs["x", "z"]["accuracy"]) == (3, pytest.approx(2 / 3))
        assert result["fleiss_n"] == 2

    def test_string_nan_is_a_label_not_a_missing_value(self) -> None:
        result = inter_judge({"a": ["nan", "x", "nan"], "b": ["nan", "x", "nan"]})
        assert result["krippendorff_alpha"] == pytest.approx(1.0)

    @pytest.mark.parametrize("judges", [{}, {"only": ["A", "B"]}, {"a": [], "b": []}, {"a": ["A"], "b": ["A"]}])
    def test_degenerate_inputs_give_none(self, judges: dict) -> None:
        result = inter_judge(judges)
        assert result["fleiss_kappa"] is None
        assert result["krippendorff_alpha"] is None
        assert result["mean_pairwise_kappa"] is None
        assert_json_plain(result)


class TestHumanCeiling:
    def test_wikipedia_fleiss_example_gives_0_210(self) -> None:
        # 10 subjects, 14 raters, 5 categories: the counts table of Wikipedia's "Fleiss' kappa" worked example.
        counts = [
            [0, 0, 0, 0, 14],
            [0, 2, 6, 4, 2],
            [0, 0, 3, 5, 6],
            [0, 3, 9, 2, 0],
            [2, 2, 8, 1, 1],
            [7, 7, 0, 0, 0],
            [3, 2, 6, 3, 0],
            [2, 5, 3, 2, 2],
            [6, 5, 2, 1, 0],
            [0, 2, 2, 3, 7],
        ]
        annotations = [[category for category, count in enumerate(row, 1) for _ in range(count)] for row in counts]
        result = human_ceiling(annotations)
        assert result["annotators"] == 14
        assert result["fleiss_kappa"] == pytest.approx(0.210, abs=5e-4)
        assert_json_plain(result)

    def test_leave_one_out_and_pairwise_by_hand(self) -> None:
        annotations = [["a", "a", "a"], ["a", "a", "b"], ["a", "b", "c"], ["b", "b", "a"]]
        result = human_ceiling(annotations, identified=True)
        loo = result["leave_one_out"]
        # annotator1 vs majority(2, 3): a=a, a=maj(a,b)=a, a!=maj(b,c)=b, b=maj(b,a)=b
        assert loo["annotator1"]["accuracy"] == pytest.approx(3 / 4)
        assert loo["annotator2"]["accuracy"] == pytest.approx(3 / 4)
        assert loo["annotator3"]["accuracy"] == pytest.approx(1 / 4)
        assert result["mean_leave_one_out_accuracy"] == pytest.approx(7 / 12)
        assert result["mean_pairwise_accuracy"] == pytest.approx((3 / 4 + 1 / 4 + 1 / 4) / 3)
        assert result["judges"] == ["annotator1", "annotator2", "annotator3"]

    def test_the_judge_is_scored_against_the_same_references_on_the_same_items(self) -> None:
        # issue 31 point 5: the judge stands beside each annotator, against that annotator's leave-one-out reference
        annotations = [["a", "a", "a"], ["a", "a", "b"], ["a", "b", "c"], ["b", "b", "a"], [None, "b", "b"]]
        judge = ["a", "b", "b", None, "b"]
        result = human_ceiling(annotations, judge)
        humans, judged = result["leave_one_out"], result["judge_leave_one_out"]
        # annotator1's items are the first four (it has no label on the fifth), references a, a, b, b
        assert humans["annotator1"]["n"] == judged["annotator1"]["n"] == 4
        assert judged["annotator1"]["accuracy"] == pytest.approx(2 / 4)  # a=a, b!=a, b=b, None is a miss
        # annotator3's references are majority(1, 2): a, a, a, b, b over all five items
        assert humans["annotator3"]["n"] == judged["annotator3"]["n"] == 5
        assert judged["annotator3"]["accuracy"] == pytest.approx(2 / 5)
        assert result["mean_judge_leave_one_out_accuracy"] == pytest.approx(
            sum(entry["accuracy"] for entry in judged.values()) / 3)
        assert_json_plain(result)

    def test_pairwise_kappa_only_between_identified_annotators(self) -> None:
        annotations = [["a", "a", "a"], ["a", "a", "b"], ["a", "b", "c"], ["b", "b", "a"]]
        anonymous = human_ceiling(annotations)
        assert anonymous["pairwise"] == [] and anonymous["mean_pairwise_kappa"] is None
        assert "dataset.annotators_identified" in anonymous["pairwise_omitted"]
        assert anonymous["fleiss_kappa"] is not None and anonymous["krippendorff_alpha"] is not None
        identified = human_ceiling(annotations, identified=True)
        assert len(identified["pairwise"]) == 3 and "pairwise_omitted" not in identified
        assert identified["fleiss_kappa"] == anonymous["fleiss_kappa"]

    def test_perfect_annotators(self) -> None:
        result = human_ceiling([["A", "A"], ["B", "B"], ["A", "A"]], identified=True)
        assert result["fleiss_kappa"] == pytest.approx(1.0)
        assert result["mean_pairwise_kappa"] == pytest.approx(1.0)
        assert result["krippendorff_alpha"] == pytest.approx(1.0)

    @pytest.mark.parametrize("annotations", [[], [["A"], ["B"]], [["A", "A"], ["A", "A"]]])
    def test_degenerate_annotations_give_none(self, annotations: list) -> None:
        result = human_ceiling(annotations)
        assert result["fleiss_kappa"] is None
        assert result["mean_leave_one_out_kappa"] is None
        assert_json_plain(result)

    def test_ragged_annotations_raise(self) -> None:
        with pytest.raises(ValueError, match="same number"):
            human_ceiling([["A", "B"], ["A"]])


def test_a_runs_macro_f1_with_unscored_as_tie_averages_over_the_gold_classes() -> None:
    """Issue 31 point 7: ``metrics.unscored_as=tie`` turns unreadable verdicts into ties; gold has no tie, so the
    tie is no class of macro-F1 (it counted as one, at F1 0, and halved the run's macro-F1)."""
    from runner.core.choices import UnscoredAs
    from runner.core.run_settings import MetricsConfig
    from runner.modes.trust import label_rows_agreement

    rows = [("A", "A")] * 8 + [(None, "A")] * 2 + [("B", "B")] * 9 + [("A", "B")]
    got = label_rows_agreement(rows, MetricsConfig(unscored_as=UnscoredAs.tie, ci_resamples=50), seed=0)
    f1_a, f1_b = 2 * 8 / (2 * 8 + 1 + 2), 2 * 9 / (2 * 9 + 0 + 1)
    assert got["labels"] == ["A", "B"]
    assert got["macro_f1"] == pytest.approx((f1_a + f1_b) / 2)
