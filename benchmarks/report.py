"""The benchmark table: rows built from results.json's scenarios, printed by bench.py and written into the
README by readme_table.py. Every figure comes from a measured run; anything missing says "not measured".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

NOT_MEASURED = "not measured"
FORMAT = 2  # the layout of a scenario in results.json; older entries (no "format") are ignored, never shown
SCALE_SIZES = (10_000, 100_000, 1_000_000)  # the sizes issue 12 asks for; rows for each, measured or not


@dataclass(frozen=True)
class Row:
    """One line of the table; ``run`` is the metadata of the run the figure comes from (first row of a run)."""

    scenario: str
    metric: str
    value: str
    target: str = ""
    result: str = ""
    run: dict[str, Any] | None = None


def missing(title: str, target: str = "") -> Row:
    """The row of a scenario (or size) that results.json does not hold."""
    return Row(title, "", NOT_MEASURED, target)


def fmt(value: Any, digits: int | None = None) -> str:
    """A number for a table cell: "-" for None, thousands separators, 3 significant-ish decimals."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if digits is not None:
            return f"{value:,.{digits}f}"
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def verdict(ok: bool | None) -> str:
    """PASS, FAIL, or "" when no target applies."""
    return "" if ok is None else ("PASS" if ok else "FAIL")


def _spread(s: dict[str, Any]) -> str:
    if not s or s.get("median") is None:
        return "-"
    if s.get("n", 1) <= 1:
        return fmt(s["median"], 1)
    return f"{fmt(s['median'], 1)} ({fmt(s['min'], 1)}-{fmt(s['max'], 1)})"


THROUGHPUT_NAMES = {"judgesweep": "judgesweep, tracking=sqlite (default)", "judgesweep_off": "judgesweep, tracking=off",
                    "judgesweep_vllm": "judgesweep, tracking=off, judge=local_vllm (hosted_vllm/)",
                    "bare_litellm": "bare litellm loop (openai/)",
                    "bare_litellm_vllm": "bare litellm loop (hosted_vllm/)",
                    "bare_openai": "bare openai SDK loop", "raw_aiohttp": "plain aiohttp (floor)"}


def throughput_rows(t: dict[str, Any]) -> list[Row]:
    """Scenario a: calls/s of every contender, then the ratios with their targets."""
    title = f"throughput ({t['judgments']:,} x {t['latency_ms']:.0f} ms, c={t['concurrency']})"
    rows = [Row(title, f"calls/s, median (min-max) of {t['repetitions']}: steady (server window) / whole process",
                "", f"ceiling {t['ceiling_calls_per_s']:.0f}", run=t)]
    for key, label in THROUGHPUT_NAMES.items():
        if key in t["steady_calls_per_s"]:
            rows.append(Row("", label, f"{_spread(t['steady_calls_per_s'][key])} / "
                                       f"{_spread(t['process_calls_per_s'][key])}"))
    r, targets, verdicts = t["ratios_to_bare_litellm"], t["targets"], t["verdicts"]
    for key, label in (("judgesweep_process", "judgesweep (sqlite) / bare litellm, whole process"),
                       ("judgesweep_off_process", "judgesweep (off) / bare litellm, whole process"),
                       ("judgesweep_steady", "judgesweep (sqlite) / bare litellm, steady"),
                       ("judgesweep_off_steady", "judgesweep (off) / bare litellm, steady")):
        rows.append(Row("", label, fmt(r.get(key)), targets.get(key, ""), verdict(verdicts.get(key))))
    for key, label in (("judgesweep_vllm", "judgesweep (off, local_vllm) / bare litellm (openai/)"),
                       ("bare_litellm_vllm", "bare litellm (hosted_vllm/) / bare litellm (openai/)"),
                       ("bare_openai", "bare openai SDK / bare litellm")):
        if r.get(f"{key}_process") is not None:
            rows.append(Row("", f"{label}, whole process / steady",
                            f"{fmt(r.get(f'{key}_process'))} / {fmt(r.get(f'{key}_steady'))}"))
    if not t.get("all_runs_ok", True):
        rows.append(Row("", "a run failed or left rows unscored (see results.json)", "", "", "FAIL"))
    return rows


def scale_rows(s: dict[str, Any] | None) -> list[Row]:
    """Scenario b: one block per size of SCALE_SIZES (and any other size measured)."""
    runs = (s or {}).get("runs", {})
    sizes = sorted({*SCALE_SIZES, *(int(k) for k in runs)})
    rows = []
    for n in sizes:
        title = f"scale {n:,}"
        run = runs.get(str(n))
        if run is None:
            rows.append(missing(title, _rss_target(n)))
            continue
        v = run["verdicts"]
        rows.append(Row(title, f"{run['items']:,} items x 2 orders x {run['repeats']}: exit code, rows journaled "
                               "/ in results", f"{run['rc']}, {fmt(run['journal']['rows'])} / "
                                               f"{fmt(run['journal']['results_rows'])}",
                        f"0, {n:,} / {n:,}", verdict(v["finishes"]), run=run))
        rows.append(Row("", "peak RSS (MB)", fmt(run["peak_rss_mb"], 0), _rss_target(n), verdict(v.get("peak_rss"))))
        rows.append(Row("", "wall (s) / calls/s steady / whole process",
                        f"{fmt(run['process_wall_s'], 0)} / {fmt(run['calls_per_s'], 0)} / "
                        f"{fmt(run['process_calls_per_s'], 0)}"))
        share = run.get("post_call_share")
        rows.append(Row("", "last answer -> exit (s, share of wall)",
                        f"{fmt(run['post_call_s'], 1)} ({'-' if share is None else f'{share:.1%}'})", "< 10%",
                        verdict(v["post_call_share"])))
    return rows


def _rss_target(n: int) -> str:
    return {100_000: "<= 400 MB", 1_000_000: "<= 600 MB"}.get(n, "")


RPM_TITLES = {"window_1s_no_judge_rpm": "rpm 600, 1 s window, no judge.rpm",
              "window_1s_judge_rpm": "rpm 600, 1 s window, judge.rpm=600",
              "window_60s_judge_rpm": "rpm 600, 60 s window, judge.rpm=600"}


def rpm_rows(r: dict[str, Any]) -> list[Row]:
    """Scenario c: per variant, wall / ideal, 429s and lost rows."""
    rows: list[Row] = []
    for key, title in RPM_TITLES.items():
        run = r["runs"].get(key)
        if run is None:
            rows.append(missing(title))
            continue
        v, t = run["verdicts"], run["targets"]
        share = run["share_429"]
        rows += [Row(title, f"{r['judgments']} judgments: wall (s) / ideal {r['ideal_s']:.0f} s",
                     f"{fmt(run['wall_s'], 1)} = {fmt(run['ratio'], 2)}x", t["wall_ratio"] + "x",
                     verdict(v["wall_ratio"]), run=None if rows else r),
                 Row("", "429s from the server (share of requests)",
                     f"{run['count_429_server']} ({'-' if share is None else f'{share:.1%}'})",
                     t.get("share_429", ""), verdict(v.get("share_429"))),
                 Row("", "lost (not scored) / exit code", f"{run['lost']} / {run['run']['rc']}", "0 / 0",
                     verdict(v["lost"]))]
    return rows


def cache_rows(c: dict[str, Any]) -> list[Row]:
    """Scenario e: the rerun of a populated cache."""
    return [Row(f"cache {c['judgments']:,}", "rerun: HTTP calls / whole process (s)",
                f"{c['rerun']['http_calls']} / {fmt(c['rerun']['process_wall_s'], 1)}", "0 / < 15",
                verdict(c["pass"]), run=c)]


def startup_rows(u: dict[str, Any]) -> list[Row]:
    """Scenario d: launch to the first request, and --help."""
    first, over, v = u["launch_to_first_request_s"], u["over_bare_litellm_s"], u["verdicts"]
    return [Row("start-up", "launch -> first request (s), median: judgesweep / tracking=off / bare litellm",
                f"{fmt(first['judgesweep']['median'], 2)} / {fmt(first['judgesweep_off']['median'], 2)} / "
                f"{fmt(first['bare_litellm']['median'], 2)}", run=u),
            Row("", "judgesweep over bare litellm (s)", fmt(over["judgesweep"], 2), "<= 0.5",
                verdict(v["first_request"])),
            Row("", "tracking=off over bare litellm (s)", fmt(over["judgesweep_off"], 2), "<= 0.5",
                verdict(v["first_request_off"])),
            Row("", "`python -m runner --help` wall (s), median", fmt(u["help_wall_s"]["median"], 2), "< 1.5",
                verdict(v["help"]))] + _floor_rows(u.get("imports_wall_s") or {})


def _floor_rows(walls: dict[str, Any]) -> list[Row]:
    """Whole-process walls under the start-up figures: Python alone, Hydra's floor, judgesweep's config composed."""
    if not {"python_only", "hydra_floor", "cfg_job"} <= set(walls):
        return []
    return [Row("", "process wall (s), median: `python -c pass` / Hydra app with a 1-key config "
                "(benchmarks/hydra_floor.py) / `python -m runner --cfg job`",
                " / ".join(fmt(walls[k]["median"], 2) for k in ("python_only", "hydra_floor", "cfg_job")))]


PEER_NAMES = {"promptfoo": "promptfoo", "inspect_ai": "inspect-ai"}


def _trio(spread: dict[str, Any], key: str) -> str:
    """"wall / CPU / peak RSS" of one contender, each median (min-max)."""
    s = spread.get(key)
    return " / ".join(_spread(s[m]) for m in ("wall_s", "cpu_s", "peak_rss_mb")) if s else "-"


def _ratios(r: dict[str, Any]) -> str:
    return f"{fmt(r['median_of_ratios'], 2)} ({fmt(r['ratio_of_medians'], 2)})"


def tracking_rows(t: dict[str, Any]) -> list[Row]:
    """Scenario f: default tracking against tracking=off and the peers (1,000 x 200 ms), then the 10,000 x 0 ms
    runs with every trace counted in the store."""
    a, b = t["throughput"], t["traces"]
    va, vb, targets = a["verdicts"], b["verdicts"], t["targets"]
    spread, ratio = a["spread"], a["default_over_off"]
    rows = [Row(f"tracking ({a['judgments']:,} x {a['latency_ms']:.0f} ms, c={a['concurrency']})",
                f"whole process, median (min-max) of {a['repetitions']}: wall (s) / CPU user+sys (s) / peak RSS (MB)",
                "", run=t),
            Row("", "judgesweep, tracking=sqlite (default)", _trio(spread, "judgesweep"), targets["peak_rss"],
                verdict(va["peak_rss"])),
            Row("", "judgesweep, tracking=off", _trio(spread, "judgesweep_off"))]
    for key, label in PEER_NAMES.items():
        version = (a.get("peers") or {}).get(key)
        if key in spread:
            rows.append(Row("", f"{label} {version}", _trio(spread, key), "default's wall below",
                            verdict(va.get(f"ahead_of_{key}"))))
        else:
            rows.append(Row("", label, f"{NOT_MEASURED}: `bash benchmarks/peers.sh`"))
    rows += [Row("", "default / off, wall: median of per-repetition ratios (ratio of medians)",
                 _ratios(ratio["wall_s"]), targets["wall_ratio"], verdict(va["wall_ratio"])),
             Row("", "default / off, CPU: median of per-repetition ratios (ratio of medians)",
                 _ratios(ratio["cpu_s"]), targets["cpu_ratio"], verdict(va["cpu_ratio"])),
             Row(f"tracking ({b['judgments']:,} x {b['latency_ms']} ms, {b['items']:,} items x order={b['order']})",
                 f"wall (s), median (min-max) of {b['repetitions']}: default / off",
                 f"{_spread(b['spread']['judgesweep']['wall_s'])} / {_spread(b['spread']['judgesweep_off']['wall_s'])}",
                 run=t),
             Row("", "default / off, wall: median of per-repetition ratios (ratio of medians)",
                 _ratios(b["default_over_off"]["wall_s"]), targets["big_wall_ratio"], verdict(vb["wall_ratio"])),
             Row("", "MLflow traces of the run in the store / journal rows, per repetition",
                 ", ".join(f"{fmt(x)} / {fmt(y)}" for x, y in zip(b["traces_per_run"], b["journal_rows_per_run"],
                                                                 strict=True)),
                 f"= {b['judgments']:,}", verdict(vb["every_trace"]))]
    if not (a["all_runs_ok"] and b["all_runs_ok"]):
        rows.append(Row("", "a run failed or left rows unscored (see results.json)", "", "", "FAIL"))
    return rows


def sporadic_rows(r: dict[str, Any]) -> list[Row]:
    """Sporadic 429s: wall against the no-fault wall, 429s and lost rows."""
    base, faulty = r["runs"]["no_fault"], r["runs"]["sporadic_10pct"]
    v, t = r["verdicts"], r["targets"]
    return [Row(f"sporadic 429s ({r['share_429']:.0%}, Retry-After 1), no judge.rpm",
                f"{r['judgments']} judgments: wall (s) / no-fault wall {fmt(base['wall_s'], 1)} s",
                f"{fmt(faulty['wall_s'], 1)} = {fmt(r['ratio'], 2)}x", t["wall_ratio"], verdict(v["wall_ratio"]),
                run=r),
            Row("", "429s from the server / requests", f"{faulty['count_429_server']} / {faulty['requests']}", "", ""),
            Row("", "lost (not scored) / exit code", f"{faulty['lost']} / {faulty['run']['rc']}", "0 / 0",
                verdict(v["lost"]))]


def batch_rows(b: dict[str, Any]) -> list[Row]:
    """Batch vs live: requests, wall and dollars of the same judgments (issue 34 point 6)."""
    live, batch = b["runs"]["live"], b["runs"]["batch"]

    def usd(value: float | None) -> str:
        return "-" if value is None else f"${value:,.4f}"

    return [Row(f"batch {b['judgments']:,} (priced as {b['price_as']})",
                "live: chat requests / wall (s) / dollars",
                f"{fmt(live['chat_requests'])} / {fmt(live['wall_s'], 1)} / {usd(live['usd'])}", "", "", run=b),
            Row("", "judge.batch=on: Files+Batches requests (batches) / live calls / wall (s) / dollars",
                f"{fmt(batch['batch_api_requests'])} ({batch['batches_created']}) / {fmt(batch['chat_requests'])} / "
                f"{fmt(batch['wall_s'], 1)} / {usd(batch['usd'])} = {fmt(b['usd_share'], 2)}x",
                "1 batch, 0 live calls, <= 0.55x", verdict(b["pass"]))]


def sweep_items_rows(s: dict[str, Any]) -> list[Row]:
    """The sweep report's item view: size, build time, chromium's open time (launch included) beside an empty page."""
    opened = "no chromium" if s.get("open_s") is None else f"{fmt(s['open_s'], 2)} / {fmt(s['empty_open_s'], 2)}"
    return [Row(f"sweep items {s['items']:,} x {s['jobs']}", "report.html MB / build s",
                f"{fmt(s['bytes'] / 1e6, 2)} / {fmt(s['build_s'], 2)}", run=s),
            Row("", "chromium open s: report / empty page (median of 3)", opened)]


FC_NAMES = {"judgesweep": "default", "judgesweep_off": "off", "bare_litellm": "bare litellm",
            "bare_openai": "bare openai", "promptfoo": "promptfoo", "inspect_ai": "inspect-ai"}
FC_PHASES = "launch -> first request / calls' span / last answer -> printed result / printed result -> exit (s)"


def _fc_medians(spread: dict[str, Any], metric: str) -> tuple[str, str]:
    """("default / off / ...", value) of one metric's medians for the contenders measured."""
    keys = [k for k in FC_NAMES if k in spread]
    return " / ".join(FC_NAMES[k] for k in keys), " / ".join(fmt(spread[k][metric]["median"], 2) for k in keys)


def _fc_phases(spread: dict[str, Any], key: str) -> str:
    s = spread.get(key)
    phases = ("launch_to_first_request_s", "calls_span_s", "last_answer_to_result_s", "result_to_exit_s")
    return " / ".join(fmt(s[p]["median"], 2) for p in phases) if s else "-"


def fixed_cost_rows(f: dict[str, Any]) -> list[Row]:
    """Issue 43's fixed cost: make run default / off, one call against the loops and peers, 30 calls, the fixed
    cost of 1,000 x 200 ms, the printed result's delay; medians, each target with its verdict."""
    v, t, mr = f["verdicts"], f["targets"], f["make_run"]
    rows = [Row(f"fixed cost: make run ({mr['judgments']} replayed judgments)",
                f"wall (s), median of {mr['repetitions']}: default / off", "", run=f)]
    for case, label in (("first", "first run, fresh cwd"), ("rerun", "re-run, store existing")):
        c = mr["cases"][case]
        rows += [Row("", f"{label}: default / off (wall ratio, median of per-repetition ratios)",
                     f"{_fc_medians(c['spread'], 'wall_s')[1]} ({fmt(c['default_over_off'], 2)}x)",
                     t[f"make_run_{case}"], verdict(v[f"make_run_{case}"])),
                 Row("", f"{label}, default: judging starts / calls / last answer -> printed result / -> exit (s)",
                     _fc_phases(c["spread"], "judgesweep"))]
    rows.append(Row("", "every default run's MLflow run at exit (make run and below)",
                    "complete" if f["numbers"]["mlflow_complete"] else "incomplete", t["mlflow_complete"],
                    verdict(v["mlflow_complete"])))
    one, thirty, big = f["one_call"], f["calls_30"], f["calls_1000"]
    names, walls = _fc_medians(one["spread"], "wall_s")
    n = f["numbers"]
    rows += [Row("fixed cost: one call (200 ms)", f"wall (s), median of {one['repetitions']}: {names}", walls, run=f),
             Row("", "default / bare litellm, wall (median of per-repetition ratios)",
                 fmt(n["one_call_default"], 2), t["one_call_default"], verdict(v["one_call_default"])),
             Row("", "off / bare litellm", fmt(n["one_call_off"], 2), t["one_call_off"], verdict(v["one_call_off"])),
             Row("", f"default: {FC_PHASES}", _fc_phases(one["spread"], "judgesweep")),
             Row("", f"off: {FC_PHASES}", _fc_phases(one["spread"], "judgesweep_off")),
             Row(f"fixed cost: {thirty['judgments']} calls (0 ms)", "wall (s): default / off (ratio)",
                 f"{_fc_medians(thirty['spread'], 'wall_s')[1]} ({fmt(n['calls_30'], 2)}x)", t["calls_30"],
                 verdict(v["calls_30"]), run=f)]
    names, fixed = _fc_medians(big["spread"], "fixed_cost_s")
    rows += [Row(f"fixed cost: {big['judgments']:,} x 200 ms (c=32)",
                 f"wall minus the calls' span (s), median of {big['repetitions']}: {names}", fixed, t["fixed_cost"],
                 verdict(v["fixed_cost"]), run=f),
             Row("", f"default: {FC_PHASES}", _fc_phases(big["spread"], "judgesweep")),
             Row("", f"off: {FC_PHASES}", _fc_phases(big["spread"], "judgesweep_off")),
             Row("fixed cost: printed result", "last answer -> printed result, largest median of the judgesweep cases "
                 "(s)", fmt(n["result_latency_s"], 2), t["result_within_s"], verdict(v["result_within_s"]), run=f)]
    if not n["all_runs_ok"]:
        rows.append(Row("", "a run failed or was incomplete (see results.json)", "", "", "FAIL"))
    return rows


ROWS: dict[str, tuple[str, Callable[[dict[str, Any]], list[Row]]]] = {
    "throughput": ("throughput", throughput_rows), "scale": ("scale", scale_rows), "rpm": ("rpm", rpm_rows),
    "sporadic_429": ("sporadic 429s", sporadic_rows),
    "startup": ("start-up", startup_rows), "cache": ("cache", cache_rows), "tracking": ("tracking", tracking_rows),
    "sweep_items": ("sweep items", sweep_items_rows),
    "batch": ("batch vs live", batch_rows), "fixed_cost": ("fixed cost", fixed_cost_rows)}


def table_rows(scenarios: dict[str, Any]) -> list[Row]:
    """Rows for every scenario in ROWS order; a scenario absent from ``scenarios`` (or in an older layout) is one
    "not measured" row (scale: one per size)."""
    rows: list[Row] = []
    for name, (title, build) in ROWS.items():
        outcome = scenarios.get(name)
        if outcome is not None and outcome.get("format") != FORMAT:
            outcome = None
        if outcome is not None and "error" in outcome:
            rows.append(Row(title, "the scenario failed (see results.json)", outcome["error"].splitlines()[0][:200],
                            "", "FAIL", run=outcome))
        if name == "scale":
            rows += scale_rows(outcome)
        elif outcome is None:
            rows.append(missing(title))
        elif "error" not in outcome:
            rows += build(outcome)
    return rows


def run_label(run: dict[str, Any] | None) -> str:
    """"2026-11-24, db5e2c4, load 0.42 -> 1.10" from a run's measured_at, git_sha and load averages."""
    if not run:
        return ""
    date = (run.get("measured_at") or "")[:10] or "?"
    sha = (run.get("git_sha") or "?")[:7] + ("+dirty" if run.get("git_dirty") else "")
    before, after = run.get("loadavg_before"), run.get("loadavg_after")
    load = f"load {before[0]:.2f} -> {after[0]:.2f}" if before and after else "load ?"
    return f"{date}, {sha}, {load}"


def print_table(rows: list[Row]) -> None:
    """Print rows as an aligned text table (no run column)."""
    header = ("scenario", "metric", "value", "target", "result")
    cells = [(r.scenario, r.metric, r.value, r.target, r.result) for r in rows]
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(5)]
    line = "  ".join("-" * w for w in widths)
    print(line)
    for row in [header, None, *cells]:
        print(line if row is None else "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    print(line)


def markdown_table(rows: list[Row]) -> str:
    """Rows as a Markdown table with a "measured" column (date, commit, load average of each run)."""
    out = ["| scenario | metric | result | target | | measured |", "|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r.scenario, r.metric, r.value, r.target, f"**{r.result}**" if r.result else "", run_label(r.run)]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(out)
