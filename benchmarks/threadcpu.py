"""Run a module in-process (like ``python -m``) and report the CPU time of each of its threads.

litellm's ``acompletion`` runs the synchronous ``completion()`` set-up in the event loop's default
executor thread (``loop.run_in_executor``), and cProfile only sees the thread it was enabled in, so
this splits a run's CPU between the event-loop thread and the helper threads, from
``/proc/self/task/<tid>/stat``. A watcher thread reads it every 0.1 s (keeping the last reading of
threads that end early, such as the executor's, shut down when ``asyncio.run`` returns). It takes no
stack samples: an in-process sampler gets the GIL mostly where the busy thread releases it (fsync,
socket calls), so its shares would not follow CPU time.

Standalone: ``python -m benchmarks.threadcpu OUT.json -- -m runner judge=...``.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import threading
import time
from collections import Counter
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _thread_cpu() -> dict[int, float]:
    """CPU seconds of every thread of this process, by native thread id."""
    cpu = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu[int(task.name)] = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return cpu


def group(name: str) -> str:
    """Thread name -> group (pool threads are numbered)."""
    if name == "MainThread":
        return "main (event loop)"
    if name.startswith("asyncio_"):
        return "asyncio default executor (litellm completion() set-up)"
    return name.rstrip("0123456789-_") or name


class Watcher(threading.Thread):
    """Keeps the latest CPU reading of every thread until stopped."""

    def __init__(self) -> None:
        super().__init__(name="bench-threadcpu", daemon=True)
        self.cpu: dict[int, tuple[str, float]] = {}
        self._stop_event = threading.Event()

    def read(self) -> None:
        """Take one reading."""
        cpu = _thread_cpu()
        for t in threading.enumerate():
            if t.native_id in cpu:
                self.cpu[t.native_id] = (t.name, cpu[t.native_id])

    def run(self) -> None:  # noqa: D102
        while not self._stop_event.wait(0.1):
            self.read()

    def stop(self) -> dict[str, float]:
        """Stop, take a last reading and return CPU seconds by thread group."""
        self._stop_event.set()
        self.join()
        self.read()
        totals: Counter[str] = Counter()
        for name, seconds in self.cpu.values():
            totals[group(name)] += seconds
        return {k: round(v, 3) for k, v in totals.most_common()}


def main() -> None:
    """Command-line entry point: ``OUT.json -- (-m module | script) args...``."""
    argv = sys.argv[1:]
    if len(argv) < 3 or argv[1] != "--":
        raise SystemExit(__doc__)
    out, target = Path(argv[0]), argv[2:]
    watcher = Watcher()
    started = time.perf_counter()
    watcher.start()
    code: object = 0
    try:
        if target[0] == "-m":
            sys.argv = [target[1], *target[2:]]
            runpy.run_module(target[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = target
            runpy.run_path(target[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code
    finally:
        by_thread = watcher.stop()
        out.write_text(json.dumps({"wall_s": round(time.perf_counter() - started, 3), "cpu_s_by_thread": by_thread}))
    sys.exit(code)


if __name__ == "__main__":
    main()
