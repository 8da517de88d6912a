"""Unit tests for runner.storage.store: the append-only journal, judgment rows and atomic JSON writes."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from runner.core.types import (
    JudgeRequest,
    JudgeResponse,
    Judgment,
    Message,
    Order,
    Status,
    Verdict,
    hash_messages,
)
from runner.storage.journal import Journal, JournalAnswers, judgment_record, read_journal
from runner.storage.store import write_json, write_results

RECORD_FIELDS = {
    "item_id",
    "repeat",
    "order",
    "stage",
    "messages_sha256",
    "status",
    "winner",
    "verdict_label",
    "score",
    "scores",
    "judge_extras",
    "parse_error",
    "raw_response",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "latency_s",
    "error_type",
    "error",
    "attempts",
    "rate_limited",
    "source",
}
MESSAGES = (Message("system", "judge well"), Message("user", "Which is better? «Output (a)» or b"))


def scored(item_id: str = "i1", order: Order = Order.AB, winner: str = "ours") -> Judgment:
    request = JudgeRequest(item_id=item_id, repeat=1, order=order, stage="judge", messages_hash=hash_messages(MESSAGES))
    response = JudgeResponse(
        text="Output (a) — sûr", finish_reason="stop", prompt_tokens=120, completion_tokens=3,
        cost_usd=0.00042, latency_s=0.123456789,
    )
    return Judgment(request, response, Verdict(label="A"), winner, Status.SCORED)


def unscored(item_id: str = "i2") -> Judgment:
    request = JudgeRequest(item_id=item_id, repeat=0, order=Order.BA, stage="synthesis",
                           messages_hash=hash_messages(MESSAGES))
    return Judgment(request, JudgeResponse(text="both good"), Verdict(None, "no_match"), None, Status.UNSCORED)


def errored(item_id: str = "i3") -> Judgment:
    request = JudgeRequest(item_id=item_id, repeat=0, order=Order.AB, stage="judge",
                           messages_hash=hash_messages(MESSAGES))
    response = JudgeResponse(text=None, error_type="RateLimitError", error="429")
    return Judgment(request, response, Verdict(None, "call_failed: RateLimitError"), None, Status.ERROR)


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --- judgment_record -------------------------------------------------------------------------------


def test_judgment_record_has_the_documented_fields_and_values() -> None:
    row = judgment_record(scored())
    assert set(row) == RECORD_FIELDS
    assert row["item_id"] == "i1"
    assert row["repeat"] == 1
    assert row["order"] == "ab"
    assert row["stage"] == "judge"
    assert row["messages_sha256"] == hash_messages(MESSAGES)
    assert row["status"] == "scored"
    assert row["winner"] == "ours"
    assert row["verdict_label"] == "A"
    assert row["parse_error"] is None
    assert row["raw_response"] == "Output (a) — sûr"
    assert (row["prompt_tokens"], row["completion_tokens"], row["cost_usd"]) == (120, 3, 0.00042)
    assert row["latency_s"] == 0.123457


def test_judgment_record_of_unscored_and_error_keeps_reason_and_raw_text() -> None:
    bad = judgment_record(unscored())
    assert (bad["status"], bad["winner"], bad["verdict_label"]) == ("unscored", None, None)
    assert (bad["parse_error"], bad["raw_response"], bad["order"], bad["stage"]) == (
        "no_match", "both good", "ba", "synthesis",
    )
    err = judgment_record(errored())
    assert (err["status"], err["error_type"], err["error"]) == ("error", "RateLimitError", "429")
    assert err["parse_error"] == "call_failed: RateLimitError"


def test_judgment_record_is_json_serialisable() -> None:
    for j in (scored(), unscored(), errored()):
        assert json.loads(json.dumps(judgment_record(j))) == judgment_record(j)


# --- Journal ---------------------------------------------------------------------------------------


def test_journal_writes_one_parseable_line_per_judgment(tmp_path: Path) -> None:
    path = tmp_path / "run" / "journal.jsonl"  # parent is created
    judgments = [scored("a"), unscored("b"), errored("c")]
    with Journal(path) as journal:
        for j in judgments:
            journal.append(j)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    assert [json.loads(line) for line in lines] == [judgment_record(j) for j in judgments]


def test_journal_line_is_on_disk_before_close(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal(path)
    try:
        journal.append(scored("a"))
        assert [row["item_id"] for row in read_lines(path)] == ["a"]
    finally:
        journal.close()


def test_paid_lines_are_fsynced_by_the_journals_thread_in_groups(tmp_path: Path) -> None:
    # The caller (the event loop) never fsyncs: 500 paid lines written at once share a few fsyncs of the
    # journal's own thread, and close() fsyncs whatever that thread had not reached yet.
    path = tmp_path / "journal.jsonl"
    journal = Journal(path)
    caller = threading.get_ident()
    synced_on: set[int] = set()
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced_on.add(threading.get_ident())
        real_fsync(fd)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "fsync", recording_fsync)
        for n in range(500):
            journal.append(scored(f"q{n}"))
        deadline = time.monotonic() + 10
        while journal.fsyncs == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert journal.fsyncs >= 1 and caller not in synced_on  # the thread's fsync, not the caller's
        journal.close()
    assert 0 < journal.fsyncs < 50
    assert len(read_lines(path)) == 500


def test_cache_hits_are_not_fsynced(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    journal.append_row({"item_id": "a"}, "cache")
    journal.close()
    assert journal.fsyncs == 0


def test_journal_survives_reopen_in_append_mode(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as journal:
        journal.append(scored("a"))
        journal.append(scored("b"))
    before = path.read_text(encoding="utf-8")
    with Journal(path) as journal:
        journal.append(unscored("c"))
    after = path.read_text(encoding="utf-8")
    assert after.startswith(before)
    assert [row["item_id"] for row in read_lines(path)] == ["a", "b", "c"]


def test_journal_keeps_non_ascii_readable(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as journal:
        journal.append(scored())
    assert "sûr" in path.read_text(encoding="utf-8")


# --- atomic writes ---------------------------------------------------------------------------------


def test_write_json_replaces_atomically_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text("old", encoding="utf-8")
    obj = {"summary": {"accuracy": 0.955}, "names": ["é", "tie"]}
    write_json(path, obj)
    assert json.loads(path.read_text(encoding="utf-8")) == obj
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_write_results_writes_rows_in_order_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    judgments = [errored("z"), scored("a"), unscored("m")]
    write_results(path, judgments)
    assert read_lines(path) == [judgment_record(j, operational=False) for j in judgments]
    assert not {"latency_s", "attempts", "rate_limited", "source"} & set(read_lines(path)[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.jsonl"]


def test_journal_cuts_a_torn_last_line_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as journal:
        journal.append(scored("a"))
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"item_id": "torn", "rep')  # a crash mid-write
    assert [row["item_id"] for row in read_journal(path)] == ["a"]  # the torn line is skipped
    with Journal(path) as journal:
        journal.append(scored("b"))
    assert [row["item_id"] for row in read_lines(path)] == ["a", "b"]


def test_journal_answers_skip_errors_and_key_like_requests(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as journal:
        for j in (scored("a"), unscored("b"), errored("c")):
            journal.append(j)
    answers = JournalAnswers(path)
    assert set(answers) == {scored("a").request.key, unscored("b").request.key}
    assert answers[scored("a").request.key].text == "Output (a) — sûr"
    assert answers[scored("a").request.key].source == "journal"


def test_journal_answers_hold_offsets_not_texts_and_read_the_text_on_lookup(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as journal:
        for j in (scored("a"), unscored("b")):
            journal.append(j)
    with path.open("ab") as fh:
        fh.write(b'{"item_id": "torn"')  # a crash mid-line
    answers = JournalAnswers(path)
    assert len(answers) == 2
    assert all(type(at) is int for at in answers._offsets.values())  # a line's offset, no answer object
    a_key, b_key = scored("a").request.key, unscored("b").request.key
    assert a_key in answers and ("missing",) not in answers
    assert answers._offsets[a_key] == 0 and answers._offsets[b_key] > 0
    looked_up = answers[scored("a").request.key]
    assert (looked_up.text, looked_up.journal_at) == ("Output (a) — sûr", 0)
    assert answers.get(("missing",)) is None


def test_unknown_tokens_and_notes_are_journaled_and_read_back_on_resume(tmp_path: Path) -> None:
    j = scored()
    noted = replace(j, response=replace(j.response, prompt_tokens=0, completion_tokens=0, tokens_known=False,
                                        notes=("usage_unknown: usage.prompt_tokens is -50, not a token count",)))
    path = tmp_path / "journal.jsonl"
    with Journal(path) as journal:
        journal.append(noted)
    [row] = read_lines(path)
    assert (row["prompt_tokens"], row["completion_tokens"]) == (None, None)  # unknown, not 0
    assert row["provider_notes"] == list(noted.response.notes)
    back = JournalAnswers(path)[noted.request.key]
    assert not back.tokens_known and back.notes == noted.response.notes and back.text == noted.response.text


def test_a_line_utf8_cannot_encode_is_written_with_escapes_not_lost(tmp_path: Path) -> None:
    j = scored()
    lone = replace(j, response=replace(j.response, text="[[A]] \ud800"))
    path = tmp_path / "journal.jsonl"
    with Journal(path) as journal:
        journal.append(lone)
        journal.append(j)
    assert [row["raw_response"] for row in read_journal(path)] == ["[[A]] \ud800", j.response.text]
