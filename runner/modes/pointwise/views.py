"""What a pointwise run shows: its console summary lines and its HTML report's views (as data, see
runner.modes.base.View); an ensemble's section adds each member's headline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.modes import statistics
from runner.modes.base import View, cell


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value * 100:.1f}%" if pct else f"{value:.2f}"


def console_lines(rep: Mapping[str, Any], judge: Mapping[str, Any]) -> list[str]:
    """A compact pointwise summary: scores, pass rate, tags, consistency, human agreement, checks, calls."""
    s = rep["summary"]
    crit = ", ".join(f"{name} {_fmt(v)}" for name, v in s["average_by_criterion"].items())
    lines = [f"items {s['total']}: scored {s['scored']}, unscored {s['unscored']}, errors {s['errors']}",
             f"average overall {_fmt(s['average_overall'])} on [{s['scale'][0]:g}, {s['scale'][1]:g}]; {crit}"]
    if s["pass_rate"] is not None:
        lines.append(f"passed {s['passed']}, failed {s['failed']}: pass rate {_fmt(s['pass_rate'], True)} "
                     f"(threshold {s['pass_threshold']:g})")
    for tag, sec in rep["by_tag"].items():
        lines.append(f"  tag {tag}: {sec['scored']} scored, pass rate {_fmt(sec['pass_rate'], True)}, "
                     f"mean {_fmt(sec['average_overall'])}")
    if "consistency" in s:
        c = s["consistency"]
        lines.append(f"consistency over {c['repeats']} repeats: mean std {_fmt(c['mean_std'])}, "
                     f"above {c['threshold']:g}: {_fmt(c['share_above_threshold'], True)}")
    if "human_correlation" in s:
        h = s["human_correlation"]
        lines.append(f"human agreement (n={h['n']}): pearson {_fmt(h['pearson']['r'])}, spearman "
                     f"{_fmt(h['spearman']['rho'])}, within +-{h['tolerance']:g} {_fmt(h['within_1_rate'], True)}")
    for name, chk in (s.get("checks") or {}).items():
        lines.append(f"check {name}: {chk['items_with_violations']} of {chk['items_checked']} items "
                     f"({_fmt(chk['violation_rate'], True)}; target < {_fmt(chk['max_rate'], True)})")
    lines.append(f"judge calls {judge['judge/calls']}: unscored {judge['judge/unscored']} "
                 f"({_fmt(judge['judge/parse_failure_rate'], True)}), errors {judge['judge/errors']}, "
                 f"cost ${judge['cost/usd_total']:.4f}")
    return lines + statistics.console_lines(rep.get("statistics") or {})


def _family_views(summary: Mapping[str, Any], scale: Any) -> list[View]:
    out = []
    for family, noun in (("by_tag", "tag"), ("by_category", "category")):
        sections = summary.get(family) or {}
        if not sections:
            continue
        means = {name: sec.get("average_overall") for name, sec in sections.items()}
        out.append(View(f"Mean score by {noun}", "bars", {"values": means, "xlabel": "mean overall score",
                                                          "limits": scale}))
        rates = {name: sec.get("pass_rate") for name, sec in sections.items()}
        if any(v is not None for v in rates.values()):
            out.append(View(f"Pass rate by {noun}", "bars", {"values": rates, "xlabel": "pass rate",
                                                             "limits": (0, 1)}))
    return out


def views(summary: Mapping[str, Any]) -> list[View]:
    """The score histogram, mean score by criterion, by tag and by category, statistics."""
    s = summary.get("summary") or {}
    scale = s.get("scale")
    details = summary.get("detailed_results") or []
    scores = [float(d["overall"]) for d in details if d.get("status") == "scored" and d.get("overall") is not None]
    out = [View("Score distribution", "histogram", {"scores": scores, "scale": scale},
                notes=(f"{len(scores)} scored of {len(details)} items; unscored items are not drawn",))]
    if s.get("average_by_criterion"):
        out.append(View("Mean score by criterion", "bars", {"values": dict(s["average_by_criterion"]),
                                                            "xlabel": "mean score", "limits": scale}))
    return out + _family_views(summary, scale) + statistics.views(summary.get("statistics") or {})


def ensemble_views(section: Mapping[str, Any]) -> list[View]:
    """A pointwise ensemble: each member's headline and how far the members' scores agree."""
    heads = section.get("member_headline") or {}
    alpha = (section.get("score_agreement") or {}).get("krippendorff_alpha_interval")
    return [View("Ensemble members", columns=("member", "mean score", "pass rate", "Pearson with humans"),
                 rows=tuple((m, *(h.get(k) for k in ("average_overall", "pass_rate", "human_pearson")))
                            for m, h in heads.items()),
                 notes=(f"combine: {section.get('combine')}; Krippendorff's alpha (interval) of the members' "
                        f"scores {cell(alpha)}",))]
