"""What a pointwise run shows: its console summary lines and its HTML report's views (as data, see
runner.modes.base.View), from its typed report (runner.modes.sections.PointwiseReport); an ensemble's section adds
each member's headline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runner.modes import score_panel, statistics
from runner.modes.drilldown import ItemOutcome
from runner.modes.sections import DetailedResult, FailedExample, PointwiseEnsemble, PointwiseReport, ScoreSection
from runner.modes.view import View, cell


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value * 100:.1f}%" if pct else f"{value:.2f}"


def console_lines(rep: PointwiseReport, judge: Mapping[str, Any]) -> list[str]:
    """A compact pointwise summary: scores, pass rate, tags, consistency, human agreement, checks, calls."""
    s = rep.summary
    crit = ", ".join(f"{name} {_fmt(v)}" for name, v in s.average_by_criterion.items())
    lines = [f"items {s.total}: scored {s.scored}, unscored {s.unscored}, errors {s.errors}",
             f"average overall {_fmt(s.average_overall)} on [{s.scale[0]:g}, {s.scale[1]:g}]; {crit}"]
    if s.pass_rate is not None:
        lines.append(f"{_pass_counts(s)}: pass rate {_fmt(s.pass_rate, True)} (threshold {s.pass_threshold:g}; "
                     f"of the scored items only: {_fmt(s.pass_rate_scored, True)})")
    lines += _failed_lines(s.failed_examples)
    for tag, sec in rep.by_tag.items():
        lines.append(f"  tag {tag}: {sec.scored} of {sec.total} scored, pass rate {_fmt(sec.pass_rate, True)}, "
                     f"mean {_fmt(sec.average_overall)}")
    if s.consistency is not None:
        lines.append(score_panel.consistency_line(s.consistency))
    if s.human_correlation is not None:
        h = s.human_correlation
        lines.append(f"human agreement (n={h.n}): pearson {_fmt(h.pearson.r)}, spearman "
                     f"{_fmt(h.spearman.rho)}, within +-{h.tolerance:g} {_fmt(h.within_1_rate, True)}")
    for name, chk in (s.checks or {}).items():
        lines.append(f"check {name}: {chk.items_with_violations} of {chk.items_checked} items "
                     f"({_fmt(chk.violation_rate, True)}; target < {_fmt(chk.max_rate, True)})")
    lines.append(f"judge calls {judge['judge/calls']}: unscored {judge['judge/unscored']} "
                 f"({_fmt(judge['judge/parse_failure_rate'], True)}), errors {judge['judge/errors']}, "
                 f"retries {judge['calls/retries']}, "
                 f"cost ${judge['cost/usd_total']:.4f}")
    return lines + statistics.console_lines(rep.statistics or {})


def _pass_counts(s: ScoreSection) -> str:
    """``passed 1, failed 0, not scored 1 of 2 items``: the pass rate's numerator and denominator."""
    passed, failed = s.passed or 0, s.failed or 0
    return f"passed {passed}, failed {failed}, not scored {s.total - passed - failed} of {s.total} items"


CONSOLE_FAILED = 10  # failed examples listed on the console (all of them are in summary.json)
CONSOLE_TEXT = 80  # characters of each text shown on the console (whole in summary.json)


def _clip(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= CONSOLE_TEXT else flat[:CONSOLE_TEXT - 3] + "..."


def _failed_lines(failed: Sequence[FailedExample]) -> list[str]:
    """Each failed example (the first CONSOLE_FAILED): its score, reasoning and texts, clipped to one line each."""
    lines = []
    for f in failed[:CONSOLE_FAILED]:
        overall = "n/a" if f.overall is None else f"{f.overall:.2f}"
        lines.append(f"  failed {f.id} ({overall}): {_clip(f.reasoning)}")
        lines += [f"    {name}: {_clip(text)}" for name, text in
                  (("input", f.input), ("expected", f.expected_output), ("actual", f.output)) if text is not None]
    if len(failed) > CONSOLE_FAILED:
        lines.append(f"  ... and {len(failed) - CONSOLE_FAILED} more failed examples (summary.json: "
                     "summary.failed_examples)")
    return lines


def _family_views(rep: PointwiseReport, scale: Sequence[float] | None) -> list[View]:
    out = []
    families: tuple[tuple[Mapping[str, ScoreSection], str], ...] = ((rep.by_tag, "tag"), (rep.by_category, "category"))
    for sections, noun in families:
        if not sections:
            continue
        means = {name: sec.average_overall for name, sec in sections.items()}
        out.append(View(f"Mean score by {noun}", "bars", {"values": means, "xlabel": "mean overall score",
                                                          "limits": scale}))
        rates = {name: sec.pass_rate for name, sec in sections.items()}
        if any(v is not None for v in rates.values()):
            out.append(View(f"Pass rate by {noun}", "bars", {"values": rates, "xlabel": "pass rate (all items)",
                                                             "limits": (0, 1)}))
    return out


def views(rep: PointwiseReport) -> list[View]:
    """The score histogram, mean score by criterion, by tag and by category, statistics."""
    s = rep.summary
    scale = list(s.scale) if s.scale else None  # None: a partial document (read leniently) without a scale
    details = rep.detailed_results
    scores = [float(d.overall) for d in details if d.status == "scored" and d.overall is not None]
    out = [View("Score distribution", "histogram", {"scores": scores, "scale": scale},
                notes=(f"{len(scores)} scored of {len(details)} items; unscored items are not drawn",))]
    if s.average_by_criterion:
        out.append(View("Mean score by criterion", "bars", {"values": dict(s.average_by_criterion),
                                                            "xlabel": "mean score", "limits": scale}))
    return out + _family_views(rep, scale) + statistics.views(rep.statistics or {})


def ensemble_views(section: PointwiseEnsemble) -> list[View]:
    """A pointwise ensemble: each member's headline and how far the members' scores agree."""
    alpha = section.score_agreement.krippendorff_alpha_interval
    return [View("Ensemble members", columns=("member", "mean score", "pass rate", "Pearson with humans"),
                 rows=tuple((m, h.average_overall, h.pass_rate, h.human_pearson)
                            for m, h in section.member_headline.items()),
                 notes=(f"combine: {section.combine}; Krippendorff's alpha (interval) of the members' "
                        f"scores {cell(alpha)}",))]


def _outcome(d: DetailedResult, tolerance: float | None, spread: float | None) -> ItemOutcome:
    if d.status != "scored" or d.overall is None:
        return ItemOutcome(d.status, frozenset({"unscored"}), d.unscored_reasons)
    flags, reasons = set(), []
    if d.passed is False:
        flags.add("failed")
        reasons.append("below the pass threshold")
    for check, found in d.violations.items():
        if found:
            flags.add("failed")
            reasons.append(f"check {check}: " + "; ".join(found))
    if tolerance is not None and d.human_score is not None and abs(d.overall - d.human_score) > tolerance:
        flags.add("wrong")
        reasons.append(f"{abs(d.overall - d.human_score):.3g} from the human score (tolerance {tolerance:g})")
    if spread is not None and d.std is not None and d.std > spread:
        flags.add("flip")
        reasons.append(f"score std {d.std:.3g} across repeats (threshold {spread:g})")
    verdict = "" if d.passed is None else (" pass" if d.passed else " fail")
    return ItemOutcome(f"{d.overall:.3g}{verdict}", frozenset(flags), tuple(reasons),
                       verdict.strip() or f"{d.overall:.3g}")


def item_outcomes(rep: PointwiseReport) -> dict[str, ItemOutcome]:
    """Each item's overall score and pass/fail; ``failed`` below the pass threshold or with a check's violation,
    ``wrong`` farther from the human score than the agreement's tolerance, ``flip`` (inconsistent) when its score
    spreads across repeats above the consistency threshold, ``unscored`` with the judge's reasons."""
    s = rep.summary
    tolerance = s.human_correlation.tolerance if s.human_correlation is not None else None
    spread = s.consistency.threshold if s.consistency is not None else None
    return {d.id: _outcome(d, tolerance, spread) for d in rep.detailed_results}
