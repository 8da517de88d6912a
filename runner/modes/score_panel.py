"""An ensemble judge on a pointwise rubric: every member scores every item; the ensemble's score combines theirs.

Each member's repeats are first aggregated as in a single-judge run (``aggregation``: mean, median). The
ensemble's overall score and per-criterion scores per item are then the ``judge.combine`` of the members' (a
score aggregation the registry offers for an ensemble: ``mean``, ``median`` or ``weighted`` mean with
``judge.weights`` or its ``params.weights``), and an item passes when that overall
score reaches the rubric's threshold. The run's report (pass rate per tag and category, correlation with
human scores, checks) is the ensemble's; the ``ensemble`` section adds each member's headline, how the
members agree (pairwise Pearson of their scores, Krippendorff's interval alpha, Fleiss' kappa of their
pass/fail decisions), and what a vote over the members' pass/fail decisions would give instead
(every label aggregation the registry offers an ensemble that needs no weights: ``majority_vote`` and, with
three or more members, ``dawid_skene``, which estimates each member's accuracy on pass/fail from their
agreement alone).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from runner.judging.aggregations import AggregationRef, aggregation_ref
from runner.judging.scoring import OVERALL_DECIMALS, Scoring
from runner.modes.ensemble import (
    LABEL_COMBINERS,
    SCORE_COMBINERS,
    combine_labels,
    combine_scores,
    inter_judge_agreement,
    member_weights,
    vote_methods,
)
from runner.modes.scorecard import SCORED, ItemScore
from runner.modes.sections import (
    Consistency,
    MemberHeadline,
    PassVotes,
    PointwiseEnsemble,
    PointwiseReport,
    ScoreAgreement,
)

PASS, FAIL = "pass", "fail"


def _combined(scores: Mapping[str, float | None], combine: AggregationRef, weights: Mapping[str, float]
              ) -> float | None:
    votes = {member: {"x": score} for member, score in scores.items() if score is not None}
    if not votes:
        return None
    weighted = SCORE_COMBINERS.spec(combine.name).weighted
    by_member = {m: weights.get(m, 1.0) for m in votes} if weighted else None  # the members that scored this item
    params = {k: v for k, v in combine.params.items() if k != "weights"}
    value = combine_scores(votes, combine.name, by_member, **params)["x"]
    return None if value is None else round(value, OVERALL_DECIMALS)


def combine_items(by_member: Mapping[str, Sequence[ItemScore]], scoring: Scoring, method: str | AggregationRef,
                  weights: Mapping[str, float]) -> list[ItemScore]:
    """The ensemble's ItemScore per item: the combined overall and criteria of the members that scored it.

    ``method`` is ``judge.combine`` (a name, ``{name, params}``); ``weights`` member -> weight, the default of its
    ``params.weights``.
    """
    combine = aggregation_ref(method, "judge.combine")
    weights = member_weights(by_member, weights, combine)
    members = list(by_member)
    out = []
    for n, first in enumerate(by_member[members[0]]):
        per_member = {m: by_member[m][n] for m in members}
        scored = {m: s for m, s in per_member.items() if s.status == SCORED}
        if not scored:
            reasons = tuple(f"{m}: {r}" for m, s in per_member.items() for r in s.reasons)
            out.append(ItemScore(first.ref, first.status, reasons=reasons, violations=first.violations,
                                 texts=first.texts))
            continue
        overall = _combined({m: s.overall for m, s in scored.items()}, combine, weights)
        names = list(dict.fromkeys(c for s in scored.values() for c in s.criteria))
        combined = {c: _combined({m: s.criteria.get(c) for m, s in scored.items()}, combine, weights) for c in names}
        criteria = {c: v for c, v in combined.items() if v is not None}  # None: no weighted member scored it
        extras = {"member_scores": {m: s.overall for m, s in per_member.items()},
                  "reasoning": next((s.extras.get("reasoning") for s in scored.values()
                                     if s.extras.get("reasoning")), None)}
        out.append(ItemScore(first.ref, SCORED, overall=overall, criteria=criteria, passed=scoring.passed(overall),
                             reasons=tuple(f"{m}: {r}" for m, s in per_member.items() for r in s.reasons),
                             extras=extras, violations=first.violations, texts=first.texts))
    return out


def _pearson(a: Sequence[float], b: Sequence[float]) -> float | None:
    from scipy import stats as scipy_stats

    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    return float(scipy_stats.pearsonr(a, b).statistic)


def score_agreement(by_member: Mapping[str, Sequence[ItemScore]]) -> dict[str, Any]:
    """How the members' overall scores agree: pairwise Pearson and Krippendorff's interval alpha."""
    import krippendorff

    members = list(by_member)
    table = [[s.overall if s.status == SCORED else None for s in by_member[m]] for m in members]
    pairs = []
    for i in range(len(members)):
        for j in range(i + 1, len(members)):
            both = [(x, y) for x, y in zip(table[i], table[j], strict=True) if x is not None and y is not None]
            pairs.append({"a": members[i], "b": members[j], "n": len(both),
                          "pearson": _pearson([x for x, _ in both], [y for _, y in both]),
                          "mean_abs_diff": float(np.mean([abs(x - y) for x, y in both])) if both else None})
    data = np.array([[np.nan if v is None else v for v in row] for row in table], dtype=float)
    alpha = None
    if data.size and np.count_nonzero(~np.isnan(data).all(axis=0)) > 1 and np.nanstd(data) > 0:
        alpha = float(krippendorff.alpha(reliability_data=data, level_of_measurement="interval"))
    return {"pairwise": pairs, "krippendorff_alpha_interval": alpha}


def pass_votes(by_member: Mapping[str, Sequence[ItemScore]]) -> dict[str, dict[str, str | None]]:
    """Member -> item -> its pass/fail decision (None where it did not score the item)."""
    return {m: {s.ref.id: None if s.passed is None else PASS if s.passed else FAIL for s in scores}
            for m, scores in by_member.items()}


def pass_vote_section(votes: Mapping[str, Mapping[str, str | None]], human: Mapping[str, str]) -> dict[str, Any]:
    """Majority vote and (3+ members) Dawid-Skene over the members' pass/fail decisions, with human agreement.

    ``pass_rate`` is over every item (one no member scored, or without a decision, is not passed), as a run's;
    ``pass_rate_scored`` over the items with a decision."""
    out: dict[str, Any] = {"inter_judge": inter_judge_agreement(votes)}
    total = len({item for member in votes.values() for item in member})
    for method in vote_methods(len(votes)):
        # a class nobody voted still exists
        params: dict[str, Any] = {"labels": [FAIL, PASS]} if LABEL_COMBINERS.spec(method).accepts("labels") else {}
        result = combine_labels(dict(votes), method, **params)
        labels = result.labels
        decided = [label for label in labels.values() if label in (PASS, FAIL)]
        row: dict[str, Any] = {"pass_rate": decided.count(PASS) / total if total else None}
        if decided:
            row["pass_rate_scored"] = decided.count(PASS) / len(decided)
        rated = [(labels.get(k), h) for k, h in human.items() if labels.get(k) is not None]
        if rated:
            row["human_pass_agreement"] = sum(p == h for p, h in rated) / len(rated)
        if result.estimated_accuracy:
            row["estimated_accuracy"] = dict(result.estimated_accuracy)
        out[method] = row
    return out


def member_headline(report: PointwiseReport) -> MemberHeadline:
    """A member's average overall score, pass rate, Pearson correlation with human scores and consistency over its
    repeats."""
    s = report.summary
    human = s.human_correlation
    return MemberHeadline(average_overall=s.average_overall, pass_rate=s.pass_rate,
                          pass_rate_scored=s.pass_rate_scored, scored=s.scored,
                          human_pearson=None if human is None else human.pearson.r,
                          human_within_1_rate=None if human is None else human.within_1_rate,
                          consistency=s.consistency)


def build(reports: Mapping[str, PointwiseReport], by_member: Mapping[str, Sequence[ItemScore]], scoring: Scoring,
          method: str | AggregationRef, weights: Mapping[str, float],
          build_report: Callable[[list[ItemScore]], PointwiseReport]
          ) -> tuple[PointwiseReport, list[ItemScore]]:
    """The ensemble's report (``build_report`` over the combined items) with its ``ensemble`` section.

    Args:
        reports: Member -> its own report (as a single-judge run of it would write).
        by_member: Member -> its ItemScore per item, every member in the same item order.
        scoring: The rubric's scoring (pass threshold).
        method: ``judge.combine``: a score aggregation's name (``mean``, ``median``, ``weighted``) or
            ``{name, params}``.
        weights: Member -> weight (``weighted``), the default of the combine's ``params.weights``.
        build_report: Builds the users' report from ItemScores (the run's settings bound).
    """
    combine = aggregation_ref(method, "judge.combine")
    items = combine_items(by_member, scoring, combine, weights)
    report = build_report(items)
    votes = None
    if scoring.pass_threshold is not None:
        human = {s.ref.id: PASS if s.ref.human_score >= scoring.pass_threshold else FAIL
                 for s in items if s.ref.human_score is not None}
        votes = PassVotes.from_json(pass_vote_section(pass_votes(by_member), human), "ensemble.pass_votes")
    section = PointwiseEnsemble(
        combine=combine.name, members=tuple(by_member),
        member_headline=MappingProxyType({m: member_headline(r) for m, r in reports.items()}),
        score_agreement=ScoreAgreement.from_json(score_agreement(by_member), "ensemble.score_agreement"),
        pass_votes=votes)
    return dataclasses.replace(report, ensemble=section), items


def ensemble_metrics(section: PointwiseEnsemble | Mapping[str, Any]) -> dict[str, float]:
    """MLflow metrics of a pointwise ensemble section (typed or as JSON)."""
    ens = PointwiseEnsemble.of(section, "ensemble")
    raw: dict[str, Any] = {"interjudge/krippendorff_alpha_interval": ens.score_agreement.krippendorff_alpha_interval}
    for member, head in ens.member_headline.items():  # its consistency: member/<m>/consistency/* (its own metrics)
        raw.update({f"member/{member}/headline/{k}": v for k, v in head.to_json().items() if k != "consistency"})
    votes = ens.pass_votes
    if votes is not None:
        raw["interjudge/fleiss_kappa"] = votes.inter_judge.fleiss_kappa
        for method, row in votes.methods.items():
            raw.update({f"ensemble/{method}/pass_rate": row.pass_rate,
                        f"ensemble/{method}/pass_rate_scored": row.pass_rate_scored,
                        f"ensemble/{method}/human_pass_agreement": row.human_pass_agreement})
            for member, acc in (row.estimated_accuracy or {}).items():
                raw[f"dawid_skene/{member}/estimated_accuracy"] = acc
    return {k: float(v) for k, v in raw.items() if v is not None}


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value * 100:.1f}%" if pct else f"{value:.2f}"


def consistency_line(c: Consistency) -> str:
    """``consistency over 3 repeats (std dev sample (n-1)): mean std 0.53, above 0.5: 25.0%``: a single judge's line,
    and each member's of an ensemble."""
    kind = f" (std dev {c.std})" if c.std else ""
    return (f"consistency over {c.repeats} repeats{kind}: mean std {_fmt(c.mean_std)}, "
            f"above {c.threshold:g}: {_fmt(c.share_above_threshold, True)}")


def console_lines(section: PointwiseEnsemble | Mapping[str, Any]) -> list[str]:
    """End-of-run lines of a pointwise ensemble (typed or as JSON): each member's headline, how they agree,
    pass/fail votes."""
    ens = PointwiseEnsemble.of(section, "ensemble")
    lines = [f"ensemble of {', '.join(ens.members)}: combine={ens.combine}; members' scores: "
             f"Krippendorff alpha (interval) {_fmt(ens.score_agreement.krippendorff_alpha_interval)}"]
    for member, head in ens.member_headline.items():
        human = f", Pearson with humans {_fmt(head.human_pearson)}" if head.human_pearson is not None else ""
        lines.append(f"  member {member}: mean {_fmt(head.average_overall)}, pass rate "
                     f"{_fmt(head.pass_rate, True)}{human}")
        if head.consistency is not None:  # each member judged every item `repeats` times
            lines.append(f"  member {member}: {consistency_line(head.consistency)}")
    for method, row in (ens.pass_votes.methods if ens.pass_votes is not None else {}).items():
        human_agreement = row.human_pass_agreement
        lines.append(f"  {method} over pass/fail: pass rate {_fmt(row.pass_rate, True)}"
                     + (f", agrees with human pass/fail {_fmt(human_agreement, True)}"
                        if human_agreement is not None else ""))
    return lines
