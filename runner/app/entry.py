"""The ``judgesweep`` console script and ``python -m runner``: the process's first lines pause the cyclic garbage
collector (:mod:`runner.core.gc_pause`) before anything is imported, then run :func:`runner.app.cli.main`."""

from __future__ import annotations


def main() -> None:
    """Console-script entry point."""
    from runner.core import gc_pause

    gc_pause.pause()
    from runner.app import cli

    cli.main()
