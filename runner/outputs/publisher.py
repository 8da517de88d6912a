"""The run's publishing helper: a child process that writes the finished run directory to MLflow
(:func:`runner.outputs.publishing.publish`), so MLflow never shares the run's interpreter, memory or event loop.

:class:`Publisher` starts it when the run starts: while the judge calls go on, the child imports mlflow and opens
the store (~2 s of CPU that would otherwise follow the last answer) on the machine's other core, then writes the
traces of the answers as they are journaled (:func:`runner.outputs.publishing.follow`). Once the run's files are
complete, :meth:`Publisher.publish` hands it the run directory and waits for its one-line
answer, at most ``tracking.timeout_s``; a store that is slow, locked, down, corrupt or wrong costs that wait at
most, never an answer or a file, and the run ends saying how to finish the tracking (``judgesweep sync``).

The child never outlives the run: its stdin is the parent's pipe, and a thread of the child reads it; end of file
(the parent exited, was killed with ``kill -9``, or cancelled the publish) makes the child mark the MLflow run
FAILED if it had made one, within ``STOP_GRACE_S``, and exit. Run as ``python -m runner.outputs.publisher <tracking
config as JSON>``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from runner.core.config import TrackingConfig

log = logging.getLogger(__name__)

STOP_GRACE_S = 3.0  # how long the child may take to mark its run FAILED once told to stop, before it is cut


def describe(cfg: TrackingConfig) -> str:
    """The store as a message names it: its URI without any user or password."""
    from urllib.parse import urlsplit, urlunsplit

    uri = cfg.uri or "MLflow's default store"
    parts = urlsplit(uri)
    if parts.password is not None or parts.username is not None:
        host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
        uri = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return f"{uri} (experiment {cfg.experiment!r})"


class Publisher:
    """The helper process of one run (see the module docstring)."""

    def __init__(self, cfg: TrackingConfig, follow: Path | None = None) -> None:
        self.cfg = cfg
        config = json.dumps(dataclasses.asdict(cfg))
        # its own output goes to the run's stderr (a warning of ours); its answer comes back on stdout
        self._proc: subprocess.Popen | None = subprocess.Popen(
            [sys.executable, "-m", "runner.outputs.publisher", config, *([str(follow)] if follow else [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")

    def publish(self, run_dir: Path, timeout_s: float) -> tuple[str | None, str | None]:
        """Publish ``run_dir`` and stop the helper.

        Returns:
            (MLflow run id, None) or (None, why the store was not written: one line).
        """
        proc = self._proc
        if proc is None:
            return None, "the publishing process was stopped"
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps({"run_dir": str(run_dir)}) + "\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
            line = proc.stdout.readline() if ready else ""
        except (BrokenPipeError, OSError) as exc:
            line = json.dumps({"error": f"the publishing process ended ({type(exc).__name__})"})
        finally:
            self.close()
        if not line:
            return None, (f"no answer within tracking.timeout_s={timeout_s:g} s" if not ready
                          else "the publishing process ended without an answer")
        answer = json.loads(line)
        return answer.get("run_id"), answer.get("error")

    def close(self) -> None:
        """Stop the helper (idempotent): end of file on its stdin, then at most STOP_GRACE_S + 1 s before it is
        killed."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
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


class _Stop(BaseException):
    """The parent is gone or said stop: raised in the child's main thread by its SIGTERM handler."""


def _watch_parent(commands: list[str], got: threading.Event) -> None:
    """The child's stdin reader: the command line, then end of file = stop (SIGTERM to itself, a hard exit later)."""
    line = sys.stdin.readline()
    if line:
        commands.append(line)
        got.set()
        sys.stdin.read()  # returns at end of file only
    got.set()
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(STOP_GRACE_S)
    os._exit(143)


def _on_stop(signum: int, frame: Any) -> None:
    raise _Stop


def serve(cfg: TrackingConfig, follow: Path | None = None) -> int:
    """The child: open the store, write the traces of ``follow``'s answers as they come (if given), then wait for the
    run directory, publish it, answer one JSON line."""
    from runner.outputs import publishing, tracking

    signal.signal(signal.SIGTERM, _on_stop)
    signal.signal(signal.SIGINT, _on_stop)  # Ctrl-C reaches the whole process group: the parent decides
    commands: list[str] = []
    got = threading.Event()
    published: list[str] = []  # the MLflow run, once the publish has found or made it
    stopped = "the run stopped before it was published; resume=<run dir> (or judgesweep sync) finishes it"
    try:
        threading.Thread(target=_watch_parent, args=(commands, got), daemon=True, name="parent").start()
        try:
            tracking._client(cfg)  # import mlflow and open the store while the run's calls go on
        except Exception:  # noqa: BLE001 - reported by the publish, which meets it again
            pass
        if follow is not None:
            try:
                publishing.follow(follow, cfg, got.is_set, on_run=published.append)
            except Exception as exc:  # noqa: BLE001 - the publish writes what this did not, or says why
                log.debug("traces not written during the run: %s: %s", type(exc).__name__, exc)
        got.wait()
        if not commands:
            return 0
        run_dir = Path(json.loads(commands[0])["run_dir"])
        stopped = f"publishing stopped; judgesweep sync {run_dir} finishes it"
        try:
            result = publishing.publish(run_dir, cfg, on_run=published.append)
        except Exception as exc:  # noqa: BLE001 - the parent reports it in one line
            _done()
            _answer({"error": f"{type(exc).__name__}: {_one_line(exc)}"})
            return 1
        _done()  # the parent closes the pipe once it has the answer: that end of file is no stop
        _answer({"run_id": result.run_id, "traces": result.traces})
        return 0
    except _Stop:
        if published:  # a run this publish made or reopened: FAILED until a sync finishes it
            try:
                tracking.close_run(cfg, published[-1], failed=True, reason=stopped)
            except Exception:  # noqa: BLE001 - best effort within the grace period
                pass
        return 143


def _done() -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:500] + ("..." if len(text) > 500 else "")


def _answer(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    """``python -m runner.outputs.publisher <tracking config as JSON> [<run dir to follow>]``."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "true")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # "Creating initial MLflow database tables" and kin
    logging.basicConfig(level=logging.WARNING, format="judgesweep publisher: %(message)s")
    logging.getLogger("mlflow").setLevel(logging.ERROR)  # "Creating initial MLflow database tables" and kin
    logging.getLogger("alembic").setLevel(logging.ERROR)
    os.nice(10)  # the run's own process and its judge calls come first; this takes what CPU they leave
    code = serve(TrackingConfig(**json.loads(argv[0])), Path(argv[1]) if len(argv) > 1 else None)
    sys.stdout.flush()
    sys.stderr.flush()
    # every write is committed: no interpreter teardown (a second of mlflow's modules) for the run to wait for
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
