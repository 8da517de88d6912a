"""The typed sections of a pointwise scorecard (runner.modes.scorecard): the summary and each ``by_tag`` /
``by_category`` entry (the same section over a subset: counts, pass rate, averages, consistency, agreement with
human scores, checks), the summary's intervals and lists, and one ``detailed_results`` entry per item."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.modes.record import Record, optional
from runner.modes.sections.agreement import Interval


@dataclass(frozen=True, kw_only=True)
class Pearson(Record):
    r: float | None
    p: float | None


@dataclass(frozen=True, kw_only=True)
class Spearman(Record):
    rho: float | None
    p: float | None


@dataclass(frozen=True, kw_only=True)
class HumanAgreement(Record):
    """``human_correlation``: the judge's scores against the human scores (runner.stats.agreement)."""

    n: int
    pearson: Pearson
    spearman: Spearman
    within_1_rate: float | None
    mean_abs_error: float | None
    tolerance: float
    unscored: int
    kappa_linear: float | None
    kappa_quadratic: float | None
    krippendorff_alpha_ordinal: float | None
    krippendorff_alpha_interval: float | None


@dataclass(frozen=True, kw_only=True)
class Consistency(Record):
    """How much an item's score moves across repeats (runner.stats.scores.Consistency)."""

    repeats: int
    threshold: float
    items_measured: int
    mean_std: float | None
    max_std: float | None
    share_above_threshold: float | None
    items_above_threshold: tuple[str, ...]
    std: str | None = optional()  # how each item's std is computed: "sample (n-1)" (absent in older reports)


@dataclass(frozen=True, kw_only=True)
class CheckSection(Record):
    """One deterministic check over the checked items, against its target."""

    items_checked: int
    items_with_violations: int
    violation_rate: float | None
    max_rate: float | None
    met: bool | None
    by_violation: Mapping[str, int]


@dataclass(frozen=True, kw_only=True)
class ScoreSection(Record):
    """Every metric over a set of items (the summary, a tag's, a category's)."""

    total: int
    scored: int
    unscored: int
    errors: int
    passed: int | None  # None without a pass threshold
    failed: int | None  # scored below the threshold (an item without a score is in neither count)
    pass_rate: float | None  # passed / total: an unscored, failed or not generated item is not passed
    # passed / (passed + failed), the scored items only; absent without a scored item (and before issue 30)
    pass_rate_scored: float | None = optional()
    average_overall: float | None
    average_by_criterion: Mapping[str, float | None]
    consistency: Consistency | None = optional()  # repeats > 1
    human_correlation: HumanAgreement | None = optional()  # items with human scores
    checks: Mapping[str, CheckSection] | None = optional()  # the rubric's checks


@dataclass(frozen=True, kw_only=True)
class FailedExample(Record):
    id: str
    overall: float | None
    reasoning: str  # its first line
    input: str | None = optional()  # the example's input, expected and actual output, whole (absent in older reports)
    expected_output: str | None = optional()
    output: str | None = optional()


@dataclass(frozen=True, kw_only=True)
class UnscoredItem(Record):
    id: str
    status: str
    reasons: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class PointwiseSummary(ScoreSection):
    """``summary``: the section over every item, its intervals, the scale and the failed and unscored items."""

    average_overall_ci: Interval
    pass_rate_ci: Interval | None = optional()  # of pass_rate (over every item), with a pass threshold
    pass_threshold: float | None
    scale: tuple[float, ...]  # (low, high)
    repeats: int
    failed_examples: tuple[FailedExample, ...]
    unscored_items: tuple[UnscoredItem, ...]
    skipped_rows: tuple[str, ...] | None = optional()  # the dataset rows left out (added when the run ends)
    failed_calls: int | None = optional()  # calls made that failed, every one the run made (added when it ends)
    retries: int | None = optional()  # retries of those calls (added when the run ends)
    batch_resent: int | None = optional()  # judge.batch: rows the provider failed, expired or cancelled, sent again
    # answers served by the response cache: earlier runs' answers, not independent samples (None: none)
    answers_from_cache: int | None = optional()
    partial: bool | None = optional()  # an aborted run's summary of what completed (added when the run ends)
    partial_reason: str | None = optional()


@dataclass(frozen=True, kw_only=True, slots=True)
class DetailedResult(Record):
    """One item of ``detailed_results``."""

    id: str
    status: str  # scored | unscored | error | not_generated
    tags: tuple[str, ...]
    category: str | None
    overall: float | None
    passed: bool | None
    scores: Mapping[str, float]
    repeat_scores: tuple[float, ...]
    std: float | None
    human_score: float | None
    reasoning: Any  # the judge's own fields, as it wrote them
    improvement_suggestions: Any
    judge_pass: tuple[Any, ...]
    violations: Mapping[str, tuple[str, ...]]
    unscored_reasons: tuple[str, ...]
    input: str | None = optional()  # the example's input, expected and actual output, whole (absent in older reports)
    expected_output: str | None = optional()
    output: str | None = optional()
    judge_overall_score: tuple[Any, ...] | None = optional()  # the judge's own overall_score, when it sent one
