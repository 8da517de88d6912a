"""A pointwise run's report: scores per item (runner.modes.scorecard), checks, length preference; an ensemble's
report combines its members' scores (runner.modes.score_panel)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from runner.core.config import RunConfig
from runner.core.types import Judgment
from runner.modes import bias, score_panel, scorecard, statistics
from runner.modes.pointwise.setup import PointwiseSetup
from runner.modes.sections import LengthScoreBias, PointwiseReport, ScoreBias

MODE = "pointwise"


def build(cfg: RunConfig, setup: PointwiseSetup, refs: Sequence[Any], judgments: Sequence[Judgment],
          violations: Mapping[str, Mapping[str, Sequence[str]]], not_generated: frozenset[str],
          texts: Mapping[str, scorecard.ItemTexts] | None = None) -> PointwiseReport:
    """The users' report for a pointwise run (see runner.modes.scorecard); ``texts`` are shown per example."""
    items = scorecard.score_items(refs, judgments, setup.scoring, cfg.aggregation.name, cfg.aggregation.params,
                                  violations, not_generated, texts)
    return report_of(cfg, setup, items, cfg.repeats)


def build_panel(cfg: RunConfig, setup: PointwiseSetup, refs: Sequence[Any], by_member: Mapping[str, Sequence[Judgment]],
                violations: Mapping[str, Mapping[str, Sequence[str]]], not_generated: frozenset[str],
                texts: Mapping[str, scorecard.ItemTexts] | None = None
                ) -> tuple[PointwiseReport, dict[str, PointwiseReport]]:
    """An ensemble's report (runner.modes.score_panel) and each member's own report."""
    items = {m: scorecard.score_items(refs, js, setup.scoring, cfg.aggregation.name, cfg.aggregation.params,
                                      violations, not_generated, texts) for m, js in by_member.items()}
    reports = {m: report_of(cfg, setup, member_items, cfg.repeats) for m, member_items in items.items()}
    weights = {m: float(cfg.judge.weights.get(m, 1.0)) for m in by_member}
    # the ensemble's items carry no repeats of their own: its consistency is each member's
    report, _ = score_panel.build(reports, items, setup.scoring, cfg.judge.combine, weights,
                                  lambda combined: report_of(cfg, setup, combined, 1))
    return report, reports


def report_of(cfg: RunConfig, setup: PointwiseSetup, items: Sequence[scorecard.ItemScore], repeats: int
              ) -> PointwiseReport:
    """The users' report over scored items: the scorecard plus the length-preference check."""
    report = scorecard.scorecard(items, setup.scoring, repeats, cfg.rubric.consistency_threshold, setup.checks,
                                 ci=(cfg.metrics.ci_level, cfg.metrics.ci_resamples, cfg.seed))
    # length preference, where the outputs' lengths are known (dataset candidates; not generated ones)
    measured = [i for i in items if i.status == scorecard.SCORED and i.ref.lengths and i.overall is not None]
    length = bias.length_score_bias([i.ref.lengths[0] for i in measured],
                                    [i.overall for i in measured if i.overall is not None],
                                    [i.ref.human_score for i in measured])
    stats = statistics.estimates(MODE, statistics.StatInputs(cfg, [i.ref for i in items], (), items))
    return dataclasses.replace(report, bias=ScoreBias(length=LengthScoreBias.from_json(length, "bias.length")),
                               statistics=stats or None)


def summary_metrics(summary: PointwiseReport) -> dict[str, float]:
    """The MLflow metrics a pointwise report determines (an ensemble's section adds its own)."""
    out = {**scorecard.report_metrics(summary), **statistics.metrics(summary.statistics or {})}
    if summary.ensemble is not None:
        out.update(score_panel.ensemble_metrics(summary.ensemble))
    return out
