"""A finished run's SQLite files are complete on their own (issue 29, point 7): the run folds their write-ahead logs
into them when it ends, even while another process still has them open (the publishing process reading the messages
for its traces, a sweep's other jobs sharing the cache), where SQLite's own checkpoint-on-close is skipped."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import threading

from tests.fakes.openai_server import Reply
from tests.integration.conftest import live_judge

ITEMS = 12


class HoldsReaders:
    """Reply policy: from the 5th request on (by then answers are in both files), opens a read-only connection to
    the run's messages.sqlite and to the cache, reads each once and keeps them open, as the publishing process and a
    sweep's other job do."""

    def __init__(self, *paths) -> None:
        self.paths, self.readers, self.seen = paths, [], 0
        self.lock = threading.Lock()

    def __call__(self, _body: dict) -> Reply:
        with self.lock:
            self.seen += 1
            if self.seen == 5:
                for path in self.paths:
                    reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
                    reader.execute("SELECT count(*) FROM sqlite_master").fetchall()  # opens the file and its WAL
                    self.readers.append(reader)
        return Reply(content="Verdict: [[A]]")

    def close(self) -> None:
        for reader in self.readers:
            reader.close()


def rows_alone(path, table: str, tmp_path) -> int:
    """The rows of ``table`` in a copy of ``path`` without its -wal and -shm files."""
    alone = tmp_path / f"alone-{path.name}"
    shutil.copyfile(path, alone)
    with contextlib.closing(sqlite3.connect(alone)) as db:
        return db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_a_finished_runs_messages_and_cache_files_hold_every_row_without_their_wal(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    dataset.write_text("".join(json.dumps({"id": f"q{n}", "prompt": f"question {n}", "chat": f"chat {n}",
                                           "simple_chat": f"simple {n}"}) + "\n" for n in range(ITEMS)))
    run_dir = tmp_path / "run"
    readers = HoldsReaders(run_dir / "messages.sqlite", tmp_path / "cache.sqlite")
    fake_server.reply = readers
    try:
        result = run_cli(*live_judge(fake_server), "prompt=mtbench_pair", "rubric=mtbench_verdict",
                         "dataset=chat_vs_simple", f"dataset.path={dataset}", "order=fixed", "concurrency=2",
                         "tracking=off", run_dir=run_dir)
        assert result.proc.returncode == 0, result.output
        assert len(readers.readers) == 2  # both files were open in another connection when the run ended
        journal = result.journal()
        assert len(journal) == ITEMS
        assert rows_alone(run_dir / "messages.sqlite", "messages", tmp_path) == len({r["messages_sha256"]
                                                                                     for r in journal})
        assert rows_alone(tmp_path / "cache.sqlite", "responses", tmp_path) == ITEMS
    finally:
        readers.close()
