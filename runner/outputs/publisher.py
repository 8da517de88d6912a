"""The run's publishing helper: a child process that writes the finished run directory to MLflow
(:func:`runner.outputs.publishing.publish`), so MLflow never shares the run's interpreter, memory or event loop.

:class:`Publisher` starts it when the run starts: while the judge calls go on, the child imports mlflow and opens
the store (~2 s of CPU that would otherwise follow the last answer) on the machine's other core, then writes the
traces of the answers as they are journaled (:func:`runner.outputs.publishing.follow`). Once the run's files are
complete, :meth:`Publisher.publish` hands it the run directory and waits for its one-line
answer, at most ``tracking.timeout_s``; a store that is slow, locked, down, corrupt or wrong costs that wait at
most, never an answer or a file, and the run ends saying how to finish the tracking (``judgesweep sync``).

A child whose publish answered with a run id may serve the next job of the same process (kept by
:class:`runner.outputs.idle_publisher.Idle`: the jobs of a sweep on Hydra's basic launcher, which run one after another
in the launching process): it waits, idle and
deaf to signals, for that job's run directory to follow, so the imports and the store are paid once a sweep, not
once a job. A failed, timed-out or cancelled publish ends it.

The child never outlives the process that started it: its stdin is the parent's pipe, and a thread of the child
reads it; end of file (the parent exited, was killed with ``kill -9``, or cancelled the publish) during a job makes
the child mark the MLflow run FAILED if it had made one, within ``STOP_GRACE_S``, and exit; between jobs it exits at
once. Run as ``python -m runner.outputs.publisher <tracking config as JSON> [<run dir to follow>]``; then one JSON
object a line on its stdin:

- ``{"follow": "<run dir>"}``: a job has started (the first job's may be the command line's): write its answers'
  traces as they are journaled. From here to the answer the job is on: SIGINT and SIGTERM stop the child as end of
  file does.
- ``{"run_dir": "<run dir>"}``: the job's files are complete: publish them and answer one line on stdout,
  ``{"run_id": ..., "traces": ...}`` (then idle) or ``{"error": "<one line>"}`` (then exit 1).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import logging
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from runner.core import gc_pause
from runner.core.run_settings import TrackingConfig
from runner.outputs.report_links import describe

__all__ = ["Publisher", "describe", "main", "serve"]

log = logging.getLogger(__name__)

STOP_GRACE_S = 3.0  # how long the child may take to mark its run FAILED once told to stop, before it is cut


class Publisher:
    """The helper process of one run, or of the jobs of a process one after another (see the module docstring)."""

    def __init__(self, cfg: TrackingConfig, follow: Path | None = None) -> None:
        self.cfg = cfg
        config = json.dumps(dataclasses.asdict(cfg))
        # its own output goes to the run's stderr (a warning of ours); its answer comes back on stdout
        self._proc: subprocess.Popen | None = subprocess.Popen(
            [sys.executable, "-m", "runner.outputs.publisher", config, *([str(follow)] if follow else [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")
        self.pid = self._proc.pid

    def alive(self) -> bool:
        """Whether the process runs (not closed, not ended)."""
        return self._proc is not None and self._proc.poll() is None

    def follow(self, run_dir: Path) -> bool:
        """Tell the (idle) helper that a job has started in ``run_dir``; False, and the helper closed, if it is gone."""
        try:
            self._send({"follow": str(run_dir)})
            return True
        except (BrokenPipeError, OSError):
            self.close()
            return False

    def publish(self, run_dir: Path, timeout_s: float) -> tuple[str | None, str | None]:
        """Publish ``run_dir``; the helper stays (idle) once it answered with a run id, else it is stopped.

        Returns:
            (MLflow run id, None) or (None, why the store was not written: one line).
        """
        proc = self._proc
        if proc is None:
            return None, "the publishing process was stopped"
        assert proc.stdout is not None
        ready: list[Any] = []
        try:
            self._send({"run_dir": str(run_dir)})
            ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
            line = proc.stdout.readline() if ready else ""
        except (BrokenPipeError, OSError) as exc:
            line = json.dumps({"error": f"the publishing process ended ({type(exc).__name__})"})
        if not line:
            self.close()
            return None, (f"no answer within tracking.timeout_s={timeout_s:g} s" if not ready
                          else "the publishing process ended without an answer")
        answer = json.loads(line)
        run_id, error = answer.get("run_id"), answer.get("error")
        if error is not None or run_id is None:
            self.close()
        return run_id, error

    def _send(self, command: dict[str, str]) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise BrokenPipeError("the publishing process was stopped")
        proc.stdin.write(json.dumps(command) + "\n")
        proc.stdin.flush()

    def close(self) -> int | None:
        """Stop the helper (idempotent): end of file on its stdin, then at most STOP_GRACE_S + 1 s before it is
        killed. Returns its exit status (None if it was stopped already)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=STOP_GRACE_S + 1.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        return proc.returncode


class _Stop(BaseException):
    """The parent is gone or said stop: raised in the child's main thread by its SIGTERM handler."""


class _Parent:
    """The child's stdin reader (a thread): each command line in :attr:`lines`, then None at end of file; end of file
    during a job (:attr:`busy`) is a stop: SIGTERM to itself, a hard exit STOP_GRACE_S later."""

    def __init__(self) -> None:
        self.lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self.busy = False  # set by the main thread once its stop handlers are in place, cleared once they are not
        self._arrived = threading.Event()  # a command (or end of file) came since the last one was taken

    def read(self) -> None:
        while line := sys.stdin.readline():
            self.lines.put(line)
            self._arrived.set()
        self.lines.put(None)  # idle, the main thread exits at once; during a job it stops the job
        self._arrived.set()
        if self.busy:
            os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(STOP_GRACE_S)  # whatever the main thread is doing then, the child ends
        os._exit(143)

    def said(self) -> bool:
        """Whether a command (or end of file) waits: the follow of the job's answers stops there."""
        return not self.lines.empty()

    def wait(self, timeout_s: float) -> None:
        """Sleep ``timeout_s``, or less if a command (or end of file) comes: the follow's pause between its reads of
        the journal, which the publish command ends at once rather than up to a poll later."""
        self._arrived.wait(timeout_s)

    def next(self) -> dict[str, str] | None:
        """The next command, None at end of file."""
        self._arrived.clear()  # before the take: a command that comes after it sets it again
        line = self.lines.get()
        return None if line is None else json.loads(line)


def _on_stop(signum: int, frame: Any) -> None:
    raise _Stop


def serve(cfg: TrackingConfig, follow: Path | None = None) -> int:
    """The child: open the store, then serve jobs one after another (``follow``, if given, is the first's run
    directory to follow) until end of file on stdin, or a publish that failed."""
    from runner.outputs import tracking

    parent = _Parent()
    _on_job(parent, True)  # a stop while mlflow is imported is a stop
    try:
        threading.Thread(target=parent.read, daemon=True, name="parent").start()
        try:
            with tracking.records_to(follow):  # MLflow's own records: into the run's log file, never the console
                tracking._client(cfg)  # import mlflow and open the store while the run's calls go on
        except Exception:  # noqa: BLE001 - reported by the publish, which meets it again
            pass
        gc.freeze()  # mlflow's modules and the store's: never garbage, never walked again by the collector
        gc_pause.resume()  # paused by main() through the imports
        # Its imports and the store's opening ran at the priority of the run, on the other core while the run starts
        # (at nice 10 another busy process starved them past the run's end). What follows, the traces written while
        # the judge calls go on, takes only the CPU the run and its calls leave.
        os.nice(10)
        command = {"follow": str(follow)} if follow is not None else parent.next()
        while command is not None:
            code = _job(cfg, parent, command)
            if code is not None:
                return code
            command = parent.next()  # idle: only the next job, or end of file
        return 0
    except _Stop:
        return 143


def _job(cfg: TrackingConfig, parent: _Parent, command: dict[str, str]) -> int | None:
    """One job: write its traces as they come (``{"follow": ...}``), then publish its directory and answer. Returns
    the child's exit status when it ends here, None when it stays (idle) for the next job."""
    from runner.outputs import publishing, tracking

    _on_job(parent, True)
    job = Path(command.get("follow") or command["run_dir"])
    published: list[str] = []  # the MLflow run, once the follow or the publish has found or made it
    stopped = "the run stopped before it was published; resume=<run dir> (or judgesweep sync) finishes it"
    try:
        if "follow" in command:
            try:
                with tracking.records_to(job):
                    publishing.follow(job, cfg, parent.said, on_run=published.append, wait=parent.wait)
            except Exception as exc:  # noqa: BLE001 - the publish writes what this did not, or says why
                log.debug("traces not written during the run: %s: %s", type(exc).__name__, exc)
            said = parent.next()
            if said is None:  # end of file: a stop (any SIGTERM on its way is no second one)
                _ignore_signals()
                raise _Stop
            command = said
        run_dir = Path(command["run_dir"])
        stopped = f"publishing stopped; judgesweep sync {run_dir} finishes it"
        try:
            with tracking.records_to(run_dir):
                result = publishing.publish(run_dir, cfg, on_run=published.append)
        except Exception as exc:  # noqa: BLE001 - the parent reports it in one line
            _on_job(parent, False)
            _answer({"error": f"{type(exc).__name__}: {_one_line(exc)}"})
            return 1
        _on_job(parent, False)  # the parent may close the pipe once it has the answer: that end of file is no stop
        _answer({"run_id": result.run_id, "traces": result.traces})
        return None
    except _Stop:
        _ignore_signals()  # a second signal (Ctrl-C, then the end of file's SIGTERM) does not cut this short
        try:  # a run this job made or reopened (one made just now may not have been said yet): FAILED until a sync
            run_id = published[-1] if published else publishing.made_run(job, cfg)
            if run_id is not None:
                with tracking.records_to(job):
                    tracking.close_run(cfg, run_id, failed=True, reason=stopped)
        except Exception:  # noqa: BLE001 - best effort within the grace period
            pass
        return 143


def _on_job(parent: _Parent, busy: bool) -> None:
    """A job on: SIGTERM and SIGINT (Ctrl-C reaches the whole process group) stop the child, and so does end of
    file; idle: the child hears its stdin only."""
    if busy:  # the handlers first, then busy: an end of file sends SIGTERM only once it stops the job
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, _on_stop)
        parent.busy = True
    else:
        parent.busy = False
        _ignore_signals()


def _ignore_signals() -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:500] + ("..." if len(text) > 500 else "")


def _answer(obj: dict[str, Any]) -> None:
    try:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()
    except OSError:  # the parent stopped waiting (a timeout, a cancel): its end of file ends this child
        pass


def main(argv: list[str]) -> int:
    """``python -m runner.outputs.publisher <tracking config as JSON> [<run dir to follow>]``."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "true")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # "Creating initial MLflow database tables" and kin
    logging.basicConfig(level=logging.WARNING, format="judgesweep publisher: %(message)s")
    logging.getLogger("mlflow").setLevel(logging.ERROR)  # "Creating initial MLflow database tables" and kin
    logging.getLogger("alembic").setLevel(logging.ERROR)
    gc_pause.pause()  # through the imports of mlflow and the store's opening (runner.core.gc_pause)
    code = serve(TrackingConfig(**json.loads(argv[0])), Path(argv[1]) if len(argv) > 1 else None)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:  # a parent gone: nothing left to tell it
            pass
    # every write is committed: no interpreter teardown (a second of mlflow's modules) for the run to wait for
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
