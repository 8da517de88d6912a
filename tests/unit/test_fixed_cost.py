"""benchmarks/fixed_cost.py's pure parts: the phases of a run, each target's verdict from given numbers, and the
rows the benchmark table shows for a results dict; plus the profile tool's aggregation of py-spy's stacks."""

from __future__ import annotations

import pytest

from benchmarks.fixed_cost import CALLS_END, CALLS_START, judge_targets, line_ts, paired_ratio, phases, summarize
from benchmarks.fixed_cost_profile import aggregate, import_times
from benchmarks.report import table_rows

PASSING = {"make_run_first": 1.2, "make_run_rerun": 1.25, "one_call_default": 1.0, "one_call_off": 0.8,
           "calls_30": 1.1, "mlflow_complete": True, "fixed_cost_default_s": 2.0, "fixed_cost_bare_s": 2.5,
           "result_latency_s": 0.4, "all_runs_ok": True}


def test_phases_split_the_wall_at_the_stamps() -> None:
    got = phases(launch_ts=100.0, end_ts=110.0, first_ts=102.5, last_ts=108.0, result_ts=108.25)
    assert got == {"wall_s": 10.0, "launch_to_first_request_s": 2.5, "calls_span_s": 5.5,
                   "last_answer_to_result_s": 0.25, "result_to_exit_s": 1.75, "fixed_cost_s": 4.5}


def test_an_unknown_stamp_leaves_its_phases_unknown() -> None:
    got = phases(launch_ts=100.0, end_ts=103.0, first_ts=101.0, last_ts=101.2, result_ts=None)
    assert got["last_answer_to_result_s"] is None and got["result_to_exit_s"] is None
    assert got["fixed_cost_s"] == 2.8
    assert phases(0.0, 1.0, None, None, None)["fixed_cost_s"] is None


def test_lines_are_found_on_stdout_by_prefix_or_pattern() -> None:
    lines = [[1.0, "out", "[..][runner.run.pipeline][INFO] - judging 100 items x 1 repeat(s), order=both"],
             [2.0, "err", "report: not this one"],
             [3.0, "out", "[..][runner.judging.progress][INFO] - judging 200/200 (100%)  1 s"],
             [3.1, "out", "[..][runner.judging.progress][INFO] - summarizing"],
             [4.0, "out", "report: /tmp/x/report.html"]]
    assert line_ts(lines, "report:") == 4.0
    assert line_ts(lines, pattern=CALLS_START) == 1.0
    assert line_ts(lines, pattern=CALLS_END) == 3.0
    assert line_ts(lines[:2] + lines[3:], pattern=CALLS_END) == 3.1  # no 100% progress line: "summarizing"
    assert line_ts([[1.0, "out", "judging 150/200 (75%)"]], pattern=CALLS_END) is None
    assert line_ts(lines, "{") is None


def test_paired_ratio_is_the_median_of_the_repetitions_and_skips_failed_runs() -> None:
    a = [{"rc": 0, "wall_s": 12.0}, {"rc": 0, "wall_s": 9.0}, {"rc": 1, "wall_s": 1.0}]
    b = [{"rc": 0, "wall_s": 10.0}, {"rc": 0, "wall_s": 10.0}, {"rc": 0, "wall_s": 10.0}]
    assert paired_ratio(a, b) == pytest.approx(1.05)
    assert paired_ratio([{"rc": 1, "wall_s": 1.0}], [{"rc": 0, "wall_s": 1.0}]) is None


def test_every_target_passes_at_its_limit() -> None:
    assert judge_targets(PASSING) == {"make_run_first": True, "make_run_rerun": True, "one_call_default": True,
                                      "one_call_off": True, "calls_30": True, "mlflow_complete": True,
                                      "fixed_cost": True, "result_within_s": True}


@pytest.mark.parametrize(("key", "value", "target"), [
    ("make_run_first", 1.26, "make_run_first"), ("make_run_rerun", 1.7, "make_run_rerun"),
    ("one_call_default", 1.01, "one_call_default"), ("one_call_off", 0.86, "one_call_off"),
    ("calls_30", 1.3, "calls_30"), ("mlflow_complete", False, "mlflow_complete"),
    ("fixed_cost_default_s", 2.6, "fixed_cost"), ("result_latency_s", 1.01, "result_within_s")])
def test_each_target_fails_past_its_limit_and_only_it(key: str, value: object, target: str) -> None:
    got = judge_targets({**PASSING, key: value})
    assert got[target] is False
    assert all(v for k, v in got.items() if k != target)


def test_a_failed_run_fails_every_target_and_a_missing_number_is_not_measured() -> None:
    assert not any(judge_targets({**PASSING, "all_runs_ok": False}).values())
    got = judge_targets({**PASSING, "fixed_cost_bare_s": None, "calls_30": None})
    assert got["fixed_cost"] is None and got["calls_30"] is None and got["one_call_off"] is True


def _run(wall: float, fixed: float | None = None, rc: int = 0) -> dict:
    return {"rc": rc, "wall_s": wall, "cpu_s": wall / 2, "peak_rss_mb": 300.0, "fixed_cost_s": fixed,
            "launch_to_first_request_s": 1.5, "calls_span_s": 0.2, "last_answer_to_result_s": 0.3,
            "result_to_exit_s": 0.1}


def _part(names: list[str], judgments: int, reps: int = 3) -> dict:
    runs = {k: [_run(5.0 + i, fixed=2.0 + i) for i in range(reps)] for k in names}
    return {"judgments": judgments, "repetitions": reps, "spread": summarize(runs), "runs": runs}


def test_summarize_takes_medians_of_successful_runs_only() -> None:
    spread = summarize({"x": [_run(4.0), _run(6.0), _run(100.0, rc=1)]})["x"]
    assert spread["wall_s"] == {"median": 5.0, "min": 4.0, "max": 6.0, "n": 2}
    assert spread["fixed_cost_s"]["n"] == 0


def test_the_table_shows_each_target_with_its_verdict() -> None:
    names = ["judgesweep", "judgesweep_off"]
    make_run = {"judgments": 200, "repetitions": 3, "cases": {
        case: {**_part(names, 200), "default_over_off": ratio} for case, ratio in (("first", 1.2), ("rerun", 1.7))}}
    numbers = {**PASSING, "make_run_rerun": 1.7}
    outcome = {"format": 2, "make_run": make_run, "one_call": _part([*names, "bare_litellm", "promptfoo"], 1),
               "calls_30": _part(names, 30), "calls_1000": _part([*names, "bare_litellm"], 1000),
               "numbers": numbers, "verdicts": judge_targets(numbers),
               "targets": {"make_run_first": "<= 1.25x off", "make_run_rerun": "<= 1.25x off",
                           "mlflow_complete": "traces", "one_call_default": "<= 1.0x", "one_call_off": "<= 0.85x",
                           "calls_30": "<= 1.25x off", "fixed_cost": "default <= bare litellm",
                           "result_within_s": "<= 1.0 s"}}
    rows = [r for r in table_rows({"fixed_cost": outcome}) if r.run is outcome or r.scenario == ""]
    by_metric = {r.metric: r for r in rows}
    first = next(r for m, r in by_metric.items() if m.startswith("first run, fresh cwd: default / off"))
    rerun = next(r for m, r in by_metric.items() if m.startswith("re-run, store existing: default / off"))
    assert (first.value, first.result) == ("6.00 / 6.00 (1.20x)", "PASS")
    assert (rerun.value, rerun.result) == ("6.00 / 6.00 (1.70x)", "FAIL")
    one = next(r for r in rows if r.scenario == "fixed cost: one call (200 ms)")
    assert one.metric.endswith("default / off / bare litellm / promptfoo") and one.value == "6.00 / 6.00 / 6.00 / 6.00"
    fixed = next(r for r in rows if r.scenario.startswith("fixed cost: 1,000 x 200 ms"))
    assert fixed.value == "3.00 / 3.00 / 3.00" and fixed.result == "PASS"
    result = next(r for r in rows if r.scenario == "fixed cost: printed result")
    assert (result.value, result.target, result.result) == ("0.40", "<= 1.0 s", "PASS")
    assert all(r.value == "1.50 / 0.20 / 0.30 / 0.10" for r in rows if r.metric.startswith("off: launch"))
    assert not any(r.metric.startswith("a run failed") for r in rows)


def test_py_spy_stacks_aggregate_per_process_without_line_numbers() -> None:
    folded = ['process 1:"python -m runner";<module> (runner/__main__.py:3);main (cli.py:10);load (a.py:5) 7',
              'process 1:"python -m runner";<module> (runner/__main__.py:3);main (cli.py:12) 3',
              'process 1:"python -m runner";process 2:"python -m runner.outputs.publisher";run (publisher.py:40) 5',
              "garbage"]
    got = aggregate(folded)
    one = got['process 1:"python -m runner"']
    assert one["total"]["samples"] == 10
    assert one["cumulative"]["main (cli.py)"] == 10 and one["self"]["load (a.py)"] == 7
    child = got['process 2:"python -m runner.outputs.publisher"']
    assert child["self"]["run (publisher.py)"] == 5 and child["total"]["samples"] == 5
    assert not any(f.startswith("process ") for f in one["cumulative"])


def test_import_times_split_top_level_imports_from_their_children() -> None:
    stderr = ("import time: self [us] | cumulative | imported package\n"
              "import time:       100 |        100 |     _io\n"
              "import time:       300 |       2400 |   litellm.types\n"
              "import time:      1000 |       5000 | litellm\n"
              "import time:        50 |         50 | json\n"
              "a warning\n")
    top, own = import_times(stderr)
    assert top == [(5000, "litellm"), (50, "json")]
    assert own[0] == (1000, "litellm") and (100, "_io") in own
