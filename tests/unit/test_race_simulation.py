"""The race's error bound and cost, simulated (issue 45, Deliver 2): 1,000 races per scenario (all equal, one best
by 5 points, two tied at the top; 10 and 30 configurations; 0/1 and shared-of-two-orders outcomes, the item the
unit) eliminate a configuration not worse than the best in at most alpha = 5% of races, within simulation error;
and the calls the races use. runner.stats.race_simulation drives runner.stats.racing's engine across races at once.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from runner.stats import race_simulation as sim
from runner.stats import racing

RACES, ITEMS, ALPHA = 1000, 1000, 0.05
# The most false eliminations that 1,000 races of a method at exactly alpha show in 999 simulations out of 1,000.
WITHIN_SIMULATION_ERROR = int(stats.binom.ppf(0.999, RACES, ALPHA))


@pytest.mark.parametrize("outcome", sorted(sim.OUTCOMES))
@pytest.mark.parametrize("k", [10, pytest.param(30, marks=pytest.mark.slow)])
@pytest.mark.parametrize("scenario", ["all_equal", "one_best_by_5", "two_tied_at_top"])
def test_a_configuration_not_worse_than_the_best_is_eliminated_in_at_most_alpha_of_races(scenario, k, outcome):
    result = sim.simulate(sim.SCENARIOS[scenario](k), ITEMS, outcome, races=RACES, seed=k, alpha=ALPHA)
    assert result.false_elimination.size == RACES
    assert result.false_elimination.sum() <= WITHIN_SIMULATION_ERROR
    # the calls used: every race judges at least the first round of every configuration, and the best all items
    assert np.all(result.call_share >= racing.round_ends(ITEMS)[0] / ITEMS)
    if scenario == "all_equal":  # nothing to eliminate: the race costs the full sweep
        assert result.median_call_share == 1.0


def naive_false_elimination_rate(k: int, races: int, seed: int) -> float:
    """A race that looks at a fixed p threshold every round (the paired z-test of each configuration against the
    leader at one-sided 5%, as a repeated-look pruner does): the share of races in which it eliminates one of ``k``
    equal configurations."""
    rng = np.random.default_rng(seed)
    x = sim.draw_outcomes(np.full(k, 0.7), races, ITEMS, "binary", 0.5, rng)
    alive = np.ones((races, k), dtype=bool)
    for end in racing.round_ends(ITEMS):
        seen = x[..., :end]
        means = np.where(alive, seen.mean(axis=2), -np.inf)
        leader = means.argmax(axis=1)
        d = seen[np.arange(races), leader][:, None, :] - seen
        z = d.mean(axis=2) / np.maximum(d.std(axis=2, ddof=1), 1e-12) * np.sqrt(end)
        alive &= ~(z > stats.norm.ppf(1 - ALPHA))
    return float((~alive).any(axis=1).mean())


def test_the_simulation_sees_the_error_of_a_race_that_ignores_its_repeated_looks():
    # the same model and rounds: a fixed threshold at every look eliminates an equal configuration far above alpha
    assert naive_false_elimination_rate(10, 300, seed=2) > 0.5


def test_clearly_worse_configurations_stop_early_so_a_race_spends_a_fraction_of_the_calls():
    result = sim.simulate(sim.SCENARIOS["best_by_5_spread"](10), ITEMS, "two_orders", races=RACES, seed=3)
    assert result.false_elimination.sum() <= WITHIN_SIMULATION_ERROR
    assert result.median_call_share < 0.35  # measured 22% (rho 0.5); the full sweep is 100%


@pytest.mark.xfail(strict=True, reason=(
    "issue 45's target (<= 25% of the calls, median) is not reached with the bound kept: measured 100% (0/1) and "
    "82% (two orders) at rho 0.5; one fixed-sample test alone needs 40% and 25% (docs/methods.md, Racing)"))
@pytest.mark.parametrize("outcome", sorted(sim.OUTCOMES))
def test_target_10_configurations_1000_items_best_5_points_ahead_a_quarter_of_the_calls(outcome):
    result = sim.simulate(sim.SCENARIOS["one_best_by_5"](10), ITEMS, outcome, races=RACES, seed=5)
    assert result.false_elimination.sum() <= WITHIN_SIMULATION_ERROR
    assert result.median_call_share <= 0.25
