"""A small sampling profiler that sees every thread (cProfile sees only the thread it was enabled in).

litellm's ``acompletion`` runs the synchronous ``completion()`` set-up in the event loop's default
executor thread and hands success logging to background threads, so a cProfile of the main thread
misses part of litellm's per-call work. This wrapper runs a module in-process (like ``python -m``)
with a sampler thread that, every ``--interval-ms``, reads ``sys._current_frames()`` and records each
busy thread's stack (a thread whose innermost frame is waiting in select/queue/lock is idle and not
counted). It also reads each thread's CPU time from /proc, so the split of CPU between the event loop
thread and the helper threads is exact even where samples are approximate.

An in-process sampler needs the GIL to take a sample, so samples land where the running thread lets
the GIL go (at most every ``sys.getswitchinterval()``); treat shares as estimates (a few %).

Standalone: ``python -m benchmarks.sampler OUT.json -- -m runner judge=... `` (or ``-- script.py args``).
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
IDLE = {("selectors.py", "select"), ("threading.py", "wait"), ("queue.py", "get"), ("thread.py", "_worker"),
        ("threading.py", "_wait_for_tstate_lock"), ("logging_worker.py", "_worker_loop"), ("queue.py", "_get")}
MAX_DEPTH = 80


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


class Sampler(threading.Thread):
    """Samples the stacks of all other threads until stopped."""

    def __init__(self, interval_s: float) -> None:
        super().__init__(name="bench-sampler", daemon=True)
        self.interval_s = interval_s
        self.stacks: Counter[tuple[str, tuple[tuple[str, int, str], ...]]] = Counter()
        self.idle: Counter[str] = Counter()
        self.cpu: dict[int, tuple[str, float]] = {}
        self._stop_event = threading.Event()

    def run(self) -> None:  # noqa: D102
        me = threading.get_ident()
        last_cpu = 0.0
        while not self._stop_event.wait(self.interval_s):
            names = {t.ident: (t.name, t.native_id) for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                name = names.get(ident, (f"thread-{ident}", None))[0]
                group = _group(name)
                code = frame.f_code
                if (os.path.basename(code.co_filename), code.co_name) in IDLE:
                    self.idle[group] += 1
                    continue
                stack = []
                while frame is not None and len(stack) < MAX_DEPTH:
                    stack.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
                    frame = frame.f_back
                self.stacks[(group, tuple(stack))] += 1
            now = time.monotonic()
            if now - last_cpu > 0.2:  # keep the last CPU reading of threads that end before we do
                last_cpu = now
                cpu = _thread_cpu()
                for _ident, (name, native) in names.items():
                    if native in cpu:
                        self.cpu[native] = (name, cpu[native])

    def stop(self) -> None:
        """Stop sampling and take a last CPU reading."""
        self._stop_event.set()
        self.join()
        cpu = _thread_cpu()
        for t in threading.enumerate():
            if t.native_id in cpu:
                self.cpu[t.native_id] = (t.name, cpu[t.native_id])


def _group(name: str) -> str:
    """Thread name -> group (executor threads are numbered)."""
    if name == "MainThread":
        return "main (event loop)"
    if name.startswith("asyncio_"):
        return "asyncio default executor (litellm completion() set-up)"
    if "litellm" in name.lower() or name.startswith("ThreadPoolExecutor"):
        return f"other pool: {name.rstrip('0123456789_')}"
    return name.rstrip("0123456789-_") or name


def dump(sampler: Sampler, out: Path, wall_s: float) -> None:
    """Write the samples and per-thread CPU as JSON."""
    cpu_by_group: Counter[str] = Counter()
    for name, seconds in sampler.cpu.values():
        cpu_by_group[_group(name)] += seconds
    busy = Counter()
    for (group, _stack), n in sampler.stacks.items():
        busy[group] += n
    stacks = [{"thread": group, "n": n, "stack": [list(f) for f in stack]}
              for (group, stack), n in sampler.stacks.most_common()]
    out.write_text(json.dumps({"wall_s": wall_s, "interval_s": sampler.interval_s,
                               "cpu_s_by_thread": {k: round(v, 3) for k, v in cpu_by_group.most_common()},
                               "busy_samples_by_thread": dict(busy), "idle_samples_by_thread": dict(sampler.idle),
                               "stacks": stacks}))


def main() -> None:
    """Command-line entry point: ``OUT.json [--interval-ms MS] -- (-m module | script) args...``."""
    argv = sys.argv[1:]
    if "--" not in argv:
        raise SystemExit(__doc__)
    split = argv.index("--")
    opts, target = argv[:split], argv[split + 1:]
    out = Path(opts[0])
    interval = float(opts[opts.index("--interval-ms") + 1]) / 1000 if "--interval-ms" in opts else 0.001
    sampler = Sampler(interval)
    started = time.perf_counter()
    sampler.start()
    try:
        if target[0] == "-m":
            sys.argv = [target[1], *target[2:]]
            runpy.run_module(target[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = target
            runpy.run_path(target[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    finally:
        sampler.stop()
        dump(sampler, out, time.perf_counter() - started)
    sys.exit(code)


if __name__ == "__main__":
    main()
