"""``make bench``: judgesweep against a fake OpenAI-compatible server, the scenarios of issue 12, one table.

1. throughput: 1,000 judgments, 200 ms latency, concurrency 32; judgesweep with the default sqlite tracking
   and with tracking=off, the bare litellm loop, the bare openai SDK loop and plain aiohttp, interleaved,
   3 repetitions; steady calls/s (the server's stamps) and whole-process calls/s, median and range.
2. scale: 10,000 and 100,000 judgments (1,000,000 with ``make bench-scale``) at 0 ms, tracking off, cache
   off: exit code, rows, peak RSS, wall, calls/s, and the time from the last answer to the process exit.
3. rpm: a server allowing 600 rpm over a sliding 1 s window (10 per second), 300 judgments at 200 ms,
   without and with judge.rpm=600 (and the old 60 s window): wall / ideal, 429s, lost rows.
   sporadic_429: no rate limit, but 10% of requests answered 429 (Retry-After: 1) whatever the rate (seeded),
   500 judgments at 200 ms, no judge.rpm: wall against the same run without the faults (target <= 1.5x).
4. start-up: launch to the first request (judgesweep sqlite / off, bare litellm loop), ``--help``.
5. cache: 10,000 judgments cached, then the same command again: no HTTP call, < 15 s.
6. tracking: the default sqlite tracking against tracking=off (1,000 x 200 ms: wall, CPU, peak RSS, and
   promptfoo and inspect-ai when benchmarks/peers.sh installed them; 10,000 x 0 ms: wall, every trace in the
   store), interleaved, 3 repetitions (benchmarks/tracking.py).
7. sweep_items: the sweep report's item view at 10,000 items x 20 configurations: file size, build time, and
   headless chromium's time to open it beside an empty page's (benchmarks/sweep_items_size.py).
8. batch: 10,000 judgments live and through the fake server's Files and Batches API (judge.batch=on): requests,
   wall and dollars at gpt-4o-mini's cost-map prices (benchmarks/batch.py).
9. fixed_cost: issue 43's fixed cost, phase by phase: ``make run`` default against tracking=off (a fresh cwd and a
   re-run), one call against the bare loops and the peers, 30 calls at 0 ms, 1,000 x 200 ms, and the time from the
   last answer to the printed result (benchmarks/fixed_cost.py).

Every scenario starts the fake server as a separate process and every run is a real subprocess; see
benchmarks/README.md for how each number is measured. Results are merged into benchmarks/results.json
(a scenario run now replaces the same scenario; scale sizes are merged one by one, so ``make bench`` and
``make bench-scale`` fill one file); ``--fresh`` starts the file anew. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.batch import scenario_batch
from benchmarks.data import write_dataset
from benchmarks.fixed_cost import scenario_fixed_cost
from benchmarks.harness import REPO, git_commit, loadavg
from benchmarks.report import FORMAT, print_table, table_rows
from benchmarks.scenarios import (
    MAX_SCALE_ITEMS,
    scale_plan,
    scenario_cache,
    scenario_rpm,
    scenario_scale,
    scenario_sporadic_429,
    scenario_startup,
    scenario_throughput,
)
from benchmarks.sweep_items_size import scenario_sweep_items
from benchmarks.tracking import scenario_tracking

RESULTS = REPO / "benchmarks" / "results.json"
QUICK_RESULTS = Path(tempfile.gettempdir()) / "judgesweep-bench-quick.json"  # a smoke run never touches RESULTS
DATA_DIR = Path(tempfile.gettempdir()) / "judgesweep-bench-data"
FULL = {"throughput_n": 1000, "throughput_reps": 3, "scale_sizes": [10_000, 100_000], "rpm_n": 300,
        "sporadic_n": 2000, "startup_reps": 3, "cache_n": 10_000, "tracking_n": 1000, "tracking_reps": 3,
        "tracking_big_items": 5_000, "sweep_items": (10_000, 20), "batch_n": 10_000,
        "fixed_cost_reps": 3, "fixed_cost_big_n": 1000}
QUICK = {"throughput_n": 200, "throughput_reps": 1, "scale_sizes": [2_000], "rpm_n": 60, "sporadic_n": 100,
         "startup_reps": 1,
         "cache_n": 1_000, "tracking_n": 200, "tracking_reps": 1, "tracking_big_items": 1_000,
         "sweep_items": (1_000, 5), "batch_n": 500, "fixed_cost_reps": 1,
         "fixed_cost_big_n": 200}

SCENARIOS: dict[str, Callable[[dict, Path, Path], dict[str, Any]]] = {
    "throughput": scenario_throughput, "scale": scenario_scale, "rpm": scenario_rpm,
    "sporadic_429": scenario_sporadic_429, "startup": scenario_startup,
    "cache": scenario_cache, "tracking": scenario_tracking, "sweep_items": scenario_sweep_items,
    "batch": scenario_batch, "fixed_cost": scenario_fixed_cost}


def machine_info() -> dict[str, Any]:
    """nproc, CPU, memory, Python and package versions, git commit."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal"))
    return {"nproc": os.cpu_count(), "cpu": cpu, "mem_gb": round(mem_kb / 2**20, 1), "platform": platform.platform(),
            "python": platform.python_version(), "litellm": metadata.version("litellm"),
            "openai": metadata.version("openai"), "httpx": metadata.version("httpx"),
            "aiohttp": metadata.version("aiohttp"), **git_commit()}


def dataset_rows(cfg: dict, names: list[str]) -> int:
    """Rows the dataset needs for the scenarios about to run (scale judges at most MAX_SCALE_ITEMS items)."""
    need = {"throughput": cfg["throughput_n"], "rpm": cfg["rpm_n"], "sporadic_429": cfg["sporadic_n"],
            "cache": cfg["cache_n"], "startup": 32,
            "scale": max((scale_plan(n)[0] for n in cfg["scale_sizes"]), default=0),
            "tracking": max(cfg["tracking_n"], cfg["tracking_big_items"]), "batch": cfg["batch_n"],
            "sweep_items": 0, "fixed_cost": cfg["fixed_cost_big_n"]}
    return max(need[name] for name in names)


def merge(previous: dict[str, Any], name: str, outcome: dict[str, Any]) -> dict[str, Any]:
    """The scenario to keep: ``outcome``, except that scale keeps the earlier sizes it did not run again."""
    if name == "scale" and "runs" in previous:
        outcome["runs"] = {k: v for k, v in sorted({**previous["runs"], **outcome.get("runs", {})}.items(),
                                                   key=lambda kv: int(kv[0]))}
    return outcome


def run_scenario(name: str, cfg: dict, data: Path, work: Path) -> dict[str, Any]:
    """One scenario's outcome; a scenario that raises (a bug here, a warm-up run that fails) is recorded with
    its traceback's last line and fails, and the next scenario still runs."""
    try:
        return SCENARIOS[name](cfg, data, work)
    except Exception as exc:  # the benchmark reports a broken scenario instead of losing the others
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        traceback.print_exc()
        return {"error": detail[-3000:], "pass": False}


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=list(SCENARIOS), help="run these scenarios only")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repetition (a smoke run)")
    parser.add_argument("--scale-sizes", type=int, nargs="+",
                        help=f"judgment counts for the scale scenario (items x 2 orders x repeats, at most "
                             f"{MAX_SCALE_ITEMS:,} items), e.g. 1000000")
    parser.add_argument("--out", type=Path, help=f"default {RESULTS} ({QUICK_RESULTS} with --quick)")
    parser.add_argument("--fresh", action="store_true", help="do not merge with the scenarios already in --out")
    parser.add_argument("--keep", action="store_true", help="keep the run directories (printed at the end)")
    args = parser.parse_args()
    cfg = dict(QUICK if args.quick else FULL)
    out = args.out or (QUICK_RESULTS if args.quick else RESULTS)
    if args.scale_sizes:
        for n in args.scale_sizes:
            scale_plan(n)  # fails now, not after the other scenarios, if a size cannot be planned
        cfg["scale_sizes"] = sorted(args.scale_sizes)
    names = [n for n in SCENARIOS if not args.only or n in args.only]
    rows = dataset_rows(cfg, names)
    started = time.monotonic()
    data = write_dataset(DATA_DIR / f"chat_vs_simple_{rows}.jsonl", rows)
    print(f"dataset {data} ({data.stat().st_size / 2**20:.0f} MB, {rows:,} rows), ready in "
          f"{time.monotonic() - started:.1f}s", flush=True)
    work = Path(tempfile.mkdtemp(prefix="judgesweep-bench-"))
    previous = json.loads(out.read_text()) if out.is_file() and not args.fresh else {}
    results: dict[str, Any] = {"scenarios": {k: v for k, v in previous.get("scenarios", {}).items()
                                             if k in SCENARIOS and v.get("format") == FORMAT}}
    results["machine"] = machine_info()
    results["config"] = {**cfg, "quick": args.quick}
    try:
        for name in names:
            print(f"running {name} ...", flush=True)
            load_before, t0 = loadavg(), time.monotonic()
            outcome = run_scenario(name, cfg, data, work)
            outcome.update({"format": FORMAT, "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                            **git_commit(), "quick": args.quick, "bench_s": round(time.monotonic() - t0, 1),
                            "loadavg_before": load_before, "loadavg_after": loadavg()})
            results["scenarios"][name] = merge(results["scenarios"].get(name, {}), name, outcome)
            print(f"  done in {outcome['bench_s']}s (load {load_before[0]} -> {outcome['loadavg_after'][0]})",
                  flush=True)
            out.write_text(json.dumps(results, indent=2) + "\n")  # a later crash keeps what was measured
    finally:
        if args.keep:
            print(f"run directories kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    results["scenarios"] = {k: results["scenarios"][k] for k in SCENARIOS if k in results["scenarios"]}
    out.write_text(json.dumps(results, indent=2) + "\n")
    print_table(table_rows(results["scenarios"]))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
