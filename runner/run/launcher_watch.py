"""A sweep's worker stops paying within seconds of its launching process's death.

A launcher's workers (joblib's loky processes, Ray's workers) are not ended by the death of the process that
launched the sweep: killed with ``kill -9``, it leaves them paying for calls whose results nobody collects, while a
resume started at once pays for them again. Each job run in a worker on the launcher's machine watches the
launching process (its pid and host, handed down by the CLI in :data:`LAUNCHER_PID`) from a thread and, once that
process is gone, sends SIGTERM to its own process: the paid stage stops as at a Ctrl-C (nothing more is sent, the
answers in flight are journaled, see :mod:`runner.judging.shutdown`), and outside a paid stage the signal ends the
worker.

A thread polling the pid, not ``prctl(PR_SET_PDEATHSIG)``: that signal follows the thread that started the worker
(loky may start them from a thread of its own), not the process, and Ray's workers are not the launcher's children.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

LAUNCHER_PID = "JUDGESWEEP_LAUNCHER_PID"  # the environment variable the CLI sets for its launcher's workers
POLL_S = 0.5


def launcher_id() -> str:
    """This process as a launcher: ``<pid>@<host>`` (the value of LAUNCHER_PID)."""
    return f"{os.getpid()}@{socket.gethostname()}"


def launcher_pid(value: str) -> int | None:
    """The launcher's pid from a LAUNCHER_PID value, when it runs on this machine (a pid of another machine, as a
    Ray cluster's worker elsewhere could inherit, names nothing here)."""
    pid, _, host = value.partition("@")
    return int(pid) if pid.isdigit() and host == socket.gethostname() else None


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # no /proc (not Linux): the signal check is all there is
        return True
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


def _watch(pid: int, done: threading.Event) -> None:
    while not done.wait(POLL_S):
        if not alive(pid):
            log.warning("the sweep's launching process (pid %d) is gone: this worker (pid %d) stops sending",
                        pid, os.getpid())
            os.kill(os.getpid(), signal.SIGTERM)
            return


@contextlib.contextmanager
def watching(pid: int | None) -> Iterator[None]:
    """While the block runs, SIGTERM this process once process ``pid`` is gone; nothing when ``pid`` is None or
    this process (the launching process runs the job itself)."""
    if pid is None or pid == os.getpid():
        yield
        return
    done = threading.Event()
    thread = threading.Thread(target=_watch, args=(pid, done), name=f"watch launcher {pid}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
