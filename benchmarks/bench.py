"""``make bench``: judgesweep against a fake OpenAI-compatible server, five scenarios, one table.

1. throughput: 200 ms latency, concurrency 32, 1000 judgments; judgesweep's calls/s over a bare
   litellm loop's, both measured in this run from the server's stamps (target ratio >= 1.0). Then,
   as a diagnostic, the same against the server with TCP_NODELAY, with plain aiohttp as the floor.
2. rpm: server limited to 600 rpm, judge.rpm=600, 300 judgments; wall / 30 s ideal (target <= 1.05)
   with no 429 and every row scored.
3. cache: 10,000 judgments at 0 ms with cache.mode=read_write, then the same command again: the rerun
   makes no HTTP call and its whole process takes < 15 s.
4. memory: 100,000 judgments at 0 ms, cache off: peak RSS of the CLI process (target <= 400 MB) and
   its calls/s; smaller sizes first, to show how memory grows with the run.
5. start-up: CLI launch to the server's first request, against ``python -c "import litellm"``.

Every scenario starts the fake server as a separate process and every run is a real CLI subprocess;
see benchmarks/README.md for how each number is measured. Prints a table and writes
benchmarks/results.json (numbers, targets, pass/fail, machine info). Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.data import write_dataset
from benchmarks.harness import (
    PYTHON,
    REPO,
    FakeServer,
    bare_loop_cmd,
    calls_per_s,
    journal_summary,
    judgesweep_cmd,
    loadavg,
    raw_http_cmd,
    run_measured,
)

RESULTS = REPO / "benchmarks" / "results.json"
DATA_DIR = Path(tempfile.gettempdir()) / "judgesweep-bench-data"
FULL = {"s1_n": 1000, "s1_reps": 3, "s2_n": 300, "s3_n": 10_000, "s4_sizes": [1000, 10_000, 100_000], "s5_reps": 3}
QUICK = {"s1_n": 300, "s1_reps": 1, "s2_n": 60, "s3_n": 2000, "s4_sizes": [1000, 5000], "s5_reps": 1}


def _round(value: Any, digits: int = 3) -> Any:
    return round(value, digits) if isinstance(value, float) else value


def _check(m: Any, what: str) -> None:
    if m.rc != 0:
        tail = (m.stdout + m.stderr)[-3000:]
        raise RuntimeError(f"{what} exited {m.rc}:\n{tail}")


def _server_run(srv: FakeServer, cmd: list[str], work: Path, tag: str) -> tuple[Any, dict[str, Any]]:
    """Reset the server, run one measured command, return (measured, server stats with CPU delta)."""
    srv.reset()
    cpu0 = srv.stats()["server_cpu_s"]
    m = run_measured(cmd, work, tag)
    _check(m, tag)
    stats = srv.stats()
    stats["server_cpu_s"] = stats["server_cpu_s"] - cpu0
    return m, stats


def _run_facts(m: Any, stats: dict[str, Any]) -> dict[str, Any]:
    window = (stats["last_response_ts"] - stats["first_request_ts"]) if stats["first_request_ts"] else None
    return {"calls_per_s": _round(calls_per_s(stats), 2), "requests": stats["requests"], "accepted": stats["accepted"],
            "count_429": stats["count_429"], "window_s": _round(window), "process_wall_s": _round(m.wall_s),
            "startup_s": _round(stats["first_request_ts"] - m.launch_ts) if stats["first_request_ts"] else None,
            "client_cpu_s": _round(m.user_s + m.sys_s, 2), "server_cpu_s": _round(stats["server_cpu_s"], 2),
            "peak_rss_mb": _round(m.maxrss_mb, 1)}


def scenario_throughput(cfg: dict, data: Path, work: Path) -> dict[str, Any]:
    """Scenario 1: judgesweep vs the bare litellm loop at 200 ms latency, concurrency 32."""
    n, runs = cfg["s1_n"], {"bare": [], "judgesweep": []}
    with FakeServer(latency_ms=200) as srv:
        for rep in range(cfg["s1_reps"]):  # alternate, so drift on the machine hits both alike
            m, stats = _server_run(srv, bare_loop_cmd(srv.base_url, data, n), work, f"s1_bare_{rep}")
            runs["bare"].append(_run_facts(m, stats))
            run_dir = work / f"s1_js_{rep}"
            m, stats = _server_run(srv, judgesweep_cmd(srv.base_url, data, n, run_dir, work / "s1_cache.sqlite"),
                                   work, f"s1_js_{rep}")
            runs["judgesweep"].append({**_run_facts(m, stats), "journal": journal_summary(run_dir)})
    # Diagnostic, not the target: the same runs against the server with TCP_NODELAY (see
    # benchmarks/nodelay_server.py), plus plain aiohttp without litellm as the floor.
    diag: dict[str, list] = {"raw_aiohttp": [], "bare": [], "judgesweep": []}
    with FakeServer(latency_ms=200, nodelay=True) as srv:
        for rep in range(cfg["s1_reps"]):
            m, stats = _server_run(srv, raw_http_cmd(srv.base_url, data, n), work, f"s1n_raw_{rep}")
            diag["raw_aiohttp"].append(_run_facts(m, stats))
            m, stats = _server_run(srv, bare_loop_cmd(srv.base_url, data, n), work, f"s1n_bare_{rep}")
            diag["bare"].append(_run_facts(m, stats))
            m, stats = _server_run(srv, judgesweep_cmd(srv.base_url, data, n, work / f"s1n_js_{rep}",
                                                       work / "s1_cache.sqlite"), work, f"s1n_js_{rep}")
            diag["judgesweep"].append(_run_facts(m, stats))
    bare = statistics.median(r["calls_per_s"] for r in runs["bare"])
    ours = statistics.median(r["calls_per_s"] for r in runs["judgesweep"])
    nodelay = {k: round(statistics.median(r["calls_per_s"] for r in v), 2) for k, v in diag.items()}
    ceiling = 32 / 0.200
    ratio = ours / bare
    return {"judgments": n, "latency_ms": 200, "concurrency": 32, "ceiling_calls_per_s": ceiling,
            "bare_calls_per_s": round(bare, 2), "judgesweep_calls_per_s": round(ours, 2), "ratio": round(ratio, 3),
            "target": "ratio >= 1.0", "pass": ratio >= 1.0, "runs": runs,
            "nodelay_server": {"calls_per_s": nodelay, "ratio": round(nodelay["judgesweep"] / nodelay["bare"], 3),
                               "runs": diag}}


def scenario_rpm(cfg: dict, data: Path, work: Path) -> dict[str, Any]:
    """Scenario 2: server limited to 600 rpm, judge.rpm=600; wall / ideal, 429s, lost rows."""
    n, rpm, latency_ms = cfg["s2_n"], 600, 200
    ideal = n / rpm * 60.0
    run_dir = work / "s2_js"
    with FakeServer(latency_ms=latency_ms, rpm=rpm) as srv:
        cmd = judgesweep_cmd(srv.base_url, data, n, run_dir, work / "s2_cache.sqlite", extra=(f"judge.rpm={rpm}",))
        m, stats = _server_run(srv, cmd, work, "s2_js")
    journal = journal_summary(run_dir)
    facts = _run_facts(m, stats)
    ratio = facts["window_s"] / ideal
    scored = journal["status"].get("scored", 0)
    lost = n - scored
    ok = ratio <= 1.05 and stats["count_429"] == 0 and journal["rate_limited"] == 0 and lost == 0 \
        and journal["items"] == n
    return {"judgments": n, "server_rpm": rpm, "judge_rpm": rpm, "latency_ms": latency_ms, "ideal_s": ideal,
            "wall_s": facts["window_s"], "ratio": round(ratio, 4), "count_429_server": stats["count_429"],
            "rate_limited_client": journal["rate_limited"], "scored": scored, "lost": lost,
            "target": "ratio <= 1.05, 0 429s, 0 lost", "pass": ok, "run": facts, "journal": journal}


def scenario_cache(cfg: dict, data: Path, work: Path) -> dict[str, Any]:
    """Scenario 3: populate the cache with n judgments, rerun the same command: no HTTP, < 15 s."""
    n, cache = cfg["s3_n"], work / "s3_cache.sqlite"
    with FakeServer(latency_ms=0) as srv:
        first_dir, again_dir = work / "s3_populate", work / "s3_rerun"
        m1, st1 = _server_run(srv, judgesweep_cmd(srv.base_url, data, n, first_dir, cache, "read_write"), work,
                              "s3_populate")
        m2, st2 = _server_run(srv, judgesweep_cmd(srv.base_url, data, n, again_dir, cache, "read_write"), work,
                              "s3_rerun")
    journal = journal_summary(again_dir)
    ok = st2["requests"] == 0 and m2.wall_s < 15.0 and journal["source"].get("cache", 0) == n
    return {"judgments": n, "populate": {**_run_facts(m1, st1), "journal": journal_summary(first_dir)},
            "rerun": {"http_calls": st2["requests"], "process_wall_s": round(m2.wall_s, 3),
                      "peak_rss_mb": round(m2.maxrss_mb, 1), "client_cpu_s": round(m2.user_s + m2.sys_s, 2),
                      "journal": journal},
            "cache_file_mb": round(cache.stat().st_size / 2**20, 1) if cache.exists() else None,
            "target": "rerun: 0 HTTP calls, process wall < 15 s", "pass": ok}


def scenario_memory(cfg: dict, data: Path, work: Path) -> dict[str, Any]:
    """Scenario 4: peak RSS and calls/s at growing sizes, 0 ms latency, cache off, tracking off."""
    sizes, runs = cfg["s4_sizes"], []
    with FakeServer(latency_ms=0) as srv:
        for n in sizes:
            run_dir = work / f"s4_js_{n}"
            m, stats = _server_run(srv, judgesweep_cmd(srv.base_url, data, n, run_dir, work / "s4_cache.sqlite"),
                                   work, f"s4_js_{n}")
            journal = journal_summary(run_dir)
            runs.append({"judgments": n, **_run_facts(m, stats), "scored": journal["status"].get("scored", 0)})
            shutil.rmtree(run_dir, ignore_errors=True)
    largest = runs[-1]
    slope = None
    if len(runs) >= 2:  # MB per 1000 judgments between the two largest sizes
        a, b = runs[-2], runs[-1]
        slope = (b["peak_rss_mb"] - a["peak_rss_mb"]) / (b["judgments"] - a["judgments"]) * 1000
    at_100k = largest["peak_rss_mb"] + slope * (100_000 - largest["judgments"]) / 1000 if slope is not None else None
    return {"sizes": runs, "largest_judgments": largest["judgments"], "peak_rss_mb": largest["peak_rss_mb"],
            "calls_per_s": largest["calls_per_s"], "mb_per_1000_judgments": _round(slope, 2),
            "extrapolated_rss_mb_at_100k": _round(at_100k, 1), "target": "peak RSS <= 400 MB at 100,000",
            "pass": largest["judgments"] >= 100_000 and largest["peak_rss_mb"] <= 400}


def scenario_startup(cfg: dict, data: Path, work: Path) -> dict[str, Any]:
    """Scenario 5: CLI launch -> first request at the server, against the wall time of importing litellm."""
    reps, ours, bare, imports = cfg["s5_reps"], [], [], {}
    with FakeServer(latency_ms=0) as srv:
        for rep in range(reps):
            m, stats = _server_run(srv, judgesweep_cmd(srv.base_url, data, 32, work / f"s5_js_{rep}",
                                                       work / "s5_cache.sqlite"), work, f"s5_js_{rep}")
            ours.append(stats["first_request_ts"] - m.launch_ts)
            m, stats = _server_run(srv, bare_loop_cmd(srv.base_url, data, 32), work, f"s5_bare_{rep}")
            bare.append(stats["first_request_ts"] - m.launch_ts)
    for label, code in (("python_only", "pass"), ("litellm", "import litellm"), ("mlflow", "import mlflow"),
                        ("runner_cli", "import runner.cli")):
        walls, rss = [], []
        for rep in range(reps):
            m = run_measured([PYTHON, "-c", code], work, f"s5_import_{label}_{rep}")
            _check(m, code)
            walls.append(m.wall_s)
            rss.append(m.maxrss_mb)
        imports[label] = {"wall_s": round(statistics.median(walls), 3), "peak_rss_mb": round(max(rss), 1)}
    first = statistics.median(ours)
    litellm_s = imports["litellm"]["wall_s"]
    return {"cli_launch_to_first_request_s": round(first, 3), "bare_loop_launch_to_first_request_s":
            round(statistics.median(bare), 3), "import_litellm_s": litellm_s, "ratio": round(first / litellm_s, 3),
            "over_import_litellm_s": round(first - litellm_s, 3), "imports": imports,
            "runs_s": [round(x, 3) for x in ours], "target": "none given (reported)", "pass": None}


SCENARIOS: dict[str, Callable[[dict, Path, Path], dict[str, Any]]] = {
    "startup": scenario_startup, "throughput": scenario_throughput, "rpm": scenario_rpm, "cache": scenario_cache,
    "memory": scenario_memory}


def machine_info() -> dict[str, Any]:
    """nproc, CPU, memory, Python and package versions, git commit."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal"))
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    return {"nproc": os.cpu_count(), "cpu": cpu, "mem_gb": round(mem_kb / 2**20, 1), "platform": platform.platform(),
            "python": platform.python_version(), "litellm": metadata.version("litellm"),
            "openai": metadata.version("openai"), "httpx": metadata.version("httpx"),
            "aiohttp": metadata.version("aiohttp"), "git_sha": sha}


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    return str(value)


def table_rows(s: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(scenario, metric, value, target, result) rows of whatever scenarios ran."""
    rows = []

    def verdict(ok: bool | None) -> str:
        return "n/a" if ok is None else ("PASS" if ok else "FAIL")

    if "throughput" in s:
        t = s["throughput"]
        ceiling = f"ceiling {t['ceiling_calls_per_s']:.0f}"
        rows += [("1 throughput", "bare litellm loop calls/s", _fmt(t["bare_calls_per_s"]), ceiling, ""),
                 ("", "judgesweep calls/s", _fmt(t["judgesweep_calls_per_s"]), "", ""),
                 ("", "ratio judgesweep / bare", _fmt(t["ratio"]), ">= 1.0", verdict(t["pass"]))]
        if "nodelay_server" in t:
            d = t["nodelay_server"]
            rows += [("  diagnostic", "TCP_NODELAY server: raw aiohttp calls/s", _fmt(d["calls_per_s"]["raw_aiohttp"]),
                      "", ""),
                     ("", "TCP_NODELAY server: bare / judgesweep",
                      f"{d['calls_per_s']['bare']:.1f} / {d['calls_per_s']['judgesweep']:.1f}", "", ""),
                     ("", "TCP_NODELAY server: ratio", _fmt(d["ratio"]), "(>= 1.0)", "")]
    if "rpm" in s:
        r = s["rpm"]
        rows += [("2 rpm 600", "wall first req -> last resp (s)", _fmt(r["wall_s"]), f"ideal {r['ideal_s']:.0f}", ""),
                 ("", "ratio wall / ideal", _fmt(r["ratio"]), "<= 1.05", ""),
                 ("", "429s (server) / lost rows", f"{r['count_429_server']} / {r['lost']}", "0 / 0",
                  verdict(r["pass"]))]
    if "cache" in s:
        c = s["cache"]
        rows += [("3 cache", f"populate {c['judgments']:,} calls/s", _fmt(c["populate"]["calls_per_s"]), "", ""),
                 ("", "rerun HTTP calls", str(c["rerun"]["http_calls"]), "0", ""),
                 ("", "rerun process wall (s)", _fmt(c["rerun"]["process_wall_s"]), "< 15", verdict(c["pass"]))]
    if "memory" in s:
        m = s["memory"]
        for run in m["sizes"]:
            rows.append(("4 memory" if run is m["sizes"][0] else "", f"{run['judgments']:,}: peak RSS MB / calls/s",
                         f"{run['peak_rss_mb']:.0f} / {run['calls_per_s']:.0f}", "", ""))
        rows.append(("", "peak RSS at largest size (MB)", _fmt(m["peak_rss_mb"]), "<= 400 at 100k", verdict(m["pass"])))
        if m["largest_judgments"] < 100_000:
            rows.append(("", "extrapolated RSS at 100k (MB)", _fmt(m["extrapolated_rss_mb_at_100k"]), "<= 400", ""))
    if "startup" in s:
        u = s["startup"]
        rows += [("5 start-up", "CLI launch -> first request (s)", _fmt(u["cli_launch_to_first_request_s"]), "", ""),
                 ("", "bare loop launch -> first request (s)", _fmt(u["bare_loop_launch_to_first_request_s"]), "", ""),
                 ("", "python -c 'import litellm' (s)", _fmt(u["import_litellm_s"]), "", ""),
                 ("", "ratio CLI / import litellm", _fmt(u["ratio"]), "none given", verdict(u["pass"]))]
    return rows


def print_table(rows: list[tuple[str, ...]]) -> None:
    """Print rows as an aligned text table."""
    header = ("scenario", "metric", "value", "target", "result")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(5)]
    line = "  ".join("-" * w for w in widths)
    print(line)
    for row in [header, None, *rows]:
        print(line if row is None else "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    print(line)


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS), help="run these scenarios only")
    parser.add_argument("--quick", action="store_true", help="small sizes, one repetition (a smoke run)")
    parser.add_argument("--memory-sizes", type=int, nargs="+", help="judgment counts for the memory scenario")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--keep", action="store_true", help="keep the run directories (printed at the end)")
    args = parser.parse_args()
    cfg = dict(QUICK if args.quick else FULL)
    if args.memory_sizes:
        cfg["s4_sizes"] = sorted(args.memory_sizes)
    names = [n for n in SCENARIOS if not args.only or n in args.only]
    largest = max(cfg["s1_n"], cfg["s2_n"], cfg["s3_n"], *cfg["s4_sizes"])
    started = time.monotonic()
    data = write_dataset(DATA_DIR / f"chat_vs_simple_{largest}.jsonl", largest)
    print(f"dataset {data} ({data.stat().st_size / 2**20:.0f} MB, {largest:,} rows), made in "
          f"{time.monotonic() - started:.1f}s", flush=True)
    work = Path(tempfile.mkdtemp(prefix="judgesweep-bench-"))
    previous = json.loads(args.out.read_text()) if args.out.is_file() and args.only else {}
    results: dict[str, Any] = {"scenarios": dict(previous.get("scenarios", {}))}
    results["machine"] = machine_info()
    results["config"] = cfg
    try:
        for name in names:
            print(f"running {name} ...", flush=True)
            load_before, t0 = loadavg(), time.monotonic()
            outcome = SCENARIOS[name](cfg, data, work)
            outcome.update({"measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                            "bench_s": round(time.monotonic() - t0, 1), "loadavg_before": load_before,
                            "loadavg_after": loadavg()})
            results["scenarios"][name] = outcome
            print(f"  done in {outcome['bench_s']}s (load {load_before[0]} -> {outcome['loadavg_after'][0]})",
                  flush=True)
    finally:
        if args.keep:
            print(f"run directories kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    ordered = {k: results["scenarios"][k] for k in ("throughput", "rpm", "cache", "memory", "startup")
               if k in results["scenarios"]}
    results["scenarios"] = ordered
    rows = table_rows(ordered)
    results["table"] = [dict(zip(("scenario", "metric", "value", "target", "result"), r, strict=True)) for r in rows]
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print_table(rows)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
