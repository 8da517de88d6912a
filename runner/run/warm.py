"""The end of a run's imports, made while its judge calls are in flight.

The summary needs scipy.stats (every bootstrap interval), sklearn.metrics (kappa, F1 and the confusion matrix
against labels) and matplotlib (the report's figures): ~2.5 CPU-s cold, which a run used to pay after its last
answer (issue 43). While the calls are out the event loop mostly waits on its sockets, so a thread importing them
then costs the run no time after its last answer; the loop still gets the GIL at every switch interval. The
thread starts importing only once the first answer is in (start-up to the first request stays as it was, issue
12), imports only what this run's config will use (no matplotlib with ``output.plots=false``, no sklearn without
labels: their memory is not paid for nothing), and never outlives the paid stages: :func:`imports_for` joins it.
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from runner.core.config import RunConfig
from runner.run.context import Prepared

__all__ = ["imports_for", "modules_for"]

log = logging.getLogger(__name__)

STATISTICS = ("scipy.stats",)  # every run's intervals (runner.stats.uncertainty, runner.stats.proportions)
LABELS = ("sklearn.metrics",)  # kappa, F1, confusion matrix: gold labels, annotators, an ensemble's members
PLOTS = ("matplotlib.figure", "matplotlib.backends.backend_agg")  # the figure and the canvas savefig switches to


def modules_for(cfg: RunConfig, prepared: Prepared) -> tuple[str, ...]:
    """The modules this run's summary and report will import, in the order to import them."""
    labelled = bool(cfg.judge.members) or any(ref.gold is not None or any(a is not None for a in ref.annotations)
                                              for ref in prepared.refs)
    return STATISTICS + (LABELS if labelled else ()) + (PLOTS if cfg.output.plots else ())


def _import(modules: tuple[str, ...], answered: threading.Event, stop: threading.Event) -> None:
    """Wait for the first answer (or the end of the stages), then import ``modules`` one by one until ``stop``."""
    while not answered.wait(0.05):
        if stop.is_set():
            return
    for name in modules:
        if stop.is_set():
            return
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the summary imports it again and reports the error where it is used
            log.debug("warm-up import of %s failed", name, exc_info=True)
            return


@contextmanager
def imports_for(cfg: RunConfig, prepared: Prepared, answered: threading.Event) -> Iterator[None]:
    """Import the end of the run's modules in a thread while the body (the paid stages) runs.

    ``answered`` is set at the first answer. On leaving normally the thread is joined once its imports are done
    (the summary would make them next anyway); on an error or an interrupt it stops after the module it is
    importing, so an abort is not held up by the imports it no longer needs.
    """
    modules = tuple(name for name in modules_for(cfg, prepared) if name not in sys.modules)
    if not modules:
        yield
        return
    stop = threading.Event()
    thread = threading.Thread(target=_import, args=(modules, answered, stop), name="judgesweep-warm-imports",
                              daemon=True)
    thread.start()
    try:
        yield
    except BaseException:
        stop.set()
        raise
    finally:
        if answered.is_set() and not stop.is_set():
            thread.join()
        stop.set()
        thread.join()

