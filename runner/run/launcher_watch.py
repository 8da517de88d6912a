"""A sweep's worker stops paying within seconds of its launching process's death, and then ends.

A launcher's workers (joblib's loky processes, Ray's workers) are not ended by the death of the process that
launched the sweep: killed with ``kill -9``, it left them paying for calls whose results nobody collects, while a
resume started at once pays for them again, and then living on with parent 1 (a loky worker waits 300 s for its next
job). Each worker on the launcher's machine watches the launching process (its pid and host, handed down by the CLI in
:data:`LAUNCHER_PID`) from one thread for the worker's life (:func:`guard`: a loky worker starts it before its first
job, see :mod:`runner.run.loky_workers`; any worker when it starts a job) and, once that process is gone, sends
SIGTERM to its own process: a paid stage stops as at a Ctrl-C (nothing more is sent, the answers in flight are
journaled, see :mod:`runner.judging.shutdown`), and wherever SIGTERM has its default effect (an idle worker, a job
outside its paid stage, a stage that stopped) the signal ends the worker. It is sent once while something handles
it (a second would cut the answers in flight), again once nothing does.

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
import time
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


def _watch(pid: int) -> None:
    while alive(pid):
        time.sleep(POLL_S)
    log.warning("the sweep's launching process (pid %d) is gone: this worker (pid %d) stops sending", pid, os.getpid())
    sent = False
    while True:  # until the signal ends this process
        if not sent or signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            os.kill(os.getpid(), signal.SIGTERM)
            sent = True
        time.sleep(POLL_S)


def guard(pid: int | None) -> None:
    """From now on until this process ends, SIGTERM it once process ``pid`` is gone (see the module docstring);
    nothing when ``pid`` is None or this process (the launching process runs the job itself), or when a guard of
    ``pid`` already runs here."""
    if pid is None or pid == os.getpid():
        return
    name = f"watch launcher {pid}"
    if any(thread.name == name for thread in threading.enumerate()):
        return
    threading.Thread(target=_watch, args=(pid,), name=name, daemon=True).start()


@contextlib.contextmanager
def watching(pid: int | None) -> Iterator[None]:
    """A job of a sweep launched by process ``pid`` (None: a single run) in this process, guarded (:func:`guard`)."""
    guard(pid)
    yield
