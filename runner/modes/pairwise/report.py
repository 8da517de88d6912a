"""A pairwise run's report: verdicts aggregated per item, the users' summary, gold accuracy, trust, bias and the
registered statistics (runner.modes.statistics), with its MLflow metrics."""

from __future__ import annotations

from collections.abc import Sequence

from runner.core.choices import PairError
from runner.core.config import RunConfig
from runner.core.types import Judgment
from runner.inputs.datasets import ItemRef
from runner.judging import aggregation, pair_policy
from runner.modes import bias, statistics, trust
from runner.modes import summary as summaries
from runner.modes.sections import BiasReport, PairErrors, PairwiseReport

MODE = "pairwise"


def build(cfg: RunConfig, refs: Sequence[ItemRef], judgments: Sequence[Judgment]
          ) -> tuple[PairwiseReport, dict[str, float]]:
    """The typed report (runner.modes.sections.PairwiseReport): the users' summary (with gold accuracy when the
    dataset has gold), its trust section (win rate with ties, agreement with gold, bootstrap CIs; see
    runner.modes.trust), its bias section, the registered statistics; and its MLflow metrics."""
    assert cfg.dataset.ours is not None and cfg.dataset.baseline is not None
    ours, baseline = cfg.dataset.ours, cfg.dataset.baseline
    # Bias first, before any per-item result exists: it imports scipy.stats (~50 MB), and the run's peak memory
    # is that import on top of whatever is alive at the time. It counts every pair, those pair_error=drop leaves
    # out of the verdicts too: FastChat's position-bias table (consistent, biased toward first / second, error)
    # is over every pair, an order without a verdict being its "error".
    bias_section = BiasReport.from_json(bias.bias_report(
        refs, judgments, ours.name, baseline.name, judge_family=cfg.judge.family,
        families={ours.name: ours.family, baseline.name: baseline.family}), "bias")
    judgments, dropped = pair_policy.apply_pair_error(cfg.rubric.pair_error, judgments)
    item_results = aggregation.aggregate_items(judgments, [r.id for r in refs],
                                               cfg.aggregation.name, cfg.aggregation.params)
    summary, aggregated = summaries.verdict_report(item_results, ours.name, baseline.name, cfg.repeats)
    trust_section = trust.pairwise_trust(refs, judgments, item_results, ours.name, baseline.name, cfg.metrics,
                                         cfg.seed, cfg.dataset.annotators_identified)
    stats = statistics.estimates(MODE, statistics.StatInputs(cfg, refs, judgments, item_results))
    del item_results  # the report holds each item's result once
    typed = PairwiseReport(
        summary=summary, aggregated_results=aggregated, gold=summaries.gold_accuracy(refs, judgments),
        trust=trust_section, bias=bias_section, statistics=stats or None,
        pair_errors=None if dropped is None else PairErrors(
            policy=PairError.drop.value, dropped_pairs=dropped.pairs, dropped_judgments=dropped.judgments,
            dropped_items=dropped.items))
    return typed, summary_metrics(typed)


def summary_metrics(summary: PairwiseReport) -> dict[str, float]:
    """The MLflow metrics a pairwise summary determines (its ensemble section's are the ensemble's own)."""
    return {**summaries.flat_metrics(summary.summary, summary.gold, {}), **trust.trust_metrics(summary.trust),
            **(bias.bias_metrics(summary.bias) if summary.bias is not None else {}),
            **statistics.metrics(summary.statistics or {}),
            **({"pair_errors/dropped_pairs": float(summary.pair_errors.dropped_pairs)} if summary.pair_errors else {})}
