"""Simulated races (runner/stats/racing.py): per scenario, how often a configuration not worse than the best was
eliminated, and the share of the full sweep's calls the race used (median, 10th and 90th percentiles).

    python -m benchmarks.racing_sim [--races 1000] [--items 1000] [--k 10 30] [--rho 0 0.5 0.8]

The scenarios and the outcome model are runner/stats/race_simulation.py's (``rho``: how much the configurations'
judgments follow the items' shared difficulty). The false-elimination bound is alpha = 0.05; its column also gives
the one-sided 95% Clopper-Pearson upper bound of the rate. Last, the floor of one_best_by_5: the items one
fixed-sample test (one look, no other configuration) needs to stop a configuration 5 points behind in 50% / 80% of
races, and the share of the calls that would cost. Nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from runner.stats import race_simulation as sim
from runner.stats.race_simulation import OUTCOMES, SCENARIOS, simulate


def upper_bound(failures: int, races: int, level: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound of a rate from ``failures`` in ``races``."""
    return 1.0 if failures >= races else float(stats.beta.ppf(level, failures + 1, races - failures))


def fixed_sample_items(outcome: str, rho: float, power: float, seed: int = 0) -> int:
    """Items one fixed-sample one-sided z-test at 5% needs to find a configuration 5 points behind the best with
    ``power`` (no other configuration, one look): the floor under which no valid race stops it in that share of
    races."""
    means = np.array([sim.BASE + sim.GAP, sim.BASE])
    x = sim.draw_outcomes(means, 1, 200_000, outcome, rho, np.random.default_rng(seed))[0]
    z = stats.norm.ppf(0.95) + stats.norm.ppf(power)
    return int(np.ceil(z**2 * np.var(x[0] - x[1]) / sim.GAP**2))


def print_floor(rhos: list[float], k: int = 10, items: int = 1000) -> None:
    """The fixed-sample floor of ``one_best_by_5``: items per configuration, and the calls share if k - 1 stop there."""
    print(f"\nfloor for one_best_by_5 (k={k}, {items} items): items a single fixed test needs -> share of calls")
    for outcome in OUTCOMES:
        for rho in rhos:
            n = {p: fixed_sample_items(outcome, rho, p) for p in (0.5, 0.8)}
            shares = {p: (items + (k - 1) * min(v, items)) / (k * items) for p, v in n.items()}
            print(f"  {outcome:10} rho {rho:>4}: power 50% {n[0.5]:>5} -> {shares[0.5]:.0%}; "
                  f"power 80% {n[0.8]:>5} -> {shares[0.8]:.0%}")


def main(argv: list[str] | None = None) -> None:
    """Print one row per scenario x k x outcome x rho."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--races", type=int, default=1000)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--k", type=int, nargs="+", default=[10, 30])
    parser.add_argument("--rho", type=float, nargs="+", default=[0.0, 0.5, 0.8])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"{args.races} races x {args.items} items per row; alpha 0.05")
    print(f"{'scenario':18} {'k':>3} {'outcome':10} {'rho':>4} {'false elim (95% up)':>20} "
          f"{'calls: median (p10-p90)':>24} {'s':>5}")
    for name, means in SCENARIOS.items():
        for k in args.k:
            for outcome in OUTCOMES:
                for rho in args.rho:
                    start = time.perf_counter()
                    sim = simulate(means(k), args.items, outcome, races=args.races, seed=args.seed, rho=rho)
                    failures = int(sim.false_elimination.sum())
                    p10, p90 = np.percentile(sim.call_share, [10, 90])
                    print(f"{name:18} {k:>3} {outcome:10} {rho:>4} "
                          f"{sim.false_elimination_rate:>9.3f} ({upper_bound(failures, args.races):.3f})   "
                          f"{sim.median_call_share:>9.1%} ({p10:.0%}-{p90:.0%})    "
                          f"{time.perf_counter() - start:>5.1f}", flush=True)
    print_floor(args.rho, items=args.items)


if __name__ == "__main__":
    main()
