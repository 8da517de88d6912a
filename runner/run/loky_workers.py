"""joblib's loky workers, each guarded against the death of the process that launched the sweep from its start.

``hydra/launcher=joblib`` runs a sweep's jobs in loky worker processes that joblib starts all at once (``n_jobs`` of
them, also more than the sweep has jobs) and keeps waiting 300 s for more work: a worker that never ran a job never
runs judgesweep's code, so the guard of :mod:`runner.run.launcher_watch` is loky's ``initializer``, which every worker
runs when it starts. Hydra's launcher asks joblib for the backend by name (``loky``), so the guarded backend is
registered under that name in the launching process (:func:`register`, from the CLI's sweep callback).
"""

from __future__ import annotations

import os
from typing import Any

from joblib import register_parallel_backend
from joblib._parallel_backends import LokyBackend

from runner.run import launcher_watch


class GuardedLokyBackend(LokyBackend):
    """joblib's loky backend whose workers run :func:`runner.run.launcher_watch.guard` of this process first."""

    def configure(self, n_jobs: int = 1, parallel: Any = None, prefer: str | None = None,
                  require: str | None = None, idle_worker_timeout: float | None = None, **kwargs: Any) -> int:
        """joblib's loky executor, its workers initialized with the launcher's guard (see the module docstring)."""
        return super().configure(n_jobs, parallel, prefer, require, idle_worker_timeout,
                                 initializer=launcher_watch.guard, initargs=(os.getpid(),), **kwargs)


def register() -> None:
    """Make ``loky`` name :class:`GuardedLokyBackend` for every joblib Parallel this process starts from now on."""
    register_parallel_backend("loky", GuardedLokyBackend)
