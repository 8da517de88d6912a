"""The ``fixed_cost`` scenario of ``make bench`` (issue 43, "A result in seconds"): what a judgesweep process costs
beyond its judge calls, phase by phase, against tracking=off, the bare litellm and openai loops and the peers.

1. ``make run``: the console script with no override (the default experiment, 200 replayed judgments, no network)
   and with ``tracking=off``, each from a fresh temp cwd (a new store under <cwd>/outputs/), then again in the same
   cwd (the store, and the response cache, existing). After each default run the store is opened with mlflow: the
   run FINISHED, with metrics, and one trace per journaled judgment. Target: default wall <= 1.25x off.
2. one judge call (200 ms server), process start to exit: judgesweep default / off, bare litellm, bare openai SDK,
   promptfoo, inspect-ai. Targets: default <= 1.0x bare litellm, off <= 0.85x.
3. 30 calls (15 items x order=both, 0 ms server): default <= 1.25x off.
4. 1,000 judgments x 200 ms, concurrency 32: fixed cost = wall minus the calls' span (server's last answer minus
   first request); default's <= bare litellm's (off and promptfoo for context).
5. Every judgesweep run: the printed result (its ``report: <path>`` line, stamped as it arrives) within 1 s of the
   last answer.

Phases of every run: launch -> first request, the calls' span, last answer -> printed result, printed result ->
exit. ``make run`` has no server: its calls start at the ``judging N items`` log line and end at the first
``judging N/N`` progress line (or ``summarizing``), stamped as they arrive (None if runner/ stops printing them).
Repetitions are interleaved, the contenders' order rotated each time; medians. Only the CLI and the store are
used, never runner/'s code, so the scenario measures whatever runner/ is at the commit it runs on.

``python -m benchmarks.fixed_cost --profile CASE`` profiles one case instead (benchmarks/fixed_cost_profile.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import peers
from benchmarks.harness import (
    PYTHON,
    REPO,
    FakeServer,
    Measured,
    _stop_group,
    bare_loop_cmd,
    bench_env,
    journal_summary,
    judgesweep_cmd,
    make_run_cmd,
    openai_loop_cmd,
)
from benchmarks.scenarios import TIMEOUT_S, _round, _spread, warm_store
from benchmarks.tracking import _rotated, count_traces

LATENCY_MS, CONCURRENCY, MAKE_RUN_JUDGMENTS = 200, 32, 200
TARGETS = {"make_run_first": 1.25, "make_run_rerun": 1.25, "one_call_default": 1.0, "one_call_off": 0.85,
           "calls_30": 1.25, "result_within_s": 1.0}
PHASES = ("launch_to_first_request_s", "calls_span_s", "last_answer_to_result_s", "result_to_exit_s")
CALLS_START = re.compile(r"\bjudging [\d,]+ items\b")
CALLS_END = re.compile(r"\bjudging ([\d,]+)/\1 |\bsummarizing\b")
RESULT_PREFIX = {"judgesweep": "report:", "bare": "{"}  # judgesweep's last summary line; the loops' JSON line


def phases(launch_ts: float, end_ts: float, first_ts: float | None, last_ts: float | None,
           result_ts: float | None) -> dict[str, float | None]:
    """The phases of one run from its stamps (seconds; None where a stamp is unknown); ``fixed_cost_s`` is the
    whole-process wall minus the calls' span."""
    def gap(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round(b - a, 3)

    span = gap(first_ts, last_ts)
    wall = end_ts - launch_ts
    return {"wall_s": round(wall, 3), "launch_to_first_request_s": gap(launch_ts, first_ts), "calls_span_s": span,
            "last_answer_to_result_s": gap(last_ts, result_ts), "result_to_exit_s": gap(result_ts, end_ts),
            "fixed_cost_s": None if span is None else round(wall - span, 3)}


def line_ts(lines: list[list], prefix: str | None = None, pattern: re.Pattern | None = None) -> float | None:
    """The stamp of the first stdout line starting with ``prefix`` (or matching ``pattern``), else None."""
    for ts, stream, text in lines:
        if stream == "out" and ((prefix is not None and text.startswith(prefix)) or
                                (pattern is not None and pattern.search(text))):
            return ts
    return None


def paired_ratio(runs_a: list[dict[str, Any]], runs_b: list[dict[str, Any]], metric: str = "wall_s") -> float | None:
    """Median of the per-repetition ratios a/b (paired: drift on the machine hits both alike), successful runs only."""
    ratios = [a[metric] / b[metric] for a, b in zip(runs_a, runs_b, strict=True)
              if a["rc"] == 0 and b["rc"] == 0 and a.get(metric) is not None and b.get(metric)]
    return round(statistics.median(ratios), 3) if ratios else None


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Median (min-max) of the wall, CPU, peak RSS and every phase per contender, successful runs only."""
    metrics = ("wall_s", "cpu_s", "peak_rss_mb", "fixed_cost_s", *PHASES)
    return {k: {m: _spread([r.get(m) for r in v if r["rc"] == 0]) for m in metrics} for k, v in runs.items()}


def judge_targets(n: dict[str, Any]) -> dict[str, bool | None]:
    """PASS (True) / FAIL (False) of each target of issue 43 from the scenario's numbers; None: not measured.

    ``n`` holds the ratios (``make_run_first``, ``make_run_rerun``, ``one_call_default``, ``one_call_off``,
    ``calls_30``), ``mlflow_complete`` (bool), ``fixed_cost_default_s`` / ``fixed_cost_bare_s`` and
    ``result_latency_s`` (the largest median last answer -> printed result of the judgesweep runs), and
    ``all_runs_ok``; a failed run fails every target.
    """
    ok = bool(n.get("all_runs_ok"))

    def at_most(value: float | None, limit: float | None) -> bool | None:
        return None if value is None or limit is None else ok and value <= limit

    out = {k: at_most(n.get(k), TARGETS[k]) for k in ("make_run_first", "make_run_rerun", "one_call_default",
                                                      "one_call_off", "calls_30")}
    out["mlflow_complete"] = None if n.get("mlflow_complete") is None else ok and bool(n["mlflow_complete"])
    out["fixed_cost"] = at_most(n.get("fixed_cost_default_s"), n.get("fixed_cost_bare_s"))
    out["result_within_s"] = at_most(n.get("result_latency_s"), TARGETS["result_within_s"])
    return out


def run_stamped(cmd: list[str], workdir: Path, tag: str, cwd: Path = REPO, env: dict[str, str] | None = None,
                timeout_s: float = TIMEOUT_S) -> tuple[Measured, list[list]]:
    """benchmarks.run_measured through benchmarks/stamped.py: the measured run and its stamped output lines."""
    out, so, se = (workdir / f"{tag}.{ext}" for ext in ("json", "stdout", "stderr"))
    env = {**bench_env(), **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])  # from any cwd
    launched, started = time.time(), time.perf_counter()
    helper = subprocess.Popen([PYTHON, "-m", "benchmarks.stamped", str(out), str(so), str(se), "--", *cmd],
                              cwd=cwd, env=env, start_new_session=True)
    try:
        rc = helper.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop_group(helper)
        return Measured(rc=-1, launch_ts=launched, end_ts=time.time(), wall_s=time.perf_counter() - started,
                        maxrss_mb=None, user_s=None, sys_s=None, stdout="", stderr="", timed_out=True), []
    if rc != 0:
        raise RuntimeError(f"benchmarks.stamped exited {rc} for {tag}")
    data = json.loads(out.read_text())
    lines = data.pop("lines")
    return Measured(**data, stdout=so.read_text(errors="replace"), stderr=se.read_text(errors="replace")), lines


def facts(m: Measured, lines: list[list], first_ts: float | None, last_ts: float | None,
          prefix: str | None) -> dict[str, Any]:
    """What one run reports: exit code, wall, CPU, peak RSS and its phases (``prefix``: its result line)."""
    out = {"rc": m.rc, **phases(m.launch_ts, m.end_ts, first_ts, last_ts,
                                line_ts(lines, prefix) if prefix else None),
           "cpu_s": _round(m.cpu_s, 2), "peak_rss_mb": _round(m.maxrss_mb, 1)}
    if m.rc != 0:
        out["error_tail"] = m.tail()
    return out


def store_check(store: Path, run_dir: Path, planned: int) -> dict[str, Any]:
    """The default run's MLflow run read back with mlflow: FINISHED, with metrics, one trace per judgment."""
    from mlflow.tracking import MlflowClient  # only here: the benchmark process needs mlflow for this check only

    traces = count_traces(store, run_dir)
    if traces["run_id"] is None:
        return {**traces, "status": None, "metrics": None, "complete": False}
    run = MlflowClient(tracking_uri=f"sqlite:///{store / 'mlflow.db'}").get_run(traces["run_id"])
    complete = run.info.status == "FINISHED" and bool(run.data.metrics) and traces["traces"] == planned
    return {**traces, "status": run.info.status, "metrics": len(run.data.metrics), "planned": planned,
            "complete": complete}


def _make_run_part(cfg: dict, work: Path) -> dict[str, Any]:
    reps, names = cfg["fixed_cost_reps"], ["judgesweep", "judgesweep_off"]
    runs: dict[str, dict[str, list]] = {case: {k: [] for k in names} for case in ("first", "rerun")}
    checks = []
    for rep in range(reps):
        for name in _rotated(names, rep):
            cwd = Path(tempfile.mkdtemp(prefix=f"mr_{name}_{rep}_", dir=work))
            for case in ("first", "rerun"):
                cmd = make_run_cmd() + ([] if name == "judgesweep" else ["tracking=off"])
                m, lines = run_stamped(cmd, work, f"mr_{name}_{case}_{rep}", cwd=cwd)
                f = facts(m, lines, line_ts(lines, pattern=CALLS_START), line_ts(lines, pattern=CALLS_END),
                          RESULT_PREFIX["judgesweep"])
                report = next((t for _, s, t in lines if s == "out" and t.startswith("report:")), None)
                if name == "judgesweep" and report:
                    run_dir = Path(report.removeprefix("report:").strip()).parent
                    f["store"] = store_check(cwd / "outputs", run_dir, journal_summary(run_dir)["rows"])
                    f["store"]["judgments"] = MAKE_RUN_JUDGMENTS
                    checks.append(f["store"]["complete"] and f["store"]["traces"] == MAKE_RUN_JUDGMENTS)
                elif name == "judgesweep":
                    checks.append(False)
                runs[case][name].append(f)
                print(f"    mr_{name}_{case}_{rep}: rc {f['rc']}, wall {f['wall_s']} s, result -> exit "
                      f"{f['result_to_exit_s']} s", flush=True)
            shutil.rmtree(cwd, ignore_errors=True)
    return {"judgments": MAKE_RUN_JUDGMENTS, "repetitions": reps, "command": " ".join(make_run_cmd()),
            "cases": {case: {"spread": summarize(r), "default_over_off": paired_ratio(r["judgesweep"],
                                                                                       r["judgesweep_off"]),
                             "runs": r} for case, r in runs.items()},
            "mlflow_complete": bool(checks) and all(checks)}


def _contenders(srv: FakeServer, data: Path, work: Path, store: Path, n: int, order: str,
                names: list[str]) -> dict[str, Any]:
    """The command builder of each contender (tag -> (cmd, env, result prefix)); peers only when installed."""
    installed = peers.versions()
    requests = peers.write_requests(data, n, work / f"fc_requests_{n}.jsonl") if any(installed.values()) else None
    build: dict[str, Any] = {}
    for name in names:
        if name.startswith("judgesweep"):
            build[name] = (lambda tag, name=name: judgesweep_cmd(
                srv.base_url, data, n, work / tag, work / "fc_cache.sqlite", order=order,
                tracking=store if name == "judgesweep" else None), None, RESULT_PREFIX["judgesweep"])
        elif name in ("bare_litellm", "bare_openai"):
            loop = bare_loop_cmd if name == "bare_litellm" else openai_loop_cmd
            build[name] = (lambda tag, loop=loop: loop(srv.base_url, data, n), None, RESULT_PREFIX["bare"])
        elif name == "promptfoo" and installed["promptfoo"] and requests:
            env = peers.promptfoo_env(work / "fc_promptfoo_home")
            warm = peers.promptfoo_config(requests, 1, srv.base_url, work / "fc_promptfoo_warm.yaml")
            run_stamped(peers.promptfoo_cmd(warm, work / "fc_promptfoo_warm.json"), work, "fc_promptfoo_warm",
                        env=env)  # its database made by one unmeasured run, as judgesweep's store
            config = peers.promptfoo_config(requests, n, srv.base_url, work / f"fc_promptfoo_{n}.yaml")
            build[name] = (lambda tag, config=config: peers.promptfoo_cmd(config, work / f"{tag}.out.json"), env,
                           None)
        elif name == "inspect_ai" and installed["inspect_ai"] and requests:
            build[name] = (lambda tag: peers.inspect_cmd(requests, n, srv.base_url, work / tag), peers.inspect_env(),
                           None)
    return build


def _server_part(srv: FakeServer, data: Path, work: Path, store: Path, reps: int, n: int, order: str,
                 names: list[str], label: str) -> dict[str, Any]:
    """``reps`` interleaved repetitions of every contender making ``n`` x order calls against ``srv``."""
    build = _contenders(srv, data, work, store, n, order, names)
    planned = n * (2 if order == "both" else 1)
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in build}
    checks = []
    for rep in range(reps):
        for name in _rotated(list(build), rep):
            tag = f"{label}_{name}_{rep}"
            cmd_of, env, prefix = build[name]
            srv.reset()
            m, lines = run_stamped(cmd_of(tag), work, tag, env=env, timeout_s=max(TIMEOUT_S, planned / 10))
            stats = srv.stats()
            f = facts(m, lines, stats["first_request_ts"], stats["last_response_ts"], prefix)
            f["accepted"] = stats["accepted"]
            f["complete"] = m.rc == 0 and stats["accepted"] == planned
            if name.startswith("judgesweep"):  # every judgment scored, as the tracking scenario checks
                f["complete"] = f["complete"] and journal_summary(work / tag)["status"].get("scored", 0) == planned
            if name == "judgesweep":
                f["store"] = store_check(store, work / tag, planned)
                checks.append(f["store"]["complete"])
            shutil.rmtree(work / tag, ignore_errors=True)
            runs[name].append(f)
            print(f"    {tag}: rc {f['rc']}, wall {f['wall_s']} s, fixed {f['fixed_cost_s']} s", flush=True)
    return {"judgments": planned, "order": order, "repetitions": reps, "spread": summarize(runs),
            "all_runs_ok": all(r["complete"] for v in runs.values() for r in v),
            "mlflow_complete": bool(checks) and all(checks), "runs": runs}


def _median(part: dict[str, Any], name: str, metric: str) -> float | None:
    return part["spread"].get(name, {}).get(metric, {}).get("median")


def scenario_fixed_cost(cfg: dict, data: Path, work: Path) -> dict[str, Any]:
    """The parts above, the load average around them, the targets judged."""
    reps = cfg["fixed_cost_reps"]
    make_run = _make_run_part(cfg, work)
    with FakeServer(latency_ms=LATENCY_MS) as srv:
        store = warm_store(srv, data, work)
        one = _server_part(srv, data, work, store, reps, 1, "fixed", ["judgesweep", "judgesweep_off", "bare_litellm",
                                                                      "bare_openai", *peers.PEERS], "fc1")
        big = _server_part(srv, data, work, store, reps, cfg["fixed_cost_big_n"], "fixed",
                           ["judgesweep", "judgesweep_off", "bare_litellm", "promptfoo"], "fcbig")
    with FakeServer(latency_ms=0) as srv0:
        thirty = _server_part(srv0, data, work, store, reps, 15, "both", ["judgesweep", "judgesweep_off"], "fc30")
    parts = {"one_call": one, "calls_30": thirty, "calls_1000": big}
    latencies = [_median(p, k, "last_answer_to_result_s") for p in (one, thirty, big)
                 for k in ("judgesweep", "judgesweep_off")]
    latencies += [c["spread"][k]["last_answer_to_result_s"]["median"] for c in make_run["cases"].values()
                  for k in ("judgesweep", "judgesweep_off")]
    known = [x for x in latencies if x is not None]
    numbers = {"make_run_first": make_run["cases"]["first"]["default_over_off"],
               "make_run_rerun": make_run["cases"]["rerun"]["default_over_off"],
               "one_call_default": paired_ratio(one["runs"]["judgesweep"], one["runs"]["bare_litellm"]),
               "one_call_off": paired_ratio(one["runs"]["judgesweep_off"], one["runs"]["bare_litellm"]),
               "calls_30": paired_ratio(thirty["runs"]["judgesweep"], thirty["runs"]["judgesweep_off"]),
               "fixed_cost_default_s": _median(big, "judgesweep", "fixed_cost_s"),
               "fixed_cost_bare_s": _median(big, "bare_litellm", "fixed_cost_s"),
               "result_latency_s": max(known) if known else None,
               "mlflow_complete": make_run["mlflow_complete"] and all(p["mlflow_complete"] for p in parts.values()),
               "all_runs_ok": all(p["all_runs_ok"] for p in parts.values()) and all(
                   r["rc"] == 0 for c in make_run["cases"].values() for v in c["runs"].values() for r in v)}
    verdicts = judge_targets(numbers)
    return {"make_run": make_run, **parts, "numbers": numbers, "peers": peers.versions(),
            "targets": {"make_run_first": "<= 1.25x off", "make_run_rerun": "<= 1.25x off",
                        "mlflow_complete": "FINISHED, metrics, traces = judgments", "one_call_default":
                        "<= 1.0x bare litellm", "one_call_off": "<= 0.85x bare litellm", "calls_30": "<= 1.25x off",
                        "fixed_cost": "default <= bare litellm", "result_within_s": "<= 1.0 s"},
            "verdicts": verdicts, "pass": all(v is True for v in verdicts.values())}


def main() -> None:
    """``python -m benchmarks.fixed_cost --profile CASE``: see benchmarks/fixed_cost_profile.py."""
    from benchmarks.fixed_cost_profile import main as profile_main

    profile_main()


if __name__ == "__main__":
    main()
