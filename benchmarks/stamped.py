"""benchmarks/measure.py with the child's output stamped: each stdout and stderr line gets ``time.time()`` as it
arrives, so the moment a run prints its result (judgesweep's ``report: <path>`` line) sits on the same clock as
the launch, the fake server's request stamps and the exit.

Writes OUT.json as measure.py does (rc, launch_ts, end_ts, wall_s, maxrss_mb, user_s, sys_s) plus ``lines``:
``[ts, "out" | "err", text]`` for the first MAX_LINES lines of each stream (text cut to 300 characters); the
streams themselves go whole to STDOUT and STDERR. The child's stdout is a pipe: a Python child should run with
``PYTHONUNBUFFERED=1`` (benchmarks.harness.bench_env sets it) or its lines arrive only at exit.

Standalone: ``python -m benchmarks.stamped OUT.json STDOUT STDERR -- CMD ARGS...``.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import threading
import time
from typing import IO

MAX_LINES = 5000


def _pump(stream: IO[bytes], sink: IO[bytes], name: str, lines: list[list]) -> None:
    """Copy ``stream`` to ``sink`` line by line, stamping each line as it is read."""
    kept = 0
    for raw in iter(stream.readline, b""):
        ts = time.time()
        sink.write(raw)
        if kept < MAX_LINES:
            lines.append([ts, name, raw.decode("utf-8", "replace").rstrip("\n")[:300]])
            kept += 1
    sink.flush()


def main() -> None:
    """Command-line entry point."""
    if len(sys.argv) < 6 or sys.argv[4] != "--":
        raise SystemExit(__doc__)
    out, stdout_path, stderr_path, cmd = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[5:]
    lines: list[list] = []
    with open(stdout_path, "wb") as so, open(stderr_path, "wb") as se:
        launched = time.time()
        started = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        pumps = [threading.Thread(target=_pump, args=(child.stdout, so, "out", lines)),
                 threading.Thread(target=_pump, args=(child.stderr, se, "err", lines))]
        for pump in pumps:
            pump.start()
        rc = child.wait()
        wall = time.perf_counter() - started
        ended = time.time()
        for pump in pumps:  # a grandchild that keeps the pipe open would hold the pumps, not the stamps above
            pump.join(timeout=30)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines.sort(key=lambda line: line[0])
    with open(out, "w", encoding="utf-8") as fh:
        json.dump({"rc": rc, "launch_ts": launched, "end_ts": ended, "wall_s": wall,
                   "maxrss_mb": usage.ru_maxrss / 1024, "user_s": usage.ru_utime, "sys_s": usage.ru_stime,
                   "lines": lines}, fh)


if __name__ == "__main__":
    main()
