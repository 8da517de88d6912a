"""A pairwise run's report: verdicts aggregated per item, the users' summary, gold accuracy, trust, bias and the
registered statistics (runner.modes.statistics), with its MLflow metrics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runner.core.config import RunConfig
from runner.core.types import Judgment
from runner.inputs.datasets import ItemRef
from runner.judging import aggregation, pair_policy
from runner.modes import bias, statistics, trust
from runner.modes import summary as summaries
from runner.modes.sections import PairwiseReport

MODE = "pairwise"


def build(cfg: RunConfig, refs: Sequence[ItemRef], judgments: Sequence[Judgment]
          ) -> tuple[dict[str, Any], PairwiseReport, dict[str, float]]:
    """The users' summary (with gold accuracy when the dataset has gold), its trust section (win rate with
    ties, agreement with gold, bootstrap CIs; see runner.modes.trust), its bias section, the registered
    statistics; the same summary typed (runner.modes.sections.PairwiseReport); and its MLflow metrics."""
    assert cfg.dataset.ours is not None and cfg.dataset.baseline is not None
    ours, baseline = cfg.dataset.ours, cfg.dataset.baseline
    # Bias first, before any per-item result exists: it imports scipy.stats (~50 MB), and the run's peak memory
    # is that import on top of whatever is alive at the time. It counts every pair, those pair_error=drop leaves
    # out of the verdicts too: FastChat's position-bias table (consistent, biased toward first / second, error)
    # is over every pair, an order without a verdict being its "error".
    bias_section = bias.bias_report(refs, judgments, ours.name, baseline.name, judge_family=cfg.judge.family,
                                    families={ours.name: ours.family, baseline.name: baseline.family})
    judgments, dropped = pair_policy.apply_pair_error(cfg.rubric.pair_error, judgments)
    item_results = aggregation.aggregate_items(judgments, [r.id for r in refs],
                                               cfg.aggregation.name, cfg.aggregation.params)
    summary = summaries.build_summary(item_results, judgments, ours.name, baseline.name, cfg.repeats)
    gold = summaries.gold_metrics(refs, judgments)
    if gold is not None:
        summary["gold"] = gold
    summary["trust"] = trust.pairwise_trust(refs, judgments, item_results, ours.name, baseline.name, cfg.metrics,
                                            cfg.seed, cfg.dataset.annotators_identified)
    summary["bias"] = bias_section
    stats = statistics.compute(MODE, statistics.StatInputs(cfg, refs, judgments, item_results))
    if stats:
        summary["statistics"] = stats
    if dropped is not None:
        summary["pair_errors"] = dropped.to_json()
    del item_results  # the typed report below is a second copy of every item's result: not three at once
    typed = PairwiseReport.from_json(summary, "pairwise summary")
    return summary, typed, summary_metrics(typed)


def summary_metrics(summary: PairwiseReport) -> dict[str, float]:
    """The MLflow metrics a pairwise summary determines (its ensemble section's are the ensemble's own)."""
    return {**summaries.flat_metrics(summary.summary, summary.gold, {}), **trust.trust_metrics(summary.trust),
            **(bias.bias_metrics(summary.bias) if summary.bias is not None else {}),
            **statistics.metrics(summary.statistics or {}),
            **({"pair_errors/dropped_pairs": float(summary.pair_errors.dropped_pairs)} if summary.pair_errors else {})}
