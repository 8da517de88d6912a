"""Run the judgesweep CLI with one or more costs patched away, to price them (runner/ is not changed).

Each patch removes one cost found while benchmarking, so "baseline vs patched" is what a fix to
runner/ would buy at most:

- ``no_fsync``: ``os.fsync`` in runner/storage/journal.py becomes a no-op (the journal still writes and flushes
  every line; only the per-call fsync on the event-loop thread goes).
- ``stub_tracking``: a stand-in ``runner.outputs.tracking`` module is installed before the CLI imports it, so
  mlflow and pandas are never imported (what a lazy import in runner/outputs/tracking/ would give a run
  with ``tracking=off``; runner/outputs/tracking/ has imported them lazily since commit 50e0f41, so this
  is now a no-op that shows the run-to-run noise). Only valid with tracking=off.
- ``zero_price``: the judge model is registered in litellm's cost map at $0 before the run (an unpriced
  model makes litellm's per-call cost calculation try three names and raise on each).
- ``switch_1ms``: ``sys.setswitchinterval(0.001)`` (default 5 ms): litellm runs part of every call in
  an executor thread, which waits for the event-loop thread to let the GIL go.
- ``gc_stats`` (a probe, not a patch): counts and times every garbage collection, printed to stderr
  as ``GC_STATS {...}`` at exit.
- ``gc_freeze``: ``gc.freeze()`` once every module is imported, so the cyclic garbage collector stops
  re-scanning the ~1-2 million objects that importing litellm (and mlflow) leaves behind on every
  full collection.

Standalone: ``python -m benchmarks.whatif no_fsync,zero_price -- judge=... (CLI overrides)``.
"""

from __future__ import annotations

import gc
import os
import runpy
import sys
import types

PATCHES = ("no_fsync", "stub_tracking", "zero_price", "gc_freeze", "gc_stats", "switch_1ms")


def _gc_stats() -> None:
    """Time every garbage collection; print a JSON line to stderr at exit (not a patch: a probe)."""
    import atexit
    import json
    import time

    totals = {g: [0, 0.0] for g in range(3)}
    started: list[float] = []

    def callback(phase: str, info: dict) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            entry = totals[info["generation"]]
            entry[0] += 1
            entry[1] += time.perf_counter() - started.pop()

    gc.callbacks.append(callback)
    atexit.register(lambda: print("GC_STATS " + json.dumps({f"gen{g}": {"collections": n, "seconds": round(t, 3)}
                                                             for g, (n, t) in totals.items()}), file=sys.stderr))


def _stub_tracking() -> None:
    module = types.ModuleType("runner.outputs.tracking")

    def _refuse(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("benchmarks.whatif stub_tracking: run with tracking=off")

    module.start_run = _refuse
    module.finish_run = _refuse
    module.RunRecord = lambda **kwargs: kwargs
    sys.modules["runner.outputs.tracking"] = module
    import runner

    runner.outputs.tracking = module


def _zero_price(argv: list[str]) -> None:
    import litellm

    model = next(a.split("=", 1)[1] for a in argv if a.startswith("judge.model="))
    provider, _, name = model.partition("/")
    entry = {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0, "litellm_provider": provider, "mode": "chat"}
    litellm.register_model({model: entry, name: entry})


def main() -> None:
    """Command-line entry point: ``PATCH[,PATCH...] -- CLI overrides``."""
    if len(sys.argv) < 3 or sys.argv[2] != "--":
        raise SystemExit(__doc__)
    patches = [p for p in sys.argv[1].split(",") if p and p != "none"]
    unknown = set(patches) - set(PATCHES)
    if unknown:
        raise SystemExit(f"unknown patch(es) {sorted(unknown)}; known: {PATCHES}")
    argv = sys.argv[3:]
    if "gc_stats" in patches:
        _gc_stats()
    if "switch_1ms" in patches:
        sys.setswitchinterval(0.001)
    if "stub_tracking" in patches:
        _stub_tracking()
    if "no_fsync" in patches:
        import runner.storage.journal

        runner.storage.journal.os = types.SimpleNamespace(**{**vars(os), "fsync": lambda fd: None})
    if "zero_price" in patches:
        _zero_price(argv)
    if "gc_freeze" in patches:
        import runner.run.pipeline  # noqa: F401  (every heavy import happens here; runner.app.cli now freezes there too)

        gc.collect()
        gc.freeze()
    sys.argv = ["runner", *argv]
    runpy.run_module("runner", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
