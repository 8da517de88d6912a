"""How many items a paired comparison needs to detect a difference with a given power (``judgesweep compare
--plan``), from what a comparison observed.

- 0/1 outcomes per item: Connor (1987)'s sample size for McNemar's test, from the discordant share
  ``psi = p01 + p10`` and the difference ``delta = p01 - p10``:
  ``n = (z_{1-alpha/2} sqrt(psi) + z_{power} sqrt(psi - delta^2))^2 / delta^2``.
- Otherwise: the paired t-test's sample size from the standard deviation of the per-item differences
  (statsmodels ``TTestPower``, the noncentral t).

Undefined plans (no difference to detect, a difference the observed discordance cannot produce) are None.
"""

from __future__ import annotations

import math
from typing import Any


def mcnemar_items(discordance: float, difference: float, alpha: float = 0.05, power: float = 0.8) -> int | None:
    """Connor (1987): items needed by McNemar's test to detect ``difference`` at two-sided ``alpha``.

    Args:
        discordance: Share of items the two runs disagree on (p01 + p10).
        difference: The difference of accuracies to detect (p01 - p10); its sign does not matter.
        alpha: Two-sided significance level.
        power: Probability of detecting the difference.

    Returns:
        The item count (rounded up), or None when ``difference`` is 0 or larger than ``discordance``.
    """
    from scipy import stats as scipy_stats

    delta = abs(difference)
    if delta == 0 or delta > discordance or discordance > 1:
        return None
    z_alpha, z_power = scipy_stats.norm.ppf(1 - alpha / 2), scipy_stats.norm.ppf(power)
    n = (z_alpha * math.sqrt(discordance) + z_power * math.sqrt(discordance - delta ** 2)) ** 2 / delta ** 2
    return math.ceil(n - 1e-9)


def paired_t_items(difference: float, sd: float, alpha: float = 0.05, power: float = 0.8) -> int | None:
    """Items needed by the paired t-test to detect a mean difference ``difference`` with per-item SD ``sd``.

    Returns:
        The item count (rounded up, at least 2), or None when ``difference`` or ``sd`` is 0.
    """
    from statsmodels.stats.power import TTestPower

    if difference == 0 or not sd > 0:
        return None
    n = TTestPower().solve_power(effect_size=abs(difference) / sd, alpha=alpha, power=power,
                                 alternative="two-sided")
    return max(2, math.ceil(float(n) - 1e-9))


def plan(pair: dict[str, Any], difference: float | None, alpha: float, power: float) -> dict[str, Any]:
    """The plan of one compared pair (a :func:`runner.stats.paired.paired_items` result).

    Args:
        pair: The pair's ``n``, ``mean_difference``, ``details`` (``b01``/``b10`` for 0/1 outcomes, else ``sd``).
        difference: The difference to detect; None: the observed one.
        alpha: Two-sided significance level.
        power: Power.

    Returns:
        ``difference``, ``alpha``, ``power``, ``method`` (``connor_1987`` or ``paired_t``), the observed
        ``discordance`` or ``sd``, and ``items`` (None when undefined).
    """
    delta = pair["mean_difference"] if difference is None else difference
    out: dict[str, Any] = {"difference": delta, "alpha": alpha, "power": power}
    details = pair["details"]
    if "b01" in details:
        discordance = (details["b01"] + details["b10"]) / pair["n"] if pair["n"] else 0.0
        items = None if delta is None else mcnemar_items(discordance, delta, alpha, power)
        return {**out, "method": "connor_1987", "discordance": discordance, "items": items}
    sd = details.get("sd")
    items = None if delta is None or sd is None else paired_t_items(delta, sd, alpha, power)
    return {**out, "method": "paired_t", "sd": sd, "items": items}
