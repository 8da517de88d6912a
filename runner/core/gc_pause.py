"""The cyclic garbage collector paused while a judgesweep process starts.

A run's start-up is imports (litellm alone builds thousands of pydantic classes) and Hydra's composition: millions
of objects made, almost none of them garbage, while the collector walks the growing heap again and again (``import
litellm`` ~13% faster with it paused, measured in docs/performance.md). The process's entry point
(:mod:`runner.app.entry`, the publishing process's main) pauses it first thing; :func:`resume` turns it back on once the
run's modules are imported (``runner.run.experiment.prepare_run``, which freezes what exists then) or once the command
turns out not to be a run. A process that did not pause it (a test, a notebook calling ``run_experiment``) is left as
it is.
"""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """Turn the cyclic collector off, if it is on; :func:`resume` turns it on again."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """Turn the collector on again if :func:`pause` turned it off (idempotent)."""
    global _paused
    if _paused:
        _paused = False
        gc.enable()
