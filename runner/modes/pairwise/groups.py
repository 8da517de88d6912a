"""Pairwise statistics per category and per tag: ours' win rate (ties as half) with a bootstrap CI over the group's
items, and agreement with gold with a Wilson (or Clopper-Pearson) interval; and, for the whole run, Gwet's AC1
against gold beside kappa (``chance_corrected/gwet_ac1``). Registered in the metric registry
(runner.modes.statistics), so they show in summary.json, MLflow, the console, the HTML report and the sweep
table without another file.

The item is the unit: a group's win rate averages its items' final verdicts (1 ours, 0 baseline, 0.5 tie), and
its agreement is the run's ``agreement/accuracy_all`` over the group's gold-labelled items: the share of their final
judgments (every order and repeat) that name the gold label, an unscored judgment wrong (or a tie with
``metrics.unscored_as=tie``), with the same item-level interval. One name, one number: the categories' agreement is
the headline's. That share of items whose final verdict (after aggregation) names the gold label is another
number with its own name, ``verdict_accuracy`` (an item without a verdict wrong): with ``aggregation=mean`` over
both orders it is JudgeBench's score per category.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping

from runner.core.choices import UnscoredAs
from runner.core.types import TIE, ItemResult
from runner.inputs.datasets import ItemRef
from runner.judging.aggregation import final_judgments
from runner.modes import trust
from runner.modes.statistics import HEADLINE_GROUP, Estimate, StatInputs, Table, statistic
from runner.stats import clusters, coefficients, proportions, uncertainty


def _estimate(values: list[float], inputs: StatInputs) -> Estimate:
    """A win rate (ties as half) over items, with its bootstrap interval."""
    metrics = inputs.cfg.metrics
    ci = uncertainty.bootstrap_ci(values, "mean", metrics.ci_level, metrics.ci_resamples, inputs.cfg.seed)
    return Estimate(sum(values) / len(values), len(values), ci["low"], ci["high"])


def _proportion(values: list[float], items: list[str], inputs: StatInputs) -> Estimate:
    """A proportion over rows clustered in items, with its Wilson or Clopper-Pearson interval; n: the items."""
    metrics = inputs.cfg.metrics
    ci = proportions.proportion_ci(values, items, metrics.ci_level, metrics.proportion_ci.value)
    return Estimate(ci["estimate"], ci["clusters"], ci["low"], ci["high"])


def _table(inputs: StatInputs, groups_of: Callable[[ItemRef], Iterable[str]]) -> Table:
    """Win rate, agreement with gold and verdict accuracy for every group that ``groups_of`` puts an item in."""
    assert inputs.cfg.dataset.ours is not None and inputs.cfg.dataset.baseline is not None
    ours, baseline = inputs.cfg.dataset.ours.name, inputs.cfg.dataset.baseline.name
    results: Mapping[str, ItemResult] = {r.item_id: r for r in inputs.results}
    wins: dict[str, list[float]] = defaultdict(list)
    agree: dict[str, list[float]] = defaultdict(list)
    agree_items: dict[str, list[str]] = defaultdict(list)
    groups = {ref.id: list(groups_of(ref)) for ref in inputs.refs}
    for ref in inputs.refs:
        result = results.get(ref.id)
        verdict = result.final_verdict if result is not None else None
        if verdict is not None:
            for group in groups[ref.id]:
                wins[group].append(1.0 if verdict == ours else 0.0 if verdict == baseline else 0.5)
    verdict_right, verdict_items = _verdicts_right(inputs, results, groups)
    rows, items = trust.gold_rows(inputs.refs, inputs.judgments)
    for correct, item in zip(trust.correct_rows(rows, inputs.cfg.metrics.unscored_as), items, strict=True):
        for group in groups[item]:
            agree[group].append(correct)
            agree_items[group].append(item)
    table: dict[str, dict[str, Estimate]] = {}
    for group in sorted(set(wins) | set(agree)):
        row = {}
        if wins[group]:
            row["win_rate"] = _estimate(wins[group], inputs)
        if agree[group]:
            row["agreement"] = _proportion(agree[group], agree_items[group], inputs)
        if verdict_right[group]:
            row["verdict_accuracy"] = _proportion(verdict_right[group], verdict_items[group], inputs)
        table[group] = row
    return table


def _verdicts_right(inputs: StatInputs, results: Mapping[str, ItemResult], groups: Mapping[str, Iterable[str]]
                    ) -> tuple[dict[str, list[float]], dict[str, list[str]]]:
    """Per group, 1.0 / 0.0 for each gold-labelled item whose final verdict names / misses its gold label (no
    verdict: a miss), and the items in the same order."""
    right: dict[str, list[float]] = defaultdict(list)
    items: dict[str, list[str]] = defaultdict(list)
    for ref in inputs.refs:
        if ref.gold is None:
            continue
        result = results.get(ref.id)
        hit = float(result is not None and result.final_verdict == ref.gold)
        for group in groups[ref.id]:
            right[group].append(hit)
            items[group].append(ref.id)
    return right, items


@statistic("overall", "overall", modes=["pairwise"], headline=True, digits=2)
def overall(inputs: StatInputs) -> Table:
    """The verdict accuracy over every gold-labelled item (``overall/verdict_accuracy``): the share whose final
    verdict names the gold label, an item without a verdict wrong, with a Wilson (or Clopper-Pearson) interval over
    items; JudgeBench's headline with ``order=both aggregation=mean``. Left out where it would repeat a number the
    run already shows under another name: an ensemble's (its ``agreement/accuracy_all`` is over its verdicts, one
    per item) and a run where no item had more than one final judgment (one order, one repeat: ``accuracy/overall``)."""
    if inputs.cfg.judge.members:
        return {}
    finals = final_judgments(inputs.judgments)
    if len(finals) <= len({j.item_id for j in finals}):
        return {}
    results = {r.item_id: r for r in inputs.results}
    right, items = _verdicts_right(inputs, results, {ref.id: [HEADLINE_GROUP] for ref in inputs.refs})
    if not right:
        return {}
    return {HEADLINE_GROUP: {"verdict_accuracy": _proportion(right[HEADLINE_GROUP], items[HEADLINE_GROUP], inputs)}}


SHOWN = {"win_rate": "ties-half rate"}  # a tie half a win: not the users' ours_win_rate (docs/methods.md)


@statistic("by_category", "category", modes=["pairwise"], labels=SHOWN)
def by_category(inputs: StatInputs) -> Table:
    """Win rate and agreement with gold per dataset category."""
    return _table(inputs, lambda ref: [ref.category] if ref.category else [])


@statistic("by_tag", "tag", modes=["pairwise"], labels=SHOWN)
def by_tag(inputs: StatInputs) -> Table:
    """Win rate and agreement with gold per dataset tag (an item with several tags counts in each)."""
    return _table(inputs, lambda ref: ref.tags)


@statistic("chance_corrected", "chance-corrected agreement with gold", modes=["pairwise"], headline=True,
           percent=False)
def chance_corrected(inputs: StatInputs) -> Table:
    """Gwet's AC1 of the judge's final judgments against gold (runner.stats.clusters.weighted_ac1), over the rows
    ``agreement/cohen_kappa`` uses (scored ones; an unscored one a tie with ``metrics.unscored_as=tie``), its
    categories the rubric's labels, with the cluster-bootstrap interval kappa has (whole items resampled)."""
    rows, items = trust.gold_rows(inputs.refs, inputs.judgments)
    if inputs.cfg.metrics.unscored_as is UnscoredAs.tie:
        rows = [(TIE if pred is None else pred, gold) for pred, gold in rows]
    scored = [(pred, gold, item) for (pred, gold), item in zip(rows, items, strict=True) if pred is not None]
    if not scored:
        return {}
    columns, used = coefficients.label_codes([p for p, _, _ in scored], [g for _, g, _ in scored])
    metrics = inputs.cfg.metrics
    ci = clusters.cluster_bootstrap_ci(
        columns, [item for _, _, item in scored],
        functools.partial(clusters.weighted_ac1, n_labels=max(used, len(inputs.cfg.rubric.labels))),
        metrics.ci_level, metrics.ci_resamples, inputs.cfg.seed)
    return {HEADLINE_GROUP: {"gwet_ac1": Estimate(ci["estimate"], ci["clusters"], ci["low"], ci["high"])}}
