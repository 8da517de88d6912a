"""Folding a SQLite file's write-ahead log into the file, so the file is complete on its own.

SQLite does this itself when the last connection to a file closes, but not when another process still has the file
open (the publishing process reading a run's messages, a sweep's other jobs sharing the response cache): the rows
then stay in ``<file>-wal``, and a copy of the file alone has none of them.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

log = logging.getLogger(__name__)


def checkpoint(db: sqlite3.Connection, path: Path, busy_timeout_ms: int | None = None,
               busy_level: int = logging.WARNING) -> bool:
    """Copy every frame of ``db``'s WAL into its file and empty the WAL (``wal_checkpoint(TRUNCATE)``); True when
    done. A reader in the middle of a read holds it up for the busy timeout (``busy_timeout_ms``, else the
    connection's); then (logged at ``busy_level``), or on any SQLite error (a warning), the rows stay in the WAL, where
    SQLite reads them.
    """
    try:
        if busy_timeout_ms is not None:
            db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.Error as exc:
        log.warning("%s: its write-ahead log was not folded into the file (%s); the rows are in %s-wal",
                    path, exc, path)
        return False
    if busy:
        log.log(busy_level, "%s: a reader kept its write-ahead log from being folded into the file; the rows are in "
                "%s-wal", path, path)
    return not busy
