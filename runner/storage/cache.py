"""The response cache shared across runs, sweeps and processes.

A judge answer is stored under :func:`cache_key` (:mod:`runner.storage.keys`) of the request that produced
it, in one SQLite file that every run and every job of a sweep may share. The file is opened in WAL journal
mode with ``synchronous=NORMAL`` and a 30 s busy timeout, so parallel sweep processes can read while one
writes, and a second writer waits for the lock instead of failing. Each :class:`ResponseCache` holds one
connection; create one per process (never pass an open cache to another process).

Only successful answers are cached (a failed call is retried by the next run, never replayed), the
first answer stored under a key is kept, and a hit returns the original tokens, latency and cost so
the money a hit saved can be reported.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from runner.core.choices import CacheMode
from runner.core.types import JudgeResponse
from runner.storage.wal import checkpoint

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 30.0
# a sweep's other jobs may be reading the shared cache when one job ends: its close waits this long for them at most
CLOSE_CHECKPOINT_MS = 2000
SCHEMA_VERSION = 1  # PRAGMA user_version of a file this module created

_CREATE = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    text TEXT,
    finish_reason TEXT,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_usd REAL,
    latency_s REAL NOT NULL,
    created_at REAL NOT NULL
) WITHOUT ROWID
"""
_SELECT = (
    "SELECT text, finish_reason, prompt_tokens, completion_tokens, cost_usd, latency_s "
    "FROM responses WHERE key = ?"
)
_INSERT = (
    "INSERT OR IGNORE INTO responses "
    "(key, text, finish_reason, prompt_tokens, completion_tokens, cost_usd, latency_s, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_HAS_TABLE = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'responses'"
_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
_COLUMNS = ("key", "text", "finish_reason", "prompt_tokens", "completion_tokens", "cost_usd", "latency_s", "created_at")

_BUSY_CODES = (5, 6)  # primary result codes SQLITE_BUSY and SQLITE_LOCKED
_T = TypeVar("_T")


class CacheError(RuntimeError):
    """The cache file cannot be opened, read or written; the message names the file."""


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    """Whether an error means another connection holds the lock (SQLITE_BUSY or SQLITE_LOCKED)."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+; before that, assume contention
    return code is None or code & 0xFF in _BUSY_CODES


class ResponseCache:
    """A SQLite-backed cache of successful judge answers.

    Mode ``read_write`` creates the parent directories, the file and its table when opened, and
    stores answers; ``read_only`` only reads (a missing file is an empty cache and is not created);
    ``off`` never touches the disk. The file is opened in the constructor, so a corrupt or
    unreadable file fails at start-up, before any paid call.

    Attributes:
        path: The SQLite file.
        mode: The cache mode.
        hits: Lookups that found an answer.
        misses: Lookups that found none (not counted in mode ``off``).
        writes: Answers newly stored by this object.
        saved_usd: Sum of ``cost_usd`` over hits (an unknown cost counts as 0).
    """

    def __init__(self, path: Path, mode: CacheMode) -> None:
        """Open the cache.

        Args:
            path: The SQLite file, shared by every run and process that should share answers.
            mode: ``read_write``, ``read_only`` or ``off``.

        Raises:
            CacheError: The file exists but is not a readable SQLite cache, or cannot be created.
        """
        self.path = Path(path)
        self.mode = CacheMode(mode)
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self.saved_usd = 0.0
        self._closed = False
        self._conn: sqlite3.Connection | None = None
        if self.mode is CacheMode.read_write:
            self._conn = self._guard(self._open_read_write)
        elif self.mode is CacheMode.read_only:
            self._conn = self._guard(self._open_read_only)

    def _guard(self, operation: Callable[[], _T]) -> _T:
        """Run a database operation, turning any sqlite3 error into a CacheError naming the file."""
        try:
            return operation()
        except sqlite3.Error as exc:
            raise CacheError(f"response cache {self.path} (cache.path, {self.mode.value}): {exc}") from exc

    def _connect(self, target: str | Path, *, uri: bool = False) -> sqlite3.Connection:
        # isolation_level=None: every statement commits on its own, so no transaction ever holds a
        # read lock while waiting to upgrade it (the case a busy timeout cannot resolve).
        conn = sqlite3.connect(target, timeout=BUSY_TIMEOUT_S, isolation_level=None, uri=uri)
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        return conn

    def _open_read_write(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._connect(self.path)
        try:
            journal = self._enable_wal(conn)
            if journal != "wal":
                logger.warning("response cache %s: journal mode is %s, not wal", self.path, journal)
            conn.execute("PRAGMA synchronous = NORMAL")
            self._check_schema(conn, other_tables_ok=False)
            conn.execute(_CREATE)
            self._check_version(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _enable_wal(self, conn: sqlite3.Connection) -> str:
        """Switch the file to WAL (a persistent setting) and return the journal mode now in force.

        SQLite fails a journal-mode change at once with SQLITE_BUSY, without calling the busy handler,
        when another process is opening the same new file, so this one step retries until the busy
        timeout is spent.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        delay = 0.005
        while True:
            try:
                journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
                return journal if journal == "wal" else conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() + delay > deadline:
                    raise
                logger.debug("response cache %s: journal mode change busy; retrying", self.path)
            time.sleep(delay)
            delay = min(delay * 2, 0.25)

    def _open_read_only(self) -> sqlite3.Connection | None:
        if not self.path.exists():
            logger.info("response cache %s does not exist; every lookup misses", self.path)
            return None
        conn = self._connect(self.path.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            if conn.execute(_HAS_TABLE).fetchone() is None:
                logger.warning("response cache %s has no responses table; every lookup misses", self.path)
                conn.close()
                return None
            self._check_schema(conn, other_tables_ok=True)
            self._check_version(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_schema(self, conn: sqlite3.Connection, other_tables_ok: bool) -> None:
        """Refuse a SQLite file that is not a response cache before anything is read from or written to it: a
        ``responses`` table of other columns, or (``other_tables_ok`` False: the cache would add its table to
        someone else's database) tables but no ``responses`` one."""
        tables = [row[0] for row in conn.execute(_TABLES)]
        if "responses" in tables:
            columns = tuple(row[1] for row in conn.execute("PRAGMA table_info(responses)"))
            if sorted(columns) != sorted(_COLUMNS):
                raise CacheError(f"response cache {self.path} (cache.path): its table 'responses' has the columns "
                                 f"{', '.join(columns)}, not a judgesweep cache's ({', '.join(_COLUMNS)}); "
                                 "point cache.path at another file")
        elif tables and not other_tables_ok:
            shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
            raise CacheError(f"response cache {self.path} (cache.path) is a SQLite database of another kind "
                             f"(tables: {shown}), not a judgesweep cache; point cache.path at another file")

    def _check_version(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise CacheError(
                f"response cache {self.path} has schema version {version}; this judgesweep reads "
                f"version {SCHEMA_VERSION} at most"
            )
        if version == 0 and self.mode is CacheMode.read_write:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _check_open(self) -> None:
        if self._closed:
            raise CacheError(f"response cache {self.path} is closed")

    def get(self, key: str) -> JudgeResponse | None:
        """Return the answer stored under ``key``, or None.

        Args:
            key: A :func:`cache_key`.

        Returns:
            The stored answer with its original text, finish reason, tokens, cost and latency, marked
            ``source="cache"`` with no attempts, or None on a miss and always in mode ``off``.

        Raises:
            CacheError: The cache is closed or the file cannot be read.
        """
        self._check_open()
        if self.mode is CacheMode.off:
            return None
        conn = self._conn
        row = None if conn is None else self._guard(lambda: conn.execute(_SELECT, (key,)).fetchone())
        if row is None:
            self.misses += 1
            return None
        text, finish_reason, prompt_tokens, completion_tokens, cost_usd, latency_s = row
        self.hits += 1
        self.saved_usd += cost_usd or 0.0
        return JudgeResponse(
            text=text,
            finish_reason=finish_reason,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=cost_usd,
            latency_s=latency_s,
            attempts=0,  # served without a call: this lookup made no HTTP attempt
            rate_limited=0,
            source="cache",
        )

    def put(self, key: str, response: JudgeResponse) -> None:
        """Store a successful answer under ``key``; the first answer stored under a key is kept.

        Nothing is written outside mode ``read_write``, for a response that carries an error, or for one kept with
        notes (a substitution, unknown tokens: the journal holds those).

        Args:
            key: A :func:`cache_key`.
            response: The judge's answer.

        Raises:
            CacheError: The cache is closed or the file cannot be written.
        """
        self._check_open()
        conn = self._conn
        if conn is None or self.mode is not CacheMode.read_write:
            return
        if response.error_type is not None or response.error is not None:
            return
        if response.notes or not response.tokens_known:
            # kept with a note (a substitution, unknown tokens) that the cache has no column for: the journal holds it
            return
        row = (
            key,
            response.text,
            response.finish_reason,
            response.prompt_tokens,
            response.completion_tokens,
            response.cost_usd,
            response.latency_s,
            time.time(),
        )
        cursor = self._guard(lambda: conn.execute(_INSERT, row))
        self.writes += cursor.rowcount

    def close(self) -> None:
        """Fold the WAL into the file (read_write; waiting at most CLOSE_CHECKPOINT_MS for another process's read),
        close the connection (idempotent); later get/put calls raise CacheError."""
        if self._conn is not None:
            if self.mode is CacheMode.read_write and self.writes:
                checkpoint(self._conn, self.path, CLOSE_CHECKPOINT_MS, logging.DEBUG)
            self._conn.close()
            self._conn = None
        self._closed = True

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
