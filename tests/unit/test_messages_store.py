"""The run's message store (runner.storage.messages): round trip, one record per distinct content, and a record
torn by a kill -9 that SQLite's recovery drops while every complete one survives."""

from __future__ import annotations

import shutil
import sqlite3

from runner.core.types import Message, hash_messages
from runner.storage.messages import MessageStore


def _messages(n: int) -> tuple[Message, ...]:
    return (Message("system", "You are a fair judge."), Message("user", f"Which output is better? ({n}) é " * 50))


def test_round_trip_and_dedup(tmp_path):
    with MessageStore(tmp_path / "m.sqlite") as store:
        key = store.put(_messages(1))
        assert key == hash_messages(_messages(1))
        store.put(_messages(1), key)
        store.put(_messages(2))
        assert len(store) == 2 and store.written == 2
    with MessageStore(tmp_path / "m.sqlite") as again:  # another process (a resume) adds nothing either
        again.put(_messages(1))
        assert again.written == 0
    with MessageStore(tmp_path / "m.sqlite", read_only=True) as read:
        assert read.get(key) == [{"role": "system", "content": "You are a fair judge."},
                                 {"role": "user", "content": _messages(1)[1].content}]
        assert read.get("0" * 64) is None
    with sqlite3.connect(tmp_path / "m.sqlite") as db:  # each record is compressed
        (stored,) = db.execute("SELECT length(z) FROM messages WHERE sha256 = ?", (key,)).fetchone()
    assert stored < len(_messages(1)[1].content) / 4


def test_a_torn_last_record_is_dropped(tmp_path):
    store = MessageStore(tmp_path / "m.sqlite")
    for n in range(5):
        store.put(_messages(n))
    # the files as a kill -9 leaves them: the connection never closed, the WAL's last frame cut short
    killed = tmp_path / "killed"
    killed.mkdir()
    for name in ("m.sqlite", "m.sqlite-wal"):
        shutil.copyfile(tmp_path / name, killed / name)
    wal = killed / "m.sqlite-wal"
    wal.write_bytes(wal.read_bytes()[:-100])
    with MessageStore(killed / "m.sqlite") as recovered:
        assert len(recovered) == 4
        assert recovered.get(hash_messages(_messages(3))) is not None
        assert recovered.get(hash_messages(_messages(4))) is None
        recovered.put(_messages(4))  # the resumed run stores it again
        assert len(recovered) == 5
    store.close()
