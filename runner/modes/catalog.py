"""The run modes this package ships: the one module of runner.modes that knows the implementations.

Each mode registers itself into runner.modes.base.MODES when its module is imported (``MODE = register(...)``);
importing this module imports them all, so a run, a resume, ``aggregate`` and the results API look a mode up here.
The interface (runner.modes.base) knows no implementation, and no implementation knows another or this module
(tests/unit/test_import_cycles.py; the independence contract in pyproject.toml). A new mode is one sub-package
registering itself and one import line below.
"""

from __future__ import annotations

import runner.modes.pairwise.mode  # noqa: F401 - registers the pairwise mode
import runner.modes.pointwise.mode  # noqa: F401 - registers the pointwise mode
from runner.core.config import RunConfig
from runner.modes.base import MODES, RunMode


def mode_named(name: str) -> RunMode:
    """The mode registered as ``name`` (a run's ``prompt.mode``).

    Raises:
        LookupError: No such mode, with the known ones.
    """
    try:
        return MODES[name]
    except KeyError:
        raise LookupError(f"run mode {name!r} is not one of {sorted(MODES)}") from None


def mode_for(cfg: RunConfig) -> RunMode:
    """The run's mode, chosen once from ``prompt.mode``."""
    return mode_named(cfg.prompt.mode.value)
