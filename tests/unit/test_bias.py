"""Unit tests for runner.modes.bias: position, length and self-preference bias of a pairwise judge."""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import pytest
from scipy import stats as scipy_stats

from runner.core.types import TIE, JudgeRequest, JudgeResponse, Judgment, Order, Status, Verdict
from runner.inputs.datasets import ItemRef
from runner.judging.parsers.labels import parse_verdict
from runner.modes.bias import bias_metrics, bias_report, position_bias
from runner.modes.summary import gold_metrics
from runner.modes.trust import bias_lines
from tests.builders import AB, BA, BASE, OURS, judgment, picking, ref, shown

LLMBAR = Path(__file__).resolve().parents[2] / "runner" / "data" / "llmbar"

pytestmark = pytest.mark.filterwarnings("error")


def report(judgments, refs=(), **kw):
    return bias_report(list(refs), judgments, OURS, BASE, **kw)


def test_consistency_counts_pairs_in_both_orders_and_unscored_never_agrees():
    js = [
        judgment("same", AB, "A"), judgment("same", BA, "B"),  # ours both times
        judgment("first", AB, "A"), judgment("first", BA, "A"),  # first-shown side both times
        judgment("second", AB, "B"), judgment("second", BA, "B"),  # second-shown side both times
        judgment("half", AB, "A"), judgment("half", BA, None),  # one order unreadable
        judgment("ties", AB, TIE), judgment("ties", BA, TIE),  # the same winner: tie
        judgment("unread", AB, None), judgment("unread", BA, None, status=Status.ERROR),
        judgment("single", AB, "A"),  # one order only: no pair
        judgment("same", AB, "A", repeat=1),  # another repeat, one order only
    ]
    pos = report(js)["position"]
    assert pos["pairs_both_orders"] == 6
    assert pos["consistent"] == 2
    assert pos["consistency_rate"] == pytest.approx(2 / 6)
    assert pos["inconsistent_toward_first"] == 1
    assert pos["inconsistent_toward_second"] == 1


def test_first_and_second_rates_and_binomial_p_match_scipy():
    js = [judgment(f"a{i}", AB if i % 2 else BA, "A") for i in range(7)]
    js += [judgment(f"b{i}", AB, "B") for i in range(3)]
    js += [judgment("t1", AB, TIE), judgment("t2", BA, TIE), judgment("u", AB, None)]
    pos = report(js)["position"]
    assert pos["n_decisive"] == 10  # ties and the unscored verdict are not decisive
    assert pos["first_position_rate"] == pytest.approx(0.7)
    assert pos["second_position_rate"] == pytest.approx(0.3)
    assert pos["binomial_p"] == pytest.approx(scipy_stats.binomtest(7, 10, 0.5).pvalue)
    assert pos["binomial_p"] == pytest.approx(2 * 176 / 1024)  # P(X >= 7 | n=10) = 176/1024, two-sided


def test_a_judge_that_always_says_a_is_never_consistent():
    js = [judgment(f"i{i}", order, "A") for i in range(20) for order in (AB, BA)]
    pos = report(js)["position"]
    assert pos["first_position_rate"] == 1.0
    assert pos["second_position_rate"] == 0.0
    assert pos["consistency_rate"] == 0.0
    assert pos["inconsistent_toward_first"] == 20 and pos["inconsistent_toward_second"] == 0
    assert pos["binomial_p"] == pytest.approx(2 * 0.5**40)  # 40 verdicts as if independent ...
    assert pos["sign_test_p"] == pytest.approx(2 * 0.5**20)  # ... but 20 items: the sign test


def test_every_inconsistency_type_is_counted_and_the_item_is_the_unit_of_the_sign_test():
    js = [judgment("aa", AB, "A"), judgment("aa", BA, "A"),  # toward first, twice
          judgment("at", AB, "A"), judgment("at", BA, TIE),  # toward first, once
          judgment("ta", AB, TIE), judgment("ta", BA, "A"),
          judgment("bt", AB, "B"), judgment("bt", BA, TIE),  # toward second, once
          judgment("tb", AB, TIE), judgment("tb", BA, "B"),
          judgment("bb", AB, "B"), judgment("bb", BA, "B"),
          judgment("au", AB, "A"), judgment("au", BA, None),  # no verdict in one order: no lean
          judgment("ok", AB, "A"), judgment("ok", BA, "B")]  # consistent: ours both times
    pos = report(js)["position"]
    assert pos["inconsistent_by_type"] == {"A,-": 1, "A,A": 1, "A,tie": 1, "B,B": 1, "B,tie": 1, "tie,A": 1,
                                           "tie,B": 1}
    assert (pos["inconsistent_toward_first"], pos["inconsistent_toward_second"]) == (3, 3)
    assert pos["inconsistent_unscored"] == 1
    assert pos["sign_test_p"] == pytest.approx(scipy_stats.binomtest(3, 6, 0.5).pvalue)
    assert (pos["items_toward_first"], pos["items_toward_second"]) == (3, 3)


def test_identical_repeats_give_the_sign_test_p_of_one_repeat():
    """Issue 31 point 3: the item is the unit, so three identical repeats are not three times the evidence."""
    def judged(repeats: int) -> dict:
        js = [judgment(f"i{i}", order, "A", repeat=r) for i in range(12) for r in range(repeats) for order in (AB, BA)]
        js += [judgment(f"j{i}", order, "B", repeat=r) for i in range(2) for r in range(repeats) for order in (AB, BA)]
        return report(js)["position"]

    one, three = judged(1), judged(3)
    assert one["sign_test_p"] == pytest.approx(scipy_stats.binomtest(12, 14, 0.5).pvalue)
    assert three["sign_test_p"] == one["sign_test_p"]
    assert (three["items_toward_first"], three["items_toward_second"]) == (12, 2)
    assert three["inconsistent_toward_first"] == 36  # the pairs are still counted, as pairs


@pytest.mark.parametrize("orders", [(AB, BA), (AB,)])
def test_the_logged_position_p_is_the_reports_and_repeats_do_not_shrink_it(orders):
    """Issue 44 point 4: ``bias/first_position_p`` (metrics.json, MLflow) is the p-value the console and report.html
    show, the sign test over items; three identical repeats are the same information as one."""
    def judged(repeats: int) -> dict:
        js = [judgment(f"i{i}", order, "A", repeat=r) for i in range(9) for r in range(repeats) for order in orders]
        js += [judgment(f"j{i}", order, "B", repeat=r) for i in range(2) for r in range(repeats) for order in orders]
        return report(js)

    one, three = judged(1), judged(3)
    logged = bias_metrics(three)["bias/first_position_p"]
    assert logged == three["position"]["sign_test_p"] == bias_metrics(one)["bias/first_position_p"]
    assert logged == pytest.approx(scipy_stats.binomtest(9, 11, 0.5).pvalue)  # 11 items, not 33 or 66 verdicts
    assert f"(sign test over items p={logged:.2g})" in bias_lines(three)[0]
    assert three["position"]["binomial_p"] < logged  # every verdict a unit: in summary.json only, never logged


def test_an_item_leans_by_the_sum_of_its_repeats_and_a_balanced_item_drops_out():
    js = [judgment("x", AB, "A", repeat=0), judgment("x", BA, "A", repeat=0),  # +2
          judgment("x", AB, "B", repeat=1), judgment("x", BA, TIE, repeat=1),  # -1: x leans first (+1)
          judgment("y", AB, "A", repeat=0), judgment("y", BA, TIE, repeat=0),  # +1
          judgment("y", AB, TIE, repeat=1), judgment("y", BA, "B", repeat=1),  # -1: y leans nowhere
          judgment("z", AB, "B", repeat=0), judgment("z", BA, "B", repeat=0)]  # -2: z leans second
    pos = report(js)["position"]
    assert (pos["items_toward_first"], pos["items_toward_second"]) == (1, 1)
    assert (pos["inconsistent_toward_first"], pos["inconsistent_toward_second"]) == (2, 3)
    assert pos["sign_test_p"] == pytest.approx(1.0)


def test_length_preference_beyond_the_labels():
    refs = [
        ref("L1", OURS, (500, 100)), ref("L2", BASE, (500, 100)),  # ours longer: gold picks it once in two
        ref("L5", BASE, (100, 500)), ref("L6", OURS, (100, 500)),  # base longer: gold picks it once in two
        ref("nogold", None, (500, 100)), ref("tiegold", TIE, (500, 100)),  # contrast, but no decisive gold
        ref("gap30", OURS, (130, 100)), ref("nolen", OURS, ()),  # no length contrast: left out
    ]
    longer = {"L1": OURS, "L2": OURS, "L5": BASE, "L6": BASE, "nogold": OURS, "tiegold": OURS,
              "gap30": OURS, "nolen": OURS}
    js = [picking(item_id, system, order) for item_id, system in longer.items() for order in (AB, BA)]
    js += [judgment("L1", AB, TIE, repeat=1), judgment("L2", BA, None, repeat=1)]  # not decisive
    length = report(js, refs)["length"]
    assert length["n"] == 12
    assert length["longer_wins_rate"] == 1.0
    assert length["n_gold"] == 8
    assert length["longer_wins_rate_gold"] == 1.0
    assert length["longer_is_gold_rate"] == 0.5
    assert length["excess"] == 0.5


def test_length_gap_threshold_is_a_parameter():
    refs = [ref("small", OURS, (130, 100))]
    js = [picking("small", OURS, AB)]
    assert report(js, refs)["length"]["n"] == 0
    length = report(js, refs, min_length_gap=29)["length"]
    assert length["n"] == 1 and length["excess"] == 0.0


def test_ties_and_unscored_only_leave_every_rate_undefined():
    refs = [ref("x", OURS, (500, 100))]
    js = [judgment("x", AB, TIE), judgment("x", BA, None)]
    out = report(js, refs, judge_family="openai", families={OURS: "openai"})
    assert out["position"]["n_decisive"] == 0
    assert out["position"]["first_position_rate"] is None and out["position"]["binomial_p"] is None
    assert out["position"]["consistency_rate"] == 0.0  # one pair, not consistent
    assert out["length"]["n"] == 0 and out["length"]["longer_wins_rate"] is None
    assert out["self_preference"]["n_decisive"] == 0 and out["self_preference"]["own_win_rate"] is None


def test_self_preference_with_families():
    refs = [ref(f"o{i}", OURS) for i in range(4)] + [ref(f"b{i}", BASE) for i in range(4)]
    js = [picking(f"b{i}", OURS if i < 3 else BASE, AB) for i in range(4)]  # 3 of 4 wrongly pick own side
    js += [picking(f"o{i}", BASE if i < 1 else OURS, BA) for i in range(4)]  # 1 of 4 wrongly pick the other
    js.append(judgment("o0", AB, TIE))
    out = report(js, refs, judge_family="OpenAI ", families={OURS: "openai", BASE: "anthropic"})
    self_pref = out["self_preference"]
    assert self_pref["judge_family"] == "OpenAI "
    assert self_pref["own_system"] == OURS
    assert self_pref["n_decisive"] == 8
    assert self_pref["own_win_rate"] == pytest.approx(6 / 8)
    assert self_pref["own_win_rate_when_gold_other"] == pytest.approx(0.75)
    assert self_pref["other_win_rate_when_gold_own"] == pytest.approx(0.25)
    assert self_pref["excess_error"] == pytest.approx(0.5)
    # the judge's family wrote the baseline instead: the errors swap roles and the excess changes sign
    flipped = report(js, refs, judge_family="anthropic", families={OURS: "openai", BASE: "anthropic"})
    assert flipped["self_preference"]["own_system"] == BASE
    assert flipped["self_preference"]["excess_error"] == pytest.approx(-0.5)


@pytest.mark.parametrize(("judge_family", "families"), [
    (None, {OURS: "openai"}),
    ("openai", None),
    ("openai", {OURS: "anthropic", BASE: None}),
    ("openai", {OURS: "openai", BASE: "openai"}),  # both sides: nothing to contrast
    ("", {OURS: None}),
])
def test_no_self_preference_section_without_exactly_one_own_side(judge_family, families):
    out = report([picking("x", OURS, AB)], [ref("x", OURS)], judge_family=judge_family, families=families)
    assert "self_preference" not in out
    assert "bias/self_own_win_rate" not in bias_metrics(out)


def test_synthesis_round_replaces_the_first_round():
    js = [judgment("x", AB, "A"), judgment("x", BA, "A"),  # inconsistent first round
          judgment("x", AB, "A", stage="synthesis"), judgment("x", BA, "B", stage="synthesis"),
          judgment("x", AB, "B", stage="generate")]  # not a verdict stage
    pos = report(js)["position"]
    assert pos["pairs_both_orders"] == 1 and pos["consistent"] == 1
    assert pos["n_decisive"] == 2 and pos["first_position_rate"] == 0.5
    assert pos["inconsistent_toward_first"] == 0


def test_no_judgments_gives_none_everywhere():
    out = report([], [ref("x", OURS, (500, 100))], judge_family="openai", families={OURS: "openai"})
    assert out["position"] == {
        "pairs_both_orders": 0, "consistent": 0, "consistency_rate": None, "first_position_rate": None,
        "second_position_rate": None, "n_decisive": 0, "binomial_p": None,
        "inconsistent_toward_first": 0, "inconsistent_toward_second": 0, "sign_test_p": None,
        "inconsistent_unscored": 0, "inconsistent_by_type": {}, "unit": "pair",
        "items_toward_first": 0, "items_toward_second": 0, "sign_test_unit": "item",
    }
    assert out["length"]["longer_wins_rate"] is None and out["length"]["excess"] is None
    assert out["self_preference"]["excess_error"] is None
    assert bias_metrics(out) == {}
    json.dumps(out, allow_nan=False)


def test_one_order_only_and_no_gold():
    refs = [ref(f"i{i}", None, (500, 100)) for i in range(4)]
    js = [picking(f"i{i}", OURS if i else BASE, AB) for i in range(4)]
    out = report(js, refs)
    assert out["position"]["pairs_both_orders"] == 0 and out["position"]["consistency_rate"] is None
    assert out["position"]["first_position_rate"] == 0.75
    assert out["length"]["longer_wins_rate"] == 0.75
    assert out["length"]["n_gold"] == 0
    assert out["length"]["longer_is_gold_rate"] is None and out["length"]["excess"] is None
    metrics = bias_metrics(out)
    assert set(metrics) == {"bias/first_position_rate", "bias/second_position_rate", "bias/first_position_p",
                            "bias/longer_wins_rate"}


def test_bias_metrics_flattens_every_key():
    refs = [ref("x", OURS, (500, 100)), ref("y", BASE, (100, 500))]
    js = [picking("x", OURS, AB), picking("x", OURS, BA), picking("y", OURS, AB), picking("y", BASE, BA)]
    out = report(js, refs, judge_family="openai", families={OURS: "openai", BASE: "meta"})
    metrics = bias_metrics(out)
    assert metrics == {
        "bias/position_consistency": 0.5,
        "bias/first_position_rate": 0.75,
        "bias/second_position_rate": 0.25,
        "bias/first_position_p": 1.0,  # the sign test over items: one flipped pair (y: A, A), toward first, p = 1
        "bias/inconsistent_toward_first": 1.0,
        "bias/inconsistent_toward_second": 0.0,
        "bias/longer_wins_rate": 0.75,
        "bias/longer_is_gold_rate": 1.0,
        "bias/length_excess": -0.25,
        "bias/self_own_win_rate": 0.75,
        "bias/self_excess_error": 0.5,  # ours on y (gold base) in 1 of 2, base on x (gold ours) in 0 of 2
    }
    assert all(isinstance(v, float) and math.isfinite(v) for v in metrics.values())


def test_invalid_arguments_raise():
    with pytest.raises(ValueError, match="different systems"):
        bias_report([], [], OURS, OURS)
    with pytest.raises(ValueError, match="min_length_gap"):
        report([], min_length_gap=-1)


@cache
def llmbar_natural() -> tuple[list[ItemRef], list[Judgment]]:
    """LLMBar Natural's rows and GPT-4's recorded vanilla verdicts, as a run would hold them."""
    rows = [json.loads(line) for line in (LLMBAR / "natural.jsonl").read_text(encoding="utf-8").splitlines()]
    refs = [ItemRef(r["id"], f"output_{r['label']}", "natural", lengths=(len(r["output_1"]), len(r["output_2"])))
            for r in rows]
    judgments = []
    for line in (LLMBAR / "replay" / "gpt-4.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["strategy"] != "vanilla" or not rec["item"].startswith("natural-"):
            continue
        verdict = parse_verdict("llmbar_output", rec["text"], ("A", "B"), {})
        a, b = shown(Order(rec["order"]), "output_1", "output_2")
        winner = {"A": a, "B": b}.get(verdict.label)
        judgments.append(Judgment(JudgeRequest(rec["item"], 0, Order(rec["order"]), rec["stage"], rec["key"]),
                                  JudgeResponse(text=rec["text"]), verdict, winner,
                                  Status.SCORED if verdict.ok else Status.UNSCORED))
    return refs, judgments


def test_llmbar_natural_gpt4_vanilla_consistency_is_the_published_positional_agreement():
    refs, judgments = llmbar_natural()
    published = json.loads((LLMBAR / "statistics" / "gpt-4_vanilla.json").read_text())["equal"]  # "95 / 100 = 95.0%"
    agree, total = (int(n) for n in published.split("=")[0].split("/"))
    out = bias_report(refs, judgments, "output_1", "output_2")
    pos = out["position"]
    assert (pos["consistent"], pos["pairs_both_orders"]) == (agree, total) == (95, 100)
    assert pos["consistency_rate"] == pytest.approx(0.95)
    assert pos["consistency_rate"] == pytest.approx(gold_metrics(refs, judgments)["positional_agreement"])
    assert pos["inconsistent_toward_first"] + pos["inconsistent_toward_second"] == total - agree
    assert pos["n_decisive"] == 200
    n_first = sum(j.verdict.label == "A" for j in judgments)
    assert pos["first_position_rate"] == n_first / 200 and pos["inconsistent_toward_first"] == 3
    assert out["length"]["n_gold"] <= out["length"]["n"] <= 200


def test_pointwise_length_preference_beyond_the_human_scores() -> None:
    from runner.modes.bias import length_score_bias

    lengths = [10, 20, 30, 40, 50]
    judge = [1.0, 2.0, 3.0, 4.0, 5.0]  # follows length perfectly
    human = [3.0, 1.0, 4.0, 2.0, 5.0]  # rho 0.5 with length
    out = length_score_bias(lengths, judge, human)
    assert out["judge_length_spearman"] == pytest.approx(1.0)
    assert out["human_length_spearman"] == pytest.approx(0.5)
    assert out["excess"] == pytest.approx(0.5)
    without_humans = length_score_bias(lengths, judge, [None] * 5)
    assert without_humans["human_length_spearman"] is None and without_humans["excess"] is None
    assert length_score_bias([1, 2], [1.0, 2.0], [None, None])["judge_length_spearman"] is None


def test_a_single_judges_both_orders_verdict_under_both_policies():
    from runner.core.run_settings import MetricsConfig
    from runner.modes.sections import TrustSection
    from runner.modes.trust import both_orders, console_lines

    refs = [ref("right", OURS), ref("flip", TIE), ref("flip2", OURS), ref("wrong", BASE), ref("half", OURS)]
    js = [picking("right", OURS, AB), picking("right", OURS, BA),
          picking("flip", OURS, AB), picking("flip", BASE, BA),  # inconsistent, gold a tie
          picking("flip2", OURS, AB), picking("flip2", BASE, BA),  # inconsistent, gold ours
          picking("wrong", OURS, AB), picking("wrong", OURS, BA),
          judgment("half", AB, "A"), judgment("half", BA, None)]  # one order unreadable: inconsistent
    got = both_orders(refs, js, MetricsConfig())
    assert (got["n_pairs"], got["inconsistent"]) == (5, 3)
    assert got["inconsistent_as_tie"]["estimate"] == pytest.approx(2 / 5)  # right, and flip (a tie is its gold)
    assert got["inconsistent_as_incorrect"]["estimate"] == pytest.approx(1 / 5)  # right only
    assert got["inconsistent_as_tie"]["method"] == "wilson" and got["inconsistent_as_tie"]["low"] > 0
    trust = {"bootstrap": {"level": 0.95, "resamples": 10, "seed": 0}, "win_rate": None, "both_orders": got}
    (line,) = console_lines(TrustSection.from_json(trust, "trust"))
    assert line.startswith("both orders per item (5 pairs, 3 inconsistent): accuracy with inconsistent as tie 40.00")


def _reference_position(finals):
    """The position bias as it was computed before runner.modes.order_pairs: a dict of [AB, BA] outcomes per (item,
    repeat), the later judgment of a key replacing the earlier."""
    pairs, n_first, n_decisive = {}, 0, 0
    for j in finals:
        outcome = (j.verdict.label, j.winner) if j.status == Status.SCORED else None
        slot = 0 if j.request.order is AB else 1
        pairs.setdefault((j.item_id, j.request.repeat), ["unseen", "unseen"])[slot] = outcome
        if outcome is not None and j.verdict.label in ("A", "B"):
            n_decisive += 1
            n_first += j.verdict.label == "A"
    both = [(key, p) for key, p in pairs.items() if "unseen" not in p]
    consistent = sum(ab is not None and ba is not None and ab[1] == ba[1] for _, (ab, ba) in both)
    types, toward, lean_of, unscored = {}, {1: 0, -1: 0}, {}, 0
    for (item, _), (ab, ba) in both:
        if ab is not None and ba is not None and ab[1] == ba[1]:
            continue
        key = f"{ab[0] if ab else '-'},{ba[0] if ba else '-'}"
        types[key] = types.get(key, 0) + 1
        if ab is None or ba is None:
            unscored += 1
            continue
        lean = sum(1 if label == "A" else -1 if label == "B" else 0 for label in (ab[0], ba[0]))
        if lean:
            toward[1 if lean > 0 else -1] += 1
            lean_of[item] = lean_of.get(item, 0) + lean
    return {"pairs_both_orders": len(both), "consistent": consistent, "n_first": n_first, "n_decisive": n_decisive,
            "toward": toward, "types": dict(sorted(types.items())), "unscored": unscored,
            "items_first": sum(v > 0 for v in lean_of.values()), "items_second": sum(v < 0 for v in lean_of.values())}


@pytest.mark.parametrize("seed", range(5))
def test_position_bias_equals_the_dict_of_pairs_it_replaced(seed):
    """runner.modes.order_pairs groups the pairs by sorting integer columns; on shuffled judgments with missing
    orders, a key judged twice (the later counts), unscored, errored and odd (label, winner) outcomes, and several
    repeats, every count equals that of the dict of pairs it replaced."""
    import random

    rng = random.Random(seed)
    js = []
    for n in range(200):
        for repeat in range(rng.choice([1, 3])):
            for order in (AB, BA):
                for _ in range(rng.choice([0, 1, 1, 1, 2])):
                    kind = rng.random()
                    if kind < 0.7:
                        js.append(judgment(f"i{n}", order, rng.choice(["A", "B", TIE, None]), repeat=repeat))
                    elif kind < 0.8:
                        js.append(judgment(f"i{n}", order, None, repeat=repeat, status=Status.ERROR))
                    else:  # a label that names no system, scored
                        js.append(Judgment(JudgeRequest(f"i{n}", repeat, order, "judge", ""), JudgeResponse("..."),
                                           Verdict("C"), None, Status.SCORED))
    rng.shuffle(js)
    ref_ = _reference_position(js)
    pos = position_bias(js)  # with the keys judged twice: bias_report's final_judgments would keep the later
    assert ref_["pairs_both_orders"] > 50 and ref_["unscored"] > 0 and len(ref_["types"]) > 5
    assert (pos["pairs_both_orders"], pos["consistent"], pos["n_decisive"]) == (
        ref_["pairs_both_orders"], ref_["consistent"], ref_["n_decisive"])
    assert pos["first_position_rate"] == ref_["n_first"] / ref_["n_decisive"]
    assert (pos["inconsistent_toward_first"], pos["inconsistent_toward_second"]) == (ref_["toward"][1],
                                                                                   ref_["toward"][-1])
    assert pos["inconsistent_by_type"] == ref_["types"] and pos["inconsistent_unscored"] == ref_["unscored"]
    assert (pos["items_toward_first"], pos["items_toward_second"]) == (ref_["items_first"], ref_["items_second"])
