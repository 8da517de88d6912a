"""The run directory's owner lock, the launcher watch's liveness check and the WAL checkpoint (issue 29, points 1
and 7), on their own: no sockets, no runs (tests/integration/test_run_dir_owner.py and test_sqlite_checkpoint.py run
them in real processes)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys

import pytest

from runner.core.errors import RunDirectoryBusy
from runner.run.launcher_watch import alive, launcher_id, launcher_pid
from runner.storage.owner import OWNER_NAME, owned
from runner.storage.wal import checkpoint


def test_a_second_owner_is_refused_naming_the_first_and_the_lock_is_free_once_released(tmp_path):
    run_dir = tmp_path / "run"
    with owned(run_dir):
        with pytest.raises(RunDirectoryBusy, match=rf"{run_dir} is in use by pid {os.getpid()} \("):
            with owned(run_dir):  # another open file description: flock refuses it even in this process
                pass
    with owned(run_dir):  # released at the end of the block
        assert (run_dir / OWNER_NAME).is_file()


def test_a_lock_file_left_by_a_dead_owner_does_not_block(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / OWNER_NAME).write_text('{"pid": 999999, "command": "judgesweep"}')
    with owned(run_dir):
        pass


def test_alive_tells_a_running_process_from_a_dead_or_zombie_one():
    assert alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    # a zombie until reaped: exited, not yet waited for
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    assert not alive(child.pid)
    child.wait()
    assert not alive(child.pid)


def test_checkpoint_folds_the_wal_into_the_file_while_a_reader_has_it_open(tmp_path):
    path = tmp_path / "db.sqlite"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE t (x)")
    reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    reader.execute("SELECT count(*) FROM t").fetchall()
    for n in range(100):
        writer.execute("INSERT INTO t VALUES (?)", (n,))
    assert checkpoint(writer, path)
    writer.close()
    shutil.copyfile(path, tmp_path / "alone.sqlite")
    reader.close()
    with contextlib.closing(sqlite3.connect(tmp_path / "alone.sqlite")) as alone:
        assert alone.execute("SELECT count(*) FROM t").fetchone()[0] == 100


JOURNAL_UNDER_A_FILE_SIZE_LIMIT = """
import json, resource, signal, sys
from pathlib import Path
from runner.core.errors import WriteFailed
from runner.storage.journal import Journal

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of a signal
resource.setrlimit(resource.RLIMIT_FSIZE, (10_000, resource.RLIM_INFINITY))
journal = Journal(Path(sys.argv[1]))
written = 0
try:
    for n in range(100):
        journal.append_row({"n": n, "text": "x" * 700}, "call")
        written += 1
except WriteFailed as exc:
    print(json.dumps({"written": written, "error": str(exc)}))
try:
    journal.append_row({"n": -1}, "call")  # a small one fits: written whole (an answer held on a full disk)
except WriteFailed:
    pass
journal.close()
"""


def test_a_journal_line_that_cannot_be_written_is_cut_off_and_a_line_that_fits_follows_it(tmp_path):
    """Was (until issue 44 point 12): nothing was written after a failed line, so an answer that arrived after the
    disk filled was lost even once room returned (runner.judging.unwritten)."""
    path = tmp_path / "journal.jsonl"
    proc = subprocess.run([sys.executable, "-c", JOURNAL_UNDER_A_FILE_SIZE_LIMIT, str(path)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["error"].startswith(f"cannot write {path}: File too large")
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == report["written"] + 1 > 1 and all(line.endswith(b"\n") for line in lines)
    assert [json.loads(line)["n"] for line in lines] == [*range(report["written"]), -1]


def test_a_launcher_on_another_machine_is_not_watched():
    assert launcher_pid(launcher_id()) == os.getpid()
    assert launcher_pid(f"{os.getpid()}@another-host-{socket.gethostname()}") is None
    assert launcher_pid("") is None and launcher_pid("12@") is None
