"""Unit tests for runner.stats.scores: judge-human correlation, repeat consistency and small helpers.

Expected numbers come from hand computation or independent formulas (Pearson from its definition,
closed-form Student t tails), never from scipy itself.
"""

from __future__ import annotations

import json
import math
import statistics
import warnings

import numpy as np
import pytest

from runner.stats.scores import Consistency, HumanCorrelation, consistency, human_correlation, item_std, mean


def pearson_by_definition(xs: list[float], ys: list[float]) -> float:
    """Pearson r as covariance over the product of spreads, computed with the statistics module."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    return cov / math.sqrt(sum((x - mx) ** 2 for x in xs) * sum((y - my) ** 2 for y in ys))


def average_ranks(values: list[float]) -> list[float]:
    """1-based ranks with ties sharing the mean of their positions (Spearman's convention)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for pos in range(start, end + 1):
            ranks[order[pos]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def two_sided_p_df2(r: float) -> float:
    """Two-sided p of a correlation over 4 pairs: Student t with 2 df has sf(t) = (1 - t/sqrt(t^2+2)) / 2."""
    t = abs(r) * math.sqrt(2 / (1 - r * r))
    return 1 - t / math.sqrt(t * t + 2)


def test_pearson_and_spearman_match_hand_computation() -> None:
    # Deviations are +-1.5, +-0.5 on both sides: sum of products 4, sums of squares 5, so r = 0.8.
    result = human_correlation([1, 2, 3, 4], [1, 3, 2, 4])
    assert result.n == 4
    assert result.pearson_r == pytest.approx(0.8)
    assert result.spearman_rho == pytest.approx(0.8)  # the values are their own ranks
    assert result.pearson_p == pytest.approx(two_sided_p_df2(0.8))
    assert result.spearman_p == pytest.approx(two_sided_p_df2(0.8))


def test_correlations_with_ties_match_independent_formulas() -> None:
    judge = [1.0, 2.5, 3.0, 4.5, 5.0, 2.5]
    human = [2.0, 2.0, 3.0, 5.0, 4.0, 1.0]
    result = human_correlation(judge, human)
    assert result.pearson_r == pytest.approx(pearson_by_definition(judge, human))
    assert result.spearman_rho == pytest.approx(pearson_by_definition(average_ranks(judge), average_ranks(human)))
    assert 0 < result.pearson_p < 1 and 0 < result.spearman_p < 1


def test_monotone_nonlinear_series_is_perfect_for_spearman_only() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = human_correlation([1, 2, 3, 4, 5], [1, 4, 9, 16, 125])
    assert result.spearman_rho == pytest.approx(1.0)
    assert result.pearson_r is not None and result.pearson_r < 0.9
    assert result.pearson_r == pytest.approx(pearson_by_definition([1, 2, 3, 4, 5], [1, 4, 9, 16, 125]))


def test_within_tolerance_counts_the_boundary_and_mae_is_mean_distance() -> None:
    result = human_correlation([4, 3, 1, 5], [3, 3, 3, 3])  # distances 1, 0, 2, 2
    assert result.within_1_rate == pytest.approx(2 / 4)
    assert result.mean_abs_error == pytest.approx(5 / 4)
    assert result.tolerance == 1.0


def test_boundary_survives_float_rounding() -> None:
    # 2.2 - 1.2 == 1.0000000000000002 in binary floating point; on paper it is exactly the tolerance.
    assert human_correlation([2.2, 4.4], [1.2, 3.4]).within_1_rate == 1.0
    assert human_correlation([2.3], [1.2]).within_1_rate == 0.0


def test_custom_tolerance() -> None:
    result = human_correlation([4, 3, 1], [3, 3, 3], tolerance=0.0)
    assert result.within_1_rate == pytest.approx(1 / 3)
    assert result.tolerance == 0.0


@pytest.mark.parametrize(
    ("judge", "human"),
    [
        ([3, 3, 3, 3], [1, 2, 3, 4]),
        ([1, 2, 3, 4], [2.5, 2.5, 2.5, 2.5]),
        ([1.0, 1.0 + 1e-15, 1.0, 1.0], [1, 2, 3, 4]),  # near-constant: scipy would warn
    ],
)
def test_constant_or_near_constant_input_gives_no_nan_and_no_warning(judge: list[float], human: list[float]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = human_correlation(judge, human)
    for value in (result.pearson_r, result.pearson_p, result.spearman_rho, result.spearman_p):
        assert value is None or math.isfinite(value)
    assert result.mean_abs_error is not None


def test_exactly_constant_side_gives_none_correlations_but_keeps_errors() -> None:
    result = human_correlation([3, 3, 3], [2, 3, 5])
    assert (result.pearson_r, result.pearson_p, result.spearman_rho, result.spearman_p) == (None, None, None, None)
    assert result.within_1_rate == pytest.approx(2 / 3)
    assert result.mean_abs_error == pytest.approx(1.0)


@pytest.mark.parametrize(("judge", "human"), [([5], [3]), ([1, 2], [2, 1])])
def test_fewer_than_three_pairs_gives_none_correlations(judge: list[float], human: list[float]) -> None:
    result = human_correlation(judge, human)
    assert result.n == len(judge)
    assert result.pearson_r is None and result.spearman_rho is None
    assert result.pearson_p is None and result.spearman_p is None
    assert result.mean_abs_error is not None and result.within_1_rate is not None


def test_no_pairs_gives_all_none() -> None:
    assert human_correlation([], []) == HumanCorrelation(0, None, None, None, None, None, None, 1.0)


def test_length_mismatch_and_negative_tolerance_raise() -> None:
    with pytest.raises(ValueError, match="length"):
        human_correlation([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="tolerance"):
        human_correlation([1], [1], tolerance=-0.5)


def test_results_are_python_floats_and_plain_json() -> None:
    result = human_correlation(np.array([1.0, 2.0, 3.0, 5.0]), np.array([2.0, 1.0, 4.0, 4.5]))
    for value in (result.pearson_r, result.pearson_p, result.spearman_rho, result.spearman_p):
        assert type(value) is float
    assert type(result.within_1_rate) is float and type(result.mean_abs_error) is float
    payload = result.to_dict()
    assert set(payload) == {"n", "pearson", "spearman", "within_1_rate", "mean_abs_error", "tolerance"}
    assert payload["pearson"] == {"r": result.pearson_r, "p": result.pearson_p}
    assert payload["spearman"] == {"rho": result.spearman_rho, "p": result.spearman_p}
    assert json.loads(json.dumps(payload, allow_nan=False)) == payload


def test_item_std_is_the_sample_std() -> None:  # the users' convention (ddof=1), since issue 15
    assert item_std([2, 4, 4, 4]) == pytest.approx(1.0)  # mean 3.5, squares 2.25 + 3 * 0.25 = 3, / (4 - 1)
    assert item_std([1.0, 2.0, 4.0]) == pytest.approx(float(np.std([1.0, 2.0, 4.0], ddof=1)))
    assert item_std([3, 3]) == 0.0
    assert type(item_std([1, 2])) is float


@pytest.mark.parametrize("scores", [[], [4.0]])
def test_item_std_needs_two_scores(scores: list[float]) -> None:
    assert item_std(scores) is None


def test_consistency_flags_items_strictly_above_threshold_in_input_order() -> None:
    per_item = {
        "z": [2, 4, 4, 4],  # sample std 1.0
        "a": [3, 3, 3],  # std 0
        "lonely": [5],  # one scored repeat: not measured
        "b": [1, 3],  # sample std sqrt(2)
        "edge": [1, 1.5, 2],  # sample std exactly 0.5: not above
    }
    result = consistency(per_item, repeats=4, threshold=0.5)
    assert result.items_measured == 4
    assert result.items_above_threshold == ("z", "b")
    assert result.share_above_threshold == pytest.approx(2 / 4)
    assert result.mean_std == pytest.approx((1.0 + 0 + math.sqrt(2) + 0.5) / 4)
    assert result.max_std == pytest.approx(math.sqrt(2))
    assert (result.repeats, result.threshold) == (4, 0.5)


def test_consistency_without_measurable_items() -> None:
    result = consistency({"a": [4], "b": []}, repeats=1)
    assert result == Consistency(1, 0.5, 0, None, None, None, ())


def test_consistency_to_dict_is_plain_json() -> None:
    payload = consistency({"a": [1, 3], "b": [2, 2]}, repeats=2, threshold=0.25).to_dict()
    assert payload == {
        "repeats": 2,
        "threshold": 0.25,
        "items_measured": 2,
        "mean_std": pytest.approx(math.sqrt(2) / 2),
        "max_std": pytest.approx(math.sqrt(2)),
        "share_above_threshold": 0.5,
        "items_above_threshold": ["a"],
        "std": "sample (n-1)",
    }
    assert json.loads(json.dumps(payload, allow_nan=False)) == payload


def test_consistency_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="repeats"):
        consistency({}, repeats=0)
    with pytest.raises(ValueError, match="threshold"):
        consistency({}, repeats=2, threshold=-1)


def test_mean() -> None:
    assert mean([]) is None
    assert mean([1, 2]) == 1.5
    assert type(mean([1, 2, 3])) is float
