"""Where a process keeps its publishing helper (runner.outputs.publisher.Publisher) between jobs: the one started
with a job before it imports litellm (:meth:`Idle.start`), or the one an earlier job's publish left idle (the jobs of
a basic-launcher sweep, which run one after another in the sweep's process)."""

from __future__ import annotations

import atexit
import logging
import threading

from runner.core.run_settings import TrackingConfig
from runner.outputs.publisher import Publisher

log = logging.getLogger(__name__)


class Idle:
    """Where a process keeps its one idle helper between its jobs: :meth:`keep` after a job's publish answered,
    :meth:`take` for the next job with an equal tracking config (any other is closed), :meth:`close` when the jobs
    are over (and at interpreter exit, whatever ends it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: Publisher | None = None
        self._at_exit = False

    def take(self, cfg: TrackingConfig) -> Publisher | None:
        """The idle helper, if it runs and publishes with ``cfg``; None otherwise (any other is closed)."""
        with self._lock:
            kept, self._kept = self._kept, None
        if kept is not None and kept.cfg == cfg and kept.alive():
            return kept
        if kept is not None:
            kept.close()
        return None

    def start(self, cfg: TrackingConfig) -> None:
        """Have a helper for ``cfg`` ready for the next job: the one idle here, else a new one, started now so that
        importing mlflow and opening (or creating) the store run on the machine's other core while the job composes,
        imports litellm and makes its first calls. Without a job it stays idle: its stdin's end of file (this
        process's :meth:`close`, its exit or its kill) ends it at once, or during its imports within
        STOP_GRACE_S."""
        kept = self.take(cfg)
        self.keep(kept if kept is not None else Publisher(cfg))

    def keep(self, publisher: Publisher) -> None:
        """Keep ``publisher`` (whose publish answered) for the next job; one kept before it is closed."""
        with self._lock:
            kept, self._kept = self._kept, publisher
            if not self._at_exit:
                atexit.register(self.close)
                self._at_exit = True
        if kept is not None:
            kept.close()

    def close(self, why: str | None = "the jobs of this process are done") -> None:
        """Stop the idle helper, if any (idempotent); ``why`` is logged with its exit status (None: nothing)."""
        with self._lock:
            kept, self._kept = self._kept, None
        if kept is not None:  # idle, it exits at once (status 0) at end of file
            status = kept.close()
            if why is not None:
                log.info("publishing process %d ended (exit %s): %s", kept.pid, status, why)
