"""The per-run bias report of a pairwise judge: position, length and self-preference.

Each statistic asks whether something other than quality moves the verdict: the slot a candidate is
shown in, how long it is, or whether the judge's own model family wrote it. Everything is computed
from the final judgment per ``(item, repeat, order)`` (a synthesis round replaces the first round),
and every value returned is plain JSON: an undefined statistic is ``None``, never NaN.

A verdict is *decisive* when it was scored and names one of the two systems (not a tie). Ties and
unscored or errored judgments never enter a decisive count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from runner.core.types import Judgment, Status
from runner.inputs.datasets import ItemRef
from runner.judging.aggregation import final_judgments
from runner.modes.order_pairs import order_pairs
from runner.modes.sections import BiasReport, PositionBias
from runner.stats.proportions import sign_test_p

FIRST, SECOND = "A", "B"


def bias_report(
    refs: Sequence[ItemRef],
    judgments: Sequence[Judgment],
    ours: str,
    baseline: str,
    *,
    judge_family: str | None = None,
    families: Mapping[str, str | None] | None = None,
    min_length_gap: int = 30,
) -> dict[str, Any]:
    """Position, length and self-preference bias of one pairwise run.

    Args:
        refs: The run's items; their ``gold`` and ``lengths`` (characters of ours, baseline) are used.
        judgments: All judgments of the run; only the final one per ``(item, repeat, order)`` counts.
        ours: System name of the first candidate (shown as A in ``Order.AB``).
        baseline: System name of the second candidate.
        judge_family: The judge model's family (e.g. ``"openai"``); compared case-insensitively.
        families: System name -> the family of the model that wrote it (None when unknown).
        min_length_gap: A verdict enters the length statistics only when the two candidates differ by
            MORE than this many characters (smaller gaps are noise, not a length contrast).

    Returns:
        ``{"position": {...}, "length": {...}}`` plus ``"self_preference"`` when exactly one of the two
        systems belongs to ``judge_family`` (with both or neither there is no contrast to measure).

    Raises:
        ValueError: If ``ours`` equals ``baseline`` or ``min_length_gap`` is negative.
    """
    if ours == baseline:
        raise ValueError(f"ours and baseline must be different systems, both are {ours!r}")
    if min_length_gap < 0:
        raise ValueError(f"min_length_gap must be >= 0, got {min_length_gap}")
    finals = final_judgments(judgments)
    by_id = {ref.id: ref for ref in refs}
    gold = {ref.id: ref.gold for ref in refs if ref.gold in (ours, baseline)}  # decisive gold only
    decisive = _decisive(finals, ours, baseline)
    out: dict[str, Any] = {
        "position": position_bias(finals),
        "length": length_bias(decisive, by_id, gold, ours, baseline, min_length_gap),
    }
    own = _own_system(judge_family, families or {}, ours, baseline)
    if own is not None:
        other = baseline if own == ours else ours
        out["self_preference"] = {"judge_family": judge_family, **self_preference(decisive, gold, own, other)}
    return out


def position_bias(finals: Sequence[Judgment]) -> dict[str, Any]:
    """How much the slot a candidate is shown in decides the verdict.

    The pair (an item and repeat judged in both orders) is the unit of consistency: in each order a verdict leans
    toward the slot it names (A: first, B: second, a tie: neither), so a pair whose two verdicts name the same
    winner leans nowhere, (A, A) twice toward the first slot, (A, tie) or (tie, A) once, and so on. The item is the
    unit of the sign test: an item leans the way the sum of its pairs' leanings over its repeats points (a zero sum
    leans nowhere and drops out), so repeats of one item are not counted as independent evidence and identical
    repeats give the p-value of one; the test asks whether the items that lean lean one way more than the other
    (exact binomial test against 0.5). A run with no pair judged in both orders (each item in one order) leans
    each item by its verdicts summed over repeats (A +1, B -1). This sign test is the p-value every output shows
    (:func:`position_p`: the console, report.html and ``bias/first_position_p``).

    Args:
        finals: Final pairwise judgments (one per ``(item, repeat, order)``; see ``final_judgments``).

    Returns:
        ``pairs_both_orders``: ``(item, repeat)`` pairs judged in both orders, whatever the outcome;
        ``consistent``: those where both orders were scored and named the same winner (an unreadable
        verdict does not survive the swap, as in ``report.gold_metrics``); ``consistency_rate``;
        ``first_position_rate`` / ``second_position_rate``: share of decisive verdicts whose label is
        A / B, over ``n_decisive``; ``binomial_p``: the exact binomial test of the A count against 0.5 with every
        verdict a unit (orders and repeats of one item counted as independent: descriptive only, summary.json
        alone shows it); ``sign_test_p``: the items' sign test above, over ``items_toward_first`` /
        ``items_toward_second``;
        ``inconsistent_toward_first`` / ``_second``: inconsistent pairs leaning toward the first / second slot
        (``(A, A)``, ``(A, tie)``, ``(tie, A)`` / ``(B, B)``, ``(B, tie)``, ``(tie, B)``);
        ``inconsistent_unscored``: inconsistent because an order has no verdict; ``inconsistent_by_type``: each
        type's count, keyed ``"<AB order's label>,<BA order's label>"`` (``-`` for no verdict).
    """
    pairs = order_pairs(finals)  # integer columns grouped by sorting, not a dict of lists per pair
    n_first = sum(n for (label, _), n in pairs.judged.items() if label == FIRST)
    n_decisive = sum(n for (label, _), n in pairs.judged.items() if label in (FIRST, SECOND))
    consistent = unscored = 0
    types: dict[str, int] = {}
    toward = {1: 0, -1: 0}
    leans = []  # each kind of pair's leaning: +1 or +2 toward the first slot, -1 or -2 the second, 0 none
    for (ab, ba), count in zip(pairs.kinds, pairs.counts, strict=True):
        lean = 0
        if ab is not None and ba is not None and ab[1] == ba[1]:
            consistent += count
        else:
            key = f"{ab[0] if ab else '-'},{ba[0] if ba else '-'}"
            types[key] = types.get(key, 0) + count
            if ab is None or ba is None:
                unscored += count
            else:
                lean = _lean(ab[0]) + _lean(ba[0])
                if lean:
                    toward[1 if lean > 0 else -1] += count
        leans.append(lean)
    # item -> the sum of its pairs' leanings over repeats; a run without a pair judged in both orders (one order
    # per item, fixed or seeded) leans by its verdicts' labels summed over repeats
    item_lean = pairs.item_sums(leans) if pairs.counts else _verdict_leans(finals)
    items_first = int((item_lean > 0).sum())
    leaning = items_first + int((item_lean < 0).sum())
    both = sum(pairs.counts)
    return {
        "pairs_both_orders": both,
        "consistent": consistent,
        "consistency_rate": _rate(consistent, both),
        "first_position_rate": _rate(n_first, n_decisive),
        "second_position_rate": _rate(n_decisive - n_first, n_decisive),
        "n_decisive": n_decisive,
        "binomial_p": sign_test_p(n_first, n_decisive) if n_decisive else None,
        "inconsistent_toward_first": toward[1],
        "inconsistent_toward_second": toward[-1],
        "sign_test_p": sign_test_p(items_first, leaning) if leaning else None,
        "inconsistent_unscored": unscored,
        "inconsistent_by_type": dict(sorted(types.items())),
        "unit": "pair",  # of the consistency: an (item, repeat) judged in both orders
        "items_toward_first": items_first,
        "items_toward_second": leaning - items_first,
        "sign_test_unit": "item",  # its repeats' leanings summed
    }


def _verdict_leans(finals: Sequence[Judgment]) -> np.ndarray:
    """Per item, the sum of its scored verdicts' leanings over repeats (A +1, B -1, a tie 0)."""
    sums: dict[str, int] = {}
    for j in finals:
        lean = _lean(j.verdict.label) if j.status == Status.SCORED else 0
        sums[j.item_id] = sums.get(j.item_id, 0) + lean
    return np.fromiter(sums.values(), dtype=np.int64, count=len(sums))


def position_p(position: PositionBias) -> float | None:
    """The position-bias p-value every output shows (console, report.html, ``bias/first_position_p``): the sign
    test over items (``sign_test_p``), so repeats of one item are one observation."""
    return position.sign_test_p


def _lean(label: str | None) -> int:
    """+1 for a verdict naming the first slot, -1 the second, 0 a tie (or a label that names neither)."""
    return 1 if label == FIRST else -1 if label == SECOND else 0


def length_bias(
    decisive: Sequence[tuple[str, str]],
    refs: Mapping[str, ItemRef],
    gold: Mapping[str, str],
    ours: str,
    baseline: str,
    min_length_gap: int,
) -> dict[str, Any]:
    """How often the longer answer wins, against how often it should by the gold labels.

    Args:
        decisive: ``(item_id, winner)`` of the final decisive judgments (scored, winner is ``ours`` or ``baseline``).
        refs: Items by id; an item without two ``lengths`` is left out.
        gold: Item id -> decisive gold winner (items with a tie or no gold are absent).
        ours: System name of the first candidate (``lengths[0]``).
        baseline: System name of the second candidate (``lengths[1]``).
        min_length_gap: Only verdicts whose candidates differ by more than this many characters count.

    Returns:
        ``n`` and ``longer_wins_rate`` over the verdicts with a length contrast; over those of them
        whose item has a decisive gold: ``n_gold``, ``longer_wins_rate_gold`` (the judge),
        ``longer_is_gold_rate`` (the labels) and ``excess`` = judge - labels, the length preference
        the labels do not justify. Both rates over the same verdicts, so an item judged k times
        weighs k times on either side.
    """
    longer: dict[str, str] = {}
    for item_id, ref in refs.items():
        if len(ref.lengths) == 2 and abs(ref.lengths[0] - ref.lengths[1]) > min_length_gap:
            longer[item_id] = ours if ref.lengths[0] > ref.lengths[1] else baseline
    contrast = [(item_id, winner) for item_id, winner in decisive if item_id in longer]
    labelled = [(item_id, winner) for item_id, winner in contrast if item_id in gold]
    judge_rate = _rate(sum(winner == longer[item_id] for item_id, winner in labelled), len(labelled))
    gold_rate = _rate(sum(gold[item_id] == longer[item_id] for item_id, _ in labelled), len(labelled))
    return {
        "min_length_gap": min_length_gap,
        "n": len(contrast),
        "longer_wins_rate": _rate(sum(winner == longer[item_id] for item_id, winner in contrast), len(contrast)),
        "n_gold": len(labelled),
        "longer_wins_rate_gold": judge_rate,
        "longer_is_gold_rate": gold_rate,
        "excess": _diff(judge_rate, gold_rate),
    }


def self_preference(decisive: Sequence[tuple[str, str]], gold: Mapping[str, str], own: str, other: str
                    ) -> dict[str, Any]:
    """How much the judge favours the side its own model family wrote.

    Args:
        decisive: ``(item_id, winner)`` of the final decisive judgments (scored, winner is ``own`` or ``other``).
        gold: Item id -> decisive gold winner (items with a tie or no gold are absent).
        own: The system written by the judge's family.
        other: The other system.

    Returns:
        ``own_system``, ``n_decisive`` and ``own_win_rate``; ``own_win_rate_when_gold_other`` (picking
        its own side where the labels say the other wins: the self-preference error, over
        ``n_gold_other``); ``other_win_rate_when_gold_own`` (the symmetric error, over
        ``n_gold_own``); and ``excess_error`` = the first error minus the second, which is 0 for an
        equally fallible judge without self-preference.
    """
    gold_other = [winner for item_id, winner in decisive if gold.get(item_id) == other]
    gold_own = [winner for item_id, winner in decisive if gold.get(item_id) == own]
    own_error = _rate(gold_other.count(own), len(gold_other))
    other_error = _rate(gold_own.count(other), len(gold_own))
    return {
        "own_system": own,
        "n_decisive": len(decisive),
        "own_win_rate": _rate(sum(winner == own for _, winner in decisive), len(decisive)),
        "n_gold_other": len(gold_other),
        "own_win_rate_when_gold_other": own_error,
        "n_gold_own": len(gold_own),
        "other_win_rate_when_gold_own": other_error,
        "excess_error": _diff(own_error, other_error),
    }


def bias_metrics(report: BiasReport | Mapping[str, Any]) -> dict[str, float]:
    """Flatten a :func:`bias_report` (typed or as JSON) into MLflow metrics keyed ``bias/<name>``.

    Undefined (None) values and an absent self-preference section are left out, since MLflow has no "missing"
    value and a 0 would read as a measurement.
    """
    b = BiasReport.of(report, "bias")
    pos, length, own = b.position, b.length, b.self_preference
    raw = {"bias/position_consistency": pos.consistency_rate, "bias/first_position_rate": pos.first_position_rate,
           "bias/second_position_rate": pos.second_position_rate, "bias/first_position_p": position_p(pos),
           "bias/longer_wins_rate": length.longer_wins_rate, "bias/longer_is_gold_rate": length.longer_is_gold_rate,
           "bias/length_excess": length.excess}
    if pos.pairs_both_orders:  # counts of flipped pairs, measured only where both orders were judged
        raw.update({"bias/inconsistent_toward_first": pos.inconsistent_toward_first,
                    "bias/inconsistent_toward_second": pos.inconsistent_toward_second})
    if own is not None:
        raw.update({"bias/self_own_win_rate": own.own_win_rate, "bias/self_excess_error": own.excess_error})
    return {k: float(v) for k, v in raw.items() if v is not None}


def _decisive(finals: Iterable[Judgment], ours: str, baseline: str) -> list[tuple[str, str]]:
    """``(item_id, winner)`` of every judgment scored and naming one of the two systems (not a tie), in order; one
    shared tuple per item and winner."""
    shared: dict[tuple[str, str], tuple[str, str]] = {}
    return [shared.setdefault(key, key) for j in finals if j.status == Status.SCORED and j.winner in (ours, baseline)
            for key in [(j.item_id, j.winner)]]


def _own_system(judge_family: str | None, families: Mapping[str, str | None], ours: str, baseline: str
                ) -> str | None:
    """The one system written by the judge's family, or None (no family given, neither side, or both)."""
    if not judge_family:
        return None
    wanted = judge_family.strip().casefold()
    own = [s for s in (ours, baseline) if (families.get(s) or "").strip().casefold() == wanted]
    return own[0] if len(own) == 1 else None


def _rate(num: int, den: int) -> float | None:
    """``num / den``, or None when ``den`` is 0 (an undefined rate is not a 0)."""
    return num / den if den else None


def _diff(a: float | None, b: float | None) -> float | None:
    """``a - b``, or None when either is undefined."""
    return None if a is None or b is None else a - b


def _spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho, or None when it is undefined (fewer than 3 pairs, or a constant side)."""
    from scipy import stats as scipy_stats

    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return None
    return float(scipy_stats.spearmanr(x, y).statistic)


def length_score_bias(lengths: Sequence[int], judge: Sequence[float], human: Sequence[float | None]) -> dict[str, Any]:
    """Pointwise length preference: how strongly the judge's score follows the output's length, against how
    strongly the human scores do on the same items (a judge that likes length beyond the humans shows
    a positive ``excess``).

    Args:
        lengths: Characters of each scored item's output.
        judge: The item's overall score, in the same order.
        human: The item's human score, or None, in the same order.
    """
    rated = [(n, h) for n, h in zip(lengths, human, strict=True) if h is not None]
    judge_rho = _spearman(list(lengths), list(judge))
    human_rho = _spearman([n for n, _ in rated], [h for _, h in rated]) if rated else None
    judge_on_rated = _spearman([n for n, _ in rated], [j for j, h in zip(judge, human, strict=True) if h is not None])
    return {"n": len(lengths), "judge_length_spearman": judge_rho, "n_human": len(rated),
            "human_length_spearman": human_rho,
            "excess": None if human_rho is None or judge_on_rated is None else judge_on_rated - human_rho}
