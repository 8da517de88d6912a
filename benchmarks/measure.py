"""Run one command as a child and report its wall time, CPU time and peak RSS as JSON.

Used as a fresh helper process per measurement: ``resource.getrusage(RUSAGE_CHILDREN)`` after waiting
for the child gives the largest RSS of the child (and of any grandchild it waited for), measured by the
kernel, with no polling. The launch timestamp is ``time.time()`` taken right before the child is
started, on the same clock the fake server stamps requests with.

Standalone: ``python -m benchmarks.measure OUT.json STDOUT STDERR -- CMD ARGS...``.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time


def main() -> None:
    """Command-line entry point."""
    if len(sys.argv) < 6 or sys.argv[4] != "--":
        raise SystemExit(__doc__)
    out, stdout_path, stderr_path, cmd = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[5:]
    with open(stdout_path, "wb") as so, open(stderr_path, "wb") as se:
        launched = time.time()
        started = time.perf_counter()
        rc = subprocess.call(cmd, stdout=so, stderr=se)
        wall = time.perf_counter() - started
        ended = time.time()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump({"rc": rc, "launch_ts": launched, "end_ts": ended, "wall_s": wall,
                   "maxrss_mb": usage.ru_maxrss / 1024, "user_s": usage.ru_utime, "sys_s": usage.ru_stime}, fh)


if __name__ == "__main__":
    main()
