"""runner.storage.sent: the keys of the calls a run sent, read back by the next process of the run."""

from __future__ import annotations

from pathlib import Path

from runner.storage.sent import SentLog


def test_a_later_process_knows_what_an_earlier_one_sent_and_skips_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "sent.jsonl"
    with SentLog(path) as first:
        assert first.record(("q1", 0, "ab", "judge", "h1")) is False
        assert first.record(("q2", 0, None, "judge", "h2")) is False
        assert first.record(("q0", 0, None, "judge", "h0")) is False
        first.finished(("q0", 0, None, "judge", "h0"))  # journaled: not paid again by a later process
    with path.open("a") as fh:
        fh.write('["q3", 0, "ab"')  # torn by a kill
    with SentLog(path) as second:
        assert second.earlier == {("q1", 0, "ab", "judge", "h1"), ("q2", 0, None, "judge", "h2")}
        assert second.record(("q2", 0, None, "judge", "h2")) is True
        assert second.record(("q9", 0, None, "judge", "h9")) is False
    assert ("q9", 0, None, "judge", "h9") in SentLog(path).earlier  # the torn line did not swallow the next one


def test_nothing_sent_writes_no_file(tmp_path: Path) -> None:
    with SentLog(tmp_path / "sent.jsonl"):
        pass
    assert not (tmp_path / "sent.jsonl").exists()
