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
