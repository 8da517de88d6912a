"""An ensemble judge inside one run (``judge=ensemble``): build its summary from the members' (checked at start-up
by runner.modes.ensemble_check).

Every member judges every item under the run's plan (runner.judging.stages.judge_panel). Each member's final
judgments are its votes: with ``order=both`` (and repeats) a member casts one vote per order (and
repeat), and for Dawid-Skene each ``member/order[/repeat]`` is its own annotator, so a judge's position
bias shows up as two annotators that disagree. The ensemble's verdict per item comes from ``judge.combine`` (a
name or ``{name, params}``), any label or score aggregation the registry (runner.judging.aggregations) offers
for an ensemble; the shipped ones:

- ``majority_vote``: a strict majority of all the members' votes (a tie without one);
- ``weighted``: the same with each member's votes weighted by ``judge.combine.params.weights``, else
  ``judge.weights`` (1.0 for a member not named);
- ``mean`` / ``median``: of each member's preference for ours (its share of votes for ours, a tie = 1/2):
  ours above 1/2, the baseline below, a tie at exactly 1/2;
- ``dawid_skene``: the EM posterior (no labels needed); each member's estimated accuracy is the vote-count
  weighted mean of its annotators'.

The run's headline (verdict distribution, win rate, agreement with gold) is the ensemble's; every
aggregation is also scored against gold, next to each member's own agreement.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from runner.core.config import RunConfig
from runner.core.types import TIE, ItemResult, Judgment, Status
from runner.inputs.datasets import ItemRef
from runner.judging.aggregation import aggregate_items, final_judgments
from runner.judging.aggregations import REGISTRY, Kind, Use
from runner.judging.aggregations.records import CONFIDENCES, MAJORITY, NO_CONSENSUS, UNANIMOUS
from runner.modes import pairwise, statistics, trust
from runner.modes import summary as summaries
from runner.modes.ensemble import combine_labels, combine_scores, inter_judge_agreement, member_comparison
from runner.modes.ensemble_check import (
    annotators_per_member,
    combine_kinds,
    combine_of,
    member_weights,
)
from runner.modes.panel_views import ensemble_metrics
from runner.modes.sections import (
    CombineStats,
    DawidSkeneReport,
    GoldAgreement,
    InterJudge,
    MemberAgreement,
    PairwiseEnsemble,
    PairwiseReport,
    TrustSection,
    VersusMembers,
)
from runner.modes.sections.ensembles import DawidSkeneIntervals

MEMBERS_DIR = "members"  # run_dir/members/<name>/: each member's journal, results and summary

__all__ = ["MEMBERS_DIR", "annotator_votes", "build", "combine", "dawid_skene_report", "member_config"]


def member_config(cfg: RunConfig, name: str) -> RunConfig:
    """The run's config with one member as its judge."""
    return dataclasses.replace(cfg, judge=cfg.judge.members[name])


def _annotator(member: str, j: Judgment, per_member: int, repeats: int) -> str:
    if per_member == 1:
        return member
    order = j.request.order.value if j.request.order is not None and per_member > repeats else ""
    repeat = f"r{j.request.repeat}" if repeats > 1 else ""
    return "/".join(part for part in (member, order, repeat) if part)


def annotator_votes(by_member: Mapping[str, Sequence[Judgment]], cfg: RunConfig) -> dict[str, dict[str, Any]]:
    """Annotator (``member[/order][/repeat]``) -> item id -> the system it preferred or tie (None: unscored)."""
    per_member = annotators_per_member(cfg)
    votes: dict[str, dict[str, Any]] = {}
    for member, judgments in by_member.items():
        for j in final_judgments(judgments):
            name = _annotator(member, j, per_member, cfg.repeats)
            votes.setdefault(name, {})[j.item_id] = j.winner if j.status is Status.SCORED else None
    return votes


def _member_of(annotator: str) -> str:
    return annotator.split("/", 1)[0]


def _preferences(votes: Mapping[str, Mapping[str, Any]], ours: str) -> dict[str, dict[str, float | None]]:
    """Member -> item -> its share of valid votes for ours (a tie counts 1/2); None without a valid vote."""
    shares: dict[str, dict[str, list[float]]] = {}
    for annotator, by_item in votes.items():
        member = shares.setdefault(_member_of(annotator), {})
        for item, label in by_item.items():
            cast = member.setdefault(item, [])
            if label is not None:
                cast.append(1.0 if label == ours else 0.5 if label == TIE else 0.0)
    return {m: {item: sum(v) / len(v) if v else None for item, v in items.items()} for m, items in shares.items()}


def _confidence(label: Hashable | None, cast: Sequence[Hashable], invalid: int) -> str | None:
    """The ensemble's confidence in ``label`` over the valid votes ``cast``; ``invalid`` votes (unscored or failed)
    beside them make it at most a majority, as a repeats' vote (runner.judging.aggregation: docs/how-to/resume.md's
    rule, whatever the combine)."""
    if label is None or not cast:
        return None
    share = sum(vote == label for vote in cast) / len(cast)
    if share == 1:
        return MAJORITY if invalid else UNANIMOUS
    return MAJORITY if share > 0.5 else NO_CONSENSUS


def combine(method: str, votes: Mapping[str, Mapping[str, Any]], cfg: RunConfig, ids: Sequence[str]
            ) -> tuple[list[ItemResult], dict[str, Any]]:
    """The ensemble's ItemResult per item under ``method`` (a label aggregation of the votes, else a score one of
    each member's preference for ours), and what the method estimated (Dawid-Skene's fit)."""
    assert cfg.dataset.ours is not None and cfg.dataset.baseline is not None
    ours, baseline = cfg.dataset.ours.name, cfg.dataset.baseline.name
    spec, chosen = REGISTRY.find(method, Use.ensemble, combine_kinds(cfg)), combine_of(cfg)
    params = {k: v for k, v in chosen.params.items() if k != "weights"} if method == chosen.name else {}
    weights = member_weights(cfg) if spec.weighted else None
    fit: dict[str, Any] = {}
    posteriors: Mapping[str, Any] = {}
    labels: Mapping[str, Any]
    if spec.kind is Kind.score:
        preferences = _preferences(votes, ours)
        by_member = None if weights is None else {m: weights.get(m, 1.0) for m in preferences}
        scores = combine_scores(preferences, method, by_member, **params)
        labels = {k: None if s is None else ours if s > 0.5 else baseline if s < 0.5 else TIE
                  for k, s in scores.items()}
    else:
        by_annotator = None if weights is None else {a: weights[_member_of(a)] for a in votes}
        result = combine_labels(votes, method, by_annotator, **params)
        labels = result.labels
        fit, posteriors = dict(result.fit), {k: e.posterior for k, e in result.items.items()}
    results = []
    for item in ids:
        cast = [by_item[item] for by_item in votes.values() if by_item.get(item) is not None]
        invalid = sum(item in by_item and by_item[item] is None for by_item in votes.values())
        label: Any = labels.get(item)  # a system's name or tie (the ensemble votes on pairwise verdicts)
        details: dict[str, Any] = {"num_votes": len(cast)}
        if posteriors.get(item):
            details["posterior"] = {str(k): round(float(p), 6) for k, p in posteriors[item].items()}
        confidence = _confidence(label, cast, invalid)
        results.append(ItemResult(item, tuple(cast), dict(Counter(cast)), label, confidence, details))
    return results, fit


def _ensemble_gold(results: Sequence[ItemResult], refs: Sequence[ItemRef], cfg: RunConfig, seed: int
                   ) -> dict[str, Any] | None:
    gold = {r.id: r.gold for r in refs if r.gold is not None}
    rows = [(r.final_verdict, gold[r.item_id]) for r in results if r.item_id in gold]
    return trust.label_rows_agreement(rows, cfg.metrics, seed) if rows else None


def _member_true_accuracy(votes: Mapping[str, Mapping[str, Any]], gold: Mapping[str, Any]) -> dict[str, Any]:
    hits: dict[str, list[bool]] = {}
    for annotator, by_item in votes.items():
        hits.setdefault(_member_of(annotator), []).extend(
            label == gold[item] for item, label in by_item.items() if label is not None and item in gold)
    return {m: sum(h) / len(h) if h else None for m, h in hits.items()}


def _member_estimates(fit: Mapping[str, Any], votes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Member -> vote-weighted mean of its annotators' Dawid-Skene accuracy."""
    sums: dict[str, list[float]] = {}
    for annotator, accuracy in fit.get("accuracy", {}).items():  # a member, or one of its vote columns
        n = sum(v is not None for column, by_item in votes.items() if annotator in (column, _member_of(column))
                for v in by_item.values())
        if accuracy is not None and n:
            acc = sums.setdefault(_member_of(annotator), [0.0, 0.0])
            acc[0] += accuracy * n
            acc[1] += n
    return {m: s / n for m, (s, n) in sums.items()}


def vote_columns_caveat(fit: Mapping[str, Any], votes: Mapping[str, Mapping[str, Any]]) -> str | None:
    """What a fit over vote columns (``annotators: vote``) says of the members, to show beside their estimates; None
    for a judge-level fit."""
    if fit.get("annotators") != "vote":
        return None
    members = len({_member_of(column) for column in votes})
    return (f"the {len(votes)} vote columns (member x order x repeat) are the annotators, each treated as "
            f"independent; {members} judges cannot identify one annotator per judge, so a member's estimate is the "
            "vote-weighted mean of its columns' and has no judge-level interval (docs/methods.md)")


def dawid_skene_report(fit: Mapping[str, Any], votes: Mapping[str, Mapping[str, Any]],
                       gold: Mapping[str, Any]) -> DawidSkeneReport:
    """Each member's (and annotator's) Dawid-Skene accuracy estimate, next to its true accuracy when gold exists,
    with the caveat of a fit over vote columns (:func:`vote_columns_caveat`)."""
    intervals = fit.get("intervals")
    return DawidSkeneReport(caveat=vote_columns_caveat(fit, votes),
        estimated_accuracy=MappingProxyType(_member_estimates(fit, votes)),
        annotator_estimated_accuracy=MappingProxyType(dict(fit.get("accuracy", {}))),
        priors=MappingProxyType({str(k): v for k, v in fit.get("priors", {}).items()}),
        iterations=fit.get("iterations"), converged=fit.get("converged"), annotators=fit.get("annotators"),
        intervals=None if intervals is None else DawidSkeneIntervals.from_json(intervals, "intervals"),
        true_accuracy=MappingProxyType(_member_true_accuracy(votes, gold)) if gold else None)


def _member_labels(results_by_member: Mapping[str, Sequence[ItemResult]]) -> dict[str, dict[str, Any]]:
    return {m: {r.item_id: r.final_verdict for r in rs} for m, rs in results_by_member.items()}


MemberOutput = tuple[PairwiseReport, dict[str, float]]  # a member's typed report and metrics


def build(cfg: RunConfig, refs: Sequence[ItemRef], by_member: Mapping[str, Sequence[Judgment]]
          ) -> tuple[PairwiseReport, dict[str, float], dict[str, MemberOutput]]:
    """The ensemble run's typed report and metrics, and each member's own (typed report, metrics)."""
    assert cfg.dataset.ours is not None and cfg.dataset.baseline is not None
    ours, baseline = cfg.dataset.ours.name, cfg.dataset.baseline.name
    ids = [r.id for r in refs]
    members = {m: pairwise.build(member_config(cfg, m), refs, list(js)) for m, js in by_member.items()}
    votes = annotator_votes(by_member, cfg)
    gold = {r.id: r.gold for r in refs if r.gold is not None}
    chosen = combine_of(cfg).name
    per_method = {method: combine(method, votes, cfg, ids) for method in _methods(cfg, len(votes))}
    results, _ = per_method[chosen]
    summary, aggregated = summaries.verdict_report(results, ours, baseline, cfg.repeats)
    ensemble_gold = _ensemble_gold(results, refs, cfg, cfg.seed)
    trust_section = TrustSection(
        bootstrap=trust.bootstrap_settings(cfg.metrics, cfg.seed),
        win_rate=trust.win_rate(results, ours, baseline, cfg.metrics, cfg.seed),
        gold_agreement=None if ensemble_gold is None else GoldAgreement.from_json(ensemble_gold,
                                                                                  "trust.gold_agreement"))
    member_items = {m: aggregated for m, aggregated in _member_results(cfg, refs, by_member).items()}
    section = PairwiseEnsemble(
        combine=chosen, members=tuple(by_member), annotators=tuple(sorted(votes)),
        inter_judge=InterJudge.from_json(inter_judge_agreement(_member_labels(member_items)), "ensemble.inter_judge"),
        inter_annotator=InterJudge.from_json(inter_judge_agreement(votes), "ensemble.inter_annotator"),
        by_combine=MappingProxyType({m: _combine_stats(rs, gold, ours, baseline) for m, (rs, _) in per_method.items()}),
        member_agreement=MappingProxyType({m: _headline(typed) for m, (typed, _) in members.items()}),
        versus_members=VersusMembers.from_json(member_comparison(
            _member_labels(member_items), {r.item_id: r.final_verdict for r in results}, gold),
            "ensemble.versus_members") if gold else None,
        # a method that estimated each annotator's accuracy (Dawid-Skene): its estimates against the truth
        estimates=MappingProxyType({method: dawid_skene_report(fit, votes, gold)
                                    for method, (_, fit) in per_method.items() if fit}))
    # per category and tag, the ensemble's verdict per item, as a single judge's (runner.modes.pairwise.groups)
    stats = statistics.estimates(pairwise.report.MODE, statistics.StatInputs(
        cfg, refs, [j for js in by_member.values() for j in js], results))
    typed = PairwiseReport(summary=summary, aggregated_results=aggregated, trust=trust_section,
                           statistics=stats or None, ensemble=section)
    metrics = {**summaries.flat_metrics(typed.summary, None, {}), **trust.trust_metrics(typed.trust),
               **statistics.metrics(typed.statistics or {}), **ensemble_metrics(section)}
    for m, (_, member_metrics) in members.items():
        member_metrics.update(summaries.numeric(summaries.judge_metrics(by_member[m])))
        metrics.update({f"member/{m}/{k}": v for k, v in member_metrics.items()})
    return typed, metrics, members


def _methods(cfg: RunConfig, n_annotators: int) -> list[str]:
    """Every aggregation the registry offers for the ensemble (for as many annotators), the chosen one first."""
    chosen = combine_of(cfg).name
    specs = REGISTRY.specs(Use.ensemble, combine_kinds(cfg))
    usable = dict.fromkeys(s.name for s in specs if n_annotators >= s.min_voters)
    return [chosen, *[m for m in usable if m != chosen]]


def _member_results(cfg: RunConfig, refs: Sequence[ItemRef], by_member: Mapping[str, Sequence[Judgment]]
                    ) -> dict[str, list[ItemResult]]:
    ids = [r.id for r in refs]
    return {m: aggregate_items(js, ids, cfg.aggregation.name, cfg.aggregation.params) for m, js in by_member.items()}


def _headline(summary: PairwiseReport) -> MemberAgreement:
    ga = summary.trust.gold_agreement
    if ga is None:
        return MemberAgreement(accuracy=None, accuracy_all=None, cohen_kappa=None, n=None)
    return MemberAgreement(accuracy=ga.accuracy, accuracy_all=ga.accuracy_all, cohen_kappa=ga.cohen_kappa, n=ga.n)


def _combine_stats(results: Sequence[ItemResult], gold: Mapping[str, Any], ours: str, baseline: str
                   ) -> CombineStats:
    finals = [r.final_verdict for r in results if r.final_verdict is not None]
    counts = Counter(finals)
    scored = [(r.final_verdict, gold[r.item_id]) for r in results if r.item_id in gold]
    return CombineStats(tie_rate=counts[TIE] / len(finals) if finals else None,
                        ours_win_rate=counts[ours] / len(finals) if finals else None,
                        confidence=MappingProxyType({c: sum(r.confidence == c for r in results) for c in CONFIDENCES}),
                        accuracy_all=sum(p == g for p, g in scored) / len(scored) if scored else None,
                        n_gold=len(scored) if scored else None)
