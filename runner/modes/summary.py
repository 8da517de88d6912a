"""Run summaries as data: the users' JSON summary, gold accuracy, judge statistics and the flat MLflow metrics.

Every function here is pure. The report's sections are built as typed records (runner.modes.sections:
:func:`verdict_report`, :func:`gold_accuracy`); :func:`build_summary` and :func:`gold_metrics` give their JSON. The
judge statistics and metrics are flat dicts. Printing them is runner.outputs.console's.
"""

from __future__ import annotations

import re
from array import array
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Any

from runner.core.types import TIE, Item, ItemResult, Judgment, Order, Status
from runner.inputs.datasets import ItemRef
from runner.judging.aggregation import final_judgments
from runner.judging.aggregations.records import CONFIDENCES, UNANIMOUS
from runner.modes.sections import AggregatedResult, GoldAccuracy, VerdictSummary
from runner.modes.shared_values import frozen_mapping, frozen_tuple
from runner.stats.scores import percentile

GOLD_KEYS = (
    "accuracy_ab",
    "accuracy_ba",
    "accuracy_mean",
    "correct_both",
    "positional_agreement",
    "accuracy_overall",
    "n_pairs",
)
PARSE_FAILURES = "judge/parse_failures/"  # + the reason's kind: one count per kind of unreadable answer
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _rate(num: int | float, den: int | float) -> float:
    """``num / den``, or 0.0 when ``den`` is 0."""
    return num / den if den else 0.0


def sanitize(label: str) -> str:
    """Make ``label`` usable inside an MLflow metric key."""
    return _UNSAFE.sub("_", label) or "_"


def build_summary(
    item_results: Sequence[ItemResult],
    judgments: Sequence[Judgment],
    ours: str,
    baseline: str,
    num_evaluation_runs: int,
    completed_at: datetime | None = None,
) -> dict[str, Any]:
    """The users' summary document, ``{"summary": {...}, "aggregated_results": {item_id: {...}}}``: the JSON of
    :func:`verdict_report` (see it for the arguments; ``judgments`` is not part of the users' format)."""
    del judgments
    summary, aggregated = verdict_report(item_results, ours, baseline, num_evaluation_runs, completed_at)
    return {"summary": summary.to_json(), "aggregated_results": {k: v.to_json() for k, v in aggregated.items()}}


def verdict_report(item_results: Sequence[ItemResult], ours: str, baseline: str, num_evaluation_runs: int,
                   completed_at: datetime | None = None) -> tuple[VerdictSummary, Mapping[str, AggregatedResult]]:
    """The users' ``summary`` section and ``aggregated_results`` (one record per item), typed.

    Args:
        item_results: One aggregated result per item (failures included).
        ours: System name of the first candidate.
        baseline: System name of the second candidate.
        num_evaluation_runs: Repeats per item and order, as configured.
        completed_at: When the evaluation completed (``evaluation_completed``, ISO 8601 in UTC, as the users'
            format has it); None: now, the summary being built as the run ends.

    Returns:
        The summary (the win and tie rates are fractions of the successful items, ``unanimous_agreement_rate`` of
        every item, a failed one not being unanimous; 0.0 when there are none) and item id -> its result.
    """
    finals = [r.final_verdict for r in item_results if r.final_verdict is not None]
    verdicts: dict[str, int] = {ours: 0, baseline: 0, TIE: 0}
    verdicts.update(Counter(finals))  # an unexpected label still shows up instead of vanishing
    confidences = {name: 0 for name in CONFIDENCES}
    confidences.update(Counter(r.confidence for r in item_results if r.confidence is not None))
    n_ok = len(finals)
    summary = VerdictSummary(
        evaluation_completed=(completed_at or datetime.now(timezone.utc)).astimezone(timezone.utc).isoformat(
            timespec="seconds"),
        num_evaluation_runs=int(num_evaluation_runs),
        total_subsets=len(item_results),
        successful_evaluations=n_ok,
        final_verdict_distribution=frozen_mapping(verdicts, fresh=True),
        confidence_distribution=frozen_mapping(confidences, fresh=True),
        ours_win_rate=_rate(verdicts[ours], n_ok),
        baseline_win_rate=_rate(verdicts[baseline], n_ok),
        tie_rate=_rate(verdicts[TIE], n_ok),
        # over every item, as the users define it: a failed item (no valid vote) is not unanimous
        unanimous_agreement_rate=_rate(confidences[UNANIMOUS], len(item_results)),
        failed_items=tuple(r.item_id for r in item_results if r.final_verdict is None),
    )
    return summary, MappingProxyType({r.item_id: _aggregated(r) for r in item_results})


def _aggregated(r: ItemResult) -> AggregatedResult:
    """An item's ``aggregated_results`` entry; its vote tuple and counts are the shared copies where they repeat
    (runner.modes.shared_values: issue 12's ~300 bytes an item)."""
    counts = r.verdict_counts
    return AggregatedResult(
        verdicts=frozen_tuple(tuple(r.verdicts)),
        # the item's own counts when they are a dict (majority and weighted votes make one per item, and the item
        # results are dropped once the report exists): one mapping per item at the run's peak, not two
        verdict_counts=frozen_mapping(counts, fresh=type(counts) is dict),
        final_verdict=r.final_verdict,
        confidence=r.confidence,
        # only what an aggregation adds (an ensemble's vote count, Dawid-Skene's posterior): a single judge's items
        # have none, so their entries stay as the users' format has them
        details=frozen_mapping(r.details) if r.details else None,
    )


def gold_metrics(items: Sequence[Item | ItemRef], judgments: Sequence[Judgment]) -> dict[str, Any] | None:
    """The JSON of :func:`gold_accuracy` (None when no item has gold)."""
    gold = gold_accuracy(items, judgments)
    return None if gold is None else gold.to_json()


def gold_accuracy(items: Sequence[Item | ItemRef], judgments: Sequence[Judgment]) -> GoldAccuracy | None:
    """Accuracy against gold labels, per presentation order, as LLMBar reports it.

    The final judgment per ``(item, repeat, order)`` counts (a synthesis round replaces the first
    round). An unscored or errored judgment counts as wrong. Over the ``(item, repeat)`` pairs:
    ``accuracy_ab``/``accuracy_ba`` (LLMBar's ``correct_False``/``correct_True``), their mean
    (``correct_average``), ``correct_both``, and ``positional_agreement`` (LLMBar's ``equal``, except
    that two unreadable verdicts do not count as agreeing here).

    Args:
        items: The dataset items; only those with ``gold`` are scored.
        judgments: All judgments of the run.

    Returns:
        None when no item has gold. Otherwise the record of the keys in :data:`GOLD_KEYS`;
        ``n_pairs`` counts ``(item, repeat)`` pairs with any final judgment, the both-order keys are
        None unless some pair was judged in both orders, and a key is None when its denominator is 0.
    """
    gold = {item.id: item.gold for item in items if item.gold is not None}
    if not gold:
        return None
    pairs: dict[tuple[str, int], dict[Order, Judgment]] = {}
    for j in final_judgments(judgments):
        if j.item_id in gold:
            pairs.setdefault((j.item_id, j.request.repeat), {})[Order(j.request.order)] = j

    def correct(j: Judgment) -> bool:
        return j.status == Status.SCORED and j.winner == gold[j.item_id]

    def accuracy(js: list[Judgment]) -> float | None:
        return sum(map(correct, js)) / len(js) if js else None

    acc = {order: accuracy([p[order] for p in pairs.values() if order in p]) for order in Order}
    both = [(p[Order.AB], p[Order.BA]) for p in pairs.values() if len(p) == len(Order)]
    mean = both_correct = agreement = None
    ab_acc, ba_acc = acc[Order.AB], acc[Order.BA]
    if both and ab_acc is not None and ba_acc is not None:  # both: each order has a judgment, so neither is None
        mean = (ab_acc + ba_acc) / 2
        both_correct = sum(correct(ab) and correct(ba) for ab, ba in both) / len(both)
        agreement = sum(_agree(ab, ba) for ab, ba in both) / len(both)
    return GoldAccuracy(accuracy_ab=acc[Order.AB], accuracy_ba=acc[Order.BA], accuracy_mean=mean,
                        correct_both=both_correct, positional_agreement=agreement,
                        accuracy_overall=accuracy([j for p in pairs.values() for j in p.values()]), n_pairs=len(pairs))


def _agree(ab: Judgment, ba: Judgment) -> bool:
    """True when both orders were scored and named the same winner."""
    return ab.status == ba.status == Status.SCORED and ab.winner == ba.winner


def numeric(values: Mapping[str, Any]) -> dict[str, float]:
    """The entries of ``values`` that have a value, as floats (for MLflow)."""
    return {k: float(v) for k, v in values.items() if v is not None}


def judge_metrics(judgments: Sequence[Judgment]) -> dict[str, Any]:
    """Counts, rates, tokens, cost and latency of the judge calls.

    Args:
        judgments: Every judge call of the run, all stages included.

    Returns:
        A flat dict keyed ``family/name``. Latency percentiles cover calls that returned (no error)
        and are None when there are none; ``judge/parse_failures/<reason>`` counts unscored judgments by
        the part of ``verdict.reason`` before the first ``":"``.
    """
    # One pass, keeping numbers only: a run's judgments are a column store (runner.core.judgments), and a list of
    # their responses would be 100,000 objects alive at the run's peak.
    status: Counter[Status] = Counter()
    reasons: Counter[str] = Counter()
    prompt = completion = made = failed = paid = repaid = cache_hits = resumed = retries = rate_limited = 0
    unknown_cost = 0
    substituted = unknown_tokens = 0
    latencies = array("d")  # 8 bytes a call, not a float object and a list slot
    paid_costs, saved_costs = array("d"), array("d")  # summed in judgment order, as the costs were
    for j in judgments:
        state = Status(j.status)
        status[state] += 1
        if state is Status.UNSCORED:
            reasons[sanitize((j.verdict.reason or "unknown").split(":", 1)[0].strip())] += 1
        r = j.response
        prompt += r.prompt_tokens
        completion += r.completion_tokens
        unknown_cost += r.cost_usd is None
        unknown_tokens += not r.tokens_known
        substituted += r.substituted
        resumed += r.source == "journal"
        if r.source == "call":
            made += 1
            failed += r.error_type is not None
            paid += r.paid
            repaid += r.repaid
            retries += max(r.attempts - 1, 0)
            rate_limited += r.rate_limited
            if r.error_type is None and r.error is None and r.latency_s > 0:  # a batch answer has no latency: 0
                latencies.append(r.latency_s)
        if r.cost_usd is not None:
            (saved_costs if r.source == "cache" else paid_costs).append(r.cost_usd)
        cache_hits += r.source == "cache"
    scored, unscored, errors = status[Status.SCORED], status[Status.UNSCORED], status[Status.ERROR]
    metrics: dict[str, Any] = {
        "judge/calls": len(judgments),
        "judge/scored": scored,
        "judge/unscored": unscored,
        "judge/errors": errors,
        "judge/parse_failure_rate": _rate(unscored, scored + unscored),
        "judge/error_rate": _rate(errors, len(judgments)),
        "tokens/prompt": prompt,
        "tokens/completion": completion,
        "tokens/total": prompt + completion,
        "tokens/unknown_calls": unknown_tokens,
        "cost/usd_total": float(sum(paid_costs)),
        "cost/usd_saved": float(sum(saved_costs)),
        "cost/unknown_calls": unknown_cost,
        "calls/made": made,
        "calls/failed": failed,
        "calls/paid": paid,
        "calls/repaid": repaid,
        "calls/cache_hits": cache_hits,
        "calls/resumed": resumed,
        "calls/retries": retries,
        "calls/rate_limited": rate_limited,
        "calls/substituted": substituted,
        "latency/p50_s": percentile(latencies, 50),
        "latency/p95_s": percentile(latencies, 95),
    }
    metrics.update({f"{PARSE_FAILURES}{reason}": n for reason, n in sorted(reasons.items())})
    return metrics


def flat_metrics(
    summary: VerdictSummary | Mapping[str, Any], gold: GoldAccuracy | Mapping[str, Any] | None, judge: Mapping[str, Any]
) -> dict[str, float]:
    """Flatten the summary, gold and judge metrics into numeric ``family/name`` MLflow metrics.

    Args:
        summary: The ``summary`` section, or the output of :func:`build_summary`.
        gold: The output of :func:`gold_metrics` (typed or as JSON), or None.
        judge: The output of :func:`judge_metrics`.

    Returns:
        Metric name -> float; None values are left out.
    """
    s = summary if isinstance(summary, VerdictSummary) else VerdictSummary.from_json(summary["summary"], "summary")
    dist = s.final_verdict_distribution
    n_ok = s.successful_evaluations
    raw: dict[str, Any] = {f"verdict/{sanitize(label)}_rate": _rate(n, n_ok) for label, n in dist.items()}
    raw.update(
        {
            # the users' ``ours_win_rate`` / ``baseline_win_rate``: strict wins, so not a win rate here (README)
            "verdict/ours_wins_share": s.ours_win_rate,
            "verdict/baseline_wins_share": s.baseline_win_rate,
            "verdict/tie_rate": s.tie_rate,
            "verdict/unanimous_rate": s.unanimous_agreement_rate,
            "items/total": s.total_subsets,
            "items/successful": n_ok,
            "items/failed": s.total_subsets - n_ok,
        }
    )
    raw.update({f"confidence/{sanitize(k)}_count": n for k, n in s.confidence_distribution.items()})
    if gold is not None:
        g = GoldAccuracy.of(gold, "gold")
        raw.update(
            {
                "accuracy/ab": g.accuracy_ab,
                "accuracy/ba": g.accuracy_ba,
                "accuracy/mean": g.accuracy_mean,
                "accuracy/correct_both": g.correct_both,
                "accuracy/overall": g.accuracy_overall,
                "accuracy/n_pairs": g.n_pairs,
                "agreement/positional": g.positional_agreement,
            }
        )
    raw.update(judge)
    return {key: float(value) for key, value in raw.items() if value is not None}
