"""The verdict_tokens parser and the rubrics that use it (arena_hard, prd_number, mtbench_fastchat), on the recorded
answers of tests/fixtures/verdicts: our parse equals the verdict the authors' own code extracted, line by line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from runner.core.errors import ParamsError
from runner.core.types import TIE, Verdict
from runner.judging.parsers.labels import EMPTY, LABEL_NOT_OFFERED, NO_MATCH, PARSERS, parse_verdict
from runner.judging.parsers.tokens import AMBIGUOUS

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "verdicts"
ABT = ("A", "B", TIE)


def rubric(name: str) -> dict[str, Any]:
    """A shipped rubric's YAML as plain data."""
    loaded = OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / "rubric" / f"{name}.yaml"))
    assert isinstance(loaded, dict)
    return loaded


def read_with(name: str, text: str | None) -> Verdict:
    spec = rubric(name)
    return parse_verdict(spec["parser"]["name"], text, spec["labels"], spec["parser"].get("params") or {})


def rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines()]


# --- the shipped rubrics on recorded answers ---------------------------------------------------------------------

_ARENA_LABEL = {"A>B": "A", "B>A": "B", "A=B": TIE}


def test_arena_hard_reads_every_judgebench_answer_as_judgebench_did() -> None:
    recorded = rows("arena_hard_judgebench.jsonl")
    assert {r["decision"] for r in recorded} == set(_ARENA_LABEL)
    for row in recorded:
        verdict = read_with("arena_hard", row["text"])
        assert verdict.label == _ARENA_LABEL[row["decision"]], row["source"]
        strong = "[[A>>B]]" in row["text"] or "[[B>>A]]" in row["text"]
        assert verdict.extras["strength"] == (2 if strong else 1 if row["decision"] != "A=B" else 0), row["source"]


def test_arena_hard_leaves_two_different_verdicts_unscored_as_arena_hard_does() -> None:
    verdict = read_with("arena_hard", "Maybe [[A>B]] at first, but on reflection [[B>>A]].")
    assert verdict.label is None and verdict.reason == f"{AMBIGUOUS}: A>B, B>>A"
    assert read_with("arena_hard", "[[B>>A]] ... so again: [[B>>A]]").label == "B"
    assert read_with("arena_hard", "no bracketed verdict").reason == NO_MATCH
    assert read_with("arena_hard", "[[A>>>B]]").reason == f"{NO_MATCH}: A>>>B"  # captured but not a token


_PRD_LABEL = {1: "A", 2: "B", 3: TIE}


def test_prd_number_reads_every_review_as_prd_recorded_it() -> None:
    recorded = rows("prd_vicuna80.jsonl")
    assert {r["score"] for r in recorded} == set(_PRD_LABEL)
    for row in recorded:
        assert row["text"].count("\n") > 1  # a review, then the verdict line
        assert read_with("prd_number", row["text"]).label == _PRD_LABEL[row["score"]], row["source"]


def test_prd_number_reads_only_a_bare_number_on_the_last_line() -> None:
    assert read_with("prd_number", "Assistant 1: 9/10\nAssistant 2: 8/10\n\n1\n").label == "A"
    assert read_with("prd_number", "Assistant 1 is better.\n3\nSo the answer is Assistant 2").reason == NO_MATCH
    assert read_with("prd_number", "Choose 2 if ...\n4").reason == NO_MATCH


def _fastchat_position(row: dict[str, Any]) -> str:
    """FastChat's recorded winner as a position: game 2 shows model_2 as A."""
    if row["winner"] == "tie":
        return TIE
    first = "model_1" if row["game"] == "g1" else "model_2"
    return "A" if row["winner"] == first else "B"


def test_mtbench_fastchat_reads_every_gpt4_judgment_as_fastchat_recorded_it() -> None:
    recorded = rows("mtbench_fastchat.jsonl")
    assert {_fastchat_position(r) for r in recorded} == set(ABT)
    for row in recorded:
        assert read_with("mtbench_fastchat", row["text"]).label == _fastchat_position(row), row["source"]


def test_mtbench_fastchat_takes_a_anywhere_first_where_last_match_differs() -> None:
    # a judge that restates the format before deciding: FastChat's rule reads [[A]] (it is present), our
    # last-match mtbench_verdict reads the final [[B]]
    restated = 'I must answer "[[A]]" if A is better, "[[B]]" if B is better, "[[C]]" for a tie. Verdict: [[B]]'
    assert read_with("mtbench_fastchat", restated).label == "A"
    assert read_with("mtbench_verdict", restated).label == "B"
    assert read_with("mtbench_fastchat", "[[C]] would be fair, but [[B]]").label == "B"  # then [[B]], then [[C]]
    assert read_with("mtbench_fastchat", "").reason == EMPTY


# --- the parser's rules and its checks -----------------------------------------------------------------------------

TABLE = {"[[A]]": "A", "[[B]]": "B", "[[C]]": "tie"}
TEXT = "[[B]] first, then [[C]], finally [[A]] and [[B]]"


@pytest.mark.parametrize(("rule", "label"), [("last", "B"), ("first", "B"), ("priority", "A"), ("unanimous", None)])
def test_each_rule_picks_its_match(rule: str, label: str | None) -> None:
    assert parse_verdict("verdict_tokens", TEXT, ABT, {"tokens": TABLE, "rule": rule}).label == label


def test_the_default_pattern_prefers_the_longest_token() -> None:
    tokens = {"A>B": "A", "A>>B": {"label": "A", "strength": 2}}
    verdict = parse_verdict("verdict_tokens", "so: A>>B", ABT, {"tokens": tokens})
    assert verdict.label == "A" and dict(verdict.extras) == {"strength": 2}


def test_a_token_without_strength_adds_no_extras_and_a_label_not_offered_is_named() -> None:
    assert parse_verdict("verdict_tokens", "[[A]]", ABT, {"tokens": TABLE}).extras == {}
    assert parse_verdict("verdict_tokens", "[[C]]", ("A", "B"), {"tokens": TABLE}).reason == f"{LABEL_NOT_OFFERED}: tie"


@pytest.mark.parametrize(("params", "message"), [
    ({"tokens": {}}, "at least one token"),
    ({"tokens": {"x": "first"}}, "label must be one of"),
    ({"tokens": {"x": {"label": "A", "weight": 2}}}, "must be a label or"),
    ({"tokens": {"x": {"label": "A", "strength": "big"}}}, "strength must be a number"),
    ({"tokens": TABLE, "rule": "middle"}, "rule must be one of"),
    ({"tokens": TABLE, "pattern": r"\[\[[ABC]\]\]"}, "exactly one capture group"),
    ({"tokens": TABLE, "pattern": r"([AB"}, "parameters"),
    ({"tokens": ["[[A]]"]}, "must be a mapping"),
])
def test_a_malformed_table_fails_at_start_up_naming_the_key(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamsError, match=message) as caught:
        PARSERS.dry_run("verdict_tokens", params, "", ABT, key="rubric r: rubric.parser.params")
    assert str(caught.value).startswith("rubric r: rubric.parser.params")


def test_the_strength_reaches_the_results_row_as_judge_extras() -> None:
    from runner.core.types import JudgeRequest, JudgeResponse, Judgment, Order, Status
    from runner.storage.journal import judgment_record

    verdict = read_with("arena_hard", "My final verdict is: [[B>>A]]")
    row = judgment_record(Judgment(JudgeRequest("i0", 0, Order.AB, "judge", ""), JudgeResponse(text="..."), verdict,
                                   "base", Status.SCORED), operational=False)
    assert row["verdict_label"] == "B" and row["judge_extras"] == {"strength": 2}
