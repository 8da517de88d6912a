"""A sweep's spending under ``budget.max_usd``, shared by its jobs: ``budget_ledger.json`` in the sweep directory.

Every job of a multirun books into the same file under a file lock (filelock), so jobs in other processes (a joblib
or submitit launcher's workers, on the same filesystem) see each other's spending: the dollars the sweep's jobs paid
since it was launched, and each job's reservations for its calls in flight (by job directory: a job that is started
again drops what an earlier process of it had reserved). The launching process starts the file anew
(:func:`start`); a resumed sweep's limit thus bounds what that launch pays, as a resumed run's does.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock

from runner.core.errors import WriteFailed

LEDGER_NAME = "budget_ledger.json"
T = TypeVar("T")


def start(sweep_dir: Path) -> None:
    """Start a sweep's ledger anew (the launching process, before any job runs)."""
    Ledger(sweep_dir, "").update(lambda state: state.clear())


class Ledger:
    """One job's view of its sweep's ledger.

    Args:
        sweep_dir: The sweep's directory (``hydra.sweep.dir``).
        job: The job's key (its directory), under which its reservations are kept.
    """

    def __init__(self, sweep_dir: Path, job: str) -> None:
        self.path = sweep_dir / LEDGER_NAME
        self.job = job

    def update(self, change: Callable[[dict[str, Any]], T]) -> T:
        """Apply ``change`` to the ledger's state under the lock and write it back (atomically); its result."""
        with FileLock(f"{self.path}.lock"):
            state = json.loads(self.path.read_text()) if self.path.is_file() else {}
            result = change(state)
            tmp = self.path.with_suffix(".part")
            try:
                tmp.write_text(json.dumps(state))
                os.replace(tmp, self.path)
            except OSError as exc:
                raise WriteFailed(self.path, exc) from None
            return result

    def book(self, worst: float, limit: float) -> float | None:
        """Reserve ``worst`` for this job when the sweep's spent plus every reservation stays within ``limit``;
        None when it was reserved, else the sweep's spent plus reservations (it was not)."""
        def change(state: dict[str, Any]) -> float | None:
            reserved = state.setdefault("reserved", {})
            committed = float(state.get("spent", 0.0)) + sum(reserved.values())
            if committed + worst > limit:
                return committed
            reserved[self.job] = reserved.get(self.job, 0.0) + worst
            return None
        return self.update(change)

    def settle(self, reserved: float, cost: float) -> None:
        """Release ``reserved`` of this job's reservations and add ``cost`` to the sweep's spent."""
        def change(state: dict[str, Any]) -> None:
            held = state.setdefault("reserved", {})
            left = held.get(self.job, 0.0) - reserved
            if left > 1e-12:
                held[self.job] = left
            else:
                held.pop(self.job, None)
            state["spent"] = float(state.get("spent", 0.0)) + cost
        self.update(change)

    def drop_reservations(self) -> None:
        """Forget what an earlier process of this job had reserved (it is not running any more)."""
        self.update(lambda state: state.setdefault("reserved", {}).pop(self.job, None))

    def spent(self) -> float:
        """The dollars the sweep's jobs paid since its launch."""
        return float(self.update(lambda state: state.get("spent", 0.0)))
