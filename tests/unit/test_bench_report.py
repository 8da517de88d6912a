"""benchmarks/report.py and benchmarks/readme_table.py: the README table shows only measured figures."""

from __future__ import annotations

import json
import re

import pytest

from benchmarks.readme_table import END, START, main, render, replace_between_markers
from benchmarks.report import NOT_MEASURED, SCALE_SIZES, table_rows

RUN = {"measured_at": "2026-11-24T06:03:56+00:00", "git_sha": "75d459f2d769f10b", "git_dirty": False,
       "loadavg_before": [0.42, 0.3, 0.2], "loadavg_after": [1.1, 0.5, 0.3], "format": 2}


def _scale_run(n: int) -> dict:
    return {"judgments": n, "items": n // 2, "repeats": 1, "rc": 0, "journal": {"rows": n, "results_rows": n},
            "peak_rss_mb": 331.0, "process_wall_s": 61.0, "calls_per_s": 190.0, "process_calls_per_s": 164.0,
            "post_call_s": 1.5, "post_call_share": 0.0246, "verdicts": {"finishes": True, "post_call_share": True},
            **RUN}


def test_an_empty_results_file_is_not_measured_everywhere() -> None:
    rows = table_rows({})
    assert {r.value for r in rows} == {NOT_MEASURED}
    assert [r.scenario for r in rows if r.scenario.startswith("scale")] == [f"scale {n:,}" for n in SCALE_SIZES]
    assert not any(re.search(r"\d", r.value) for r in rows)  # no figure anywhere


def test_scale_sizes_not_run_are_not_measured_and_run_ones_carry_their_run() -> None:
    rows = table_rows({"scale": {"format": 2, "runs": {"10000": _scale_run(10_000)}}})
    by_title = {r.scenario: r for r in rows if r.scenario}
    assert by_title["scale 100,000"].value == NOT_MEASURED
    assert by_title["scale 1,000,000"].value == NOT_MEASURED
    ten_k = by_title["scale 10,000"]
    assert ten_k.result == "PASS" and ten_k.run["git_sha"].startswith("75d459f")


def test_markdown_puts_date_commit_and_load_beside_the_figures() -> None:
    body = render({"machine": {"nproc": 2, "cpu": "AMD EPYC", "python": "3.11.7", "litellm": "1.100.5"},
                   "scenarios": {"scale": {"format": 2, "runs": {"10000": _scale_run(10_000)}}}})
    line = next(x for x in body.splitlines() if x.startswith("| scale 10,000"))
    assert line.endswith("| 2026-11-24, 75d459f, load 0.42 -> 1.10 |")
    assert "| throughput |  | not measured |" in body


def test_scenarios_in_an_older_layout_are_not_shown() -> None:
    old = {"throughput": {"judgments": 1000, "ratio": 0.97, "pass": False}}  # before "format": 2
    assert [r.value for r in table_rows(old) if r.scenario == "throughput"] == [NOT_MEASURED]


def test_a_scenario_that_failed_is_a_fail_row_without_figures() -> None:
    rows = table_rows({"rpm": {"format": 2, "error": "RuntimeError: the warm-up run failed (1):\nTraceback", **RUN}})
    [row] = [r for r in rows if r.scenario == "rpm"]
    assert row.result == "FAIL" and row.value == "RuntimeError: the warm-up run failed (1):"


def test_replace_between_markers_keeps_everything_outside() -> None:
    text = f"# T\n\nbefore\n{START}\nold table\n{END}\nafter\n"
    assert replace_between_markers(text, "new\n") == f"# T\n\nbefore\n{START}\nnew\n{END}\nafter\n"
    for broken in ("no markers\n", f"{START}\n{START}\n{END}\n", f"{END}\nx\n{START}\n"):
        with pytest.raises(ValueError):
            replace_between_markers(broken, "new\n")


def test_cli_writes_the_readme_and_refuses_quick_results(tmp_path, capsys) -> None:
    readme, results = tmp_path / "README.md", tmp_path / "results.json"
    readme.write_text(f"intro\n{START}\n{END}\noutro\n")
    results.write_text(json.dumps({"scenarios": {"cache": {"quick": True, "judgments": 1000}}}))
    with pytest.raises(SystemExit):
        main(["--readme", str(readme), "--results", str(results)])
    assert "--quick" in capsys.readouterr().err
    results.write_text(json.dumps({"scenarios": {}}))
    assert main(["--readme", str(readme), "--results", str(results)]) == 0
    assert main(["--readme", str(readme), "--results", str(results), "--check"]) == 0
    assert readme.read_text().startswith(f"intro\n{START}\n") and readme.read_text().endswith(f"{END}\noutro\n")
    assert NOT_MEASURED in readme.read_text()


def _startup(walls: dict) -> dict:
    first = {k: {"median": m} for k, m in (("judgesweep", 4.8), ("judgesweep_off", 4.8), ("bare_litellm", 3.9))}
    return {"launch_to_first_request_s": first, "over_bare_litellm_s": {"judgesweep": 0.9, "judgesweep_off": 0.9},
            "help_wall_s": {"median": 0.96}, "imports_wall_s": walls,
            "verdicts": {"first_request": False, "first_request_off": False, "help": True}, "format": 2, **RUN}


def test_the_start_up_rows_show_hydras_floor_when_it_was_measured() -> None:
    walls = {"python_only": {"median": 0.03}, "hydra_floor": {"median": 0.71}, "cfg_job": {"median": 1.2}}
    floor = [r for r in table_rows({"startup": _startup(walls)}) if "hydra_floor.py" in r.metric]
    assert [r.value for r in floor] == ["0.03 / 0.71 / 1.20"]
    older = table_rows({"startup": _startup({"python_only": {"median": 0.03}})})  # a run from before it existed
    assert not [r for r in older if "hydra_floor.py" in r.metric]


def _spread3(wall: float, cpu: float, rss: float) -> dict:
    return {"wall_s": {"median": wall, "min": wall, "max": wall, "n": 3}, "cpu_s": {"median": cpu, "n": 1},
            "peak_rss_mb": {"median": rss, "n": 1}}


def _tracking(peers: dict) -> dict:
    ratio = {"median_of_ratios": 1.62, "ratio_of_medians": 1.6}
    throughput = {"judgments": 1000, "latency_ms": 200, "concurrency": 32, "repetitions": 3, "peers": peers,
                  "spread": {"judgesweep": _spread3(48.0, 40.0, 400.0), "judgesweep_off": _spread3(30.0, 25.0, 300.0),
                             **{k: _spread3(24.0, 20.0, 250.0) for k, v in peers.items() if v}},
                  "default_over_off": {"wall_s": ratio, "cpu_s": ratio}, "all_runs_ok": True,
                  "verdicts": {"wall_ratio": False, "cpu_ratio": False, "peak_rss": False,
                               **{f"ahead_of_{k}": (False if v else None) for k, v in peers.items()}}}
    traces = {"judgments": 10_000, "items": 5000, "order": "both", "latency_ms": 0, "repetitions": 3,
              "spread": {"judgesweep": _spread3(90.0, 0, 0), "judgesweep_off": _spread3(60.0, 0, 0)},
              "default_over_off": {"wall_s": ratio}, "traces_per_run": [10_000, 9_999, 10_000],
              "journal_rows_per_run": [10_000] * 3, "all_runs_ok": True,
              "verdicts": {"wall_ratio": False, "every_trace": False}}
    targets = {"wall_ratio": "<= 1.1", "cpu_ratio": "<= 1.25", "peak_rss": "<= 350 MB", "big_wall_ratio": "<= 1.25"}
    return {"throughput": throughput, "traces": traces, "targets": targets, "pass": False, **RUN}


def test_tracking_rows_show_the_peers_measured_or_how_to_install_them() -> None:
    absent = table_rows({"tracking": _tracking({"promptfoo": None, "inspect_ai": None})})
    values = {r.metric: r.value for r in absent}
    assert values["promptfoo"] == values["inspect-ai"] == f"{NOT_MEASURED}: `bash benchmarks/peers.sh`"
    assert values["MLflow traces of the run in the store / journal rows, per repetition"] == \
        "10,000 / 10,000, 9,999 / 10,000, 10,000 / 10,000"
    present = table_rows({"tracking": _tracking({"promptfoo": "0.121.20", "inspect_ai": "0.3.285"})})
    [row] = [r for r in present if r.metric == "promptfoo 0.121.20"]
    assert row.value == "24.0 (24.0-24.0) / 20.0 / 250.0" and row.result == "FAIL"
    assert [r.run["git_sha"] for r in present if r.run] == [RUN["git_sha"]] * 2


def test_the_batch_rows_show_requests_wall_and_dollars_of_both_runs() -> None:
    """Issue 34 point 6: the "batch vs live" rows (the figures of a --quick run of 500 judgments)."""
    live = {"rc": 0, "wall_s": 13.43, "chat_requests": 500, "batch_api_requests": 0, "batches_created": 0,
            "usd": 0.08283675, "scored": 500, "results_rows": 500}
    batched = {**live, "wall_s": 9.7, "chat_requests": 0, "batch_api_requests": 7, "batches_created": 1,
               "usd": 0.041418375}
    outcome = {"judgments": 500, "price_as": "gpt-4o-mini", "runs": {"live": live, "batch": batched},
               "usd_share": 0.5, "pass": True, **RUN}
    first, second = [r for r in table_rows({"batch": outcome}) if r.value != NOT_MEASURED]
    assert first.scenario == "batch 500 (priced as gpt-4o-mini)" and first.value == "500 / 13.4 / $0.0828"
    assert second.value == "7 (1) / 0 / 9.7 / $0.0414 = 0.50x" and second.result == "PASS"
