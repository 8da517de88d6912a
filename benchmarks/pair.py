"""Whole runs of N judgments side by side, one per mode given (``default``: the default sqlite tracking, its
store in a temp dir and made by one unmeasured 32-judgment run; ``off``: tracking=off), against the fake server at
L ms, through benchmarks.harness as ``make bench`` runs them; prints wall, CPU, peak RSS, and when the first
request, the last answer and the exit came. A quick look, not a table: ``make bench`` (the tracking scenario) is
the measurement::

    .venv/bin/python -m benchmarks.pair 1000 200 default off default off
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from benchmarks.data import write_dataset
from benchmarks.harness import FakeServer, judgesweep_cmd, run_measured


def main(argv: list[str]) -> None:
    """Run the modes in the order given and print one line each."""
    n, latency = int(argv[0]), float(argv[1])
    work = Path(tempfile.mkdtemp(prefix="judgesweep-pair-"))
    data = write_dataset(work / "data.jsonl", n)
    with FakeServer(latency_ms=latency, record=False) as srv:
        store = work / "store"
        run_measured(judgesweep_cmd(srv.base_url, data, 32, work / "warm", work / "c.sqlite", tracking=store), work,
                     "warm")
        for rep, mode in enumerate(argv[2:] or ["default", "off"]):
            srv.reset()
            cmd = judgesweep_cmd(srv.base_url, data, n, work / f"run{rep}", work / "c.sqlite",
                                 tracking=None if mode == "off" else store)
            m = run_measured(cmd, work, mode)
            st = srv.stats()
            print(f"{mode}: rc={m.rc} wall={m.wall_s:.1f}s cpu={(m.user_s or 0) + (m.sys_s or 0):.1f}s "
                  f"rss={m.maxrss_mb:.0f}MB first_request={st['first_request_ts'] - m.launch_ts:.1f}s "
                  f"calls={st['last_response_ts'] - st['first_request_ts']:.1f}s "
                  f"after_last_answer={m.end_ts - st['last_response_ts']:.1f}s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
