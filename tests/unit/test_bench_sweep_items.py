"""benchmarks/sweep_items_size.py: `make bench`'s sweep-items row can be made again (issue 44, point 8)."""

from __future__ import annotations

import shutil

from benchmarks import sweep_items_size


def test_the_benchmark_builds_the_sweep_report_at_a_tiny_size(monkeypatch, capsys) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)  # no browser: the size and build time alone
    sweep_items_size.main(["12", "2"])
    line = capsys.readouterr().out
    assert "12 items x  2 jobs: report.html" in line and "no chromium" in line


def test_measure_reports_the_page_size_without_opening_a_browser() -> None:
    measured = sweep_items_size.measure(30, 3, browser=False)
    assert measured["items"] == 30 and measured["jobs"] == 3
    assert measured["bytes"] > 1000 and measured["open_s"] is None
