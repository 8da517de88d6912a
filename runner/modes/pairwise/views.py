"""What a pairwise run shows: its console summary lines and its HTML report's views (as data, see
runner.modes.base.View), from its typed summary (runner.modes.sections.PairwiseReport); an ensemble's section adds
its aggregations and members."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from runner.inputs.datasets import ItemRef
from runner.modes import statistics, trust
from runner.modes.drilldown import ItemOutcome
from runner.modes.sections import GoldAccuracy, PairwiseEnsemble, PairwiseReport, VerdictSummary
from runner.modes.summary import PARSE_FAILURES
from runner.modes.view import View, cell


def _pct(value: float | None) -> str:
    """Format a fraction as a percentage with one decimal, or ``n/a``."""
    return "n/a" if value is None else f"{value * 100:.1f}%"


def gold_line(gold: GoldAccuracy | Mapping[str, Any]) -> str:
    """One console line with the gold accuracies (LLMBar's, per order: ``accuracy/*``, summary.json ``gold``, an
    unscored verdict wrong). "accuracy" names these alone; the agreement with gold (``agreement/*``, which follows
    ``metrics.unscored_as``) has its own line and name (runner.modes.trust.console_lines)."""
    g = GoldAccuracy.of(gold, "gold")
    if g.accuracy_mean is None:  # a single order was judged
        return f"accuracy {_pct(g.accuracy_overall)} ({g.n_pairs} pairs, one order; an unscored verdict wrong)"
    return (
        f"accuracy AB {_pct(g.accuracy_ab)} / BA {_pct(g.accuracy_ba)} / "
        f"mean {_pct(g.accuracy_mean)} / both {_pct(g.correct_both)} / "
        f"positional agreement {_pct(g.positional_agreement)}"
    )


def headline_lines(summary: VerdictSummary | Mapping[str, Any], gold: GoldAccuracy | Mapping[str, Any] | None,
                   judge: Mapping[str, Any]) -> list[str]:
    """The summary's headline: items, verdicts, confidence, wins shares, gold accuracy, calls, tokens and cost.

    ``summary`` is the ``summary`` section, or a summary document (runner.modes.summary.build_summary's).
    """
    s = summary if isinstance(summary, VerdictSummary) else VerdictSummary.from_json(summary["summary"], "summary")
    dist = ", ".join(f"{label} {n}" for label, n in s.final_verdict_distribution.items())
    conf = ", ".join(f"{name} {n}" for name, n in s.confidence_distribution.items())
    failures = ", ".join(f"{k[len(PARSE_FAILURES):]} {v}" for k, v in judge.items() if k.startswith(PARSE_FAILURES))
    lines = [
        f"items {s.total_subsets}, successful {s.successful_evaluations}, failed {len(s.failed_items)}",
        f"verdicts: {dist}",
        f"confidence: {conf}",
        f"wins share ours {_pct(s.ours_win_rate)} / baseline {_pct(s.baseline_win_rate)} / "
        f"tie {_pct(s.tie_rate)}; unanimous {_pct(s.unanimous_agreement_rate)}",
    ]
    if gold is not None:
        lines.append(gold_line(gold))
    return lines + [
        f"judge calls {judge['judge/calls']}: unscored {judge['judge/unscored']} "
        f"({_pct(judge['judge/parse_failure_rate'])}), errors {judge['judge/errors']}"
        + (f"; parse failures: {failures}" if failures else ""),
        f"tokens {judge['tokens/prompt']} + {judge['tokens/completion']} = {judge['tokens/total']}, "
        f"cost ${judge['cost/usd_total']:.4f} ({judge['cost/unknown_calls']} calls unpriced)",
        f"calls made {judge['calls/made']} (failed {judge['calls/failed']}), cache hits {judge['calls/cache_hits']} "
        f"(saved ${judge['cost/usd_saved']:.4f}), resumed {judge['calls/resumed']}, "
        f"retries {judge['calls/retries']}, 429s {judge['calls/rate_limited']}",
    ]


def console_lines(rep: PairwiseReport, gold: GoldAccuracy | None, judge: Mapping[str, Any],
                  ensemble_lines: list[str] | None = None) -> list[str]:
    """The whole console summary: headline, trust, the ensemble's lines (else the bias line), statistics."""
    if ensemble_lines is not None:
        extra = ensemble_lines
    else:
        assert rep.bias is not None, "a single judge's pairwise summary has a bias section"
        extra = trust.bias_lines(rep.bias)
    return [*headline_lines(rep.summary, gold, judge), *trust.console_lines(rep.trust), *extra,
            *statistics.console_lines(rep.statistics or {})]


def views(rep: PairwiseReport) -> list[View]:
    """The verdict distribution (Wilson CIs, the win rate's CI), the confusion matrix against gold, statistics."""
    s, win_rate = rep.summary, rep.trust.win_rate
    distribution = s.final_verdict_distribution
    n = s.total_subsets or sum(distribution.values())
    data = {"distribution": dict(distribution), "n": n, "win_rate": win_rate.to_json() if win_rate else None}
    out = [View("Verdict distribution", "verdicts", data)] if distribution else []
    gold = rep.trust.gold_agreement
    if gold is not None and gold.confusion.matrix:
        out.append(View("Agreement with gold labels", "confusion",
                        {"labels": list(gold.confusion.labels), "matrix": [list(r) for r in gold.confusion.matrix]},
                        notes=("rows: gold label; columns: the judge's verdict (each order counted)",)))
    return out + statistics.views(rep.statistics or {})


def ensemble_views(section: PairwiseEnsemble) -> list[View]:
    """An ensemble run: every aggregation and every member against gold, Dawid-Skene's estimates."""
    by_combine, members = section.by_combine, section.member_agreement
    agreement: dict[str, float | None] = {f"ensemble: {m}": s.accuracy_all for m, s in by_combine.items()
                                          if s.accuracy_all is not None}
    agreement.update({f"member: {m}": h.accuracy_all for m, h in members.items()})
    ds = section.estimates.get("dawid_skene")
    estimated = ds.estimated_accuracy if ds is not None else {}
    truth = (ds.true_accuracy if ds is not None else None) or {}
    out = [View("Ensemble aggregations", columns=("aggregation", "agreement with gold", "tie rate", "ours wins share"),
                rows=tuple((m, s.accuracy_all, s.tie_rate, s.ours_win_rate) for m, s in by_combine.items()),
                notes=(f"headline aggregation: {section.combine}; inter-judge Fleiss kappa "
                       f"{cell(section.inter_judge.fleiss_kappa)}",)),
           View("Ensemble members", columns=("member", "agreement (per judgment)", "Dawid-Skene estimate",
                                             "true accuracy (of votes)"),
                rows=tuple((m, h.accuracy_all, estimated.get(m), truth.get(m)) for m, h in members.items()),
                notes=(f"Dawid-Skene: {ds.caveat}",) if ds is not None and ds.caveat else ())]
    if any(v is not None for v in agreement.values()):
        out.append(View("Agreement with gold: ensemble vs members", "bars",
                        {"values": agreement, "xlabel": "agreement", "limits": (0, 1)}))
    return out


def item_outcomes(rep: PairwiseReport, refs: Sequence[ItemRef]) -> dict[str, ItemOutcome]:
    """Each item's final verdict with its confidence; ``wrong`` where it differs from the gold label (an item with
    no valid vote is not wrong: the drill-down flags its calls as unscored)."""
    out = {}
    for ref in refs:
        agg = rep.aggregated_results.get(ref.id)
        if agg is None or agg.final_verdict is None:
            out[ref.id] = ItemOutcome("no valid vote", frozenset({"unscored"}), ("no call gave a readable verdict",))
            continue
        wrong = ref.gold is not None and agg.final_verdict != ref.gold
        order = rep.summary.final_verdict_distribution  # ours, baseline, tie
        notes = () if agg.posterior is None else (posterior_line(agg.posterior, order),)
        out[ref.id] = ItemOutcome(f"{agg.final_verdict} ({agg.confidence})", frozenset({"wrong"} if wrong else ()),
                                  notes, agg.final_verdict)
    return out


def posterior_line(posterior: Mapping[str, float], order: Iterable[str] = ()) -> str:
    """``posterior: ours 0.93, baseline 0.05, tie 0.02``: the labels in ``order`` (ours, baseline, tie) first."""
    first = [label for label in order if label in posterior]
    labels = [*first, *(label for label in posterior if label not in first)]
    return "posterior: " + ", ".join(f"{label} {posterior[label]:.2f}" for label in labels)
