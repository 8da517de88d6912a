"""What each judge saw: a run's rendered messages, stored once per distinct content under their sha256.

The journal keeps only ``messages_sha256`` (:func:`runner.core.types.hash_messages`); this store keeps the
messages themselves, zlib-compressed, in one SQLite file of the run directory (``messages.sqlite``). A judgment's
messages are written just before its journal line, so every journaled answer has its input on disk, and a
repeat, a resumed call or a cache hit with the same messages adds nothing (``INSERT OR IGNORE`` on the hash).

SQLite in WAL mode with ``synchronous=NORMAL``, as the response cache: each put is its own transaction, written
to the operating system before the call counts as done, so a kill -9 loses nothing and a record torn by a crash
is dropped by SQLite's recovery (its WAL frames are checksummed); only a power cut can lose the last puts.

Closed, the store folds its WAL into the file (``PRAGMA wal_checkpoint(TRUNCATE)``) even while a reader (the
publishing process writing traces) still has it open, where SQLite's own checkpoint-on-close is skipped: a finished
run's ``messages.sqlite`` holds every row on its own, and copying that one file copies them all.
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from runner.core.errors import WriteFailed
from runner.core.types import Message, hash_messages
from runner.storage.wal import checkpoint

MESSAGES_NAME = "messages.sqlite"
CHECKPOINT_PAGES = 16_384  # 64 MB at SQLite's 4 KB pages (~30,000 LLMBar-sized judgments)
LEVEL = 6  # zlib's default: the judge prompts of LLMBar shrink ~3x; 9 costs twice the CPU for ~1% less

# a rowid table: WITHOUT ROWID suits small rows, and these (~1 KB compressed) would spill into overflow pages
_CREATE = "CREATE TABLE IF NOT EXISTS messages (sha256 TEXT PRIMARY KEY, z BLOB NOT NULL)"


def _canonical(messages: Iterable[Message]) -> bytes:
    """The bytes hash_messages hashes, so a stored record can be checked against its key."""
    payload = [{"role": m.role, "content": m.content} for m in messages]
    return json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


class MessageStore:
    """A run's rendered messages, content-addressed and compressed (see the module docstring).

    Args:
        path: The SQLite file (created with its table if missing).
        read_only: Open for reading only; a missing file then reads as empty.
    """

    def __init__(self, path: Path, read_only: bool = False) -> None:
        self.path = path
        self.written = 0  # distinct messages this object added
        self._seen: set[str] = set()  # hashes put through this object: a repeat skips compressing again
        self._read_only = read_only
        if read_only:
            uri = f"file:{path}?mode=ro"
            self._db = sqlite3.connect(uri, uri=True) if path.is_file() else sqlite3.connect(":memory:")
            if not path.is_file():
                self._db.execute(_CREATE)
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, isolation_level=None)  # autocommit: one transaction per put
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            # a checkpoint fsyncs on the event loop's thread: every 64 MB of WAL instead of SQLite's 4 MB
            self._db.execute(f"PRAGMA wal_autocheckpoint={CHECKPOINT_PAGES}")
            self._db.execute(_CREATE)
        except (OSError, sqlite3.Error) as exc:
            raise WriteFailed(path, exc) from None

    def put(self, messages: tuple[Message, ...], sha256: str | None = None) -> str:
        """Store ``messages`` under their sha256 (given, or computed) unless already there; returns the hash.

        Raises:
            WriteFailed: The file could not be written.
        """
        key = sha256 or hash_messages(messages)
        if key in self._seen:
            return key
        try:
            cursor = self._db.execute("INSERT OR IGNORE INTO messages (sha256, z) VALUES (?, ?)",
                                      (key, zlib.compress(_canonical(messages), LEVEL)))
        except sqlite3.Error as exc:  # disk full, an I/O error: the put is rolled back whole
            raise WriteFailed(self.path, exc) from None
        self.written += cursor.rowcount
        self._seen.add(key)
        return key

    def get(self, sha256: str) -> list[dict[str, str]] | None:
        """The messages stored under ``sha256`` as ``[{"role", "content"}, ...]``, or None."""
        row = self._db.execute("SELECT z FROM messages WHERE sha256 = ?", (sha256,)).fetchone()
        return None if row is None else json.loads(zlib.decompress(row[0]))

    def get_many(self, hashes: Iterable[str]) -> dict[str, list[dict[str, str]]]:
        """The messages of every stored hash among ``hashes``."""
        out: dict[str, list[dict[str, str]]] = {}
        for key in dict.fromkeys(hashes):
            found = self.get(key)
            if found is not None:
                out[key] = found
        return out

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM messages").fetchone()[0])

    def close(self) -> None:
        """Fold the WAL into the file (a writer), then close it."""
        if not self._read_only:
            checkpoint(self._db, self.path)
        self._db.close()

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

