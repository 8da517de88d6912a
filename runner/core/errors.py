"""Errors shared by several modules."""

from __future__ import annotations


class DatasetError(ValueError):
    """A dataset file or row is malformed; the message names the file and line."""


class ConfigurationError(ValueError):
    """The composed configuration cannot run; raised before any judge call."""


class ParamsError(ConfigurationError, TypeError):
    """Parameters from config do not fit what they configure (a registered parser, aggregation, check or
    combiner): a name that is not a parameter, a missing one, or a value it refuses (an invalid regex, a string
    where a list belongs). Also a TypeError, which these checks raised before it existed."""

# The exit status of a run (or aggregation, or sync) whose files are complete but whose MLflow tracking failed:
# distinct from 1 (a failed run) so a script can tell "rerun" from "judgesweep sync <dir>".
TRACKING_FAILED = 3

# The exit status of a run refused because another live process owns its run directory (runner.storage.owner).
RUN_DIR_BUSY = 4
# The exit status of a run stopped because its run directory could not be written (disk full, I/O error).
WRITE_FAILED = 5
# The exit status of a run stopped by its spending limit (budget.max_usd): its answers are kept, a resume with a higher
# limit continues it.
BUDGET_REACHED = 6


class RunDirectoryBusy(RuntimeError):
    """Another live process owns the run directory; raised before any call, the message names that process."""


class WriteFailed(RuntimeError):
    """A file of the run directory could not be written (disk full, an I/O error, no permission).

    The run sends nothing more once it is raised; the answers already journaled are kept, and a resume pays only
    for what never reached the journal.

    Attributes:
        path: The file that could not be written.
        kept: The answer being journaled when it was raised is in the journal all the same (another file failed).
    """

    def __init__(self, path: object, cause: BaseException, kept: bool = False) -> None:
        self.path = path
        self.kept = kept
        reason = cause.strerror if isinstance(cause, OSError) and cause.strerror else str(cause)
        super().__init__(f"cannot write {path}: {reason}")


class BatchPending(RuntimeError):
    """A batch was submitted (or is still running) and ``batch.wait=false``: the run ends here, exit 0, and a later
    ``resume=<run dir>`` collects it (runner.judging.batching)."""


class BatchFailed(RuntimeError):
    """A provider's batch request failed (upload, create, retrieve, download); the message holds no key."""
