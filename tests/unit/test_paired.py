"""Unit tests for runner.stats.paired and runner.stats.sample_size (the tests, intervals and plans of
``judgesweep-compare``) and for how the compare table prints an interval.

Exact p-values are checked against brute-force enumeration of every sign vector, statsmodels' McNemar and scipy's
t-test; the Agresti-Min interval by a seeded coverage simulation; the plans against Connor (1987)'s worked example
and G*Power's paired t figure.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from rich.console import Console

from runner.app.compare_cli import render_table
from runner.outputs import compare
from runner.outputs.compare_outcomes import RunResults
from runner.stats import paired, sample_size


def enumerated_p(d: np.ndarray) -> float:
    """P(|sum s_i d_i| >= |sum d_i|) over all 2^n sign vectors s."""
    observed = abs(d.sum())
    signs = np.array(list(itertools.product((-1.0, 1.0), repeat=d.size)))
    return float(np.mean(np.abs(signs @ d) >= observed - 1e-9))


@pytest.mark.parametrize("seed", range(5))
def test_the_exact_sign_flip_p_equals_brute_force_enumeration(seed):
    rng = np.random.default_rng(seed)
    k = (2, 3, 6, 4, 2)[seed]  # judgments per item: shares j/k, differences on the lattice 1/k
    a, b = rng.integers(0, k + 1, size=12) / k, rng.integers(0, k + 1, size=12) / k
    got = paired.paired_items(a, b)
    assert got["test"] == "sign_flip_exact" and got["p_value"] == pytest.approx(enumerated_p(b - a), rel=1e-12)
    assert got["details"]["lattice"] == f"1/{paired.lattice(b - a)[0]}"


def test_an_exact_p_goes_below_one_over_2001():
    a, b = np.zeros(12), np.full(12, 0.5)  # 12 items, each right in one more order of two
    got = paired.paired_items(a, b)
    # 2 / 2^12 = 4.9e-4: below 1 / (2000 + 1), the floor of 2,000 sign-flip draws
    assert got["p_value"] == pytest.approx(enumerated_p(b - a), rel=1e-12) == 2 / 2**12
    many = paired.paired_items(np.zeros(300), np.r_[np.full(200, 0.5), np.zeros(100)])
    assert many["p_value"] == pytest.approx(2 / 2**200, rel=1e-9)


@pytest.mark.parametrize(("b01", "b10", "n"), [(10, 2, 50), (1, 6, 30), (5, 5, 20), (300, 200, 2000), (0, 40, 60)])
def test_0_1_outcomes_get_mcnemars_exact_test_as_statsmodels(b01, b10, n):
    from statsmodels.stats.contingency_tables import mcnemar

    a = [0.0] * b01 + [1.0] * b10 + [1.0] * (n - b01 - b10)
    b = [1.0] * b01 + [0.0] * b10 + [1.0] * (n - b01 - b10)
    got = paired.paired_items(a, b)
    expected = mcnemar([[n - b01 - b10, b10], [b01, 0]], exact=True).pvalue
    assert got["test"] == "mcnemar_exact" and got["p_value"] == pytest.approx(expected, rel=1e-9)
    assert (got["details"]["b01"], got["details"]["b10"]) == (b01, b10) and got["method"] == "agresti_min"


def test_off_a_small_lattice_the_test_is_the_paired_t_test_and_says_so():
    from scipy import stats

    rng = np.random.default_rng(3)
    a, b = rng.normal(size=40), rng.normal(loc=0.3, size=40)
    got = paired.paired_items(a, b)
    t = stats.ttest_rel(b, a)
    assert got["test"] == "paired_t" and got["details"]["lattice"] is None
    assert got["p_value"] == pytest.approx(t.pvalue) and got["statistic"] == pytest.approx(t.statistic)
    assert got["method"] == "paired_t" and got["low"] < got["mean_difference"] < got["high"]


def test_a_lattice_finer_than_1_over_720_or_too_large_to_convolve_falls_back_to_the_t_test():
    fine = paired.paired_items(np.zeros(30), np.arange(1, 31) / 7919)  # 7919: a prime above 720
    assert fine["test"] == "paired_t" and fine["details"]["lattice"] is None
    assert paired.paired_items(np.zeros(30), np.arange(1, 31) / 719)["details"]["lattice"] == "1/719"
    # 20,000 integer differences in -50..50: exact, but about 1e11 multiply-adds to convolve
    wide = np.random.default_rng(0).integers(-50, 51, size=20_000).astype(float)
    assert paired.sign_flip_exact_p(wide.astype(int)) is None
    assert paired.paired_items(np.zeros(wide.size), wide)["test"] == "paired_t"


@pytest.mark.parametrize(("n", "p01", "p10"), [(40, 0.15, 0.05), (30, 0.2, 0.05)])
def test_the_agresti_min_interval_covers_where_the_conditional_one_undercovers(n, p01, p10):
    from statsmodels.stats.proportion import proportion_confint

    reps, delta = 2000, p01 - p10
    cells = np.random.default_rng(0).multinomial(n, [p01, p10, 1 - p01 - p10], size=reps)
    bounds = np.array([paired.agresti_min(int(x), int(y), n) for x, y in cells[:, :2]])
    coverage = np.mean((bounds[:, 0] <= delta) & (delta <= bounds[:, 1]))
    # main's interval: Clopper-Pearson of b01 / (b01 + b10), scaled by the discordant share (none without discordance)
    discordant = cells[:, 0] + cells[:, 1]
    low, high = proportion_confint(cells[:, 0], np.maximum(discordant, 1), alpha=0.05, method="beta")
    share = discordant / n
    old = np.mean((discordant > 0) & (share * (2 * low - 1) <= delta) & (delta <= share * (2 * high - 1)))
    assert coverage >= 0.94 and old < 0.92, (coverage, old)


def test_connor_1987s_worked_example_and_the_paired_t_plan():
    # Connor 1987, p. 209: p01 = 0.45, p10 = 0.05, two-sided alpha 0.05, power 0.8: 23 pairs.
    assert sample_size.mcnemar_items(0.5, 0.40, alpha=0.05, power=0.8) == 23
    # A paired t-test for an effect of 0.5 SD, two-sided 0.05, power 0.8: 34 pairs (G*Power, 33.37 rounded up).
    assert sample_size.paired_t_items(0.25, 0.5, alpha=0.05, power=0.8) == 34
    assert sample_size.mcnemar_items(0.1, 0.2) is None and sample_size.mcnemar_items(0.3, 0.0) is None
    assert sample_size.paired_t_items(0.1, 0.0) is None


def gold_run(run_id: str, correct: list[bool]) -> RunResults:
    """A pairwise run with gold on items i0..i(n-1), one order, right where ``correct`` says."""
    rows = [{"item_id": f"i{k}", "repeat": 0, "order": "ab", "stage": "judge", "status": "scored",
             "winner": "output_1" if ok else "output_2", "gold": "output_1"} for k, ok in enumerate(correct)]
    return RunResults(run_id, {"dataset": "d", "judge": run_id}, rows, ours="output_1")


def test_simultaneous_intervals_are_bonferroni_beside_the_unadjusted_ones_and_the_plan_uses_the_discordance():
    runs = [gold_run("a", [True] * 60 + [False] * 40), gold_run("b", [True] * 70 + [False] * 30),
            gold_run("c", [False] * 10 + [True] * 75 + [False] * 15)]
    result = compare.compare_runs(runs, level=0.95, plan={"difference": None, "power": 0.8, "alpha": None})
    assert result["simultaneous_level"] == pytest.approx(1 - 0.05 / 3) and result["simultaneous_method"] == "bonferroni"
    for pair in result["pairs"]:
        b01, b10 = pair["test_details"]["b01"], pair["test_details"]["b10"]
        assert (pair["ci_low"], pair["ci_high"]) == paired.agresti_min(b01, b10, 100, 0.95)
        assert (pair["simultaneous_ci_low"], pair["simultaneous_ci_high"]) == paired.agresti_min(
            b01, b10, 100, 1 - 0.05 / 3)
        assert pair["simultaneous_ci_low"] < pair["ci_low"] and pair["ci_high"] < pair["simultaneous_ci_high"]
        plan = pair["plan"]
        assert plan["alpha"] == pytest.approx(0.05 / 3) and plan["method"] == "connor_1987"
        assert plan["items"] == sample_size.mcnemar_items((b01 + b10) / 100, (b01 - b10) / 100, 0.05 / 3, 0.8)
    console = Console(record=True, width=250)
    render_table(result, console)
    text = console.export_text()
    assert "simultaneous CI" in text and "items needed" in text and "Connor 1987" in text


@pytest.mark.parametrize(("low", "high", "shown"), [
    (-0.056, -0.0004, "[-0.056, -4.0e-04]"),  # excludes 0: never "-0.000"
    (-0.056, 0.0, "[-0.056, 0]"),
    (-0.0004, 0.2, "[-4.0e-04, +0.200]"),  # includes 0, visibly
    (0.00002, 0.1, "[+2.0e-05, +0.100]"),
])
def test_a_printed_interval_shows_on_which_side_of_0_it_lies(low, high, shown):
    pair = {"difference": (low + high) / 2, "ci_low": low, "ci_high": high}
    assert shown in compare_cli_difference(pair)


def compare_cli_difference(pair: dict) -> str:
    """The table's "diff [CI]" cell of a pair."""
    from runner.app import compare_cli

    return compare_cli._difference(pair)
