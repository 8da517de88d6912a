"""What a pairwise ensemble's section (runner.modes.panel) shows: its MLflow metrics and its end-of-run console
lines, read from the typed section (runner.modes.sections.PairwiseEnsemble)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.modes.sections import DawidSkeneReport, PairwiseEnsemble


def ensemble_metrics(section: PairwiseEnsemble | Mapping[str, Any]) -> dict[str, float]:
    """MLflow metrics of the ensemble section (typed or as JSON): every aggregation, inter-judge agreement,
    Dawid-Skene's estimates."""
    ens = PairwiseEnsemble.of(section, "ensemble")
    raw: dict[str, Any] = {}
    for method, stats in ens.by_combine.items():
        raw.update({f"ensemble/{method}/accuracy_all": stats.accuracy_all,
                    f"ensemble/{method}/tie_rate": stats.tie_rate,
                    f"ensemble/{method}/ours_wins_share": stats.ours_win_rate})
    raw.update({"interjudge/fleiss_kappa": ens.inter_judge.fleiss_kappa,
                "interjudge/mean_pairwise_kappa": ens.inter_judge.mean_pairwise_kappa})
    vm = ens.versus_members
    if vm is not None:
        raw["ensemble/minus_best_member"] = vm.ensemble_minus_best_member
        raw["ensemble/minus_best_member_ties_half"] = vm.ensemble_minus_best_member_ties_half
        raw.update({f"member/{m}/item_accuracy": s.accuracy_all for m, s in vm.members.items()})
    for method, ds in _estimates(ens):
        raw.update({f"{method}/{m}/estimated_accuracy": v for m, v in ds.estimated_accuracy.items()})
        raw.update({f"{method}/{m}/true_accuracy": v for m, v in (ds.true_accuracy or {}).items()})
        for m, bounds in (ds.intervals.accuracy if ds.intervals else {}).items():
            if bounds is not None:
                raw.update({f"{method}/{m}/estimated_accuracy_ci_low": bounds[0],
                            f"{method}/{m}/estimated_accuracy_ci_high": bounds[1]})
    return {k: float(v) for k, v in raw.items() if v is not None}


def _estimates(ens: PairwiseEnsemble) -> list[tuple[str, DawidSkeneReport]]:
    """(method, its report) for each method that estimated the members' accuracy (Dawid-Skene), in
    ``by_combine`` order."""
    return [(m, ens.estimates[m]) for m in ens.by_combine if m in ens.estimates]


def _bounds(bounds: tuple[float, ...] | None) -> str:
    return "" if bounds is None else f" [{bounds[0] * 100:.1f}, {bounds[1] * 100:.1f}]"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def console_lines(section: PairwiseEnsemble | Mapping[str, Any]) -> list[str]:
    """End-of-run lines (from the section, typed or as JSON): every aggregation against gold, each member's
    agreement, Dawid-Skene's estimates."""
    ens = PairwiseEnsemble.of(section, "ensemble")
    lines = [f"ensemble of {', '.join(ens.members)}: combine={ens.combine}; inter-judge Fleiss "
             f"kappa {ens.inter_judge.fleiss_kappa or float('nan'):.3f}"]
    for method, stats in ens.by_combine.items():
        if stats.accuracy_all is not None:
            lines.append(f"  {method:<13} agreement {_pct(stats.accuracy_all)}  ties {_pct(stats.tie_rate)}")
    for member, headline in ens.member_agreement.items():
        if headline.accuracy_all is not None:
            lines.append(f"  member {member}: agreement {_pct(headline.accuracy_all)} (per judgment)")
    for method, ds in _estimates(ens):
        truth = ds.true_accuracy or {}
        bounds = ds.intervals.accuracy if ds.intervals else {}
        lines += [f"  {method} {member}: estimated accuracy {_pct(est)}" + _bounds(bounds.get(member))
                  + (f", true {_pct(truth[member])}" if truth.get(member) is not None else "")
                  for member, est in ds.estimated_accuracy.items()]
        if ds.caveat:
            lines.append(f"  {method}: {ds.caveat}")
    return lines
