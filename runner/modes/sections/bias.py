"""The typed ``bias`` sections (runner.modes.bias): a pairwise judge's position, length and self-preference bias,
and a pointwise judge's length preference. An undefined statistic is None."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from runner.modes.record import Record, optional


@dataclass(frozen=True, kw_only=True)
class PositionBias(Record):
    """How much the slot a candidate is shown in decides the verdict."""

    pairs_both_orders: int
    consistent: int
    consistency_rate: float | None
    first_position_rate: float | None
    second_position_rate: float | None
    n_decisive: int
    binomial_p: float | None  # every verdict a unit: descriptive; the item is the unit of sign_test_p
    inconsistent_toward_first: int
    inconsistent_toward_second: int
    sign_test_p: float | None
    inconsistent_unscored: int
    inconsistent_by_type: Mapping[str, int]
    unit: str | None = optional()  # "pair"; absent from reports written before it was named
    # the sign test's counts: items whose pairs, summed over repeats, lean toward the first / second slot; absent
    # from reports written when the pair was the sign test's unit
    items_toward_first: int | None = optional()
    items_toward_second: int | None = optional()
    sign_test_unit: str | None = optional()  # "item"


@dataclass(frozen=True, kw_only=True)
class LengthBias(Record):
    """How often the longer answer wins, against how often it should by the gold labels."""

    min_length_gap: int
    n: int
    longer_wins_rate: float | None
    n_gold: int
    longer_wins_rate_gold: float | None
    longer_is_gold_rate: float | None
    excess: float | None


@dataclass(frozen=True, kw_only=True)
class SelfPreference(Record):
    """How much the judge favours the side its own model family wrote."""

    judge_family: str
    own_system: str
    n_decisive: int
    own_win_rate: float | None
    n_gold_other: int
    own_win_rate_when_gold_other: float | None
    n_gold_own: int
    other_win_rate_when_gold_own: float | None
    excess_error: float | None


@dataclass(frozen=True, kw_only=True)
class BiasReport(Record):
    """A pairwise run's ``bias``; ``self_preference`` only when exactly one side is the judge's family's."""

    position: PositionBias
    length: LengthBias
    self_preference: SelfPreference | None = optional()


@dataclass(frozen=True, kw_only=True)
class LengthScoreBias(Record):
    """How strongly the judge's score follows the output's length, against how strongly the human scores do."""

    n: int
    judge_length_spearman: float | None
    n_human: int
    human_length_spearman: float | None
    excess: float | None


@dataclass(frozen=True, kw_only=True)
class ScoreBias(Record):
    """A pointwise run's ``bias``."""

    length: LengthScoreBias
