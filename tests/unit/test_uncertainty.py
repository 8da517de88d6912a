"""Unit tests for runner.stats.uncertainty: bootstrap intervals and paired significance tests.

P-values are checked against hand computation (binomial sums, the closed-form chi-square(1) tail,
Holm's step-down by hand); intervals against properties that must hold for any correct bootstrap.
Warnings are errors: degenerate data must give None quietly.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from runner.stats.coefficients import cohen_kappa, label_codes, nominal_kappa
from runner.stats.significance import holm, mcnemar_test, wilcoxon_test
from runner.stats.uncertainty import BCA_MAX_N, bootstrap_ci, bootstrap_metric_ci, paired_difference

pytestmark = pytest.mark.filterwarnings("error")


def correctness(counts: dict[tuple[bool, bool], int]) -> tuple[list[bool], list[bool]]:
    """Per-item (a_correct, b_correct) lists from a 2x2 table of counts."""
    pairs = [pair for pair, count in counts.items() for _ in range(count)]
    return [a for a, _ in pairs], [b for _, b in pairs]


def kappa_ci(rows: list[tuple[str, str]], **kwargs) -> dict:
    """bootstrap_metric_ci of the vectorized kappa over (pred, gold) rows, as runner.modes.trust calls it."""
    columns, n_labels = label_codes([p for p, _ in rows], [g for _, g in rows])
    return bootstrap_metric_ci(columns, lambda a, b: nominal_kappa(a, b, n_labels), **kwargs)


def mean_of(values: np.ndarray) -> np.ndarray:
    return np.mean(values, axis=-1)


class TestBootstrapCI:
    def test_same_seed_same_interval_and_contains_estimate(self) -> None:
        values = np.random.default_rng(1).normal(3.0, 1.0, size=60).tolist()
        first = bootstrap_ci(values, seed=7)
        assert first == bootstrap_ci(values, seed=7)
        assert first != bootstrap_ci(values, seed=8)
        assert first["method"] == "BCa"
        assert first["low"] < first["estimate"] < first["high"]
        assert first["estimate"] == pytest.approx(float(np.mean(values)))
        json.dumps(first, allow_nan=False)

    def test_narrower_with_more_data(self) -> None:
        rng = np.random.default_rng(2)
        small = bootstrap_ci(rng.normal(size=20).tolist())
        large = bootstrap_ci(rng.normal(size=2000).tolist())
        assert large["high"] - large["low"] < (small["high"] - small["low"]) / 4

    def test_higher_level_is_wider(self) -> None:
        values = np.random.default_rng(3).normal(size=50).tolist()
        narrow, wide = bootstrap_ci(values, level=0.8), bootstrap_ci(values, level=0.99)
        assert wide["low"] < narrow["low"] < narrow["high"] < wide["high"]

    def test_degenerate_bca_falls_back_to_percentile(self) -> None:
        # The median of mostly equal values has a collapsed jackknife: BCa is undefined here.
        result = bootstrap_ci([1.0, 2.0, 2.0, 2.0, 2.0, 3.0], statistic="median", resamples=500)
        assert result["method"] == "percentile"
        assert result["low"] <= result["estimate"] == 2.0 <= result["high"]

    def test_callable_statistic(self) -> None:
        values = np.random.default_rng(4).normal(0.0, 2.0, size=80).tolist()
        result = bootstrap_ci(values, statistic=lambda sample: float(np.std(sample)), resamples=500)
        assert result["low"] < result["estimate"] < result["high"]

    @pytest.mark.parametrize(("values", "estimate"), [([], None), ([4.0], 4.0), ([2.0, 2.0, 2.0], 2.0)])
    def test_too_few_or_constant_values_give_none_bounds(self, values: list, estimate: float | None) -> None:
        result = bootstrap_ci(values)
        assert (result["estimate"], result["low"], result["high"], result["method"]) == (estimate, None, None, None)

    @pytest.mark.parametrize("kwargs", [{"statistic": "mode"}, {"level": 1.0}, {"level": 0.0}, {"resamples": 0}])
    def test_invalid_settings_raise(self, kwargs: dict) -> None:
        with pytest.raises(ValueError):
            bootstrap_ci([1.0, 2.0], **kwargs)


class TestBootstrapMetricCI:
    def test_kappa_interval_is_reproducible_and_contains_estimate(self) -> None:
        rng = np.random.default_rng(5)
        gold = rng.choice(["A", "B", "tie"], size=120).tolist()
        pred = [g if keep else "A" for g, keep in zip(gold, rng.random(120) < 0.7, strict=True)]
        rows = list(zip(pred, gold, strict=True))
        result = kappa_ci(rows, resamples=300, seed=3)
        assert result == kappa_ci(rows, resamples=300, seed=3)
        assert result["estimate"] == pytest.approx(cohen_kappa(pred, gold), abs=1e-12)
        assert result["low"] < result["estimate"] < result["high"]
        assert result["undefined_resamples"] == 0
        json.dumps(result, allow_nan=False)

    def test_narrower_with_more_rows(self) -> None:
        rng = np.random.default_rng(6)
        widths = []
        for n in (30, 1000):
            rows = (rng.random(n) < 0.6).astype(float).tolist()
            result = bootstrap_metric_ci([rows], mean_of, resamples=400)
            widths.append(result["high"] - result["low"])
        assert widths[1] < widths[0] / 3

    def test_undefined_resamples_are_counted(self) -> None:
        # A resample without the single ("B", "B") row holds one class only: kappa is undefined there.
        rows = [("A", "A")] * 9 + [("B", "B")]
        result = kappa_ci(rows, resamples=200)
        assert 0 < result["undefined_resamples"] < 200
        assert result["estimate"] == pytest.approx(1.0)
        assert (result["low"], result["high"]) == (None, None)  # every defined resample gives 1.0

    @pytest.mark.parametrize("rows", [[], [("A", "B")]])
    def test_too_few_rows_give_none_bounds(self, rows: list) -> None:
        result = kappa_ci(rows)
        assert (result["low"], result["high"]) == (None, None)

    def test_batches_draw_the_same_resamples_as_one_draw(self) -> None:
        # Resamples are drawn a batch at a time to bound memory; the batches must be the one-draw resamples.
        values = np.random.default_rng(11).normal(size=50)
        one = np.random.default_rng(4).integers(0, 50, size=(300, 50))
        expected = np.quantile(values[one].mean(axis=1), [0.025, 0.975])
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("runner.stats.uncertainty.BATCH_VALUES", 7 * 50)  # 7 resamples a batch, the last one short
            result = bootstrap_metric_ci([values], mean_of, resamples=300, seed=4)
        assert (result["low"], result["high"]) == pytest.approx(tuple(expected), abs=1e-12)

    def test_columns_of_different_lengths_raise(self) -> None:
        with pytest.raises(ValueError, match="differ in length"):
            bootstrap_metric_ci([[1, 2], [1]], mean_of)


class TestNominalKappa:
    def test_equals_sklearn_row_by_row(self) -> None:
        rng = np.random.default_rng(9)
        labels = np.array(["A", "B", "tie"])
        for _ in range(50):
            n = int(rng.integers(2, 40))
            pred, gold = labels[rng.integers(0, 3, n)].tolist(), labels[rng.integers(0, 2, n)].tolist()
            columns, n_labels = label_codes(pred, gold)
            got = nominal_kappa(np.asarray(columns[0])[None], np.asarray(columns[1])[None], n_labels)[0]
            expected = cohen_kappa(pred, gold)
            assert (math.isnan(got) and expected is None) or got == pytest.approx(expected, abs=1e-12)

    def test_one_shared_label_is_undefined(self) -> None:
        assert math.isnan(nominal_kappa(np.zeros((1, 5), int), np.zeros((1, 5), int), 1)[0])


class TestLargeSamples:
    def test_percentile_above_bca_max_n_agrees_with_bca(self) -> None:
        # Above BCA_MAX_N the percentile interval is used (BCa's jackknife is O(n^2)); at that size the two agree.
        values = (np.random.default_rng(12).random(BCA_MAX_N) < 0.8).astype(float)
        bca = bootstrap_ci(values, resamples=1000)
        percentile = bootstrap_ci(np.append(values, values[:1]), resamples=1000)
        assert (bca["method"], percentile["method"]) == ("BCa", "percentile")
        assert percentile["low"] == pytest.approx(bca["low"], abs=2e-3)
        assert percentile["high"] == pytest.approx(bca["high"], abs=2e-3)

    def test_a_million_values_get_an_interval(self) -> None:
        # 100,000 values once needed a 9.3 GiB jackknife; resampling in batches keeps memory near the data's.
        values = (np.random.default_rng(13).random(1_000_000) < 0.7).astype(float)
        result = bootstrap_ci(values, resamples=50)
        assert result["method"] == "percentile"
        assert result["low"] < result["estimate"] < result["high"]


class TestPairedDifference:
    def test_shifted_scores(self) -> None:
        rng = np.random.default_rng(8)
        a = rng.normal(size=100)
        b = a + 0.5 + rng.normal(0.0, 0.3, size=100)
        result = paired_difference(a.tolist(), b.tolist())
        assert result["mean_difference"] == pytest.approx(float(np.mean(b - a)))
        assert 0.0 < result["low"] < result["mean_difference"] < result["high"]
        assert result["mean_b"] - result["mean_a"] == pytest.approx(result["mean_difference"])

    def test_constant_difference_gives_none_bounds(self) -> None:
        result = paired_difference([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
        assert result["mean_difference"] == pytest.approx(1.0)
        assert (result["low"], result["high"]) == (None, None)

    def test_length_mismatch_raises(self) -> None:
        with pytest.raises(ValueError, match="differ in length"):
            paired_difference([1.0], [1.0, 2.0])


class TestMcNemar:
    def test_textbook_table_uses_chi2_with_continuity_correction(self) -> None:
        # Wikipedia's "McNemar's test" example table: 101 / 121 / 59 / 33.
        a, b = correctness({(True, True): 101, (True, False): 121, (False, True): 59, (False, False): 33})
        result = mcnemar_test(a, b)
        assert (result["b01"], result["b10"], result["exact"]) == (59, 121, False)
        statistic = (abs(121 - 59) - 1) ** 2 / (121 + 59)
        assert result["statistic"] == pytest.approx(statistic)
        assert result["p_value"] == pytest.approx(math.erfc(math.sqrt(statistic / 2)))  # chi2(1) tail

    @pytest.mark.parametrize(("b01", "b10", "p_value"), [(1, 6, 16 / 128), (2, 10, 2 * (1 + 12 + 66) / 4096)])
    def test_few_discordant_pairs_use_the_exact_binomial_test(self, b01: int, b10: int, p_value: float) -> None:
        a, b = correctness({(True, True): 40, (False, True): b01, (True, False): b10, (False, False): 5})
        result = mcnemar_test(a, b)
        assert result["exact"] is True
        assert result["statistic"] == min(b01, b10)
        assert result["p_value"] == pytest.approx(p_value)

    def test_exact_threshold(self) -> None:
        assert mcnemar_test(*correctness({(False, True): 12, (True, False): 12}))["exact"] is True
        assert mcnemar_test(*correctness({(False, True): 12, (True, False): 13}))["exact"] is False

    @pytest.mark.parametrize("counts", [{}, {(True, True): 5, (False, False): 3}])
    def test_no_discordant_pair_gives_none(self, counts: dict) -> None:
        result = mcnemar_test(*correctness(counts))
        assert (result["statistic"], result["p_value"]) == (None, None)


class TestWilcoxon:
    def test_all_positive_differences_by_hand(self) -> None:
        # Five positive differences: W- = 0, exact two-sided p = 2 / 2**5.
        result = wilcoxon_test([0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
        assert (result["n"], result["n_nonzero"]) == (6, 5)
        assert result["statistic"] == 0.0
        assert result["p_value"] == pytest.approx(2 / 32)

    @pytest.mark.parametrize(("a", "b"), [([], []), ([1.0, 2.0], [1.0, 2.0])])
    def test_all_zero_differences_give_none(self, a: list, b: list) -> None:
        result = wilcoxon_test(a, b)
        assert (result["statistic"], result["p_value"]) == (None, None)


class TestHolm:
    def test_by_hand(self) -> None:
        # Sorted 0.01, 0.03, 0.04 times 3, 2, 1 = 0.03, 0.06, 0.04 -> running max 0.03, 0.06, 0.06.
        adjusted = holm({"a": 0.01, "b": 0.04, "c": 0.03})
        assert list(adjusted) == ["a", "b", "c"]
        assert adjusted == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06})

    def test_capped_at_one_and_none_passes_through(self) -> None:
        adjusted = holm({"x": 0.5, "undefined": None, "y": 0.6})
        assert adjusted == {"x": pytest.approx(1.0), "undefined": None, "y": pytest.approx(1.0)}

    def test_empty(self) -> None:
        assert holm({}) == {}
