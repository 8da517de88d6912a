"""The typed ``ensemble`` sections: a pairwise ensemble's (runner.modes.panel: every aggregation against gold, the
members' agreement, Dawid-Skene's estimates) and a pointwise ensemble's (runner.modes.score_panel: each member's
headline, how their scores agree, what a vote over their pass/fail decisions gives)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.modes.record import Record, optional, rest
from runner.modes.sections.agreement import InterJudge
from runner.modes.sections.scores import Consistency


@dataclass(frozen=True, kw_only=True)
class CombineStats(Record):
    """One aggregation's verdicts: tie and win rates, confidences and (with gold) its accuracy."""

    tie_rate: float | None
    ours_win_rate: float | None
    confidence: Mapping[str, int]
    accuracy_all: float | None = optional()
    n_gold: int | None = optional()


@dataclass(frozen=True, kw_only=True)
class MemberAgreement(Record):
    """A member's own agreement with gold (None without gold)."""

    accuracy: float | None
    accuracy_all: float | None
    cohen_kappa: float | None
    n: int | None


@dataclass(frozen=True, kw_only=True)
class VersusGold(Record):
    """One member's (or the ensemble's) verdicts against gold; ``accuracy_ties_half``: a tie counts half right."""

    n: int
    unscored: int
    accuracy: float | None
    accuracy_all: float | None
    cohen_kappa: float | None
    accuracy_ties_half: float | None = optional()


@dataclass(frozen=True, kw_only=True)
class VersusMembers(Record):
    """The ensemble's verdict per item against each member's, both against gold."""

    n_gold: int
    members: Mapping[str, VersusGold]
    ensemble: VersusGold
    ensemble_minus_best_member: float | None
    ensemble_minus_best_member_ties_half: float | None = optional()  # members' and ensemble's ties half right


@dataclass(frozen=True, kw_only=True)
class DawidSkeneIntervals(Record):
    """Percentile bootstrap intervals over items on Dawid-Skene's estimates (runner.stats.dawid_skene)."""

    accuracy: Mapping[str, tuple[float, ...] | None]  # [low, high]
    priors: Mapping[str, tuple[float, ...] | None]
    unit: str
    method: str
    level: float
    resamples: int
    seed: int


@dataclass(frozen=True, kw_only=True)
class DawidSkeneReport(Record):
    """A method's estimate of each member's (and annotator's) accuracy, with its true accuracy given gold."""

    estimated_accuracy: Mapping[str, float]
    annotator_estimated_accuracy: Mapping[str, float | None]
    priors: Mapping[str, Any]
    iterations: int | None
    converged: bool | None
    annotators: str | None = optional()  # "judge" (orders and repeats pooled) or "vote" (each column its own)
    intervals: DawidSkeneIntervals | None = optional()
    true_accuracy: Mapping[str, float | None] | None = optional()
    # with vote columns as annotators (fewer than 3 judges): what the members' estimates are and are not
    caveat: str | None = optional()


@dataclass(frozen=True, kw_only=True)
class PairwiseEnsemble(Record):
    """A pairwise run's ``ensemble``; ``estimates``: one entry per method that estimated accuracies, keyed by it."""

    combine: str
    members: tuple[str, ...]
    annotators: tuple[str, ...]
    inter_judge: InterJudge
    inter_annotator: InterJudge
    by_combine: Mapping[str, CombineStats]
    member_agreement: Mapping[str, MemberAgreement]
    versus_members: VersusMembers | None = optional()  # with gold labels
    estimates: Mapping[str, DawidSkeneReport] = rest()


@dataclass(frozen=True, kw_only=True)
class MemberHeadline(Record):
    average_overall: float | None
    pass_rate: float | None  # the member's summary pass_rate (over every item)
    pass_rate_scored: float | None = optional()
    scored: int | None
    human_pearson: float | None
    human_within_1_rate: float | None
    consistency: Consistency | None = optional()  # the member's own over its repeats (repeats > 1)


@dataclass(frozen=True, kw_only=True)
class ScorePair(Record):
    a: str
    b: str
    n: int
    pearson: float | None
    mean_abs_diff: float | None


@dataclass(frozen=True, kw_only=True)
class ScoreAgreement(Record):
    """How the members' overall scores agree."""

    pairwise: tuple[ScorePair, ...]
    krippendorff_alpha_interval: float | None


@dataclass(frozen=True, kw_only=True)
class PassVoteRow(Record):
    """One vote method over the members' pass/fail decisions."""

    pass_rate: float | None  # over every item: one without a decision is not passed
    pass_rate_scored: float | None = optional()  # over the items with a decision
    human_pass_agreement: float | None = optional()
    estimated_accuracy: Mapping[str, float | None] | None = optional()


@dataclass(frozen=True, kw_only=True)
class PassVotes(Record):
    """The members' pass/fail decisions: their agreement, then one entry per vote method, keyed by it."""

    inter_judge: InterJudge
    methods: Mapping[str, PassVoteRow] = rest()


@dataclass(frozen=True, kw_only=True)
class PointwiseEnsemble(Record):
    """A pointwise run's ``ensemble``; ``pass_votes`` only with a pass threshold."""

    combine: str
    members: tuple[str, ...]
    member_headline: Mapping[str, MemberHeadline]
    score_agreement: ScoreAgreement
    pass_votes: PassVotes | None = optional()
