"""Reading existing evaluation files for ``judgesweep aggregate`` (runner.inputs.evaluation_files / evaluation_sets):
the users' per-run JSON files, judgesweep's results.jsonl and generic JSONL votes, and the errors naming file and
line. Hand-made files in the users' format: tests/fixtures/users/aggregate/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.inputs.evaluation_files import (
    GENERIC_JSONL,
    RESULTS_JSONL,
    SCORE,
    USERS_JSON,
    VERDICT,
    EvaluationFileError,
    Systems,
    read_evaluation_file,
)
from runner.inputs.evaluation_sets import read_evaluation_set

USERS = Path(__file__).resolve().parents[1] / "fixtures" / "users" / "aggregate"
SYSTEMS = Systems("chat", "simple-chat")


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_users_file_reads_one_vote_per_item_with_role_words_as_system_names():
    f = read_evaluation_file(USERS / "eval2.json", SYSTEMS)
    assert (f.format, f.kind) == (USERS_JSON, VERDICT)
    assert [(v.item_id, v.verdict) for v in f.votes] == [
        ("q1", "chat"), ("q2", "simple-chat"), ("q3", "simple-chat"), ("q4", "simple-chat")]
    assert f.votes[1].text == "baseline is enough"
    assert f.votes[2].where == f"{USERS / 'eval2.json'}:6"  # the line of the entry's id
    assert len(f.sha256) == 64


def test_users_file_as_a_list_or_a_mapping_and_null_as_an_unscored_vote(tmp_path):
    listed = read_evaluation_file(write(tmp_path / "a.json", json.dumps(
        [{"id": 1, "verdict": "chat"}, {"id": 2, "verdict": "tie"}])), SYSTEMS)
    mapped = read_evaluation_file(write(tmp_path / "b.json", '{\n"1": "baseline",\n"2": null\n}'), SYSTEMS)
    assert [(v.item_id, v.verdict) for v in listed.votes] == [("1", "chat"), ("2", "tie")]
    assert [(v.item_id, v.verdict, v.status) for v in mapped.votes] == [
        ("1", "simple-chat", "scored"), ("2", None, "unscored")]
    assert mapped.votes[1].where.endswith("b.json:3")


def test_invalid_json_names_the_file_and_line(tmp_path):
    path = write(tmp_path / "eval.json", '{"evaluations": [\n {"id": "q1", "verdict": "ours"},\n {"id": "q2",,}\n]}')
    with pytest.raises(EvaluationFileError, match=r"eval\.json:3: not valid JSON"):
        read_evaluation_file(path, SYSTEMS)


def test_a_verdict_outside_the_labels_names_file_line_and_the_labels(tmp_path):
    path = write(tmp_path / "eval.json", '{"evaluations": [\n {"id": "q1", "verdict": "ours"},\n'
                                         ' {"id": "q2", "verdict": "maybe"}\n]}')
    with pytest.raises(EvaluationFileError, match=r"eval\.json:3: item 'q2': verdict 'maybe' is not one of "
                                                  r"\['ours', 'baseline', 'tie', 'chat', 'simple-chat'\]"):
        read_evaluation_file(path, SYSTEMS)


def test_a_file_of_no_known_shape_names_the_accepted_keys(tmp_path):
    path = write(tmp_path / "eval.json", '{"evaluations": [{"name": "q1", "choice": "ours"}]}')
    expected = (r"eval\.json:1: evaluation 0 needs one id key of \['id', 'subset_id', 'item_id'\] and one verdict "
                r"key of \['verdict', 'winner'\]")
    with pytest.raises(EvaluationFileError, match=expected):
        read_evaluation_file(path, SYSTEMS)
    with pytest.raises(EvaluationFileError, match=r"not an evaluation file: expected .*\"evaluations\""):
        read_evaluation_file(write(tmp_path / "other.json", '{"x": 1}'), SYSTEMS)


def test_generic_jsonl_verdicts_and_scores(tmp_path):
    lines = '{"id": "a", "verdict": "ours", "order": "ba"}\n\n{"id": "a", "verdict": "tie", "repeat": 1}\n'
    verdicts = read_evaluation_file(write(tmp_path / "v.jsonl", lines), SYSTEMS)
    scores = read_evaluation_file(write(tmp_path / "s.jsonl", '{"id": "a", "scores": {"x": 4, "y": 2}, "tags": ["t"]}\n'
                                                             '{"id": "b", "score": 7.5, "judge": "j2"}\n'), SYSTEMS)
    assert verdicts.format == GENERIC_JSONL and verdicts.kind == VERDICT
    assert [(v.verdict, v.order, v.repeat, v.where[-9:]) for v in verdicts.votes] == [
        ("chat", "ba", 0, "v.jsonl:1"), ("tie", None, 1, "v.jsonl:3")]
    assert scores.kind == SCORE
    assert (dict(scores.votes[0].scores), scores.votes[0].tags, scores.votes[1].score, scores.votes[1].judge) == (
        {"x": 4.0, "y": 2.0}, ("t",), 7.5, "j2")


def test_generic_jsonl_bad_line_names_file_and_line(tmp_path):
    path = write(tmp_path / "v.jsonl", '{"id": "a", "verdict": "ours"}\n{"id": "b", "verdict": \n')
    with pytest.raises(EvaluationFileError, match=r"v\.jsonl:2: not valid JSON"):
        read_evaluation_file(path, SYSTEMS)
    path = write(tmp_path / "w.jsonl", '{"id": "a", "verdict": "ours"}\n{"id": "b", "verdict": "B"}\n')
    with pytest.raises(EvaluationFileError, match=r"w\.jsonl:2: item 'b': verdict 'B' is not one of"):
        read_evaluation_file(path, SYSTEMS)


def test_judgesweep_results_rows_keep_repeat_order_label_and_unscored_rows(tmp_path):
    rows = [{"item_id": "1", "repeat": 0, "order": "ab", "stage": "judge", "status": "scored", "winner": "chat",
             "verdict_label": "A", "raw_response": "A", "gold": "chat"},
            {"item_id": "1", "repeat": 0, "order": "ba", "stage": "judge", "status": "unscored", "winner": None,
             "verdict_label": None, "parse_error": "no_label: nothing", "raw_response": "hm", "gold": "chat"}]
    f = read_evaluation_file(write(tmp_path / "results.jsonl", "".join(json.dumps(r) + "\n" for r in rows)), SYSTEMS)
    assert f.format == RESULTS_JSONL
    assert [(v.verdict, v.label, v.order, v.status, v.reason, v.gold) for v in f.votes] == [
        ("chat", "A", "ab", "scored", None, "chat"), (None, None, "ba", "unscored", "no_label: nothing", "chat")]


def test_three_files_give_three_repeats_per_item():
    evaluation = read_evaluation_set([USERS / f"eval{n}.json" for n in (1, 2, 3)], SYSTEMS)
    assert (evaluation.repeats, evaluation.item_ids, evaluation.orders_known) == (3, ("q1", "q2", "q3", "q4"), False)
    assert sorted({v.repeat for v in evaluation.votes}) == [0, 1, 2]
    assert [v.verdict for v in evaluation.votes if v.item_id == "q3"] == ["chat", "simple-chat", "tie"]


def test_ids_that_do_not_match_name_the_file(tmp_path):
    other = write(tmp_path / "eval_other.json", json.dumps({"evaluations": [
        {"subset_id": "q1", "winner": "ours"}, {"subset_id": "q2", "winner": "ours"},
        {"subset_id": "q3", "winner": "ours"}, {"subset_id": "q9", "winner": "ours"}]}))
    with pytest.raises(EvaluationFileError, match=r"eval_other\.json: its item ids do not match .*eval1\.json's: "
                                                  r"1 missing \(q4\); 1 not in .*\(q9\)"):
        read_evaluation_set([USERS / "eval1.json", other], SYSTEMS)


def test_two_votes_for_one_item_in_one_run_name_both_lines(tmp_path):
    path = write(tmp_path / "dup.json", '[\n{"id": "q1", "verdict": "ours"},\n{"id": "q1", "verdict": "tie"}\n]')
    with pytest.raises(EvaluationFileError, match=r"dup\.json:3: a second vote for item 'q1' in the same run .*"
                                                  r"the first is at .*dup\.json:2"):
        read_evaluation_set([path], SYSTEMS)


def test_files_of_two_kinds_are_refused(tmp_path):
    scores = write(tmp_path / "s.jsonl", '{"id": "q1", "score": 3}\n')
    with pytest.raises(EvaluationFileError, match=r"s\.jsonl: holds score votes, .*eval1\.json verdict votes"):
        read_evaluation_set([USERS / "eval1.json", scores], SYSTEMS)


def test_users_results_file_keyed_by_item_id_with_other_top_level_keys():
    f = read_evaluation_file(USERS / "results2.json", SYSTEMS)
    assert f.format == USERS_JSON
    assert [(v.item_id, v.verdict, v.status) for v in f.votes] == [
        ("q1", "chat", "scored"), ("q2", "simple-chat", "scored"), ("q3", "simple-chat", "scored"),
        ("q4", "simple-chat", "scored"), ("q5", None, "error"), ("q6", None, "error")]
    assert f.votes[1].text == "the baseline is enough" and f.votes[1].where == f"{USERS / 'results2.json'}:8"
    assert f.votes[4].reason.startswith("context_length_exceeded")  # a failed vote: the run's call failed


def test_users_results_entry_without_a_verdict_or_an_error_names_file_line_and_item(tmp_path):
    path = write(tmp_path / "run.json", '{"evaluation_completed": true,\n "results": {\n  "q1": {"verdict": "ours"},\n'
                                        '  "q2": {"reasoning": "no verdict"}\n }\n}')
    with pytest.raises(EvaluationFileError, match=r"run\.json:4: item 'q2' needs one verdict key of \['verdict', "
                                                  r"'winner'\] \(or an \"error\" for a failed vote\); it has "
                                                  r"\['reasoning'\]"):
        read_evaluation_file(path, SYSTEMS)
    mixed = write(tmp_path / "mixed.json", '{"results": {"q1": {"verdict": "ours"}, "q2": "tie"}}')
    with pytest.raises(EvaluationFileError, match=r"mixed\.json: not an evaluation file"):
        read_evaluation_file(mixed, SYSTEMS)
