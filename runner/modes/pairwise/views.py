"""What a pairwise run shows: its console summary lines and its HTML report's views (as data, see
runner.modes.base.View), from its summary document; an ensemble's section adds its aggregations and members."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.modes import statistics, trust
from runner.modes.base import View, cell
from runner.modes.summary import PARSE_FAILURES


def _pct(value: float | None) -> str:
    """Format a fraction as a percentage with one decimal, or ``n/a``."""
    return "n/a" if value is None else f"{value * 100:.1f}%"


def gold_line(gold: Mapping[str, Any]) -> str:
    """One console line with the gold accuracies."""
    if gold["accuracy_mean"] is None:  # a single order was judged
        return f"accuracy {_pct(gold['accuracy_overall'])} ({gold['n_pairs']} pairs, one order)"
    return (
        f"accuracy AB {_pct(gold['accuracy_ab'])} / BA {_pct(gold['accuracy_ba'])} / "
        f"mean {_pct(gold['accuracy_mean'])} / both {_pct(gold['correct_both'])} / "
        f"positional agreement {_pct(gold['positional_agreement'])}"
    )


def headline_lines(summary: Mapping[str, Any], gold: Mapping[str, Any] | None, judge: Mapping[str, Any]) -> list[str]:
    """The summary's headline: items, verdicts, confidence, win rates, gold accuracy, calls, tokens and cost."""
    s = summary["summary"]
    dist = ", ".join(f"{label} {n}" for label, n in s["final_verdict_distribution"].items())
    conf = ", ".join(f"{name} {n}" for name, n in s["confidence_distribution"].items())
    failures = ", ".join(f"{k[len(PARSE_FAILURES):]} {v}" for k, v in judge.items() if k.startswith(PARSE_FAILURES))
    lines = [
        f"items {s['total_subsets']}, successful {s['successful_evaluations']}, failed {len(s['failed_items'])}",
        f"verdicts: {dist}",
        f"confidence: {conf}",
        f"win rate ours {_pct(s['ours_win_rate'])} / baseline {_pct(s['baseline_win_rate'])} / "
        f"tie {_pct(s['tie_rate'])}; unanimous {_pct(s['unanimous_agreement_rate'])}",
    ]
    if gold is not None:
        lines.append(gold_line(gold))
    return lines + [
        f"judge calls {judge['judge/calls']}: unscored {judge['judge/unscored']} "
        f"({_pct(judge['judge/parse_failure_rate'])}), errors {judge['judge/errors']}"
        + (f"; parse failures: {failures}" if failures else ""),
        f"tokens {judge['tokens/prompt']} + {judge['tokens/completion']} = {judge['tokens/total']}, "
        f"cost ${judge['cost/usd_total']:.4f} ({judge['cost/unknown_calls']} calls unpriced)",
        f"calls made {judge['calls/made']}, cache hits {judge['calls/cache_hits']} "
        f"(saved ${judge['cost/usd_saved']:.4f}), resumed {judge['calls/resumed']}, "
        f"retries {judge['calls/retries']}, 429s {judge['calls/rate_limited']}",
    ]


def console_lines(summary: Mapping[str, Any], gold: Mapping[str, Any] | None, judge: Mapping[str, Any],
                  ensemble_lines: list[str] | None = None) -> list[str]:
    """The whole console summary: headline, trust, the ensemble's lines (else the bias line), statistics."""
    extra = ensemble_lines if ensemble_lines is not None else trust.bias_lines(dict(summary["bias"]))
    return [*headline_lines(summary, gold, judge), *trust.console_lines(dict(summary["trust"])), *extra,
            *statistics.console_lines(summary.get("statistics") or {})]


def views(summary: Mapping[str, Any]) -> list[View]:
    """The verdict distribution (Wilson CIs, the win rate's CI), the confusion matrix against gold, statistics."""
    s, trust_section = summary.get("summary") or {}, summary.get("trust") or {}
    distribution = s.get("final_verdict_distribution") or {}
    n = s.get("total_subsets") or sum(distribution.values())
    data = {"distribution": dict(distribution), "n": n, "win_rate": trust_section.get("win_rate")}
    out = [View("Verdict distribution", "verdicts", data)] if distribution else []
    confusion = (trust_section.get("gold_agreement") or {}).get("confusion") or {}
    if confusion.get("matrix"):
        out.append(View("Agreement with gold labels", "confusion",
                        {"labels": confusion["labels"], "matrix": confusion["matrix"]},
                        notes=("rows: gold label; columns: the judge's verdict (each order counted)",)))
    return out + statistics.views(summary.get("statistics") or {})


def ensemble_views(section: Mapping[str, Any]) -> list[View]:
    """An ensemble run: every aggregation and every member against gold, Dawid-Skene's estimates."""
    by_combine = section.get("by_combine") or {}
    agreement = {f"ensemble: {m}": s.get("accuracy_all") for m, s in by_combine.items() if "accuracy_all" in s}
    members = section.get("member_agreement") or {}
    agreement.update({f"member: {m}": h.get("accuracy_all") for m, h in members.items()})
    ds = section.get("dawid_skene") or {}
    estimated, truth = ds.get("estimated_accuracy") or {}, ds.get("true_accuracy") or {}
    out = [View("Ensemble aggregations", columns=("aggregation", "agreement with gold", "tie rate", "ours win rate"),
                rows=tuple((m, s.get("accuracy_all"), s.get("tie_rate"), s.get("ours_win_rate"))
                           for m, s in by_combine.items()),
                notes=(f"headline aggregation: {section.get('combine')}; inter-judge Fleiss kappa "
                       f"{cell((section.get('inter_judge') or {}).get('fleiss_kappa'))}",)),
           View("Ensemble members", columns=("member", "agreement (per judgment)", "Dawid-Skene estimate",
                                             "true accuracy (of votes)"),
                rows=tuple((m, h.get("accuracy_all"), estimated.get(m), truth.get(m)) for m, h in members.items()))]
    if any(v is not None for v in agreement.values()):
        out.append(View("Agreement with gold: ensemble vs members", "bars",
                        {"values": agreement, "xlabel": "agreement", "limits": (0, 1)}))
    return out
