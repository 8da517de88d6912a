"""The item as the unit of intervals (runner.stats.clusters, runner.stats.proportions): a cluster bootstrap wider
than the naive one where an item's judgments agree, Wilson / Clopper-Pearson bounds equal to statsmodels', never
empty and never at 100% with an error, and the weighted kappa equal to sklearn's."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from runner.stats.clusters import cluster_bootstrap_ci, design_effect, weighted_ac1, weighted_kappa, weighted_mean
from runner.stats.coefficients import cohen_kappa, label_codes
from runner.stats.proportions import proportion_ci
from runner.stats.uncertainty import bootstrap_ci


def _pairs(per_item: list[float]) -> tuple[list[float], list[int]]:
    """Each item judged twice (both orders) with the same outcome: every judgment doubled."""
    return [v for v in per_item for _ in range(2)], [k for k in range(len(per_item)) for _ in range(2)]


def test_the_cluster_bootstrap_is_wider_than_the_naive_one_when_orders_agree():
    rng = np.random.default_rng(0)
    values, items = _pairs(rng.binomial(1, 0.8, size=100).astype(float).tolist())
    naive = bootstrap_ci(values, "mean", resamples=2000, seed=1)
    clustered = cluster_bootstrap_ci([values], items, weighted_mean, resamples=2000, seed=1)
    assert clustered["estimate"] == pytest.approx(naive["estimate"])
    ratio = (clustered["high"] - clustered["low"]) / (naive["high"] - naive["low"])
    # 200 copies of 100 outcomes: the variance is twice the naive one, so the width sqrt(2) times (bootstrap noise)
    assert ratio == pytest.approx(math.sqrt(2), rel=0.1)
    assert clustered["clusters"] == 100 and clustered["unit"] == "cluster"


def test_the_design_effect_of_doubled_outcomes_is_two_and_the_interval_widens():
    values, items = _pairs([1.0] * 80 + [0.0] * 20)
    assert design_effect(values, items) == pytest.approx(2 * 100 / 99)  # k / (k - 1) times 2
    clustered, naive = proportion_ci(values, items), proportion_ci(values)
    assert clustered["effective_n"] == 100.0 and clustered["design_effect"] == pytest.approx(2 * 100 / 99)
    low, high = proportion_confint(80, 100, alpha=0.05, method="wilson")  # as if the 100 items were judged once
    assert (clustered["low"], clustered["high"]) == pytest.approx((low, high))
    assert clustered["high"] - clustered["low"] > naive["high"] - naive["low"]


def _error_orders(sizes: list[int], seed: int) -> dict[str, list[int]]:
    """Orders in which to turn the rows of items with ``sizes`` rows into errors, one at a time."""
    starts = np.cumsum([0, *sizes[:-1]])
    rows = [[int(start) + j for j in range(size)] for start, size in zip(starts, sizes, strict=True)]
    spread = [item[j] for j in range(max(sizes)) for item in rows if j < len(item)]  # one per item, then again
    return {"item by item": [r for item in rows for r in item], "spread": spread,
            "shuffled": np.random.default_rng(seed).permutation(sum(sizes)).tolist()}


@pytest.mark.parametrize("method", ["wilson", "clopper_pearson"])
@pytest.mark.parametrize("sizes", [[2] * 50, [1] * 30, [3] * 12, [6] * 8, [2] * 10 + [1] * 5 + [4] * 3, [5, 1, 1, 1]],
                         ids=["50x2", "30x1", "12x3", "8x6", "mixed", "one big"])
def test_one_more_error_never_raises_either_bound(sizes, method):
    """Issue 31 point 4: 50 items x 2 orders, one wrong judgment raised the lower bound from 0.9287 to 0.9451."""
    items = [k for k, size in enumerate(sizes) for _ in range(size)]
    for name, order in _error_orders(sizes, seed=len(sizes)).items():
        values = [1.0] * len(items)
        before = proportion_ci(values, items, method=method)
        for errors, row in enumerate(order, start=1):
            values[row] = 0.0
            after = proportion_ci(values, items, method=method)
            where = f"{name}, error {errors}"
            assert after["low"] <= before["low"] + 1e-12, where
            assert after["high"] <= before["high"] + 1e-12, where
            before = after


def test_fifty_items_in_two_orders_all_correct_and_with_one_error():
    values, items = _pairs([1.0] * 50)
    perfect = proportion_ci(values, items)
    assert (perfect["low"], perfect["high"]) == pytest.approx((0.9287, 1.0), abs=1e-4)
    values[0] = 0.0
    one = proportion_ci(values, items)
    assert one["low"] < perfect["low"] and one["high"] < 1.0
    assert (one["low"], one["high"]) == pytest.approx(proportion_confint(49.5, 50, alpha=0.05, method="wilson"))


def test_unequal_items_count_as_kishs_effective_number():
    items = [0] * 4 + [1, 2, 3, 4]  # one item judged four times, four items once: 64 / 20 = 3.2 items' worth
    got = proportion_ci([1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0], items)
    assert got["clusters"] == 5 and got["effective_n"] == pytest.approx(3.2)
    assert (got["low"], got["high"]) == pytest.approx(proportion_confint(0.75 * 3.2, 3.2, alpha=0.05,
                                                                         method="wilson"))


@pytest.mark.parametrize("method", ["wilson", "clopper_pearson"])
def test_proportion_bounds_equal_statsmodels_and_hold_their_promises(method):
    got = proportion_ci([1.0] * 98 + [0.0] * 2, level=0.95, method=method)
    low, high = proportion_confint(98, 100, alpha=0.05, method={"wilson": "wilson", "clopper_pearson": "beta"}[method])
    assert (got["low"], got["high"]) == pytest.approx((low, high))
    assert got["high"] < 1.0  # two errors: 100% is outside the interval
    perfect = proportion_ci([1.0] * 100, method=method)
    assert perfect["low"] < 1.0 and perfect["high"] == 1.0  # never empty at 100/100
    none = proportion_ci([0.0] * 3, method=method)
    assert none["low"] == 0.0 and 0 < none["high"] < 1


def test_no_error_in_clustered_rows_counts_each_item_once():
    values, items = _pairs([1.0] * 50)
    got = proportion_ci(values, items)
    assert "design_effect" not in got and got["effective_n"] == 50.0
    assert got["low"] == pytest.approx(proportion_confint(50, 50, alpha=0.05, method="wilson")[0])


def test_weighted_kappa_with_unit_weights_is_sklearns_and_weights_repeat_rows():
    rng = np.random.default_rng(3)
    pred, gold = rng.choice(["A", "B", "tie"], size=60).tolist(), rng.choice(["A", "B"], size=60).tolist()
    (a, b), n_labels = label_codes(pred, gold)
    a, b = np.asarray(a), np.asarray(b)
    assert weighted_kappa(np.ones((1, 60)), a, b, n_labels)[0] == pytest.approx(cohen_kappa(pred, gold))
    weights = np.zeros((1, 60))
    weights[0, :30] = 2.0  # the first 30 rows twice, the rest not at all
    doubled = cohen_kappa(pred[:30] * 2, gold[:30] * 2)
    assert weighted_kappa(weights, a, b, n_labels)[0] == pytest.approx(doubled)


def test_one_row_per_item_is_not_a_cluster():
    got = proportion_ci([1.0] * 93 + [0.0] * 7, list(range(100)))
    assert "design_effect" not in got and got["effective_n"] == 100.0
    assert (got["low"], got["high"]) == pytest.approx(proportion_confint(93, 100, alpha=0.05, method="wilson"))


def test_the_interval_is_statsmodels_proportion_confint_to_the_bit():
    from runner.stats.proportions import interval

    rng = np.random.default_rng(7)
    for _ in range(400):
        nobs = float(rng.integers(1, 5000))
        count = float(rng.integers(0, int(nobs) + 1))
        if rng.random() < 0.5:  # an effective count and size, as clustered rows give
            scale = rng.uniform(1.0, 3.0)
            count, nobs = count / scale, nobs / scale
        alpha = float(rng.choice([0.05, 1 - 0.95, 0.1, 0.01]))
        wilson_low, wilson_high = proportion_confint(count, nobs, alpha=alpha, method="wilson")
        assert interval(count, nobs, alpha, "wilson") == (max(wilson_low, 0.0), min(wilson_high, 1.0))
        assert interval(count, nobs, alpha, "clopper_pearson") == tuple(
            float(b) for b in proportion_confint(count, nobs, alpha=alpha, method="beta"))


def test_gwet_ac1_survives_kappas_paradox_as_irrcac_computes_it():
    """Feinstein and Cicchetti's paradox: 118 of 125 agree on the dominant label, yet kappa is below 0; AC1
    (Gwet 2008) is not. 0.94078 (q = 2) and 0.94243 (q = 3, a category neither rater used) are irrCAC 0.4.4's
    ``CAC(...).gwet()`` on the same ratings, computed once by hand and by that package."""
    first = ["x"] * 123 + ["y"] * 2
    second = ["x"] * 118 + ["y"] * 5 + ["x"] * 2
    (a, b), n_labels = label_codes(first, second)
    ones = np.ones((1, 125))
    assert cohen_kappa(first, second) == pytest.approx(-0.0234, abs=1e-4)
    assert weighted_ac1(ones, np.array(a), np.array(b), n_labels)[0] == pytest.approx(0.94078, abs=1e-5)
    assert weighted_ac1(ones, np.array(a), np.array(b), 3)[0] == pytest.approx(0.94243, abs=1e-5)


def test_gwet_ac1_weights_repeat_rows_and_one_category_is_undefined():
    a, b = np.array([0, 0, 1, 2, 1]), np.array([0, 1, 1, 2, 2])
    doubled = weighted_ac1(np.ones((1, 10)), np.tile(a, 2), np.tile(b, 2), 3)[0]
    assert weighted_ac1(np.full((1, 5), 2.0), a, b, 3)[0] == pytest.approx(doubled)
    # 3 of 5 agree; pi = (0.3, 0.4, 0.3); pe = (0.21 + 0.24 + 0.21) / 2 = 0.33
    assert doubled == pytest.approx((0.6 - 0.33) / (1 - 0.33))
    assert math.isnan(weighted_ac1(np.ones((1, 3)), np.zeros(3, int), np.zeros(3, int), 1)[0])



@pytest.mark.parametrize("nobs", [*range(1, 60), 99, 100, 1_000, 4_001])
def test_sign_test_p_is_scipys_binomial_test_at_one_half(nobs: int) -> None:
    """The bias report's two tests without scipy.stats: scipy's own figure for every count of the trial count."""
    from scipy import stats as scipy_stats

    from runner.stats.proportions import sign_test_p

    for count in range(0, nobs + 1, max(1, nobs // 97)):
        expected = scipy_stats.binomtest(count, nobs, 0.5).pvalue
        assert sign_test_p(count, nobs) == pytest.approx(expected, rel=1e-9, abs=1e-300)
