"""Where a judge call's client CPU goes, and which litellm settings cut it.

``python -m benchmarks.overhead`` (not part of ``make bench``; about 10 minutes) writes
benchmarks/overhead.json and prints three reports, all at 0 ms server latency so the client is the
bottleneck:

1. settings: the bare litellm loop (benchmarks/bare_loop.py) once per litellm setting or model
   prefix, repeated; client CPU ms per call (process CPU of all threads during the calls / calls) and
   server-side calls/s. judgesweep itself at the same size, for reference (its CPU per call is the
   CLI's total CPU minus a 32-call run's, over the difference in calls).
2. threads: one judgesweep run under benchmarks/threadcpu.py: CPU seconds of the event-loop thread
   and of litellm's executor threads, from /proc.
4. what-if: the judgesweep CLI with one cost patched away at a time (benchmarks/whatif.py: no journal
   fsync, gc.freeze() after imports, the model priced at $0, mlflow/pandas not imported) and with the
   model prefix hosted_vllm/ (config only); calls/s, CPU and garbage-collection time per variant.
3. cProfile of the CLI (``python -m cProfile -o``): the event-loop thread only; the top functions
   under litellm/ and openai/ by own time, and the cumulative time of named litellm stages.
"""

from __future__ import annotations

import argparse
import json
import pstats
import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.data import write_dataset
from benchmarks.harness import (
    PYTHON,
    REPO,
    FakeServer,
    bare_loop_cmd,
    calls_per_s,
    judgesweep_cmd,
    loadavg,
    run_measured,
)

OUT = REPO / "benchmarks" / "overhead.json"
DATA_DIR = Path(tempfile.gettempdir()) / "judgesweep-bench-data"
JUDGESWEEP_CONFIGURE = ("telemetry=False", "suppress_debug_info=True", "drop_params=True")
FLAGS = ("turn_off_message_logging=True", "disable_token_counter=True", "disable_end_user_cost_tracking=True")
# (label, litellm attribute assignments, extra bare_loop arguments)
VARIANTS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("baseline (the brief's call)", (), ()),
    ("+ judgesweep's decoding params", (), ("--judge-params",)),
    ("+ judgesweep's configure() (telemetry off, suppress_debug_info, drop_params)", JUDGESWEEP_CONFIGURE, ()),
    ("turn_off_message_logging=True", ("turn_off_message_logging=True",), ()),
    ("disable_token_counter=True", ("disable_token_counter=True",), ()),
    ("logging=False (a control: litellm 1.100.5 never reads this flag)", ("logging=False",), ()),
    ("disable_end_user_cost_tracking=True", ("disable_end_user_cost_tracking=True",), ()),
    ("all of the flags above (configure() + the three disable/turn_off flags)", (*JUDGESWEEP_CONFIGURE, *FLAGS), ()),
    ("model registered at $0 (register_model)", (), ("--zero-price",)),
    ("disable_aiohttp_transport=True (httpx)", ("disable_aiohttp_transport=True",), ()),
    ("model hosted_vllm/fake-judge (no openai SDK)", (), ("--model", "hosted_vllm/fake-judge")),
    ("hosted_vllm + $0 price", (), ("--model", "hosted_vllm/fake-judge", "--zero-price")),
    ("hosted_vllm + $0 price + flags + judge params", (*JUDGESWEEP_CONFIGURE, *FLAGS),
     ("--model", "hosted_vllm/fake-judge", "--zero-price", "--judge-params")),
]


def settings_sweep(srv: FakeServer, data: Path, work: Path, n: int, reps: int) -> list[dict[str, Any]]:
    """Run every variant ``reps`` times, interleaved; median CPU ms per call and calls/s."""
    samples: dict[str, list[tuple[float, float]]] = {label: [] for label, _, _ in VARIANTS}
    for rep in range(reps):
        for i, (label, settings, extra) in enumerate(VARIANTS):
            srv.reset()
            m = run_measured([*bare_loop_cmd(srv.base_url, data, n, settings=settings), *extra], work,
                             f"var{i}_{rep}")
            if m.rc != 0:
                raise RuntimeError(f"{label}: exit {m.rc}: {m.stderr[-2000:]}")
            out = json.loads(m.stdout.strip().splitlines()[-1])
            if out["ok"] != n:
                raise RuntimeError(f"{label}: {out}")
            samples[label].append((out["client_cpu_s"] / n * 1000, calls_per_s(srv.stats())))
            print(f"  {label}: {samples[label][-1][0]:.2f} ms/call", flush=True)
    base = statistics.median(c for c, _ in samples[VARIANTS[0][0]])
    rows = []
    for label, settings, extra in VARIANTS:
        cpu = statistics.median(c for c, _ in samples[label])
        rows.append({"variant": label, "settings": list(settings), "args": list(extra),
                     "cpu_ms_per_call": round(cpu, 3), "cpu_ms_runs": [round(c, 3) for c, _ in samples[label]],
                     "calls_per_s": round(statistics.median(r for _, r in samples[label]), 1),
                     "vs_baseline_pct": round((cpu / base - 1) * 100, 1)})
    return rows


def judgesweep_cpu(srv: FakeServer, data: Path, work: Path, n: int, reps: int) -> dict[str, Any]:
    """judgesweep's client CPU per call: (CPU of an n-call run - CPU of a 32-call run) / (n - 32)."""
    big, small, rates = [], [], []
    for rep in range(reps):
        for size, into in ((n, big), (32, small)):
            srv.reset()
            m = run_measured(judgesweep_cmd(srv.base_url, data, size, work / f"jscpu_{size}_{rep}",
                                            work / "c.sqlite"), work, f"jscpu_{size}_{rep}")
            if m.rc != 0:
                raise RuntimeError(m.stderr[-2000:])
            into.append(m.user_s + m.sys_s)
            if size == n:
                rates.append(calls_per_s(srv.stats()))
    per_call = (statistics.median(big) - statistics.median(small)) / (n - 32) * 1000
    return {"cpu_ms_per_call": round(per_call, 3), "calls_per_s": round(statistics.median(rates), 1),
            "cpu_s_runs": [round(x, 2) for x in big], "cpu_s_32_call_runs": [round(x, 2) for x in small]}


def thread_split(srv: FakeServer, data: Path, work: Path, n: int) -> dict[str, Any]:
    """CPU per thread of one judgesweep run (benchmarks/threadcpu.py): event loop vs executor threads."""
    out = work / "threadcpu_out.json"  # not threads.json: run_measured writes <tag>.json
    srv.reset()
    cmd = judgesweep_cmd(srv.base_url, data, n, work / "threads", work / "c.sqlite")
    m = run_measured([PYTHON, "-m", "benchmarks.threadcpu", str(out), "--", *cmd[1:]], work, "threads")
    if m.rc != 0:
        raise RuntimeError(m.stderr[-2000:])
    raw = json.loads(out.read_text())
    return {"calls": n, "calls_per_s": _round1(calls_per_s(srv.stats())), "cpu_s_by_thread": raw["cpu_s_by_thread"],
            "note": "main includes start-up (~4 s of imports and config) and the end-of-run report"}


def _round1(value: float | None) -> float | None:
    return round(value, 1) if value is not None else None


# (label, benchmarks.whatif patches, extra CLI overrides)
WHATIFS: list[tuple[str, str, tuple[str, ...]]] = [
    ("judgesweep as is", "gc_stats", ()),
    ("journal without fsync (runner/storage/store.py Journal.append)", "gc_stats,no_fsync", ()),
    ("gc.freeze() after imports", "gc_stats,gc_freeze", ()),
    ("judge model priced at $0 (litellm.register_model)", "gc_stats,zero_price", ()),
    ("mlflow/pandas not imported (a no-op since runner/outputs/tracking/ imports them lazily: a noise control)",
     "gc_stats,stub_tracking", ()),
    ("judge.model=hosted_vllm/fake-judge (config only)", "gc_stats", ("judge.model=hosted_vllm/fake-judge",)),
    ("runner-side together: no fsync + gc.freeze() + no mlflow/pandas", "gc_stats,no_fsync,gc_freeze,stub_tracking",
     ()),
    ("all of the above (+ $0 price + hosted_vllm/)", "gc_stats,no_fsync,gc_freeze,zero_price,stub_tracking",
     ("judge.model=hosted_vllm/fake-judge",)),
]


def whatif_sweep(srv: FakeServer, data: Path, work: Path, n: int, reps: int) -> list[dict[str, Any]]:
    """The judgesweep CLI with costs patched away (benchmarks/whatif.py), interleaved reps; medians."""
    runs: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in WHATIFS}
    for rep in range(reps):
        for i, (label, patches, overrides) in enumerate(WHATIFS):
            cmd = judgesweep_cmd(srv.base_url, data, n, work / f"whatif{i}_{rep}", work / "c.sqlite",
                                 extra=overrides)
            srv.reset()
            m = run_measured([PYTHON, "-m", "benchmarks.whatif", patches, "--", *cmd[3:]], work, f"whatif{i}_{rep}")
            if m.rc != 0:
                raise RuntimeError(f"{label}: exit {m.rc}: {m.stderr[-2000:]}")
            stats = srv.stats()
            gc_line = next((ln for ln in m.stderr.splitlines() if ln.startswith("GC_STATS ")), "GC_STATS {}")
            gcs = json.loads(gc_line.split(" ", 1)[1])
            runs[label].append({"calls_per_s": calls_per_s(stats), "cpu_s": m.user_s + m.sys_s,
                                "peak_rss_mb": m.maxrss_mb, "startup_s": stats["first_request_ts"] - m.launch_ts,
                                "gc_s": sum(g["seconds"] for g in gcs.values()),
                                "gc_full_s": gcs.get("gen2", {}).get("seconds", 0.0)})
            print(f"  {label}: {runs[label][-1]['calls_per_s']:.1f} calls/s", flush=True)
    rows = []
    base = statistics.median(r["calls_per_s"] for r in runs[WHATIFS[0][0]])
    for label, patches, overrides in WHATIFS:
        med = {k: statistics.median(r[k] for r in runs[label]) for k in runs[label][0]}
        rows.append({"variant": label, "patches": patches, "overrides": list(overrides),
                     **{k: round(v, 3) for k, v in med.items()},
                     "calls_per_s_runs": [round(r["calls_per_s"], 1) for r in runs[label]],
                     "vs_as_is_pct": round((med["calls_per_s"] / base - 1) * 100, 1)})
    return rows


STAGES = {  # named stages of a litellm call (function name substrings), for cProfile's cumulative view
    "openai SDK async_maybe_transform (request body)": "_transform.py:297(async_transform)",
    "openai SDK response parse": "_legacy_response.py:101(parse)",
    "litellm update_response_metadata (cost + hidden params)": "response_metadata.py:166(update_response_metadata)",
    "litellm completion_cost": "cost_calculator.py:1167(completion_cost)",
    "litellm function_setup (Logging object per call)": "utils.py:828(function_setup)",
    "litellm post_call_processing": "utils.py:1352(post_call_processing)",
    "litellm _build_standard_logging_payload": "_build_standard_logging_payload",
    "litellm convert_to_model_response_object": "convert_to_model_response_object",
    "httpx AsyncClient.send": "httpx/_client.py:1594(send)",
    "judgesweep store.Journal.append (write+flush+fsync)": "store.py:93(append)",
    "os.fsync": "posix.fsync",
    "judgesweep prompts.Template.render": "prompts.py:68(render)",
    "judgesweep cache_key/hash_messages": "types.py:41(hash_messages)",
}


def cprofile_run(srv: FakeServer, data: Path, work: Path, n: int) -> dict[str, Any]:
    """judgesweep under ``python -m cProfile -o``: top litellm/openai functions, named stages."""
    prof = work / "cli.prof"
    srv.reset()
    cmd = judgesweep_cmd(srv.base_url, data, n, work / "cprof", work / "c.sqlite",
                         python_args=("-m", "cProfile", "-o", str(prof)))
    m = run_measured(cmd, work, "cprof")
    if m.rc != 0:
        raise RuntimeError(m.stderr[-2000:])
    stats = pstats.Stats(str(prof)).stats  # {(file, line, func): (cc, nc, tt, ct, callers)}
    top = []
    for (filename, line, func), (_cc, nc, tt, ct, _callers) in stats.items():
        if "site-packages/litellm/" in filename or "site-packages/openai/" in filename:
            short = filename.split("site-packages/", 1)[1]
            top.append({"function": f"{short}:{line}({func})", "calls": nc, "own_s": round(tt, 3),
                        "cum_s": round(ct, 3), "own_us_per_judgment": round(tt / n * 1e6, 1)})
    top.sort(key=lambda r: -r["own_s"])
    stages = {}
    for label, needle in STAGES.items():
        for (filename, line, func), (_cc, nc, _tt, ct, _callers) in stats.items():
            if needle in f"{filename}:{line}({func})" or needle == func:
                stages[label] = {"calls": nc, "cum_s": round(ct, 3), "cum_us_per_judgment": round(ct / n * 1e6, 1)}
                break
    total = sum(tt for (_f, _l, _fn), (_cc, _nc, tt, _ct, _c) in stats.items())
    return {"calls": n, "profiled_total_s": round(total, 2), "top_litellm_openai_own_time": top[:30],
            "stages": stages, "note": "cProfile instruments the event-loop thread only and inflates "
            "call-heavy code; litellm's completion() set-up runs in the default executor thread (not seen here)."}


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000, help="calls per run")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", nargs="+", choices=["settings", "judgesweep", "whatif", "threads", "cprofile"])
    parser.add_argument("--latency-ms", type=float, default=0.0,
                        help="server latency (0: the client is the bottleneck; 200: scenario 1's setting)")
    parser.add_argument("--nodelay", action="store_true", help="serve through benchmarks/nodelay_server.py")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    parts = args.only or ["settings", "judgesweep", "whatif", "threads", "cprofile"]
    data = write_dataset(DATA_DIR / f"chat_vs_simple_{args.n}.jsonl", args.n)
    result: dict[str, Any] = json.loads(args.out.read_text()) if args.out.is_file() and args.only else {}
    result["loadavg_before"] = loadavg()
    result.update(n=args.n, latency_ms=args.latency_ms, reps=args.reps, nodelay_server=args.nodelay)
    with tempfile.TemporaryDirectory(prefix="judgesweep-overhead-") as tmp, \
            FakeServer(latency_ms=args.latency_ms, nodelay=args.nodelay) as srv:
        work = Path(tmp)
        steps = {"settings": lambda: settings_sweep(srv, data, work, args.n, args.reps),
                 "judgesweep": lambda: judgesweep_cpu(srv, data, work, args.n, args.reps),
                 "whatif": lambda: whatif_sweep(srv, data, work, args.n, args.reps),
                 "threads": lambda: thread_split(srv, data, work, args.n),
                 "cprofile": lambda: cprofile_run(srv, data, work, args.n)}
        for name in parts:
            print(f"{name} ...", flush=True)
            result[name] = steps[name]()
            args.out.write_text(json.dumps(result, indent=2) + "\n")  # keep what is done if a later part fails
    result["loadavg_after"] = loadavg()
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    _print(result)


def _print(result: dict[str, Any]) -> None:
    if "settings" in result:
        print(f"\n{'bare loop variant':<80} {'CPU ms/call':>11} {'vs base':>8} {'calls/s':>8}")
        for r in result["settings"]:
            print(f"{r['variant']:<80} {r['cpu_ms_per_call']:>11.3f} {r['vs_baseline_pct']:>+7.1f}% "
                  f"{r['calls_per_s']:>8.1f}")
    if "judgesweep" in result:
        j = result["judgesweep"]
        print(f"{'judgesweep CLI (same calls)':<80} {j['cpu_ms_per_call']:>11.3f} {'':>8} {j['calls_per_s']:>8.1f}")
    if "whatif" in result:
        print(f"\n{'judgesweep what-if':<66} {'calls/s':>8} {'vs as-is':>8} {'CPU s':>6} {'GC s':>5} "
              f"{'start s':>7} {'RSS MB':>6}")
        for r in result["whatif"]:
            print(f"{r['variant']:<66} {r['calls_per_s']:>8.1f} {r['vs_as_is_pct']:>+7.1f}% {r['cpu_s']:>6.1f} "
                  f"{r['gc_s']:>5.2f} {r['startup_s']:>7.2f} {r['peak_rss_mb']:>6.0f}")
    if "threads" in result:
        t = result["threads"]
        print(f"\nCPU s by thread, one judgesweep run of {t['calls']} calls: {t['cpu_s_by_thread']}")
    if "cprofile" in result:
        c = result["cprofile"]
        print(f"\ncProfile (event-loop thread only), {c['calls']} calls; cumulative per judgment:")
        for label, st in c["stages"].items():
            print(f"  {label:<62} {st['cum_us_per_judgment']:>8.1f} us")
        print("  top own time in litellm/ and openai/:")
        for row in c["top_litellm_openai_own_time"][:12]:
            print(f"    {row['function'][:90]:<90} {row['own_us_per_judgment']:>7.1f} us")


if __name__ == "__main__":
    main()
