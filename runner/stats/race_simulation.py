"""Simulated races, many at once (numpy across races), to measure :mod:`runner.stats.racing`'s error and cost.

The outcome model: each item has a shared difficulty ``u`` ~ U(0, 1); each judgment (a configuration's verdict in
one order) follows the item with probability ``rho`` (correct if ``u < p``) and is otherwise an independent draw
(correct with probability ``p``), so every configuration's judgments are correct with probability ``p`` (its mean)
and two configurations agree on an item more than chance when ``rho > 0`` (judges share the items' difficulty).
``outcome="binary"``: one judgment per item (0/1); ``outcome="two_orders"``: the mean of two (0, 0.5, 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from runner.stats.racing import ALPHA, BETS, RaceState, round_ends

OUTCOMES = {"binary": 1, "two_orders": 2}  # judgments (calls) per item
BASE, GAP = 0.70, 0.05  # the field's mean, and the best's lead ("5 points")


def _top(k: int, *top: float) -> np.ndarray:
    """``top`` first, then configurations at the field's mean: ``k`` in all."""
    return np.concatenate([top, np.full(k - len(top), BASE)])


# Scenario -> the true means of k configurations, a best one first.
SCENARIOS: dict[str, Callable[[int], np.ndarray]] = {
    "all_equal": lambda k: _top(k),  # every configuration at 0.70
    "one_best_by_5": lambda k: _top(k, BASE + GAP),  # one at 0.75, the others at 0.70
    "two_tied_at_top": lambda k: _top(k, BASE + GAP, BASE + GAP),  # two at 0.75: both not worse than the best
    "two_close_at_top": lambda k: _top(k, BASE + GAP, BASE + GAP - 0.01),  # 0.75 and 0.74, the others 0.70
    "best_by_5_spread": lambda k: np.concatenate([[BASE + GAP], np.linspace(BASE, BASE - 0.30, k - 1)]),
}


@dataclass(frozen=True)
class Simulation:
    """The races' results: per race, whether a configuration with the highest mean was eliminated, and the share
    of the full sweep's calls the race used."""

    false_elimination: np.ndarray  # (races,) bool
    call_share: np.ndarray  # (races,) float in (0, 1]

    @property
    def false_elimination_rate(self) -> float:
        """Share of races that eliminated a configuration not worse than the best."""
        return float(self.false_elimination.mean())

    @property
    def median_call_share(self) -> float:
        """Median over races of the calls used / the full sweep's calls."""
        return float(np.median(self.call_share))


def draw_outcomes(means: np.ndarray, races: int, items: int, outcome: str, rho: float,
                  rng: np.random.Generator) -> np.ndarray:
    """(races, k, items) per-item outcomes under the model of the module's docstring."""
    p = means[None, :, None].astype(np.float32)
    total = np.zeros((races, means.size, items), dtype=np.float32)
    for _ in range(OUTCOMES[outcome]):
        u = rng.random((races, 1, items), dtype=np.float32)
        z = rng.random((races, means.size, items), dtype=np.float32)
        # z < rho: the judgment follows the item (correct if u < p); else z is uniform on [rho, 1), and
        # z < rho + p (1 - rho) has probability p: an independent draw.
        total += np.where(z < rho, u < p, z < rho + p * (1 - rho))
    return total / OUTCOMES[outcome]


def simulate(means: Sequence[float] | np.ndarray, n_items: int, outcome: str = "binary",
             ends: Sequence[int] | None = None, races: int = 1000, seed: int = 0, rho: float = 0.5,
             alpha: float = ALPHA, bets: Sequence[float] = BETS) -> Simulation:
    """Run ``races`` independent races of ``len(means)`` configurations (true means ``means``) over ``n_items``
    items in rounds ending at ``ends`` (default :func:`runner.stats.racing.round_ends`); a race stops when one
    configuration is left or the items run out."""
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {sorted(OUTCOMES)}, got {outcome!r}")
    p = np.asarray(means, dtype=float)
    ends = list(ends or round_ends(n_items))
    rng = np.random.default_rng(seed)
    state = RaceState(p.size, races, alpha, bets, lattice=OUTCOMES[outcome])
    start = 0
    for end in ends:
        running = state.alive.sum(axis=1) > 1
        if not running.any():
            break
        x = draw_outcomes(p, races, end - start, outcome, rho, rng)
        state.observe(x, running)
        state.eliminate()
        start = end
    best = p >= p.max()
    false = (~state.alive & best[None, :]).any(axis=1)
    return Simulation(false, state.items.sum(axis=1) / (p.size * n_items))
