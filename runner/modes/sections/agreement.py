"""The typed ``trust`` section of a pairwise summary (runner.modes.trust): the bootstrap's settings, the win rate
with ties and its interval, agreement with gold (confusion matrix, kappa, bootstrap CIs) and the human ceiling;
and the inter-judge agreement an ensemble's section shares (runner.stats.inter_rater)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from runner.modes.record import Record, optional


@dataclass(frozen=True, kw_only=True)
class Interval(Record):
    """A confidence interval: a bootstrap (runner.stats.uncertainty, runner.stats.clusters), bounds None where there
    was no spread, or a proportion's (runner.stats.proportions). ``unit`` says what was resampled or counted once:
    ``cluster`` / ``item`` where an item's several judgments are kept together."""

    n: int
    clusters: int | None = optional()  # the items the n rows belong to
    unit: str | None = optional()
    estimate: float | None
    low: float | None
    high: float | None
    level: float
    resamples: int | None = optional()  # a bootstrap's
    undefined_resamples: int | None = optional()  # an interval of a whole-row metric (e.g. kappa)
    method: str | None
    design_effect: float | None = optional()  # a proportion over clustered rows: Kish's design effect ...
    effective_n: float | None = optional()  # ... and the effective sample size it gives


@dataclass(frozen=True, kw_only=True)
class Bootstrap(Record):
    """The bootstrap's settings, beside the intervals they produced."""

    level: float
    resamples: int
    seed: int


@dataclass(frozen=True, kw_only=True)
class WinRate(Record):
    """Ours' win rate with ties as half a win, over the items with a final verdict."""

    n: int
    wins: int
    losses: int
    ties: int
    rate: float
    standard_error: float | None
    ci: Interval


@dataclass(frozen=True, kw_only=True)
class Confusion(Record):
    """Rows: the gold label; columns: the judge's verdict."""

    labels: tuple[str, ...]
    matrix: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, kw_only=True)
class GoldAgreement(Record):
    """Agreement of the final judgments with the gold labels (runner.modes.trust.label_rows_agreement)."""

    n: int
    n_total: int
    unscored: int
    accuracy: float | None  # over the scored judgments
    accuracy_all: float  # an unscored judgment counts as wrong
    cohen_kappa: float | None
    macro_f1: float | None
    krippendorff_alpha: float | None
    labels: tuple[str, ...]
    confusion: Confusion
    unscored_as: str
    accuracy_all_ci: Interval
    cohen_kappa_ci: Interval


@dataclass(frozen=True, kw_only=True)
class BothOrders(Record):
    """A single judge's verdict per (item, repeat) judged in both orders, against gold: the two orders' common winner,
    and when they disagree (or one has no verdict) a tie (``inconsistent_as_tie``) or a miss
    (``inconsistent_as_incorrect``, as JudgeBench scores it). Intervals over items (runner.stats.proportions)."""

    n_pairs: int
    inconsistent: int
    inconsistent_as_tie: Interval
    inconsistent_as_incorrect: Interval


@dataclass(frozen=True, kw_only=True)
class PairAgreement(Record):
    """Two raters over the items both labelled."""

    n: int
    accuracy: float | None
    cohen_kappa: float | None


@dataclass(frozen=True, kw_only=True)
class JudgePair(Record):
    """Two named judges over the items both labelled."""

    a: str
    b: str
    n: int
    accuracy: float | None
    cohen_kappa: float | None


@dataclass(frozen=True, kw_only=True)
class InterJudge(Record):
    """Agreement between several judges or annotators (runner.stats.inter_rater.inter_judge)."""

    judges: tuple[str, ...]
    n_items: int
    pairwise: tuple[JudgePair, ...]
    mean_pairwise_kappa: float | None
    fleiss_kappa: float | None
    fleiss_n: int
    krippendorff_alpha: float | None


@dataclass(frozen=True, kw_only=True)
class HumanCeiling(InterJudge):
    """How well the human annotators agree with each other (runner.stats.inter_rater.human_ceiling)."""

    pairwise_omitted: str | None = optional()  # why pairwise kappa is not reported (unstable annotator columns)
    annotators: int
    identified: bool
    mean_pairwise_accuracy: float | None
    leave_one_out: Mapping[str, PairAgreement]
    mean_leave_one_out_accuracy: float | None
    mean_leave_one_out_kappa: float | None
    judge_leave_one_out: Mapping[str, PairAgreement] | None = optional()  # the judge vs the same references
    mean_judge_leave_one_out_accuracy: float | None = optional()
    mean_judge_leave_one_out_kappa: float | None = optional()


@dataclass(frozen=True, kw_only=True)
class TrustSection(Record):
    """``trust``: the win rate with ties (None without a verdict) and, with gold labels, agreement with them."""

    bootstrap: Bootstrap
    win_rate: WinRate | None
    gold_agreement: GoldAgreement | None = optional()
    both_orders: BothOrders | None = optional()
    human_ceiling: HumanCeiling | None = optional()
