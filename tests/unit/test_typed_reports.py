"""Unit tests for the typed report sections (runner.modes.record, runner.modes.sections): every document the real
builders write reads into its record and writes back identically (the same keys, in the same order, with the same
values), and a document that lacks a key the builder always writes fails naming the section and the key."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import pytest

from runner.core.config import RunConfig
from runner.core.types import Judgment
from runner.inputs.datasets import ItemRef
from runner.modes import panel, scorecard
from runner.modes.catalog import mode_named
from runner.modes.pairwise import report as pairwise_report
from runner.modes.pointwise import report as pointwise_report
from runner.modes.pointwise.setup import PointwiseSetup
from runner.modes.pointwise.setup import prepare as prepare_pointwise
from runner.modes.record import Record, ReportFormatError
from runner.modes.sections import (
    BiasReport,
    Gate,
    GoldAccuracy,
    PairwiseEnsemble,
    PairwiseReport,
    PointwiseEnsemble,
    PointwiseReport,
    TrustSection,
    VerdictSummary,
)
from runner.modes.summary import judge_metrics
from tests.builders import (
    AB,
    BA,
    BASE,
    OURS,
    PROMPTS,
    both_orders,
    errored,
    judgment,
    make_scoring,
    pairwise_cfg,
    picking,
    refs,
    round_trips,
    same,
    scored,
    to_run_config,
    unscored,
)

pytestmark = pytest.mark.usefixtures("hydra_conf")


# --- pairwise ----------------------------------------------------------------------------------------------------


def test_a_single_judge_with_gold_groups_self_preference_and_human_ceiling_round_trips() -> None:
    cfg = pairwise_cfg(family="openai")
    typed, _ = pairwise_report.build(cfg, refs(gold=True, groups=True, annotations=True), both_orders())
    doc = typed.to_json()
    assert list(doc) == ["summary", "aggregated_results", "gold", "trust", "bias", "statistics"]
    assert {"gold_agreement", "human_ceiling"} <= set(doc["trust"]) and "self_preference" in doc["bias"]
    assert set(doc["statistics"]) == {"by_category", "by_tag", "chance_corrected", "overall"}  # the last two: gold
    round_trips(doc)
    assert typed == PairwiseReport.from_json(doc) and typed.gold == GoldAccuracy.from_json(doc["gold"])
    assert typed.trust.gold_agreement is not None
    assert typed.statistics is not None and typed.statistics["by_category"]["math"]["win_rate"].n == 4


def test_a_single_judge_without_gold_in_one_order_round_trips() -> None:
    js = [picking(f"i{n}", OURS, AB) for n in range(5)]
    typed, _ = pairwise_report.build(pairwise_cfg(), refs(gold=False), js)
    doc = typed.to_json()
    assert typed.gold is None and "gold" not in doc and "statistics" not in doc
    assert list(doc["trust"]) == ["bootstrap", "win_rate"] and "self_preference" not in doc["bias"]
    round_trips(doc)


def test_no_verdict_at_all_round_trips() -> None:
    report, _ = pairwise_report.build(pairwise_cfg(), refs(gold=True), [judgment("i0", AB, None)])
    doc = report.to_json()
    assert doc["trust"]["win_rate"] is None
    round_trips(doc)


def test_swap_and_synthesize_judgments_round_trip() -> None:
    js = both_orders() + [picking("i1", BASE, AB, stage="synthesis"), picking("i1", OURS, BA, stage="synthesis")]
    report, _ = pairwise_report.build(pairwise_cfg(), refs(gold=True), js)
    doc = report.to_json()
    round_trips(doc)


@pytest.mark.parametrize("gold", [True, False])
def test_an_ensemble_round_trips_with_and_without_gold(gold: bool) -> None:
    cfg = pairwise_cfg("judge=ensemble")
    members = {"replay_gpt4": both_orders(), "replay_chatgpt": [picking(f"i{n}", OURS, o) for n in range(8)
                                                                for o in (AB, BA)]}
    report, _, member_reports = panel.build(cfg, refs(gold=gold), members)
    doc = report.to_json()
    section = doc["ensemble"]
    assert ("versus_members" in section) is gold and "dawid_skene" in section
    round_trips(doc)
    for member_report, _ in member_reports.values():
        round_trips(member_report.to_json())
    typed = PairwiseEnsemble.from_json(section)
    assert list(typed.estimates) == ["dawid_skene"] and same(section, typed.to_json())


# --- pointwise ---------------------------------------------------------------------------------------------------


def pointwise(threshold: float | None = 3.5, checks: bool = True) -> tuple[RunConfig, PointwiseSetup]:
    cfg = to_run_config(["experiment=agent_rubric"])
    _, setup = prepare_pointwise(cfg, PROMPTS)
    specs = (scorecard.CheckSpec("ai_phrases", 0.2),) if checks else ()
    return cfg, dataclasses.replace(setup, scoring=make_scoring(threshold), checks=specs)


def point_refs(human: bool = True, groups: bool = True) -> list[ItemRef]:
    return [ItemRef(f"p{n}", None, f"test:{n}", tags=("retrieval",) if groups and n % 2 else (),
                    category=("casual" if n < 3 else "formal") if groups else None,
                    human_score=float(1 + n % 5) if human else None, lengths=(50 + 40 * n,)) for n in range(6)]


def point_judgments(repeats: int) -> list[Judgment]:
    js = [scored(f"p{n}", r, 1 + (n + r) % 5, 1 + n % 5, reasoning=f"because {n}\nmore",
                 improvement_suggestions=["shorter"]) for n in range(4) for r in range(repeats)]
    return js + [unscored("p4", 0)] + [errored("p5", r) for r in range(repeats)]


@pytest.mark.parametrize(("threshold", "repeats", "human", "groups", "checks"), [
    (3.5, 3, True, True, True),  # everything: pass rate, consistency, human scores, tags, categories, checks
    (None, 1, False, False, False),  # nothing optional
    (3.5, 1, True, False, True),
])
def test_a_scorecard_round_trips(threshold: float | None, repeats: int, human: bool, groups: bool,
                                 checks: bool) -> None:
    cfg, setup = pointwise(threshold, checks)
    violations = {"p1": {"ai_phrases": ["as an AI"]}} if checks else {}
    doc = pointwise_report.build(dataclasses.replace(cfg, repeats=repeats), setup, point_refs(human, groups),
                                 point_judgments(repeats), violations, frozenset({"p5"})).to_json()
    summary = doc["summary"]
    assert ("consistency" in summary) is (repeats > 1) and ("human_correlation" in summary) is human
    assert ("checks" in summary) is checks and ("pass_rate_ci" in summary) is (threshold is not None)
    assert bool(doc["by_tag"]) is groups and bool(doc["by_category"]) is groups and "bias" in doc
    round_trips(doc)
    typed = PointwiseReport.from_json(doc)
    assert [d.status for d in typed.detailed_results] == ["scored"] * 4 + ["unscored", "not_generated"]


@pytest.mark.parametrize("threshold", [3.5, None])
def test_a_pointwise_ensemble_round_trips(threshold: float | None) -> None:
    cfg, setup = pointwise(threshold)
    cfg = dataclasses.replace(cfg, judge=dataclasses.replace(cfg.judge, combine="mean"))
    by_member = {m: point_judgments(1) for m in ("a", "b", "c")}
    by_member["b"] = [scored(f"p{n}", 0, 5, 5) for n in range(6)]
    report, reports = pointwise_report.build_panel(cfg, setup, point_refs(), by_member, {}, frozenset())
    doc = report.to_json()
    assert ("pass_votes" in doc["ensemble"]) is (threshold is not None)
    round_trips(doc)
    for member_report in reports.values():
        round_trips(member_report.to_json())
    typed = PointwiseEnsemble.from_json(doc["ensemble"])
    assert same(doc["ensemble"], typed.to_json())
    if threshold is not None:
        assert typed.pass_votes is not None and "majority_vote" in typed.pass_votes.methods


# --- strictness --------------------------------------------------------------------------------------------------


@pytest.fixture
def pairwise_doc() -> dict[str, Any]:
    report, _ = pairwise_report.build(pairwise_cfg(family="openai"), refs(gold=True), both_orders())
    doc = report.to_json()
    return doc


def test_a_renamed_key_fails_naming_the_section_and_the_key(pairwise_doc: dict[str, Any]) -> None:
    summary = pairwise_doc["summary"]
    summary["verdict_distribution"] = summary.pop("final_verdict_distribution")
    with pytest.raises(ReportFormatError, match=r"pairwise summary\.summary: missing key 'final_verdict_distribution'"):
        mode_named("pairwise").read(pairwise_doc)
    # and so do the consumers that read it: the console, the metrics (the results API), the items
    mode = mode_named("pairwise")
    for consume in (lambda d: mode.console_lines(d, judge_metrics([])), mode.summary_metrics, mode.items):
        with pytest.raises(ReportFormatError, match="final_verdict_distribution"):
            consume(pairwise_doc)


@pytest.mark.parametrize(("path", "message"), [
    (("trust", "gold_agreement", "confusion"), r"trust\.gold_agreement: missing key 'confusion'"),
    (("bias", "position", "binomial_p"), r"bias\.position: missing key 'binomial_p'"),
    (("trust", "win_rate", "ci", "low"), r"trust\.win_rate\.ci: missing key 'low'"),
])
def test_a_missing_nested_key_is_named_with_its_path(pairwise_doc: dict[str, Any], path: tuple[str, ...],
                                                     message: str) -> None:
    parent = pairwise_doc
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    with pytest.raises(ReportFormatError, match=message):
        PairwiseReport.from_json(pairwise_doc)


def test_unknown_keys_wrong_kinds_nulls_and_another_order_are_refused(pairwise_doc: dict[str, Any]) -> None:
    trust = pairwise_doc["trust"]
    with pytest.raises(ReportFormatError, match=r"trust: unknown key\(s\) \['extra'\]"):
        TrustSection.from_json({**trust, "extra": 1}, "trust")
    with pytest.raises(ReportFormatError, match=r"summary\.tie_rate: expected a number, got str"):
        VerdictSummary.from_json({**pairwise_doc["summary"], "tie_rate": "0.5"}, "summary")
    with pytest.raises(ReportFormatError, match=r"bias\.self_preference: null where the builder leaves the key out"):
        BiasReport.from_json({**pairwise_doc["bias"], "self_preference": None}, "bias")
    with pytest.raises(ReportFormatError, match="not in the order"):
        TrustSection.from_json(dict(reversed(list(trust.items()))), "trust")


def test_the_dict_readers_accept_a_typed_section_or_its_json(pairwise_doc: dict[str, Any]) -> None:
    typed = PairwiseReport.from_json(pairwise_doc)
    assert GoldAccuracy.of(pairwise_doc["gold"]) == GoldAccuracy.of(typed.gold) == typed.gold
    assert pairwise_report.summary_metrics(typed) == mode_named("pairwise").summary_metrics(pairwise_doc)


def test_a_lenient_read_fills_what_a_partial_document_lacks() -> None:
    typed = PairwiseReport.from_json({"summary": {"total_subsets": 3}, "trust": {"win_rate": None}}, lenient=True)
    assert typed.summary.total_subsets == 3 and typed.summary.final_verdict_distribution == {}
    assert typed.trust.win_rate is None and typed.trust.gold_agreement is None and typed.aggregated_results == {}


def test_items_with_the_same_votes_share_one_read_only_copy_and_every_value_writes_back_exactly() -> None:
    # issue 12: one tuple and one count mapping per distinct vote pattern, not per item (~300 bytes an item at the
    # run's peak); never shared across values that are equal but write differently (1 vs 1.0 vs True, 0.0 vs -0.0)
    typed, _ = pairwise_report.build(pairwise_cfg(), refs(gold=False), both_orders())
    doc = typed.to_json()
    results = typed.aggregated_results
    assert results["i5"] == results["i4"] and results["i5"] is not results["i4"]
    assert results["i5"].verdicts is results["i4"].verdicts
    assert results["i5"].verdict_counts is results["i4"].verdict_counts
    with pytest.raises(TypeError):
        results["i5"].verdict_counts[OURS] = 0  # type: ignore[index]
    assert same(doc, typed.to_json())
    for kind in (1, 1.0, True):
        doc = {"free": {"value": kind, "zero": 0}, "numbers": {"value": 1 if kind is True else kind, "zero": 0.0}}
        assert [json.dumps(Loose.from_json(doc).to_json()) for _ in range(2)] == [json.dumps(doc)] * 2
    negative = {"free": {"zero": -0.0}, "numbers": {"zero": -0.0}}
    assert json.dumps(Loose.from_json(negative).to_json()) == json.dumps(negative)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Loose(Record):
    free: Mapping[str, Any]
    numbers: Mapping[str, float]


def _records(cls: type = Record) -> list[type]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_records(sub))]


def test_every_record_is_frozen_and_refuses_unknown_fields() -> None:
    import runner.modes.statistics  # noqa: F401 - Estimate is a record too

    records = {c for c in _records() if c.__module__.startswith("runner.")}
    assert {"AggregatedResult", "DetailedResult", "PairwiseReport", "PointwiseReport", "Estimate", "Gate"} <= {
        c.__name__ for c in records}
    for cls in records:
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls.__name__  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="unexpected keyword argument 'mood'"):
        Gate("g", True, 1.0, 0.5, "ok", mood="fine")  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Gate("g", True, 1.0, 0.5, "ok").passed = False  # type: ignore[misc]

    @dataclasses.dataclass(kw_only=True)
    class Thawed(Record):
        n: int

    with pytest.raises(TypeError, match="Thawed: a Record must be declared a frozen dataclass"):
        Thawed(n=1).to_json()
