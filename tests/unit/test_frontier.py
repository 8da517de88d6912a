"""Unit tests for runner.outputs.frontier: Pareto logic (ties, free configs, missing values), labels, CSV, plot."""

from __future__ import annotations

import csv
import json

import pytest

from runner.outputs.frontier import (
    COST_PER_1K,
    FRONTIER_CSV,
    LABEL,
    PARETO,
    config_labels,
    frontier,
    frontier_png,
    ordered,
    plot_frontier,
    with_job_counts,
    write_csv,
)

PNG = b"\x89PNG\r\n\x1a\n"


def row(job: int, cost: float | None, quality: float | None, items: int | None = 100, **extra) -> dict:
    """A sweep row as runner.outputs.sweep.collect makes it, with the items column added."""
    return {"job": job, "judge": f"j{job}", "status": "ok", "agreement": quality, "list $": cost, "items": items,
            **extra}


def flags(rows: list[dict]) -> list[bool | None]:
    return [r[PARETO] for r in frontier(rows)]


def test_a_config_is_dominated_by_one_cheaper_or_equal_and_better_or_equal():
    rows = [row(0, 1.0, 0.80), row(1, 2.0, 0.90), row(2, 2.0, 0.70), row(3, 3.0, 0.90), row(4, 0.5, 0.60)]
    # 2: A is cheaper and better; 3: as good as B but dearer; 4: the cheapest, so on the frontier
    assert flags(rows) == [True, True, False, False, True]


def test_the_cost_is_the_list_price_of_the_calls_not_what_the_sweep_paid():
    # job 0 was served from the cache (paid nothing) but its calls are worth 4.0: job 1 is cheaper and better
    rows = [row(0, 4.0, 0.80, **{"cost $": 0.0}), row(1, 1.0, 0.85, **{"cost $": 1.0})]
    assert flags(rows) == [False, True]


def test_equal_configs_are_all_on_the_frontier():
    assert flags([row(0, 1.0, 0.9), row(1, 1.0, 0.9), row(2, 1.0, 0.8)]) == [True, True, False]


def test_free_configs_compete_on_quality_alone_and_dominate_paid_ones_that_are_not_better():
    rows = [row(0, 0.0, 0.80), row(1, 0.0, 0.90), row(2, 0.0, 0.90), row(3, 5.0, 0.85), row(4, 5.0, 0.95)]
    assert flags(rows) == [False, True, True, False, True]


def test_all_free_configs_leave_only_the_best_on_the_frontier():
    assert flags([row(0, 0.0, 0.955), row(1, 0.0, 0.8), row(2, 0.0, 0.7)]) == [True, False, False]


def test_float_noise_in_cost_or_quality_does_not_break_a_tie():
    assert flags([row(0, 0.1 + 0.2, 0.7 + 0.1), row(1, 0.3, 0.8)]) == [True, True]


def test_rows_missing_a_value_are_not_compared_and_do_not_dominate():
    rows = [row(0, 1.0, None), row(1, None, 0.99), row(2, 0.1, 0.99, items=0), row(3, 0.1, 0.99, items=None),
            row(4, 0.0, 0.99, status="failed"), row(5, 2.0, 0.5)]
    out = frontier(rows)
    assert [r[PARETO] for r in out] == [None, None, None, None, None, True]
    assert [r[COST_PER_1K] for r in out][:4] == [10.0, None, None, None]


def test_cost_is_put_per_thousand_items():
    out = frontier([row(0, 0.5, 0.9, items=250), row(1, 0.5, 0.9, items=1000)])
    assert [r[COST_PER_1K] for r in out] == [2.0, 0.5]
    assert [r[PARETO] for r in out] == [False, True]  # same total cost, four times the items


def test_another_quality_column_can_be_maximized():
    rows = [{**row(0, 1.0, None), "mean score": 7.0}, {**row(1, 1.0, None), "mean score": 8.0}]
    assert [r[PARETO] for r in frontier(rows, quality_key="mean score")] == [False, True]


def test_labels_name_only_the_overrides_that_vary():
    rows = [{"job": 0, "judge": "a", "prompt": "p", "max_items": "4", "status": "ok", "agreement": 0.5},
            {"job": 1, "judge": "b", "prompt": "p", "max_items": "4", "status": "ok", "agreement": 0.6}]
    assert config_labels(rows) == ["judge=a", "judge=b"]
    assert config_labels([{"job": 3, "status": "ok"}]) == ["job 3"]
    assert frontier(rows)[1][LABEL] == "judge=b"


def test_job_counts_are_read_from_each_job_metrics(tmp_path):
    (tmp_path / "0").mkdir()
    (tmp_path / "0" / "metrics.json").write_text(json.dumps({"items/total": 100.0, "cost/list_unpriced_calls": 200.0}))
    out = with_job_counts(tmp_path, [row(0, 0.0, 0.9, items=None), row(1, 0.0, 0.8, items=None)])
    assert (out[0]["items"], out[0]["unpriced calls"]) == (100.0, 200.0)
    assert (out[1]["items"], out[1]["unpriced calls"]) == (None, None)  # job 1 wrote no metrics


def test_the_csv_lists_the_frontier_first_cheapest_first(tmp_path):
    rows = frontier([row(0, 3.0, 0.95), row(1, 1.0, 0.5), row(2, 2.0, 0.4), row(3, 1.0, None)])
    path = write_csv(tmp_path / FRONTIER_CSV, rows)
    read = list(csv.DictReader(path.open()))
    assert [r["job"] for r in read] == ["1", "0", "2", "3"]
    assert [r["pareto"] for r in read] == ["True", "True", "False", ""]
    assert list(read[0])[:3] == ["job", "config", "agreement"] and "agr low" in read[0]
    assert [r["job"] for r in ordered(rows)] == [1, 0, 2, 3]


@pytest.mark.parametrize("rows", [
    [row(0, 1.0, 0.8, **{"agr low": 0.7, "agr high": 0.9}), row(1, 2.0, 0.9), row(2, 2.0, 0.7)],
    [row(0, 0.0, 0.9), row(1, 0.0, 0.9)],  # every config free: a zero-width cost axis
    [row(0, None, None)],  # nothing to compare
    [{**row(0, 1.0, 0.8), "judge": "a $x^{$ b"}, {**row(1, 1.0, 0.8), "judge": "<script>alert(1)</script>"}],
])
def test_the_plot_is_a_png_whatever_the_rows(tmp_path, rows):
    out = frontier(rows)
    assert frontier_png(out).startswith(PNG)
    assert plot_frontier(out, tmp_path / "f.png").read_bytes().startswith(PNG)
