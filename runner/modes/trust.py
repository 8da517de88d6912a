"""How far to trust a pairwise run: agreement with gold labels, the win rate with ties and its
uncertainty, each headline number with a confidence interval over items (a seeded bootstrap that resamples
items, or a proportion's Wilson / Clopper-Pearson interval on the items' effective number).

Computed from the same final judgments the summary uses (a synthesis round replaces the first round).
An unscored verdict is never a vote; for agreement it counts as wrong (``metrics.unscored_as: wrong``)
or, to reproduce papers that map unreadable output to a tie (PandaLM), as a tie (``unscored_as: tie``).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from runner.core.choices import UnscoredAs
from runner.core.run_settings import MetricsConfig
from runner.core.types import TIE, ItemResult, Judgment, Status
from runner.inputs.datasets import ItemRef
from runner.judging.aggregation import final_judgments
from runner.modes import bias
from runner.modes.sections import (
    BiasReport,
    Bootstrap,
    BothOrders,
    GoldAgreement,
    HumanCeiling,
    Interval,
    TrustSection,
    WinRate,
)
from runner.stats import agreement, clusters, coefficients, inter_rater, proportions, uncertainty


def bootstrap_settings(cfg: MetricsConfig, seed: int) -> Bootstrap:
    """The bootstrap's level, resample count and seed, recorded beside the intervals they produced."""
    return Bootstrap(level=cfg.ci_level, resamples=cfg.ci_resamples, seed=seed)


def win_rate(results: Sequence[ItemResult], ours: str, baseline: str, cfg: MetricsConfig, seed: int
             ) -> WinRate | None:
    """Ours' win rate with ties as half a win (AlpacaEval's), over items with a final verdict.

    Returns:
        The record with ``standard_error`` = sample std / sqrt(n) of the per-item scores (1, 0, 0.5), or None when
        no item has a verdict.
    """
    scores = [1.0 if r.final_verdict == ours else 0.0 if r.final_verdict == baseline else 0.5
              for r in results if r.final_verdict is not None]
    if not scores:
        return None
    se = statistics.stdev(scores) / math.sqrt(len(scores)) if len(scores) > 1 else None
    return WinRate(n=len(scores), wins=scores.count(1.0), losses=scores.count(0.0), ties=scores.count(0.5),
                   rate=statistics.fmean(scores), standard_error=se, ci=Interval.from_json(uncertainty.bootstrap_ci(
                       scores, "mean", cfg.ci_level, cfg.ci_resamples, seed, unit="item"), "trust.win_rate.ci"))


def gold_agreement(refs: Sequence[ItemRef], judgments: Sequence[Judgment], cfg: MetricsConfig, seed: int
                   ) -> dict[str, Any] | None:
    """Agreement of every final judgment with the item's gold label (accuracy, Cohen's kappa, macro-F1,
    Krippendorff's alpha, confusion matrix) with CIs on accuracy and kappa over items; None without gold."""
    rows, items = gold_rows(refs, judgments)
    return label_rows_agreement(rows, cfg, seed, items) if rows else None


def gold_rows(refs: Sequence[ItemRef], judgments: Sequence[Judgment]
              ) -> tuple[list[tuple[str | None, str]], list[str]]:
    """The (winner or None if unscored, gold) row of every final judgment of a gold-labelled item, and its item:
    the rows ``agreement/accuracy_all`` counts (also per category and per tag: runner.modes.pairwise.groups)."""
    gold = {r.id: r.gold for r in refs if r.gold is not None}
    finals = [j for j in final_judgments(judgments) if j.item_id in gold]
    return ([(j.winner if j.status is Status.SCORED else None, gold[j.item_id]) for j in finals],
            [j.item_id for j in finals])


def correct_rows(rows: Sequence[tuple[str | None, str]], unscored_as: UnscoredAs) -> list[float]:
    """1.0 where a row's prediction is its gold label, else 0.0; an unscored row is wrong, or a tie with
    ``unscored_as=tie`` (PandaLM's convention)."""
    if unscored_as is UnscoredAs.tie:
        return [float((TIE if pred is None else pred) == g) for pred, g in rows]
    return [float(pred == g) for pred, g in rows]


def label_rows_agreement(rows: Sequence[tuple[str | None, str]], cfg: MetricsConfig, seed: int,
                         items: Sequence[str] | None = None) -> dict[str, Any]:
    """Agreement of (predicted or None, gold) rows: accuracy, kappa, macro-F1, alpha, confusion, and CIs.

    The item is the unit: ``items`` names each row's item (its orders and repeats are several rows), and the
    accuracy's interval (Wilson or Clopper-Pearson, ``cfg.proportion_ci``) counts the items' effective number,
    kappa's resamples whole items (runner.stats.clusters). None: one row per item.
    """
    if cfg.unscored_as is UnscoredAs.tie:
        rows = [(TIE if pred is None else pred, g) for pred, g in rows]
    # macro-F1 over the classes present in gold (label_agreement's default): a tie no gold label has is not a class
    out = agreement.label_agreement([p for p, _ in rows], [g for _, g in rows])
    out["unscored_as"] = cfg.unscored_as.value
    correct = [float(p == g) for p, g in rows]  # unscored (None) is wrong here, as in accuracy_all
    out["accuracy_all_ci"] = proportions.proportion_ci(correct, items, cfg.ci_level, cfg.proportion_ci.value)
    scored = [(p, g, item) for (p, g), item in zip(rows, items or range(len(rows)), strict=True) if p is not None]
    columns, n_labels = coefficients.label_codes([p for p, _, _ in scored], [g for _, g, _ in scored])
    out["cohen_kappa_ci"] = clusters.cluster_bootstrap_ci(
        columns, [item for _, _, item in scored], functools.partial(clusters.weighted_kappa, n_labels=n_labels),
        cfg.ci_level, cfg.ci_resamples, seed)
    return out


def both_orders(refs: Sequence[ItemRef], judgments: Sequence[Judgment], cfg: MetricsConfig) -> dict[str, Any] | None:
    """A single judge's verdict per (item, repeat) judged in both orders against gold, under the two policies for
    orders that disagree (runner.modes.sections.BothOrders); None without gold or without a pair in both orders."""
    gold = {r.id: r.gold for r in refs if r.gold is not None}
    pairs: dict[tuple[str, int], dict[Any, Judgment]] = {}
    for j in final_judgments(judgments):
        if j.item_id in gold and j.request.order is not None:
            pairs.setdefault((j.item_id, j.request.repeat), {})[j.request.order] = j
    both = [(key[0], list(p.values())) for key, p in pairs.items() if len(p) == 2]
    if not both:
        return None
    items, as_tie, as_incorrect, inconsistent = [], [], [], 0
    for item, (first, second) in both:
        agree = first.status is second.status is Status.SCORED and first.winner == second.winner
        inconsistent += not agree
        verdict = first.winner if agree else TIE
        items.append(item)
        as_tie.append(float(verdict == gold[item]))
        as_incorrect.append(float(agree and verdict == gold[item]))
    level, method = cfg.ci_level, cfg.proportion_ci.value
    return {"n_pairs": len(both), "inconsistent": inconsistent,
            "inconsistent_as_tie": proportions.proportion_ci(as_tie, items, level, method),
            "inconsistent_as_incorrect": proportions.proportion_ci(as_incorrect, items, level, method)}


def pairwise_trust(refs: Sequence[ItemRef], judgments: Sequence[Judgment], results: Sequence[ItemResult],
                   ours: str, baseline: str, cfg: MetricsConfig, seed: int, annotators_identified: bool = False
                   ) -> TrustSection:
    """The ``trust`` section of a pairwise summary: win rate with ties and, with gold, agreement and the
    both-orders verdict; with human annotations, the human ceiling with the judge's verdict per item scored
    against the same leave-one-out references (``annotators_identified``: pairwise kappa between columns).
    The agreement statistics (runner.stats) are read into their records once each."""
    won = win_rate(results, ours, baseline, cfg, seed)
    gold = gold_agreement(refs, judgments, cfg, seed)
    paired = both_orders(refs, judgments, cfg) if gold is not None else None
    ceiling = None
    annotated = [r for r in refs if r.annotations]
    if annotated:  # several human labels per item: how well humans agree with each other is the ceiling
        verdicts = {r.item_id: r.final_verdict for r in results}
        judge = [verdicts.get(r.id) for r in annotated]
        if cfg.unscored_as is UnscoredAs.tie:
            judge = [TIE if label is None and r.id in verdicts else label for r, label in zip(annotated, judge,
                                                                                             strict=True)]
        ceiling = HumanCeiling.from_json(inter_rater.human_ceiling([r.annotations for r in annotated], judge,
                                                                   annotators_identified), "trust.human_ceiling")
    return TrustSection(
        bootstrap=bootstrap_settings(cfg, seed), win_rate=won,
        gold_agreement=None if gold is None else GoldAgreement.from_json(gold, "trust.gold_agreement"),
        both_orders=None if paired is None else BothOrders.from_json(paired, "trust.both_orders"),
        human_ceiling=ceiling)


def trust_metrics(trust: TrustSection | Mapping[str, Any]) -> dict[str, float]:
    """MLflow metrics of the trust section: ``verdict/win_rate`` (ties as half, + SE and CI) and ``agreement/*``."""
    t = TrustSection.of(trust, "trust")
    raw: dict[str, Any] = {}
    wr = t.win_rate
    if wr:
        raw.update({"verdict/win_rate": wr.rate, "verdict/win_rate_se": wr.standard_error,
                    "verdict/win_rate_ci_low": wr.ci.low, "verdict/win_rate_ci_high": wr.ci.high})
    ga = t.gold_agreement
    if ga:
        raw.update({"agreement/accuracy": ga.accuracy, "agreement/accuracy_all": ga.accuracy_all,
                    "agreement/cohen_kappa": ga.cohen_kappa, "agreement/macro_f1": ga.macro_f1,
                    "agreement/krippendorff_alpha": ga.krippendorff_alpha, "agreement/unscored": ga.unscored,
                    "agreement/n": ga.n})
        raw.update({"agreement/accuracy_all_ci_low": ga.accuracy_all_ci.low,
                    "agreement/accuracy_all_ci_high": ga.accuracy_all_ci.high,
                    "agreement/cohen_kappa_ci_low": ga.cohen_kappa_ci.low,
                    "agreement/cohen_kappa_ci_high": ga.cohen_kappa_ci.high})
    both = t.both_orders
    if both:
        for name, ci in (("tie", both.inconsistent_as_tie), ("incorrect", both.inconsistent_as_incorrect)):
            raw.update({f"agreement/both_orders_inconsistent_as_{name}": ci.estimate,
                        f"agreement/both_orders_inconsistent_as_{name}_ci_low": ci.low,
                        f"agreement/both_orders_inconsistent_as_{name}_ci_high": ci.high})
    ceiling = t.human_ceiling
    if ceiling:
        raw.update({"agreement/human_fleiss_kappa": ceiling.fleiss_kappa,
                    "agreement/human_mean_pairwise_kappa": ceiling.mean_pairwise_kappa,
                    "agreement/human_mean_pairwise_accuracy": ceiling.mean_pairwise_accuracy,
                    "agreement/human_leave_one_out_accuracy": ceiling.mean_leave_one_out_accuracy,
                    "agreement/judge_leave_one_out_accuracy": ceiling.mean_judge_leave_one_out_accuracy})
    return {k: float(v) for k, v in raw.items() if v is not None}


def _interval(ci: Interval, scale: float = 100.0, digits: int = 1) -> str:
    if ci.low is None or ci.high is None:
        return ""
    return f" [{ci.low * scale:.{digits}f}, {ci.high * scale:.{digits}f}]"


def console_lines(trust: TrustSection | Mapping[str, Any]) -> list[str]:
    """Lines for the run's console summary: win rate with ties, agreement with gold, with their CIs."""
    t = TrustSection.of(trust, "trust")
    lines = []
    wr = t.win_rate
    level = f"{t.bootstrap.level:.0%} CI"
    if wr:
        se = f" (SE {wr.standard_error * 100:.2f})" if wr.standard_error is not None else ""
        lines.append(f"ties-half rate (ours, a tie half a win) {wr.rate * 100:.2f}{se}{_interval(wr.ci)} {level}")
    ga = t.gold_agreement
    if ga:
        kappa = "n/a" if ga.cohen_kappa is None else f"{ga.cohen_kappa:.3f}"
        f1 = "n/a" if ga.macro_f1 is None else f"{ga.macro_f1:.4f}"
        # named "agreement" as in report.html's headline and the sweep table (agreement/accuracy_all): "accuracy"
        # is LLMBar's per-order figure (the gold line), a different number where an answer was unscored
        lines.append(f"agreement with gold (unscored as {ga.unscored_as}) {ga.accuracy_all * 100:.2f}"
                     f"{_interval(ga.accuracy_all_ci)}, kappa {kappa}{_interval(ga.cohen_kappa_ci, 1.0, 3)}, "
                     f"macro-F1 {f1}")
    both = t.both_orders
    if both:
        tie, wrong = both.inconsistent_as_tie, both.inconsistent_as_incorrect
        lines.append(f"both orders per item ({both.n_pairs} pairs, {both.inconsistent} inconsistent): accuracy with "
                     f"inconsistent as tie {(tie.estimate or 0) * 100:.2f}{_interval(tie)}, as incorrect "
                     f"{(wrong.estimate or 0) * 100:.2f}{_interval(wrong)} ({tie.method})")
    ceiling = t.human_ceiling
    if ceiling and ceiling.mean_leave_one_out_accuracy is not None:
        judge = ceiling.mean_judge_leave_one_out_accuracy
        same = "" if judge is None else f", the judge vs the same references on the same items {judge * 100:.2f}"
        fleiss = "n/a" if ceiling.fleiss_kappa is None else f"{ceiling.fleiss_kappa:.3f}"
        lines.append(f"human ceiling ({ceiling.annotators} annotators): each vs the others' majority "
                     f"{ceiling.mean_leave_one_out_accuracy * 100:.2f}{same}, Fleiss kappa {fleiss}")
    return lines


def bias_lines(report: BiasReport | Mapping[str, Any]) -> list[str]:
    """One console line with the bias report's headline numbers (runner.modes.bias)."""
    b = BiasReport.of(report, "bias")
    pos, length = b.position, b.length

    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{value * 100:.1f}%"

    line = (f"bias: same verdict in both orders {pct(pos.consistency_rate)}, first position wins "
            f"{pct(pos.first_position_rate)}, longer answer wins {pct(length.longer_wins_rate)}")
    if length.longer_is_gold_rate is not None:
        line += f" (labels: {pct(length.longer_is_gold_rate)})"
    own = b.self_preference
    if own:
        line += f"; own family ({own.own_system}) wins {pct(own.own_win_rate)}"
    if pos.pairs_both_orders:
        line += (f"; flipped pairs toward first/second {pos.inconsistent_toward_first}/"
                 f"{pos.inconsistent_toward_second}")
    p_value = bias.position_p(pos)
    if p_value is not None:
        if pos.items_toward_first is not None:
            line += f"; items toward first/second {pos.items_toward_first}/{pos.items_toward_second}"
        line += f" (sign test over items p={p_value:.2g})"
    return [line]
