"""Issue 31 point 8: published protocols by config only. JudgeBench's scoring rule is ``aggregation=mean`` (a single
judge) or ``judge.combine=mean`` (an ensemble), each with its per-category table; FastChat's MT-Bench position
consistency (``rubric=mtbench_fastchat``) counts every pair, an unreadable order as its error column."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from runner.core.types import TIE, Order
from runner.inputs.datasets import ItemRef
from runner.modes import panel
from runner.modes.pairwise import report as pairwise_report
from tests.builders import AB, BA, BASE, OURS, ensemble_cfg, judgment, pairwise_cfg, round_trips

pytestmark = pytest.mark.usefixtures("hydra_conf")
JUDGEBENCH_RUN = Path("/work/shared/data/judgebench/outputs/gpt__arena_hard__o1-mini-2024-09-12.jsonl")
POSITIONS = ("A", "B", TIE, None)  # a positional verdict, None = unreadable


def judgebench_correct(first: str | None, second: str | None) -> bool:
    """JudgeBench's utils/metrics.py for a pair whose label is ours: +1 per order that picks ours, -1 per order
    that picks the baseline, correct when the sum is above 0 (AB shows ours as A, BA as B)."""
    def score(verdict: str | None, ours: str) -> int:
        return 0 if verdict in (None, TIE) else 1 if verdict == ours else -1
    return score(first, "A") + score(second, "B") > 0


def every_pair_of_orders() -> tuple[list[ItemRef], list]:
    """One item per (AB verdict, BA verdict) combination, gold ours; the category names the AB verdict."""
    refs, judgments = [], []
    for n, (first, second) in enumerate(itertools.product(POSITIONS, POSITIONS)):
        item = f"i{n}"
        refs.append(ItemRef(item, OURS, f"test:{n}", category=f"first_{first}", lengths=(100, 100)))
        judgments += [judgment(item, AB, first), judgment(item, BA, second)]
    return refs, judgments


def test_aggregation_mean_is_judgebenchs_rule_for_a_single_judge_with_a_table_per_category() -> None:
    refs, judgments = every_pair_of_orders()
    typed, metrics = pairwise_report.build(pairwise_cfg("aggregation=mean", "order=both"), refs, judgments)
    doc = typed.to_json()
    verdicts = {item: result["final_verdict"] for item, result in doc["aggregated_results"].items()}
    for n, (first, second) in enumerate(itertools.product(POSITIONS, POSITIONS)):
        assert (verdicts[f"i{n}"] == OURS) == judgebench_correct(first, second), (first, second)
    assert verdicts["i2"] == OURS  # (ours, tie) counts as correct, as JudgeBench scores it
    table = doc["statistics"]["by_category"]
    for first in POSITIONS:
        expected = [judgebench_correct(first, second) for second in POSITIONS]
        assert table[f"first_{first}"]["verdict_accuracy"]["value"] == sum(expected) / len(expected)
        assert metrics[f"by_category/first_{first}/verdict_accuracy"] == sum(expected) / len(expected)
    round_trips(doc)


def test_an_ensembles_verdicts_have_a_table_per_category() -> None:
    refs, judgments = every_pair_of_orders()
    cfg = ensemble_cfg("judge.combine=mean")
    report, metrics, _ = panel.build(cfg, refs, {"replay_gpt4": judgments, "replay_chatgpt": judgments})
    table = report.to_json()["statistics"]["by_category"]
    # two identical members: the mean of their preferences is each one's, JudgeBench's rule per item
    for first in POSITIONS:
        expected = [judgebench_correct(first, second) for second in POSITIONS]
        assert table[f"first_{first}"]["verdict_accuracy"]["value"] == sum(expected) / len(expected)
    assert metrics["by_category/first_A/verdict_accuracy"] == table["first_A"]["verdict_accuracy"]["value"]


@pytest.mark.skipif(not JUDGEBENCH_RUN.is_file(), reason="the shared JudgeBench copy is not on this machine")
def test_judgebenchs_published_o1_mini_arena_hard_score_is_aggregation_mean() -> None:
    label = {"A>B": "A", "B>A": "B", "A=B": TIE}  # positional in the order shown (the second one swapped)
    rows = [json.loads(line) for line in JUDGEBENCH_RUN.read_text().splitlines()]
    refs, judgments = [], []
    for n, row in enumerate(rows):
        item, (first, second) = row["pair_id"], row["judgments"]
        # ours is response A; JudgeBench's source (knowledge, reasoning, math, coding) is the category
        refs.append(ItemRef(item, OURS if row["label"] == "A>B" else BASE, f"judgebench:{n}",
                            category=row["source"].split("-")[0], lengths=(100, 100)))
        judgments += [judgment(item, AB, label.get(first["decision"])),
                      judgment(item, BA, label.get(second["decision"]))]
    doc = pairwise_report.build(pairwise_cfg("aggregation=mean", "order=both"), refs, judgments)[0].to_json()
    table = doc["statistics"]["by_category"]
    correct = sum(row["verdict_accuracy"]["value"] * row["verdict_accuracy"]["n"] for row in table.values())
    assert sum(row["verdict_accuracy"]["n"] for row in table.values()) == 350
    assert round(correct) == 230 and round(100 * correct / 350, 2) == 65.71  # JudgeBench's o1-mini, Arena-Hard
    assert round(100 * doc["trust"]["both_orders"]["inconsistent_as_incorrect"]["estimate"], 2) == 58.00


def test_fastchat_consistency_counts_every_pair_with_errors_in_the_denominator() -> None:
    # 12 pairs: 3 consistent, 7 flipped with the swap, 2 with an unreadable order (FastChat's "error")
    verdicts = [("A", "B")] * 3 + [("A", "A")] * 5 + [("B", "B")] * 2 + [("A", None), (None, "B")]
    refs = [ItemRef(f"i{n}", None, f"test:{n}", lengths=(100, 100)) for n in range(len(verdicts))]
    judgments = [j for n, (ab, ba) in enumerate(verdicts) for j in (judgment(f"i{n}", AB, ab),
                                                                   judgment(f"i{n}", BA, ba))]
    report, metrics = pairwise_report.build(pairwise_cfg("rubric=mtbench_fastchat"), refs, judgments)
    doc = report.to_json()
    position = doc["bias"]["position"]
    # Zheng et al. 2023, Table 2: consistency, biased toward first, toward second and error sum to 100%
    assert (position["pairs_both_orders"], position["consistent"]) == (12, 3)
    assert position["consistency_rate"] == 0.25 and metrics["bias/position_consistency"] == 0.25
    assert (position["inconsistent_toward_first"], position["inconsistent_toward_second"],
            position["inconsistent_unscored"]) == (5, 2, 2)
    assert doc["pair_errors"]["dropped_pairs"] == 2  # still left out of the verdicts, as FastChat's agreement does


def test_the_overall_verdict_accuracy_is_shown_once_with_its_interval_over_items() -> None:
    """Issue 44 point 4: ``overall/verdict_accuracy`` over every gold item (JudgeBench's headline); left out where it
    would repeat a number shown under another name: one judgment per item (``accuracy/overall``) and an ensemble
    (its ``agreement/accuracy_all`` is over its verdicts)."""
    refs, judgments = every_pair_of_orders()
    typed, metrics = pairwise_report.build(pairwise_cfg("aggregation=mean", "order=both"), refs, judgments)
    expected = sum(judgebench_correct(a, b) for a, b in itertools.product(POSITIONS, POSITIONS)) / len(refs)
    overall = typed.to_json()["statistics"]["overall"]["all"]["verdict_accuracy"]
    assert (overall["value"], overall["n"]) == (expected, 16) and overall["ci_low"] < expected < overall["ci_high"]
    assert metrics["overall/verdict_accuracy"] == expected and metrics["overall/n"] == 16
    one_order = [j for j in judgments if Order(j.request.order) is Order.AB]
    assert len(one_order) == len(refs)
    typed, metrics = pairwise_report.build(pairwise_cfg("order=fixed"), refs, one_order)
    assert "overall" not in typed.to_json()["statistics"] and "overall/verdict_accuracy" not in metrics
    report, metrics, _ = panel.build(ensemble_cfg("judge.combine=mean"), refs,
                                     {"replay_gpt4": judgments, "replay_chatgpt": judgments})
    assert "overall" not in report.to_json()["statistics"] and metrics["agreement/accuracy_all"] == expected
