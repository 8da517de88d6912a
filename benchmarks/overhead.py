"""Where a judge call's client CPU goes, and which litellm settings cut it.

``python -m benchmarks.overhead`` (not part of ``make bench``; about 10 minutes) writes
benchmarks/overhead.json and prints three reports, all at 0 ms server latency so the client is the
bottleneck:

1. settings: the bare litellm loop (benchmarks/bare_loop.py) once per litellm setting or model
   prefix, repeated; client CPU ms per call (process CPU of all threads during the calls / calls) and
   server-side calls/s. judgesweep itself at the same size, for reference (its CPU per call is the
   CLI's total CPU minus a 32-call run's, over the difference in calls).
2. sampled profile: one judgesweep run under benchmarks/sampler.py, which sees every thread; busy
   samples are attributed to the innermost non-stdlib, non-pydantic frame's layer (openai SDK request
   transform, litellm cost calculation, ...), and CPU per thread is read from /proc.
3. cProfile of the CLI (``python -m cProfile -o``): the event-loop thread only; the top functions
   under litellm/ and openai/ by own time, and the cumulative time of named litellm stages.
"""

from __future__ import annotations

import argparse
import json
import pstats
import statistics
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.data import write_dataset
from benchmarks.harness import PYTHON, REPO, FakeServer, bare_loop_cmd, calls_per_s, judgesweep_cmd, loadavg, \
    run_measured

OUT = REPO / "benchmarks" / "overhead.json"
DATA_DIR = Path(tempfile.gettempdir()) / "judgesweep-bench-data"
JUDGESWEEP_CONFIGURE = ("telemetry=False", "suppress_debug_info=True", "drop_params=True")
FLAGS = ("turn_off_message_logging=True", "disable_token_counter=True", "logging=False",
         "disable_end_user_cost_tracking=True")
# (label, litellm attribute assignments, extra bare_loop arguments)
VARIANTS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("baseline (the brief's call)", (), ()),
    ("+ judgesweep's decoding params", (), ("--judge-params",)),
    ("+ judgesweep's configure() (telemetry off, suppress_debug_info, drop_params)", JUDGESWEEP_CONFIGURE, ()),
    ("turn_off_message_logging=True", ("turn_off_message_logging=True",), ()),
    ("disable_token_counter=True", ("disable_token_counter=True",), ()),
    ("logging=False", ("logging=False",), ()),
    ("disable_end_user_cost_tracking=True", ("disable_end_user_cost_tracking=True",), ()),
    ("all of the flags above", (*JUDGESWEEP_CONFIGURE, *FLAGS), ()),
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


TRANSPARENT = ("/lib/python3.", "/pydantic/", "/pydantic_core/", "typing_extensions", "<frozen")


def _layer(filename: str, func: str) -> str | None:
    """The layer a frame belongs to, or None for frames charged to their caller (stdlib, pydantic)."""
    f = filename.replace("\\", "/")
    if "site-packages/" in f:
        f = f.split("site-packages/", 1)[1]
    elif any(t in f for t in TRANSPARENT):
        return None
    rules = [
        ("/runner/", f"judgesweep runner/{f.rsplit('/', 1)[-1]}"),
        ("benchmarks/", "benchmark script"),
        ("openai/_utils/_transform.py", "openai SDK: request body transform (async_maybe_transform)"),
        ("openai/_legacy_response.py", "openai SDK: response parsing"),
        ("openai/_models.py", "openai SDK: response parsing"),
        ("openai/_response.py", "openai SDK: response parsing"),
        ("openai/", "openai SDK: client plumbing (_base_client, resources)"),
        ("httpx/", "httpx"),
        ("aiohttp/", "aiohttp"),
        ("litellm/llms/custom_httpx/", "litellm: http transport glue (custom_httpx)"),
        ("litellm/cost_calculator.py", "litellm: cost calculation"),
        ("litellm/litellm_core_utils/llm_cost_calc/", "litellm: cost calculation"),
        ("litellm/litellm_core_utils/litellm_logging.py", "litellm: Logging object (pre/post call, success, payload)"),
        ("litellm/litellm_core_utils/logging_worker.py", "litellm: async logging worker"),
        ("litellm/litellm_core_utils/llm_response_utils/", "litellm: response conversion / metadata"),
        ("litellm/litellm_core_utils/get_llm_provider_logic.py", "litellm: get_llm_provider"),
        ("litellm/litellm_core_utils/token_counter.py", "litellm: token counting"),
        ("tiktoken", "litellm: token counting"),
        ("litellm/llms/openai/", "litellm: openai provider handler"),
        ("litellm/llms/hosted_vllm/", "litellm: hosted_vllm provider config"),
        ("litellm/llms/custom_llm/", "litellm: base http handler"),
        ("litellm/llms/base_llm/", "litellm: base http handler"),
        ("litellm/main.py", "litellm: main.py (acompletion / completion dispatch)"),
    ]
    for needle, layer in rules:
        if needle in f:
            return layer
    if f.startswith("litellm/utils.py"):
        if "optional_params" in func:
            return "litellm: get_optional_params"
        if "model_info" in func:
            return "litellm: model info lookup"
        if func in ("function_setup", "wrapper_async", "client", "post_call_processing"):
            return f"litellm: utils.{func}"
        return "litellm: utils.py (other)"
    if f.startswith("litellm/"):
        return f"litellm: {f.split('/', 1)[1].rsplit('.', 1)[0]}"
    return f.split("/", 1)[0]


def sampled_profile(srv: FakeServer, data: Path, work: Path, n: int) -> dict[str, Any]:
    """One judgesweep run under the sampler; busy samples by layer, per thread group; CPU per thread."""
    out = work / "samples.json"
    srv.reset()
    cmd = judgesweep_cmd(srv.base_url, data, n, work / "sampled", work / "c.sqlite")
    m = run_measured([PYTHON, "-m", "benchmarks.sampler", str(out), "--interval-ms", "4", "--", *cmd[1:]], work,
                     "sampled")
    if m.rc != 0:
        raise RuntimeError(m.stderr[-2000:])
    raw = json.loads(out.read_text())
    by_thread: dict[str, Counter[str]] = {}
    inclusive: dict[str, Counter[str]] = {}
    for entry in raw["stacks"]:
        layers = [_layer(fn, func) for fn, _line, func in entry["stack"]]
        own = next((x for x in layers if x is not None), "stdlib (asyncio loop, etc.)")
        by_thread.setdefault(entry["thread"], Counter())[own] += entry["n"]
        for layer in set(x for x in layers if x is not None):
            inclusive.setdefault(entry["thread"], Counter())[layer] += entry["n"]
    report = {"calls": n, "cpu_s_by_thread": raw["cpu_s_by_thread"], "threads": {}}
    for thread, counts in by_thread.items():
        total = sum(counts.values())
        cpu = next((v for k, v in raw["cpu_s_by_thread"].items() if k == thread), None)
        rows = []
        for layer, k in counts.most_common():
            share = k / total
            rows.append({"layer": layer, "share_pct": round(share * 100, 1),
                         "est_cpu_ms_per_call": round(share * cpu / n * 1000, 3) if cpu else None,
                         "inclusive_pct": round(inclusive[thread][layer] / total * 100, 1)})
        report["threads"][thread] = {"busy_samples": total, "cpu_s": cpu, "layers": rows}
    return report


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
        for (filename, line, func), (_cc, nc, tt, ct, _callers) in stats.items():
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
    parser.add_argument("--only", nargs="+", choices=["settings", "judgesweep", "sampled", "cprofile"])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    parts = args.only or ["settings", "judgesweep", "sampled", "cprofile"]
    data = write_dataset(DATA_DIR / f"chat_vs_simple_{args.n}.jsonl", args.n)
    result: dict[str, Any] = json.loads(args.out.read_text()) if args.out.is_file() and args.only else {}
    result["loadavg_before"] = loadavg()
    with tempfile.TemporaryDirectory(prefix="judgesweep-overhead-") as tmp, FakeServer(latency_ms=0) as srv:
        work = Path(tmp)
        if "settings" in parts:
            print("settings sweep ...", flush=True)
            result["settings"] = settings_sweep(srv, data, work, args.n, args.reps)
        if "judgesweep" in parts:
            print("judgesweep CPU per call ...", flush=True)
            result["judgesweep"] = judgesweep_cpu(srv, data, work, args.n, args.reps)
        if "sampled" in parts:
            print("sampled profile ...", flush=True)
            result["sampled"] = sampled_profile(srv, data, work, args.n)
        if "cprofile" in parts:
            print("cProfile ...", flush=True)
            result["cprofile"] = cprofile_run(srv, data, work, args.n)
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
    if "sampled" in result:
        s = result["sampled"]
        print(f"\nsampled judgesweep run, {s['calls']} calls; CPU s by thread: {s['cpu_s_by_thread']}")
        for thread, t in s["threads"].items():
            print(f"  {thread} ({t['busy_samples']} busy samples)")
            for row in t["layers"][:14]:
                print(f"    {row['layer']:<70} {row['share_pct']:>5.1f}%  ~{row['est_cpu_ms_per_call'] or 0:.3f} ms/call")
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
