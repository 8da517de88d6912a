"""The race's statistical engine (issue 45, Deliver 2): runner.stats.racing on hand-built rounds.

The closed test against a brute force over every set of configurations, the bets' wealth (two ways to sum it),
the evidence an elimination carries, and the rules (the leader is never eliminated, eliminated configurations
judge no more items, bad input is refused). The error bound itself is simulated in test_race_simulation.py.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from runner.stats import racing


@pytest.mark.parametrize("lattice", [1, 2, 6])
def test_the_lattice_shortcut_gives_the_direct_sum_of_log_1_plus_lam_d(lattice):
    rng = np.random.default_rng(lattice)
    x = rng.integers(0, lattice + 1, (4, 3, 2, 50)) / lattice
    d = x[:, :, 0] - x[:, :, 1]
    bets = np.asarray(racing.BETS)
    direct = np.array([[[np.log1p(lam * d[r, j]).sum() for lam in bets] for j in range(3)] for r in range(4)])
    assert racing.log_growth(d, bets) == pytest.approx(direct, rel=1e-10)
    assert racing.log_growth(d, bets, lattice) == pytest.approx(direct, rel=1e-10)


@pytest.mark.parametrize("seed", range(4))
def test_closed_e_values_are_the_smallest_mean_over_every_set_containing_the_configuration(seed):
    rng = np.random.default_rng(seed)
    state = racing.RaceState(6, batch=3)
    state.log_wealth = rng.normal(0, 3, state.log_wealth.shape)
    e = np.exp(state.log_e_values())
    brute = np.array([[min(e[b, list(s)].mean() for r in range(1, 7) for s in itertools.combinations(range(6), r)
                           if j in s) for j in range(6)] for b in range(3)])
    assert state.closed_e_values() == pytest.approx(brute, rel=1e-12)


def test_a_clearly_worse_configuration_is_eliminated_with_its_evidence():
    race = racing.Race(["a", "b", "c"])
    rng = np.random.default_rng(0)
    for _ in range(4):
        good = (rng.random(50) < 0.9).astype(float)
        race.observe({n: good if n != "c" else np.zeros(50) for n in race.alive})
        race.eliminate()
    (gone,) = race.eliminated
    assert (gone.name, gone.round, gone.items) == ("c", 1, 50)
    assert gone.opponent == "a" and gone.mean_difference > 0.5
    assert gone.closed_e_value >= gone.threshold == pytest.approx(20.0) and gone.e_value >= gone.closed_e_value
    assert race.alive == ["a", "b"] and race.items == 200 and race.calls == 200 + 200 + 50


def test_the_evidence_s_mean_difference_is_on_the_items_both_judged():
    race = racing.Race(["a", "b"])
    race.observe({"a": [1.0] * 30 + [0.5] * 10, "b": [0.0] * 30 + [0.5] * 10})
    (gone,) = race.eliminate()
    assert (gone.name, gone.opponent, gone.mean_difference) == ("b", "a", pytest.approx(0.75))


def test_equal_configurations_are_never_eliminated_and_the_leader_never_is():
    race = racing.Race(["a", "b"])
    race.observe({"a": [1.0] * 10, "b": [1.0] * 10})
    assert race.eliminate() == []
    state = racing.RaceState(2)
    state.observe(np.array([[[1.0] * 5, [0.0] * 5]]))
    state.log_wealth[:] = 100.0  # both e-values huge: only the one behind goes, the leader stays
    assert state.eliminate().tolist() == [[False, True]] and state.alive.tolist() == [[True, False]]


def test_an_eliminated_configuration_judges_no_more_items_and_a_round_needs_exactly_the_survivors():
    race = racing.Race(["a", "b", "c"])
    race.observe({"a": [1.0] * 60, "b": [1.0] * 60, "c": [0.0] * 60})
    assert [e.name for e in race.eliminate()] == ["c"]
    with pytest.raises(ValueError, match=r"exactly the surviving configurations \['a', 'b'\]"):
        race.observe({"a": [1.0], "b": [1.0], "c": [1.0]})
    race.observe({"a": [1.0, 0.0], "b": [0.0, 1.0]})
    assert race.state.items.tolist() == [[62, 62, 60]]


@pytest.mark.parametrize(("outcomes", "message"), [
    ({"a": [1.0, 0.0], "b": [1.0]}, "same, non-empty items"),
    ({"a": [], "b": []}, "same, non-empty items"),
    ({"a": [1.5], "b": [1.0]}, r"in \[0, 1\]"),
    ({"a": [float("nan")], "b": [1.0]}, r"in \[0, 1\]"),
])
def test_bad_rounds_are_refused(outcomes, message):
    with pytest.raises(ValueError, match=message):
        racing.Race(["a", "b"]).observe(outcomes)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"configurations": ["a", "a"]}, "unique"), ({"configurations": []}, "at least one"),
    ({"configurations": ["a"], "alpha": 1.0}, "alpha"), ({"configurations": ["a"], "bets": [1.0]}, "bet size"),
])
def test_bad_races_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        racing.Race(**kwargs)


def test_round_ends_grow_and_stop_at_the_last_item():
    assert racing.round_ends(400) == [50, 105, 166, 233, 307, 388, 400]  # 50 items, then 1.1 times the last round
    assert racing.round_ends(100, first=20, growth=1.5) == [20, 50, 95, 100]
    assert racing.round_ends(150, first=50, growth=1.0) == [50, 100, 150]
    with pytest.raises(ValueError):
        racing.round_ends(0)


def test_a_race_is_rebuilt_by_replaying_its_rounds():
    rng = np.random.default_rng(7)
    rounds = [{n: (rng.random(40) < p).astype(float) for n, p in zip("abc", (0.9, 0.6, 0.2), strict=True)}
              for _ in range(3)]
    races = [racing.Race(["a", "b", "c"]), racing.Race(["a", "b", "c"])]
    for race in races:
        for outcomes in rounds:
            race.observe({n: outcomes[n] for n in race.alive})
            race.eliminate()
    assert races[0].eliminated == races[1].eliminated and races[0].eliminated
    assert races[0].state.log_wealth.tolist() == races[1].state.log_wealth.tolist()
