"""One process owns a run directory at a time: a second run, resume or sweep worker on it refuses before any call.

The owner holds an exclusive ``flock`` on ``.owner.lock`` in the directory for as long as it runs. The operating
system releases the lock when the process ends however it ends (``kill -9`` included), so a dead owner never blocks
a later resume, and there is no pid file to clean up. The file's content only names the owner (pid and command
line) for the refusal message.

Reading a run directory needs no ownership: ``judgesweep aggregate`` reads finished evaluation files, and
``judgesweep sync`` publishes only finished runs (their ``metrics.json`` written) under the publishing lock of
:mod:`runner.outputs.publishing`, so neither waits for nor refuses a run in progress.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from runner.core.errors import RunDirectoryBusy, WriteFailed

OWNER_NAME = ".owner.lock"
COMMAND_CHARS = 200  # of the owner's command line, in the refusal message


def _holder(fd: int) -> str:
    """Who holds the lock, from the file's content: "pid N (command)", or "another process" when it cannot say."""
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
        pid, command = int(data["pid"]), str(data.get("command", ""))
    except (OSError, ValueError, TypeError, KeyError):
        return "another process"
    return f"pid {pid}" + (f" ({command})" if command else "")


@contextlib.contextmanager
def owned(run_dir: Path) -> Iterator[None]:
    """Own ``run_dir`` (created if missing) while the block runs.

    Raises:
        RunDirectoryBusy: Another live process owns it; the message names that process.
        WriteFailed: The directory or its lock file cannot be created.
    """
    path = run_dir / OWNER_NAME
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise WriteFailed(path, exc) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunDirectoryBusy(f"{run_dir} is in use by {_holder(fd)}: one process runs a run directory at a "
                                   "time; wait for it to end (or stop it), then resume") from None
        me = {"pid": os.getpid(), "command": " ".join(sys.orig_argv)[:COMMAND_CHARS]}
        with contextlib.suppress(OSError):  # the lock holds without it: the content only names the owner
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(me).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
