"""The typed sections of a pairwise summary the users' format fixes: ``summary`` (counts, rates, distributions,
failed items), ``aggregated_results`` (one entry per item) and ``gold`` (LLMBar's accuracy per order); built by
runner.modes.summary."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.modes.record import Record, optional


@dataclass(frozen=True, kw_only=True)
class VerdictSummary(Record):
    """``summary``: items, verdicts and confidences counted, the win and tie rates (fractions of the successful
    items) and the unanimous rate (of every item)."""

    # when the summary was built, ISO 8601 in UTC (a str); summaries written before issue 15 hold a bool here
    evaluation_completed: Any
    num_evaluation_runs: int
    total_subsets: int
    successful_evaluations: int
    final_verdict_distribution: Mapping[str, int]  # ours, baseline, tie, then any other label
    confidence_distribution: Mapping[str, int]
    ours_win_rate: float
    baseline_win_rate: float
    tie_rate: float
    unanimous_agreement_rate: float  # of every item (total_subsets): a failed item is not unanimous
    failed_items: tuple[str, ...]
    skipped_rows: tuple[str, ...] | None = optional()  # the dataset rows left out (added when the run ends)
    failed_calls: int | None = optional()  # calls made that failed, every one the run made (added when it ends)
    retries: int | None = optional()  # retries of those calls (added when the run ends)
    batch_resent: int | None = optional()  # judge.batch: rows the provider failed, expired or cancelled, sent again
    # answers served by the response cache: earlier runs' answers, not independent samples (None: none)
    answers_from_cache: int | None = optional()
    partial: bool | None = optional()  # an aborted run's summary of what completed (added when the run ends)
    partial_reason: str | None = optional()


@dataclass(frozen=True, kw_only=True, slots=True)
class AggregatedResult(Record):
    """One item of ``aggregated_results``: its valid votes, their counts, the final verdict and its confidence;
    ``details``, what the aggregation adds (an ensemble's ``num_votes``; Dawid-Skene's ``posterior``: label -> p)."""

    verdicts: tuple[str, ...]
    verdict_counts: Mapping[str, int]
    final_verdict: str | None  # None: no valid vote (a failure, not a tie)
    confidence: str | None
    details: Mapping[str, Any] | None = optional()

    @property
    def posterior(self) -> Mapping[str, float] | None:
        """Label -> the probability the aggregation gives it (Dawid-Skene's posterior), None without one."""
        return None if self.details is None else self.details.get("posterior")


@dataclass(frozen=True, kw_only=True)
class GoldAccuracy(Record):
    """``gold``: accuracy against gold labels per presentation order, as LLMBar reports it (None: undefined)."""

    accuracy_ab: float | None
    accuracy_ba: float | None
    accuracy_mean: float | None
    correct_both: float | None
    positional_agreement: float | None
    accuracy_overall: float | None
    n_pairs: int


@dataclass(frozen=True, kw_only=True)
class PairErrors(Record):
    """``pair_errors`` (only under the rubric's ``pair_error: drop``): the pairs with a failed order left out of
    every statistic (runner.judging.pair_policy), the judgments they held, and their items."""

    policy: str
    dropped_pairs: int
    dropped_judgments: int
    dropped_items: tuple[str, ...]
