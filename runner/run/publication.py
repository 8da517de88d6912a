"""Publishing a finished run from the pipeline (runner.run.pipeline): the helper process that writes the run's MLflow
view (runner.outputs.publisher), started with the job and told to follow the run once its first answer is in, or
the run's own process
(``RunContext.publish_here``); the one line a tracking failure becomes; and the signals after the calls, which end
the run as they do during them."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from runner.core.run_settings import TrackingConfig
from runner.judging.progress import Phases
from runner.judging.shutdown import Interrupted, Signalled
from runner.outputs.publisher import Publisher, describe
from runner.run.context import RunContext, RunOutcome

log = logging.getLogger(__name__)


def _publish_here(run_dir: Path, cfg: TrackingConfig) -> tuple[str | None, str | None]:
    """:func:`publishing.publish` in this process: (MLflow run id, None) or (None, why not, one line)."""
    from runner.outputs import publishing

    try:
        return publishing.publish(run_dir, cfg).run_id, None
    except Exception as exc:  # noqa: BLE001 - the run's files stand; the outcome says it in one line
        return None, f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}"


# what each step after the calls writes (runner.outputs.run_files, publish_run): a signal during a step leaves it and
# those after it unwritten
STEP_OUTPUTS = (("writing results.jsonl", "results.jsonl"), ("writing summary", "summary.json"),
                ("writing report.html", "report.html"), ("publishing to MLflow", "the MLflow run"))


@contextlib.contextmanager
def signals_raise(ctx: RunContext, steps: Phases | None = None) -> Iterator[None]:
    """SIGINT and SIGTERM after the paid calls (summary, files, publishing) raise Interrupted with the resume
    command and what was not written (from the step ``steps`` shows), as during the calls: the CLI exits 130 / 143
    with one line. The handler raises :class:`runner.judging.shutdown.Signalled`, which no step's own ``except
    Exception`` takes for a failure, and ignores a second signal until the block is left. Only the main thread may
    set handlers (a launcher's worker thread keeps the defaults)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = (signal.SIGINT, signal.SIGTERM)

    def stop(signum: int, frame: Any) -> None:
        for sig in sigs:  # the first one stops the run; a second would only cut its one line short
            signal.signal(sig, signal.SIG_IGN)
        raise Signalled(signum)

    previous = {sig: signal.signal(sig, stop) for sig in sigs}
    try:
        yield
    except Signalled as exc:
        raise Interrupted(exc.signum, str(ctx.run_dir), unwritten(ctx, steps)) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def unwritten(ctx: RunContext, steps: Phases | None) -> tuple[str, ...]:
    """What a run stopped during the step ``steps`` shows has not written: that step's output and those after it
    (all of them before the first step; none without ``steps``, as when the helper process is closed)."""
    if steps is None:
        return ()
    names = [step for step, _ in STEP_OUTPUTS]
    start = names.index(steps.current) if steps.current in names else 0
    outputs = [output for _, output in STEP_OUTPUTS[start:]]
    return tuple(o for o in outputs if ctx.cfg.tracking.enabled or o != "the MLflow run")


class Helper:
    """The run's publishing process, told to follow this run directory once the first answer is in (the MLflow run is
    made then), or when the run ends before any: :meth:`get`. ``ctx.publishers`` holds it: started by
    ``runner.run.experiment.run_job`` before the job imports litellm (so mlflow's import and the store's opening run on
    the other core during the job's start-up), or kept by an earlier job of this process (the jobs of a basic-launcher
    sweep); it is kept there again once its publish answered. Without one there (it could not be started, or died),
    one is started at the first answer."""

    def __init__(self, ctx: RunContext, answered: threading.Event) -> None:
        self._answered = answered
        self._publisher: Publisher | None = None
        self._error: OSError | None = None
        self._kept = ctx.publishers

        def start() -> None:
            answered.wait()
            publisher = self._kept.take(ctx.cfg.tracking) if self._kept is not None else None
            if publisher is not None and publisher.follow(ctx.run_dir):
                self._publisher = publisher
                return
            try:
                self._publisher = Publisher(ctx.cfg.tracking, follow=ctx.run_dir)
            except OSError as exc:  # no process could be started: the run publishes in its own process
                self._error = exc

        self._thread = threading.Thread(target=start, name="publisher-start", daemon=True)
        self._thread.start()

    def get(self) -> Publisher | None:
        """The process (None if it could not be started)."""
        self._answered.set()
        self._thread.join()
        if self._error is not None:
            log.warning("no publishing process (%s): publishing in the run's own process", self._error)
            self._error = None
        return self._publisher

    def publish(self, run_dir: Path, timeout_s: float) -> tuple[str | None, str | None, int] | None:
        """Have the process publish ``run_dir``: (MLflow run id, None, its pid) or (None, why not, its pid); None
        without a process. Once it answered with a run id it is kept for the next job (``ctx.publishers``)."""
        publisher = self.get()
        if publisher is None:
            return None
        run_id, error = publisher.publish(run_dir, timeout_s)
        if self._kept is not None and publisher.alive():  # alive: it answered with a run id
            self._publisher = None
            self._kept.keep(publisher)
        return run_id, error, publisher.pid

    def close(self) -> None:
        """Stop the process unless it was kept (idempotent)."""
        publisher = self.get()
        if publisher is not None:
            publisher.close()


def publish_run(ctx: RunContext, helper: Helper | None, result: RunOutcome | None = None,
                steps: Phases | None = None) -> RunOutcome | None:
    """Hand the finished run directory to the publishing process (or publish it here: ``ctx.publish_here``); a
    tracking failure is the outcome's ``tracking_error`` (the run's files stand), said in one line with the command
    that finishes it. ``steps`` shows the step (default: nothing shown)."""
    cfg = ctx.cfg.tracking
    if not cfg.enabled:
        return result
    (steps or Phases()).now("publishing to MLflow")
    served = helper.publish(ctx.run_dir, cfg.timeout_s) if helper is not None else None
    if served is not None:
        run_id, error, pid = served
        by = f"publishing process {pid}"
    else:
        (run_id, error), by = _publish_here(ctx.run_dir, cfg), "this process"
    if error is not None:  # said by the CLI, once, on stderr (runner.app.cli)
        error = (f"tracking failed: {describe(cfg)}: {error}. The run's files are complete in {ctx.run_dir}; "
                 f"finish the tracking with: judgesweep sync {ctx.run_dir}")
    else:
        log.info("MLflow run %s at %s (written by %s)", run_id, describe(cfg), by)
    if result is None:  # an aborted run: its own error is the one line; this one goes to the log
        if error is not None:
            log.warning("%s", error)
        return None
    return dataclasses.replace(result, mlflow_run_id=run_id, tracking_error=error)
