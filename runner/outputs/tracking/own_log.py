"""Where MLflow's own log records go in a process that publishes (the run's publishing helper, ``judgesweep sync``).

MLflow gives its loggers (and SQLAlchemy's, alembic's) a handler of its own on stderr when it is imported; a store
locked past SQLite's busy timeout then prints an ERROR record with two tracebacks on the run's console, although
the publish reports the failure (or retries and succeeds) in one line of ours. Inside :func:`records_to` those
records go to the run directory's ``judgesweep.log`` instead (the run's own log file, beside Hydra's lines), with
their tracebacks; with no run directory they are dropped (the publish that meets the same store says why).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

# The loggers MLflow configures when it is imported (mlflow.utils.logging_utils._configure_mlflow_loggers).
LOGGERS = ("mlflow", "sqlalchemy", "alembic", "huey")
LOG_NAME = "judgesweep.log"  # the run's log file (conf/hydra/default.yaml's job_logging)
FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"  # Hydra's line format in that file


class _RunLog(logging.Handler):
    """Appends each record to ``path`` (opened per record: they are rare, and the run's process appends too)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.setFormatter(logging.Formatter(FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(self.format(record) + "\n")
        except Exception:  # noqa: BLE001 - logging's own policy: a record that cannot be written is not an error
            self.handleError(record)


@contextlib.contextmanager
def records_to(run_dir: Path | None) -> Iterator[None]:
    """MLflow's log records (its ``mlflow``, ``sqlalchemy``, ``alembic`` loggers) into ``run_dir/judgesweep.log``
    while inside, none on the console; dropped when ``run_dir`` is None. mlflow is imported first (its import sets
    those loggers' handlers); the handlers before are restored on the way out."""
    import mlflow  # noqa: F401 - its import configures the loggers replaced here

    handler: logging.Handler = _RunLog(run_dir / LOG_NAME) if run_dir is not None else logging.NullHandler()
    loggers = [logging.getLogger(name) for name in LOGGERS]
    saved = [(logger.handlers, logger.propagate) for logger in loggers]
    for logger in loggers:
        logger.handlers = [handler]
        logger.propagate = False
    try:
        yield
    finally:
        for logger, (handlers, propagate) in zip(loggers, saved, strict=True):
            logger.handlers, logger.propagate = handlers, propagate
