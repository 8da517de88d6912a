"""The ``judgesweep`` console script and ``python -m runner``: the process's first lines pause the cyclic garbage
collector (:mod:`runner.core.gc_pause`) before anything is imported, then run :func:`runner.app.cli.main`, and end the
process without the interpreter's teardown once the command is done."""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading


def main() -> None:
    """Console-script entry point."""
    from runner.core import gc_pause

    gc_pause.pause()
    from runner.app import cli

    try:
        cli.main()
    except SystemExit as exc:
        _end(exc.code)
    _end(0)


def _end(code: str | int | None) -> None:
    """Exit with ``code`` as ``sys.exit`` would, skipping the interpreter's teardown: freeing every module and object
    of litellm, Hydra, numpy and the rest one by one (~0.35 s a run, after its result is printed). What the teardown
    would do that matters is done first: the exit handlers (the publishing process's close, logging's flush and
    close) and the standard streams' flush. The run's files are complete and closed by then (a run survives a kill -9
    at any point: the journal and the run directory are the record). Should a thread other than a daemon still run,
    the normal exit waits for it."""
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message"): printed on stderr, status 1
        sys.stderr.write(f"{code}\n")
        status = 1
    atexit._run_exitfuncs()  # CPython's own call at exit: every handler registered with atexit, last first
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (| head): nothing left to tell it
            pass
    os._exit(status)
