"""The ``tracking`` scenario of ``make bench`` (issue 28): what the default sqlite tracking costs against
``tracking=off``, whether every judgment's trace reaches the store, and judgesweep against its peers.

1. 1,000 judgments x 200 ms, concurrency 32: judgesweep default tracking (the warm sqlite store) and
   tracking=off, plus promptfoo and inspect-ai when benchmarks/peers.sh installed them; interleaved, the
   order rotated every repetition. Whole-process wall, CPU (user+sys) and peak RSS, median (min-max).
2. 10,000 judgments x 0 ms (5,000 items x order=both): default against off, and the run's MLflow traces
   counted in the store against its journal rows.

Only the CLI and the store are used (never runner/'s tracking code), so the scenario measures any version of
how judgesweep writes to MLflow. See benchmarks/README.md.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import statistics
from pathlib import Path
from typing import Any

from benchmarks import peers
from benchmarks.harness import FakeServer, Measured, journal_summary, judgesweep_cmd, run_measured
from benchmarks.scenarios import TIMEOUT_S, _complete, _ratio, _round, _spread, warm_store

LATENCY_MS, CONCURRENCY = 200, 32
TARGETS = {"wall_ratio": 1.10, "cpu_ratio": 1.25, "peak_rss_mb": 350.0, "big_wall_ratio": 1.25}


def count_traces(store: Path, run_dir: Path) -> dict[str, Any]:
    """The MLflow traces linked to a run (``mlflow.sourceRun`` = the run id of ``run_dir/run.json``), counted in
    the sqlite store, with how many of them have spans; what ``search_traces(run_id=...)`` would page through."""
    manifest = run_dir / "run.json"
    run_id = json.loads(manifest.read_text(encoding="utf-8")).get("mlflow_run_id") if manifest.is_file() else None
    if not run_id:
        return {"run_id": None, "traces": None, "with_spans": None}
    con = sqlite3.connect(f"file:{store / 'mlflow.db'}?mode=ro", uri=True)
    try:
        ids = "SELECT request_id FROM trace_request_metadata WHERE key = 'mlflow.sourceRun' AND value = ?"
        traces = con.execute(f"SELECT COUNT(*) FROM trace_info WHERE request_id IN ({ids})", (run_id,)).fetchone()[0]
        has_spans = con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'spans'").fetchone()
        spans = con.execute(f"SELECT COUNT(DISTINCT trace_id) FROM spans WHERE trace_id IN ({ids})",
                            (run_id,)).fetchone()[0] if has_spans else None
    finally:
        con.close()
    return {"run_id": run_id, "traces": traces, "with_spans": spans}


def _facts(m: Measured, stats: dict[str, Any]) -> dict[str, Any]:
    facts = {"rc": m.rc, "wall_s": _round(m.wall_s, 2), "cpu_s": _round(m.cpu_s, 2),
             "peak_rss_mb": _round(m.maxrss_mb, 1), "accepted": stats["accepted"], "requests": stats["requests"]}
    if m.rc != 0:
        facts["error_tail"] = m.tail()
    return facts


def _measure(srv: FakeServer, cmd: list[str], work: Path, tag: str, env: dict[str, str] | None = None,
             timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    srv.reset()
    m = run_measured(cmd, work, tag, timeout_s=timeout_s, env=env)
    return _facts(m, srv.stats())


def _summary(runs: dict[str, list[dict[str, Any]]], baseline: str = "judgesweep_off") -> dict[str, Any]:
    """Median (min-max) of wall, CPU and peak RSS per contender; default/off as the median of the per-repetition
    ratios (paired: drift on the machine hits both alike) and as the ratio of the medians."""
    out: dict[str, Any] = {k: {m: _spread([r[m] for r in v if r["rc"] == 0]) for m in ("wall_s", "cpu_s",
                                                                                       "peak_rss_mb")}
                           for k, v in runs.items()}
    ratios = {}
    for metric in ("wall_s", "cpu_s"):
        paired = [_ratio(a[metric], b[metric]) for a, b in zip(runs["judgesweep"], runs[baseline], strict=True)
                  if a["rc"] == 0 and b["rc"] == 0]
        paired = [p for p in paired if p is not None]
        ratios[metric] = {"per_repetition": paired,
                          "median_of_ratios": _round(statistics.median(paired), 3) if paired else None,
                          "ratio_of_medians": _ratio(out["judgesweep"][metric]["median"],
                                                     out[baseline][metric]["median"])}
    return {"spread": out, "default_over_off": ratios}


def _judgesweep(srv: FakeServer, data: Path, work: Path, store: Path, name: str, tag: str, n: int,
                order: str) -> dict[str, Any]:
    """One measured judgesweep run, its journal checked (and, with tracking, its traces counted)."""
    tracked = name == "judgesweep"
    cmd = judgesweep_cmd(srv.base_url, data, n, work / tag, work / "tracking_cache.sqlite",
                         tracking=store if tracked else None, order=order)
    planned = n * (2 if order == "both" else 1)
    facts = _measure(srv, cmd, work, tag, timeout_s=max(TIMEOUT_S, planned / 10))
    journal = journal_summary(work / tag)
    facts.update(journal=journal, complete=_complete({"rc": facts["rc"]}, journal, planned))
    if tracked:
        facts["store"] = count_traces(store, work / tag)
    shutil.rmtree(work / tag, ignore_errors=True)
    return facts


def _rotated(names: list[str], rep: int) -> list[str]:
    return names[rep % len(names):] + names[:rep % len(names)]


def _throughput_part(cfg: dict, data: Path, work: Path, store: Path, srv: FakeServer) -> dict[str, Any]:
    n, reps = cfg["tracking_n"], cfg["tracking_reps"]
    installed = peers.versions()
    names = ["judgesweep", "judgesweep_off", *(p for p in peers.PEERS if installed[p])]
    peer_cmds: dict[str, tuple[Any, dict[str, str]]] = {}
    if any(installed.values()):
        requests = peers.write_requests(data, n, work / "peer_requests.jsonl")
        if installed["promptfoo"]:
            home = work / "promptfoo_home"  # its database, made by one unmeasured run, as judgesweep's store
            env = peers.promptfoo_env(home)
            warm = peers.promptfoo_config(requests, 32, srv.base_url, work / "promptfoo_warm.yaml")
            run_measured(peers.promptfoo_cmd(warm, work / "promptfoo_warm.json"), work, "promptfoo_warm", TIMEOUT_S,
                         env)
            config = peers.promptfoo_config(requests, n, srv.base_url, work / "promptfoo.yaml")
            peer_cmds["promptfoo"] = (lambda tag: peers.promptfoo_cmd(config, work / f"{tag}.out.json"), env)
        if installed["inspect_ai"]:
            peer_cmds["inspect_ai"] = (lambda tag: peers.inspect_cmd(requests, n, srv.base_url, work / tag),
                                       peers.inspect_env())
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in names}
    for rep in range(reps):
        for name in _rotated(names, rep):
            tag = f"tr_{name}_{rep}"
            if name.startswith("judgesweep"):
                facts = _judgesweep(srv, data, work, store, name, tag, n, "fixed")
            else:
                build, env = peer_cmds[name]
                facts = _measure(srv, build(tag), work, tag, env)
                facts["complete"] = facts["rc"] == 0 and facts["accepted"] == n
                shutil.rmtree(work / tag, ignore_errors=True)
            runs[name].append(facts)
            print(f"    {tag}: rc {facts['rc']}, wall {facts['wall_s']} s, cpu {facts['cpu_s']} s, "
                  f"rss {facts['peak_rss_mb']} MB", flush=True)
    summary = _summary(runs)
    wall, cpu = (summary["default_over_off"][k]["median_of_ratios"] for k in ("wall_s", "cpu_s"))
    rss = max((r["peak_rss_mb"] for r in runs["judgesweep"] if r["peak_rss_mb"] is not None), default=None)
    ok = all(r["complete"] for v in runs.values() for r in v)
    default_wall = summary["spread"]["judgesweep"]["wall_s"]["median"]
    verdicts = {"wall_ratio": ok and wall is not None and wall <= TARGETS["wall_ratio"],
                "cpu_ratio": ok and cpu is not None and cpu <= TARGETS["cpu_ratio"],
                "peak_rss": ok and rss is not None and rss <= TARGETS["peak_rss_mb"]}
    for peer in peers.PEERS:
        peer_wall = summary["spread"][peer]["wall_s"]["median"] if peer in runs else None
        verdicts[f"ahead_of_{peer}"] = None if peer not in runs else \
            ok and default_wall is not None and peer_wall is not None and default_wall < peer_wall
    return {"judgments": n, "latency_ms": LATENCY_MS, "concurrency": CONCURRENCY, "order": "fixed",
            "repetitions": reps, **summary, "default_peak_rss_max_mb": rss, "peers": installed,
            "peers_install": None if all(installed.values()) else peers.INSTALL, "all_runs_ok": ok,
            "verdicts": verdicts, "runs": runs}


def _traces_part(cfg: dict, data: Path, work: Path, store: Path) -> dict[str, Any]:
    items, reps = cfg["tracking_big_items"], cfg["tracking_reps"]
    names = ["judgesweep", "judgesweep_off"]
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in names}
    with FakeServer(latency_ms=0, record=False) as srv:
        for rep in range(reps):
            for name in _rotated(names, rep):
                tag = f"trbig_{name}_{rep}"
                facts = _judgesweep(srv, data, work, store, name, tag, items, "both")
                runs[name].append(facts)
                print(f"    {tag}: rc {facts['rc']}, wall {facts['wall_s']} s, rows {facts['journal']['rows']}, "
                      f"traces {facts.get('store', {}).get('traces', '-')}", flush=True)
    summary = _summary(runs)
    planned = items * 2
    traces = [r["store"]["traces"] for r in runs["judgesweep"]]
    every = all(r["store"]["traces"] == r["journal"]["rows"] == planned for r in runs["judgesweep"])
    ok = all(r["complete"] for v in runs.values() for r in v)
    wall = summary["default_over_off"]["wall_s"]["median_of_ratios"]
    return {"judgments": planned, "items": items, "order": "both", "latency_ms": 0, "concurrency": CONCURRENCY,
            "repetitions": reps, **summary, "traces_per_run": traces,
            "journal_rows_per_run": [r["journal"]["rows"] for r in runs["judgesweep"]], "all_runs_ok": ok,
            "verdicts": {"wall_ratio": ok and wall is not None and wall <= TARGETS["big_wall_ratio"],
                         "every_trace": ok and every},
            "runs": runs}


def scenario_tracking(cfg: dict, data: Path, work: Path) -> dict[str, Any]:
    """The default tracking against tracking=off (1,000 x 200 ms with the peers; 10,000 x 0 ms with the traces
    counted), interleaved, ``tracking_reps`` repetitions each."""
    with FakeServer(latency_ms=LATENCY_MS) as srv:
        store = warm_store(srv, data, work)
        throughput = _throughput_part(cfg, data, work, store, srv)
    traces = _traces_part(cfg, data, work, store)
    verdicts = [v for part in (throughput, traces) for v in part["verdicts"].values() if v is not None]
    return {"throughput": throughput, "traces": traces,
            "targets": {"wall_ratio": f"<= {TARGETS['wall_ratio']}", "cpu_ratio": f"<= {TARGETS['cpu_ratio']}",
                        "peak_rss": f"<= {TARGETS['peak_rss_mb']:.0f} MB",
                        "ahead_of_peers": "default's median wall < each peer's",
                        "big_wall_ratio": f"<= {TARGETS['big_wall_ratio']}",
                        "every_trace": "traces of the run = journal rows = judgments"},
            "pass": all(verdicts)}
