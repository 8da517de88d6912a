"""Paired comparison of judge runs on the same items (the engine behind ``judgesweep compare``).

Pure functions over the rows of runs' ``results.jsonl`` (no MLflow here: :mod:`runner.app.compare_cli` fetches
the rows through :mod:`runner.outputs.tracking`). Each run becomes a map from a pairing key to an outcome
(:mod:`runner.outputs.compare_outcomes`).

Two runs are paired on the items both have: the item is the unit (an item's orders and repeats are averaged
first, :mod:`runner.outputs.compare_outcomes`). Per pair: both metrics, the difference ``B - A``, its test
(McNemar's exact test when every item's correctness is 0 or 1 in both runs, else the exact sign-flip test on the
differences' lattice, else the paired t-test; :mod:`runner.stats.paired`), its interval unadjusted and
simultaneous over all pairs (Bonferroni), and the Holm-adjusted p-value over all pairs of the comparison
(:mod:`runner.stats.significance`); optionally, the items needed to detect a difference
(:mod:`runner.stats.sample_size`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from runner.outputs.compare_outcomes import (
    CORRECT,
    SCORE,
    WIN_SCORE,
    ComparisonError,
    Key,
    Outcomes,
    RunResults,
    outcomes,
)
from runner.stats import coefficients, inter_rater, paired, sample_size, significance

__all__ = ["CHOICE_ORDER", "IGNORED_CHOICES", "METRICS", "TESTS", "UNITS", "check_comparable", "compare_pair",
           "compare_runs", "run_labels"]

METRICS = {CORRECT: "accuracy", WIN_SCORE: "win score (ties half, judgments per item averaged)", SCORE: "mean score"}
EXACT_OR_T = "sign_flip_exact (on the differences' lattice) or paired_t"
TESTS = {CORRECT: f"mcnemar_exact (0/1 per item), {EXACT_OR_T}", WIN_SCORE: EXACT_OR_T, SCORE: EXACT_OR_T}
UNITS = {CORRECT: "item", WIN_SCORE: "item", SCORE: "item"}

# The order in which choices appear in run labels; choices not listed follow alphabetically.
CHOICE_ORDER = ("generator", "judge", "prompt", "rubric", "aggregation", "dataset")
IGNORED_CHOICES = frozenset({"tracking"})


def compare_pair(a: Outcomes, b: Outcomes, level: float = 0.95, simultaneous_level: float | None = None
                 ) -> dict[str, Any]:
    """Compare two runs on the keys both have.

    Args:
        a: The baseline run's outcomes.
        b: The contender's outcomes (the difference is ``b - a``).
        level: Confidence level of the difference's unadjusted interval.
        simultaneous_level: Level of the simultaneous interval (None: the unadjusted level).

    Returns:
        ``n`` (paired keys), ``dropped_a``/``dropped_b`` (keys only one run has), ``metric_a``,
        ``metric_b``, ``difference``, ``ci_low``, ``ci_high`` (unadjusted), ``simultaneous_ci_low``,
        ``simultaneous_ci_high``, ``ci_method``, ``test``, ``statistic``, ``p_value``, ``test_details`` (the
        test's full result) and, for pairwise runs, ``verdict_agreement`` with ``verdict_kappa`` over the
        judgments both runs scored.

    Raises:
        ComparisonError: If the two runs measure different kinds of outcome.
    """
    if a.kind != b.kind:
        raise ComparisonError(f"cannot pair a {METRICS[a.kind]} run with a {METRICS[b.kind]} run")
    keys = sorted(set(a.values) & set(b.values), key=repr)
    xa, xb = [a.values[k] for k in keys], [b.values[k] for k in keys]
    diff = paired.paired_items(xa, xb, level=level, simultaneous_level=simultaneous_level or level)
    result = {
        "n": len(keys),
        "dropped_a": len(a.values) - len(keys),
        "dropped_b": len(b.values) - len(keys),
        "metric_a": diff["mean_a"],
        "metric_b": diff["mean_b"],
        "difference": diff["mean_difference"],
        "ci_low": diff["low"],
        "ci_high": diff["high"],
        "simultaneous_ci_low": diff["simultaneous_low"],
        "simultaneous_ci_high": diff["simultaneous_high"],
        "ci_method": diff["method"],
        "test": diff["test"],
        "statistic": diff["statistic"],
        "p_value": diff["p_value"],
        "test_details": diff["details"],
    }
    if a.verdicts or b.verdicts:
        result.update(_verdict_agreement(a.verdicts, b.verdicts))
    return result


def compare_runs(runs: Sequence[RunResults], level: float = 0.95, alpha: float = 0.05,
                 plan: dict[str, Any] | None = None) -> dict[str, Any]:
    """Compare every pair of runs (A = the earlier run in ``runs``) with Holm correction over all pairs.

    Args:
        runs: Two or more runs on the same dataset.
        level: Confidence level of the unadjusted intervals; the simultaneous ones are at
            ``1 - (1 - level) / pairs`` (Bonferroni).
        alpha: Family-wise error rate a Holm-adjusted p-value is called significant at.
        plan: Also the items each pair needs (:func:`runner.stats.sample_size.plan`): ``difference`` (None:
            the observed one), ``power`` and ``alpha`` (None: ``alpha`` / pairs, what Holm needs in the worst case).

    Returns:
        The JSON-serializable comparison: ``dataset``, ``kind``, ``metric``, ``test``, ``unit``, the
        settings (``simultaneous_level`` among them), ``runs`` (``run_id``, ``label``, ``choices``, ``n_keys``),
        ``pairs`` (one :func:`compare_pair` result each, plus ``a``, ``b``, ``label_a``, ``label_b``, ``p_holm``,
        ``significant`` and, with ``plan``, ``plan``), ``n_pairs`` and ``n_significant``.

    Raises:
        ComparisonError: Fewer than two runs, runs on different datasets, or different kinds of outcome.
    """
    check_comparable(runs)
    reduced = [outcomes(run) for run in runs]
    empty = [run.run_id for run, o in zip(runs, reduced, strict=True) if not o.values]
    if empty:
        raise ComparisonError(f"no outcome to compare in run(s) {', '.join(empty)} (no scored or gold-labelled row)")
    kinds = {o.kind for o in reduced}
    if len(kinds) > 1:
        listing = ", ".join(f"{run.run_id} ({METRICS[o.kind]})" for run, o in zip(runs, reduced, strict=True))
        raise ComparisonError(f"runs measure different things: {listing}")
    labels = run_labels(runs)
    pairs = []
    combinations = list(itertools.combinations(range(len(runs)), 2))
    simultaneous = 1 - (1 - level) / len(combinations)
    for i, j in combinations:
        pair = compare_pair(reduced[i], reduced[j], level=level, simultaneous_level=simultaneous)
        ids = {"a": runs[i].run_id, "b": runs[j].run_id, "label_a": labels[runs[i].run_id],
               "label_b": labels[runs[j].run_id]}
        pairs.append({**ids, **pair})
    adjusted = significance.holm({str(k): pair["p_value"] for k, pair in enumerate(pairs)})
    for k, pair in enumerate(pairs):
        pair["p_holm"] = adjusted[str(k)]
        pair["significant"] = pair["p_holm"] is not None and pair["p_holm"] < alpha
        if plan is not None:
            pair["plan"] = sample_size.plan(
                {"n": pair["n"], "mean_difference": pair["difference"], "details": pair["test_details"]},
                plan.get("difference"), alpha=plan.get("alpha") or alpha / len(pairs), power=plan.get("power", 0.8))
    kind = kinds.pop()
    verdicts = {labels[run.run_id]: o.verdicts for run, o in zip(runs, reduced, strict=True) if o.verdicts}
    return {
        "dataset": runs[0].dataset,
        "kind": kind,
        "metric": METRICS[kind],
        "test": TESTS[kind],
        "unit": UNITS[kind],
        "level": level,
        "simultaneous_level": simultaneous,
        "simultaneous_method": "bonferroni",
        "alpha": alpha,
        "correction": "holm",
        "plan": None if plan is None else {"difference": plan.get("difference"), "power": plan.get("power", 0.8),
                                           "alpha": plan.get("alpha") or alpha / len(pairs)},
        "runs": [{"run_id": run.run_id, "label": labels[run.run_id], "choices": dict(run.choices),
                  "n_keys": len(o.values)} for run, o in zip(runs, reduced, strict=True)],
        "pairs": pairs,
        "n_pairs": len(pairs),
        "n_significant": sum(pair["significant"] for pair in pairs),
        "inter_judge": _inter_judge(verdicts) if len(verdicts) > 1 else None,
    }


def _inter_judge(verdicts: Mapping[str, Mapping[Key, str]]) -> dict[str, Any]:
    """Agreement among all runs' verdicts (pairwise runs): Fleiss' kappa over the keys every run scored,
    Krippendorff's alpha over every key (a run that did not score a key is missing there)."""
    keys = sorted({k for v in verdicts.values() for k in v}, key=repr)
    return inter_rater.inter_judge({label: [v.get(k) for k in keys] for label, v in verdicts.items()})


def check_comparable(runs: Sequence[RunResults]) -> None:
    """Raise ``ComparisonError`` unless there are two or more distinct runs, all on one dataset."""
    if len(runs) < 2:
        raise ComparisonError(f"need at least 2 runs to compare, got {len(runs)}")
    ids = [run.run_id for run in runs]
    if len(set(ids)) != len(ids):
        raise ComparisonError(f"a run is listed twice: {sorted({i for i in ids if ids.count(i) > 1})}")
    by_dataset: dict[str | None, list[str]] = {}
    for run in runs:
        by_dataset.setdefault(run.dataset, []).append(run.run_id)
    if len(by_dataset) > 1:
        listing = "; ".join(f"{name or '<unknown>'}: {', '.join(run_ids)}" for name, run_ids in by_dataset.items())
        raise ComparisonError(f"cannot compare runs on different datasets ({listing})")


def run_labels(runs: Sequence[RunResults]) -> dict[str, str]:
    """Short labels built from the choices that differ between the runs (``judge=x,prompt=y``).

    Runs whose differing choices are identical (or runs that differ in no choice) are told apart by the
    first 8 characters of their run id.
    """
    names = {name for run in runs for name in run.choices} - IGNORED_CHOICES
    ordered = [n for n in CHOICE_ORDER if n in names] + sorted(names - set(CHOICE_ORDER))
    varying = [n for n in ordered if len({run.choices.get(n, "") for run in runs}) > 1]
    labels = {run.run_id: ",".join(f"{n}={run.choices.get(n, '')}" for n in varying) for run in runs}
    seen = list(labels.values())
    for run in runs:
        label = labels[run.run_id]
        if not label or seen.count(label) > 1:
            labels[run.run_id] = f"{label}@{run.run_id[:8]}" if label else run.run_id[:8]
    return labels


def _verdict_agreement(a: Mapping[Key, str], b: Mapping[Key, str]) -> dict[str, Any]:
    """How often two runs gave the same verdict on the judgments both scored, and Cohen's kappa."""
    keys = sorted(set(a) & set(b), key=repr)
    la, lb = [a[k] for k in keys], [b[k] for k in keys]
    same = sum(x == y for x, y in zip(la, lb, strict=True))
    return {
        "verdict_n": len(keys),
        "verdict_agreement": same / len(keys) if keys else None,
        "verdict_kappa": coefficients.cohen_kappa(la, lb) if keys else None,
    }
