"""Unit tests for runner.modes.summary (summary format, gold accuracy, judge statistics) and
runner.outputs.console."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone

import pytest
from rich.console import Console

from runner.core.types import (
    Candidate,
    Item,
    JudgeResponse,
    Judgment,
    Order,
    Status,
)
from runner.judging.aggregations.builtin import majority_vote
from runner.modes.summary import GOLD_KEYS, build_summary, flat_metrics, gold_metrics, judge_metrics
from runner.outputs.console import render_console
from tests.builders import won as judgment

OURS, BASE = "ours", "base"
AB, BA = Order.AB, Order.BA


def item(item_id: str, gold: str | None) -> Item:
    return Item(item_id, {"instruction": "x"}, (Candidate(OURS, "a"), Candidate(BASE, "b")), gold)


# Four gold items, one repeat, both orders, with chosen outcomes:
#   g1 right/right (agree), g2 right/wrong (disagree), g3 right/unscored, g4 wrong/wrong (agree).
GOLD_ITEMS = [item("g1", OURS), item("g2", BASE), item("g3", OURS), item("g4", BASE), item("n1", None)]
GOLD_JUDGMENTS = [
    judgment("g1", OURS, AB),
    judgment("g1", OURS, BA),
    judgment("g2", BASE, AB),
    judgment("g2", OURS, BA),
    judgment("g3", OURS, AB),
    judgment("g3", None, BA),
    judgment("g4", OURS, AB),
    judgment("g4", OURS, BA),
    judgment("n1", OURS, AB),  # no gold: not scored for accuracy
]


def test_gold_metrics_on_hand_built_outcomes() -> None:
    gold = gold_metrics(GOLD_ITEMS, GOLD_JUDGMENTS)
    assert gold is not None
    assert set(gold) == set(GOLD_KEYS)
    assert gold["accuracy_ab"] == pytest.approx(3 / 4)
    assert gold["accuracy_ba"] == pytest.approx(1 / 4)
    assert gold["accuracy_mean"] == pytest.approx(1 / 2)
    assert gold["correct_both"] == pytest.approx(1 / 4)
    assert gold["positional_agreement"] == pytest.approx(2 / 4)
    assert gold["accuracy_overall"] == pytest.approx(4 / 8)
    assert gold["n_pairs"] == 4


def test_gold_metrics_none_without_gold() -> None:
    assert gold_metrics([item("n1", None)], [judgment("n1", OURS)]) is None


def test_two_unscored_orders_do_not_agree() -> None:
    gold = gold_metrics([item("g1", OURS)], [judgment("g1", None, AB), judgment("g1", None, BA)])
    assert gold is not None
    assert gold["positional_agreement"] == 0.0
    assert gold["accuracy_ab"] == gold["accuracy_ba"] == 0.0


def test_gold_metrics_over_repeats_and_with_synthesis() -> None:
    judgments = [
        judgment("g1", OURS, AB, repeat=0),
        judgment("g1", BASE, BA, repeat=0),
        judgment("g1", OURS, AB, repeat=1),
        judgment("g1", OURS, BA, repeat=1),
        # the synthesis round replaces repeat 0's disagreeing first round
        judgment("g1", OURS, AB, repeat=0, stage="synthesis"),
        judgment("g1", OURS, BA, repeat=0, stage="synthesis"),
    ]
    gold = gold_metrics([item("g1", OURS)], judgments)
    assert gold is not None
    assert gold["n_pairs"] == 2
    assert gold["accuracy_ba"] == 1.0
    assert gold["correct_both"] == 1.0
    assert gold["positional_agreement"] == 1.0


def test_gold_metrics_single_order_leaves_both_order_keys_none() -> None:
    judgments = [judgment("g1", OURS, AB), judgment("g2", OURS, AB), judgment("g3", None, AB)]
    gold = gold_metrics([item("g1", OURS), item("g2", BASE), item("g3", OURS)], judgments)
    assert gold is not None
    assert gold["accuracy_ab"] == pytest.approx(1 / 3)
    assert gold["accuracy_overall"] == pytest.approx(1 / 3)
    for key in ("accuracy_ba", "accuracy_mean", "correct_both", "positional_agreement"):
        assert gold[key] is None


def llmbar_statistics(rows: list[tuple[str, str, str]]) -> dict[str, float]:
    """LLMBar's evaluate.py statistics for (label, output_False, output_True) rows."""
    n = len(rows)
    c_false = sum(o_f == label for label, o_f, _ in rows)
    c_true = sum(o_t == label for label, _, o_t in rows)
    return {
        "correct_False": c_false / n,
        "correct_True": c_true / n,
        "correct_average": (c_false + c_true) / 2 / n,
        "correct_both": sum(o_f == label and o_t == label for label, o_f, o_t in rows) / n,
        "equal": sum(o_f == o_t for _, o_f, o_t in rows) / n,
    }


def test_gold_metrics_reproduce_llmbar_statistics() -> None:
    rng = random.Random(7)
    rows = [(rng.choice("12"), rng.choice("12"), rng.choice("12")) for _ in range(200)]
    name = {"1": OURS, "2": BASE}
    items = [item(f"i{k}", name[label]) for k, (label, _, _) in enumerate(rows)]
    judgments = []
    for k, (_, o_false, o_true) in enumerate(rows):
        judgments += [judgment(f"i{k}", name[o_false], AB), judgment(f"i{k}", name[o_true], BA)]
    ours, ref = gold_metrics(items, judgments), llmbar_statistics(rows)
    assert ours is not None
    assert ours["accuracy_ab"] == pytest.approx(ref["correct_False"])
    assert ours["accuracy_ba"] == pytest.approx(ref["correct_True"])
    assert ours["accuracy_mean"] == pytest.approx(ref["correct_average"])
    assert ours["correct_both"] == pytest.approx(ref["correct_both"])
    assert ours["positional_agreement"] == pytest.approx(ref["equal"])


def summary_fixture() -> dict:
    results = [
        majority_vote("a", [OURS, OURS, OURS]),
        majority_vote("b", [OURS, BASE, OURS]),
        majority_vote("c", [BASE, "tie", OURS]),
        majority_vote("d", ["tie", "tie", BASE]),
        majority_vote("e", []),
    ]
    return build_summary(results, [], OURS, BASE, num_evaluation_runs=3)


def test_build_summary_numbers_and_keys() -> None:
    doc = summary_fixture()
    assert set(doc) == {"summary", "aggregated_results"}
    s = doc["summary"]
    assert set(s) == {
        "evaluation_completed",
        "num_evaluation_runs",
        "total_subsets",
        "successful_evaluations",
        "final_verdict_distribution",
        "confidence_distribution",
        "ours_win_rate",
        "baseline_win_rate",
        "tie_rate",
        "unanimous_agreement_rate",
        "failed_items",
    }
    assert datetime.fromisoformat(s["evaluation_completed"]).utcoffset() == timedelta(0)  # issue 15: a timestamp
    assert (s["num_evaluation_runs"], s["total_subsets"], s["successful_evaluations"]) == (3, 5, 4)
    assert s["final_verdict_distribution"] == {OURS: 2, BASE: 0, "tie": 2}
    assert s["confidence_distribution"] == {"unanimous": 1, "majority": 2, "no_consensus": 1}
    assert s["ours_win_rate"] == 0.5
    assert s["baseline_win_rate"] == 0.0
    assert s["tie_rate"] == 0.5
    # issue 30: of every item, as the users define it; the failed item "e" is not unanimous (1 of 5, not 1 of 4)
    assert s["unanimous_agreement_rate"] == 0.2
    assert s["failed_items"] == ["e"]
    assert list(doc["aggregated_results"]) == ["a", "b", "c", "d", "e"]
    assert doc["aggregated_results"]["b"] == {
        "verdicts": [OURS, BASE, OURS],
        "verdict_counts": {OURS: 2, BASE: 1},
        "final_verdict": OURS,
        "confidence": "majority",
    }
    assert doc["aggregated_results"]["e"]["final_verdict"] is None
    assert json.loads(json.dumps(doc)) == doc


def test_build_summary_complete_and_empty() -> None:
    at = datetime(2025, 3, 1, 12, 30, tzinfo=timezone(timedelta(hours=2)))
    done = build_summary([majority_vote("a", [BASE])], [], OURS, BASE, 1, completed_at=at)["summary"]
    assert done["evaluation_completed"] == "2025-03-01T10:30:00+00:00"  # issue 15: the users' ISO timestamp, UTC
    assert done["baseline_win_rate"] == 1.0
    empty = build_summary([], [], OURS, BASE, 1)["summary"]
    assert datetime.fromisoformat(empty["evaluation_completed"]).tzinfo is not None
    assert empty["ours_win_rate"] == empty["tie_rate"] == empty["unanimous_agreement_rate"] == 0.0
    assert empty["final_verdict_distribution"] == {OURS: 0, BASE: 0, "tie": 0}


def judge_fixture() -> list[Judgment]:
    def resp(latency: float, cost: float | None = 0.01, error: str | None = None) -> JudgeResponse:
        return JudgeResponse("x", "stop", 100, 10, cost, latency, error and "Timeout", error)

    return [
        judgment("a", OURS, response=resp(1.0)),
        judgment("a", OURS, BA, response=resp(2.0)),
        judgment("b", BASE, response=resp(3.0, cost=None)),
        judgment("b", BASE, BA, response=resp(4.0)),
        judgment("c", None, reason="no_label: no [[A]]", response=resp(1.5)),
        judgment("c", None, BA, reason="ambiguous: both labels", response=resp(2.5)),
        judgment("d", None, status=Status.ERROR, reason=None, response=resp(100.0, None, "timed out")),
    ]


def test_judge_metrics_counts_rates_and_percentiles() -> None:
    m = judge_metrics(judge_fixture())
    assert (m["judge/calls"], m["judge/scored"], m["judge/unscored"], m["judge/errors"]) == (7, 4, 2, 1)
    assert m["judge/parse_failure_rate"] == pytest.approx(2 / 6)
    assert m["judge/error_rate"] == pytest.approx(1 / 7)
    assert (m["tokens/prompt"], m["tokens/completion"], m["tokens/total"]) == (700, 70, 770)
    assert m["cost/usd_total"] == pytest.approx(0.05)
    assert m["cost/unknown_calls"] == 2
    # latencies of calls that returned: 1, 1.5, 2, 2.5, 3, 4 (the 100 s error is left out)
    assert m["latency/p50_s"] == pytest.approx(2.25)
    assert m["latency/p95_s"] == pytest.approx(3.75)
    assert m["judge/parse_failures/no_label"] == 1
    assert m["judge/parse_failures/ambiguous"] == 1
    assert not any(k.startswith("judge/parse_failures/") and "unknown" in k for k in m)


def test_percentile_sorts_as_an_array_and_gives_what_sorting_a_list_gave() -> None:
    """runner.stats.scores.percentile sorts one float64 array (a million latencies are not a million float objects):
    the same value, to the bit, as the sorted list it replaced, and numpy's linear percentile."""
    from array import array

    import numpy as np

    from runner.stats.scores import percentile

    rng = random.Random(3)
    for n in (1, 2, 7, 1000):
        values = [round(rng.uniform(0.001, 3.0), 4) for _ in range(n)]
        for q in (0, 50, 95, 100):
            ordered = sorted(values)
            pos = (n - 1) * q / 100
            lo, hi = int(pos), -int(-pos // 1)
            listed = ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
            assert percentile(values, q) == percentile(array("d", values), q) == listed
            assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
    assert percentile(array("d"), 50) is None


def test_judge_metrics_without_calls() -> None:
    m = judge_metrics([])
    assert m["judge/parse_failure_rate"] == m["judge/error_rate"] == 0.0
    assert m["latency/p50_s"] is None


def test_flat_metrics_keys_and_values() -> None:
    gold = gold_metrics(GOLD_ITEMS, GOLD_JUDGMENTS)
    flat = flat_metrics(summary_fixture(), gold, judge_metrics(judge_fixture()))
    assert all(isinstance(v, float) for v in flat.values())
    assert flat["verdict/ours_rate"] == flat["verdict/ours_wins_share"] == 0.5
    assert flat["verdict/base_rate"] == 0.0
    assert flat["verdict/tie_rate"] == 0.5
    assert flat["verdict/unanimous_rate"] == 0.2
    assert flat["confidence/no_consensus_count"] == 1.0
    assert (flat["items/total"], flat["items/successful"], flat["items/failed"]) == (5.0, 4.0, 1.0)
    assert flat["accuracy/ab"] == 0.75
    assert flat["accuracy/correct_both"] == 0.25
    assert flat["agreement/positional"] == 0.5
    assert flat["judge/calls"] == 7.0
    assert flat["judge/parse_failures/no_label"] == 1.0


def test_flat_metrics_sanitises_labels_and_skips_none() -> None:
    summary = build_summary([majority_vote("a", ["gpt-4o mini"])], [], "gpt-4o mini", "x/y", 1)
    single = gold_metrics([item("g1", OURS)], [judgment("g1", OURS, AB)])
    flat = flat_metrics(summary, single, judge_metrics([]))
    assert flat["verdict/gpt-4o_mini_rate"] == 1.0
    assert flat["verdict/x_y_rate"] == 0.0
    assert "accuracy/ba" not in flat and "agreement/positional" not in flat
    assert "latency/p50_s" not in flat
    assert "accuracy/ab" not in flat_metrics(summary, None, judge_metrics([]))


def test_render_console_prints_the_accuracy_line() -> None:
    console = Console(record=True, width=80)
    gold = gold_metrics(GOLD_ITEMS, GOLD_JUDGMENTS)
    render_console(summary_fixture(), gold, judge_metrics(judge_fixture()), "demo [run]", console)
    text = console.export_text()
    assert "accuracy AB 75.0% / BA 25.0% / mean 50.0% / both 25.0% / positional agreement 50.0%" in text
    assert "demo [run]" in text
    assert "no_label 1" in text
    assert len(text.strip().splitlines()) <= 15


def test_render_console_without_gold() -> None:
    console = Console(record=True, width=80)
    render_console(summary_fixture(), None, judge_metrics([]), "demo", console)
    text = console.export_text()
    assert "accuracy" not in text
    assert "items 5" in text
