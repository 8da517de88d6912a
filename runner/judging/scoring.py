"""Pointwise scoring: which criteria apply to an item, their weights, the overall score, pass/fail.

A pointwise rubric lists criteria (name, scale, weight, optional ``when`` variable). For one item the
applicable criteria are those whose ``when`` variable is non-empty (or that have none), weighted by the
item's category when the rubric overrides weights for it. The overall score is the weighted mean of
the applicable criteria's scores, so equal weights give the plain mean. Across repeats an item's
scores are combined by a score aggregation of the one registry (runner.judging.aggregations) that may combine
repeats (``mean``, ``median``): :data:`SCORE_AGGREGATIONS`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from runner.core.config import RubricConfig
from runner.core.types import Criterion, Item
from runner.judging.aggregations import REGISTRY, Kind, Use

OVERALL_DECIMALS = 9
ScoreAggregation = Callable[..., float]
SCORE_AGGREGATIONS = REGISTRY.view(Kind.score, Use.repeats, "score aggregation")


class RubricError(ValueError):
    """A pointwise rubric is inconsistent; the message names the rubric and the key."""


@dataclass(frozen=True)
class Scoring:
    """A validated pointwise rubric, ready to score items.

    Attributes:
        criteria: Every criterion with its default weight, in rubric order.
        category_weights: Category -> criterion -> weight overrides.
        pass_threshold: An item passes when its overall score is at least this; None: no pass/fail.
        low: Lowest possible overall score (the smallest criterion minimum).
        high: Highest possible overall score (the largest criterion maximum).
    """

    criteria: tuple[Criterion, ...]
    category_weights: Mapping[str, Mapping[str, float]]
    pass_threshold: float | None
    low: float
    high: float

    @classmethod
    def from_config(cls, rubric: RubricConfig) -> Scoring:
        """Build and validate the scoring of a pointwise rubric.

        Raises:
            RubricError: No criteria, duplicate names, an empty scale, a negative weight, weights that
                sum to 0, category weights naming an unknown criterion, or a threshold off the scale.
        """
        where = f"rubric {rubric.name}"
        if not rubric.criteria:
            raise RubricError(f"{where}: a pointwise rubric needs criteria")
        criteria = tuple(Criterion(name=c.name, min=c.min, max=c.max, weight=c.weight, description=c.description,
                                   when=c.when, aliases=tuple(c.aliases)) for c in rubric.criteria)
        names = [c.name for c in criteria]
        if len(set(names)) != len(names):
            raise RubricError(f"{where}: criterion names repeat: {names}")
        _check_aliases(where, criteria)
        if all(c.when for c in criteria):
            raise RubricError(f"{where}: at least one criterion must apply to every item (have no `when`)")
        for c in criteria:
            if not c.min < c.max:
                raise RubricError(f"{where}: criterion {c.name}: min {c.min} must be below max {c.max}")
        always = [c for c in criteria if c.when is None]  # what every item is scored on
        _check_weights(where, {c.name: c.weight for c in always}, "criteria (those without `when`)")
        for category, weights in rubric.category_weights.items():
            unknown = sorted(set(weights) - set(names))
            if unknown:
                raise RubricError(f"{where}: category_weights.{category} names unknown criteria {unknown}; "
                                  f"known: {names}")
            _check_weights(where, {c.name: weights.get(c.name, c.weight) for c in always},
                           f"category_weights.{category}")
            _check_weights(where, {c.name: weights.get(c.name, c.weight) for c in criteria},
                           f"category_weights.{category}")
        low, high = min(c.min for c in criteria), max(c.max for c in criteria)
        if rubric.pass_threshold is not None and not low <= rubric.pass_threshold <= high:
            raise RubricError(f"{where}: pass_threshold {rubric.pass_threshold} is outside the scale [{low}, {high}]")
        return cls(criteria, {k: dict(v) for k, v in rubric.category_weights.items()}, rubric.pass_threshold,
                   low, high)

    @property
    def when_variables(self) -> frozenset[str]:
        """Template variables that switch criteria on (each must be provided by the dataset)."""
        return frozenset(c.when for c in self.criteria if c.when)

    def for_item(self, item: Item) -> tuple[Criterion, ...]:
        """The criteria that apply to ``item``, with the weights of its category."""
        weights = self.category_weights.get(item.category or "", {})
        return tuple(replace(c, weight=weights.get(c.name, c.weight)) for c in self.criteria
                     if c.when is None or item.variables.get(c.when, "").strip())

    def overall(self, scores: Mapping[str, float], criteria: Sequence[Criterion]) -> float:
        """The weighted mean of ``scores`` over ``criteria`` (every one of them must be scored).

        Rounded to 9 decimals: decimal weights (0.4 / 0.3 / 0.3) otherwise land an ulp off the exact value,
        and 6.999999999999999 must not fail a threshold of 7.
        """
        total = math.fsum(c.weight for c in criteria)
        if total <= 0:  # every applicable criterion has weight 0 for this category: fall back to the mean
            return round(statistics.fmean(scores[c.name] for c in criteria), OVERALL_DECIMALS)
        return round(math.fsum(scores[c.name] * c.weight for c in criteria) / total, OVERALL_DECIMALS)

    def passed(self, overall: float | None) -> bool | None:
        """Whether an overall score passes; None without a threshold or without a score."""
        if self.pass_threshold is None or overall is None:
            return None
        return overall >= self.pass_threshold


def _check_aliases(where: str, criteria: Sequence[Criterion]) -> None:
    """An alias may stand for one criterion only, and never be another criterion's name."""
    owner: dict[str, str] = {c.name: c.name for c in criteria}
    for c in criteria:
        for alias in c.aliases:
            if alias in owner and owner[alias] != c.name:
                raise RubricError(f"{where}: criterion {c.name}: alias {alias!r} is already "
                                  f"{'the name' if alias == owner[alias] else 'an alias'} of {owner[alias]}")
            owner[alias] = c.name


def _check_weights(where: str, weights: Mapping[str, float], key: str) -> None:
    negative = sorted(name for name, w in weights.items() if w < 0)
    if negative:
        raise RubricError(f"{where}: {key}: negative weight for {negative}")
    if sum(weights.values()) <= 0:
        raise RubricError(f"{where}: {key}: weights sum to 0")
