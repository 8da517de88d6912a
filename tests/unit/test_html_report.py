"""Unit tests for runner.outputs.html_report: plots are PNGs, reports embed them, tables hold the data, labels
are escaped."""

from __future__ import annotations

import base64
import json
import re

import pytest

from runner.outputs import html_report
from runner.outputs.frontier import frontier
from runner.outputs.html_report import (
    bars_png,
    confusion_png,
    histogram_png,
    run_report,
    verdict_png,
    wilson,
    write_run_report,
)
from runner.outputs.sweep_page import sweep_report, write_sweep_report

PNG = b"\x89PNG\r\n\x1a\n"
HOSTILE = "<script>alert(1)</script>"


def images(html: str) -> list[bytes]:
    """The PNGs embedded in a page."""
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)]


def pairwise_summary() -> dict:
    ci = {"low": 0.336, "high": 0.515}
    return {"summary": {"total_subsets": 100, "final_verdict_distribution": {"output_1": 40, "output_2": 55, "tie": 5}},
            "trust": {"win_rate": {"rate": 0.425, "ci": ci},
                      "gold_agreement": {"confusion": {"labels": ["output_1", "output_2"],
                                                       "matrix": [[80, 4], [5, 111]]}}}}


def pointwise_summary() -> dict:
    detail = [{"status": "scored", "overall": 6.5 + i / 4} for i in range(8)]
    detail.append({"status": "unscored", "overall": None})
    section = {"average_overall": 7.1, "pass_rate": None, "scored": 4}
    return {"summary": {"scale": [0.0, 10.0], "average_by_criterion": {"naturalness": 7.0, "intent": 7.4}},
            "by_tag": {}, "by_category": {HOSTILE: section, "a $x^{$ b": {**section, "average_overall": None}},
            "detailed_results": detail,
            "gates": [{"name": "gate.min_mean_score", "passed": True, "message": "mean score 7.1 >= 6"}]}


def test_plots_are_png_bytes():
    assert verdict_png({"output_1": 3, "tie": 1}, 4, {"rate": 0.6, "ci": {"low": 0.2, "high": 0.9}}).startswith(PNG)
    assert verdict_png({"output_1": 0}, 0).startswith(PNG)
    assert confusion_png(["a", "b", "$x^{$"], [[1, 0, 0], [0, 2, 1], [0, 0, 0]]).startswith(PNG)
    assert histogram_png([1.0, 2.0, 2.5], [1, 5]).startswith(PNG)
    assert histogram_png([], None).startswith(PNG)
    assert bars_png({"x": 0.5, "y": None}, "rate", (0, 1)).startswith(PNG)


def test_wilson_interval_stays_in_range_and_is_centred_at_a_half():
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == pytest.approx(1.0)
    low, high = wilson(5, 10)
    assert low == pytest.approx(1 - high) and low == pytest.approx(0.2366, abs=1e-4)
    assert wilson(0, 0) == (0.0, 0.0)


def test_a_pairwise_report_embeds_the_verdict_and_confusion_plots_and_escapes_the_title():
    metrics = {"agreement/accuracy_all": 0.955, "cost/usd_total": 0.0, "items/total": 100.0, "judge/calls": 200.0}
    html = run_report(pairwise_summary(), metrics, f"run {HOSTILE}", "pairwise")
    assert len(images(html)) == 2 and all(png.startswith(PNG) for png in images(html))
    assert HOSTILE not in html and "run &lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<td>agreement</td><td>0.955</td>" in html and "<td>items/total</td><td>100</td>" in html
    assert "Agreement with gold labels" in html


def test_a_pairwise_report_without_gold_has_no_confusion_matrix():
    summary = pairwise_summary()
    del summary["trust"]["gold_agreement"]
    html = run_report(summary, {}, "t", "pairwise")
    assert len(images(html)) == 1 and "Agreement with gold labels" not in html


def test_a_pointwise_report_has_histogram_criteria_and_category_bars_and_gates():
    html = run_report(pointwise_summary(), {"score/mean": 7.1}, "t", "pointwise")
    assert len(images(html)) == 3  # scores, criteria, categories (no pass rates, no tags)
    assert "8 scored of 9 items" in html and "Mean score by category" in html
    assert "<td>gate.min_mean_score</td><td>PASS</td>" in html and HOSTILE not in html


def sweep_rows() -> list[dict]:
    return [{"job": 0, "judge": "replay_gpt4", "prompt": HOSTILE, "status": "ok", "agreement": 0.955,
             "agr low": 0.92, "agr high": 0.975, "list $": 0.0, "items": 100.0},
            {"job": 1, "judge": "replay_chatgpt", "prompt": HOSTILE, "status": "ok", "agreement": 0.8,
             "agr low": 0.75, "agr high": 0.85, "list $": 0.0, "items": 100.0, "unpriced calls": 200.0}]


def test_a_sweep_report_has_the_table_the_frontier_and_escapes_override_values():
    rows = sweep_rows()
    html = sweep_report(rows, frontier(rows), f"sweep {HOSTILE}")
    assert HOSTILE not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # a CI beside its value, in one cell, in both tables (not a column per bound)
    assert "<td>replay_chatgpt</td>" in html and "<td>0.955 [0.92, 0.975]</td>" in html
    assert "<th>agreement [95% CI]</th>" in html and "<th>agr low</th>" not in html
    assert len(images(html)) == 1 and images(html)[0].startswith(PNG)
    assert "<td>judge=replay_gpt4</td><td>0.955 [0.92, 0.975]</td><td>0</td><td>True</td>" in html
    assert "their cost is a lower bound" in html


def test_a_sweep_report_without_labels_says_there_is_no_frontier():
    rows = [{"job": 0, "judge": "a", "status": "ok", "mean score": 7.0}]
    html = sweep_report(rows, None, "s")
    assert images(html) == [] and "No job has &#39;agreement&#39;: no frontier." in html


def job(sweep_dir, num: int, judge: str, metrics: dict) -> None:
    path = sweep_dir / str(num) / ".hydra"
    path.mkdir(parents=True)
    (path / "overrides.yaml").write_text(f"- judge={judge}\n")
    (sweep_dir / str(num) / "metrics.json").write_text(json.dumps(metrics))


def test_the_sweep_files_are_written_with_a_frontier_only_when_there_are_labels(tmp_path):
    from runner.outputs import sweep

    labelled, unlabelled = tmp_path / "labelled", tmp_path / "unlabelled"
    for num, acc in enumerate((0.9, 0.8)):
        job(labelled, num, f"j{num}", {"agreement/accuracy_all": acc, "cost/usd_list": 0.0, "items/total": 10.0})
        job(unlabelled, num, f"j{num}", {"score/mean": acc, "cost/usd_total": 0.1, "items/total": 10.0})
    files = write_sweep_report(labelled, sweep.collect(labelled))
    assert [p.name for p in files] == ["frontier.csv", "frontier.png", "report.html"]
    assert "judge=j0,0.9," in (labelled / "frontier.csv").read_text()
    assert [p.name for p in write_sweep_report(unlabelled, sweep.collect(unlabelled))] == ["report.html"]


def test_a_report_that_cannot_be_written_is_a_warning_not_a_failed_run(tmp_path, caplog):
    assert write_run_report(tmp_path / "missing", pairwise_summary(), {}, "t", "pairwise") is None
    assert "report.html not written" in caplog.text
    path = write_run_report(tmp_path, pairwise_summary(), {}, "t", "pairwise")
    assert path == tmp_path / html_report.REPORT_NAME and path.read_text().startswith("<!doctype html>")


def test_verdict_bars_of_all_ties_draw_without_negative_error_bars() -> None:
    from runner.outputs.html_report import verdict_png

    png = verdict_png({"ours": 0, "baseline": 0, "tie": 7}, 7)
    assert png.startswith(b"\x89PNG")


def test_the_headline_and_all_metrics_show_a_ci_beside_its_value_not_on_rows_of_their_own():
    metrics = {"agreement/accuracy_all": 0.955, "agreement/accuracy_all_ci_low": 0.92,
               "agreement/accuracy_all_ci_high": 0.975, "verdict/win_rate": 0.425,
               "verdict/win_rate_ci_low": 0.3364, "verdict/win_rate_ci_high": 0.515}
    html = run_report(pairwise_summary(), metrics, "t", "pairwise")
    assert "<td>agreement</td><td>0.955 [0.92, 0.975]</td>" in html
    assert "<td>ties-half rate</td><td>0.425 [0.3364, 0.515]</td>" in html and "<td>win rate</td>" not in html
    assert "agr low" not in html and "accuracy_all_ci_low" not in html  # neither in the headline nor all metrics
    assert "<td>agreement/accuracy_all</td><td>0.955 [0.92, 0.975]</td>" in html


def test_wilson_intervals_come_from_statsmodels_with_the_hand_written_formula_s_figures():
    assert wilson(191, 200) == pytest.approx((0.9167032959981803, 0.976147456998507), abs=1e-12)
    assert wilson(5, 100) == pytest.approx((0.021544, 0.111750), abs=1e-6)


def test_the_sweep_report_links_each_job_to_its_report_and_says_once_what_every_job_shares(tmp_path):
    from runner.outputs import sweep

    for num, acc in enumerate((0.9, 0.8)):
        job(tmp_path, num, f"j{num}", {"agreement/accuracy_all": acc, "cost/usd_list": 0.0, "items/total": 10.0})
        (tmp_path / str(num) / ".hydra" / "overrides.yaml").write_text(f"- judge=j{num}\n- cache.path=/x/c.db\n")
    (tmp_path / "0" / "report.html").write_text("job 0")  # job 1 has none: its cell is no link
    write_sweep_report(tmp_path, sweep.collect(tmp_path))
    html = (tmp_path / "report.html").read_text()
    assert '<td><a href="0/report.html">0</a></td>' in html and '<a href="1/report.html">' not in html
    assert "The same in every job: cache.path=/x/c.db" in html and "<th>cache.path</th>" not in html


IMG = re.compile(r'<img alt="[^"]*" src="data:image/png;base64,[A-Za-z0-9+/=]+">')


@pytest.mark.parametrize(("summary", "mode", "figures"), [(pairwise_summary(), "pairwise", 2),
                                                         (pointwise_summary(), "pointwise", 3)])
def test_without_plots_a_report_is_the_same_page_with_one_line_where_each_figure_was(summary, mode, figures):
    metrics = {"agreement/accuracy_all": 0.955, "score/mean": 7.1}
    drawn = run_report(summary, metrics, "t", mode)
    off = run_report(summary, metrics, "t", mode, plots=False)
    assert len(images(drawn)) == figures and images(off) == [] and "data:image" not in off
    assert off.count(html_report.PLOTS_OFF) == figures and html_report.PLOTS_OFF not in drawn
    # every heading and table of the page, each figure's place taken by the line that says plots are off
    assert IMG.sub(f'\n<p class="note">{html_report.PLOTS_OFF}</p>', drawn) == off


def test_a_sweep_of_jobs_without_plots_writes_no_frontier_png_and_keeps_the_frontier_table(tmp_path):
    from runner.outputs import sweep

    for num, acc in enumerate((0.9, 0.8)):
        job(tmp_path, num, f"j{num}", {"agreement/accuracy_all": acc, "cost/usd_list": 0.0, "items/total": 10.0})
        (tmp_path / str(num) / ".hydra" / "config.yaml").write_text("seed: 0\noutput:\n  plots: false\n")
    files = write_sweep_report(tmp_path, sweep.collect(tmp_path))
    assert [p.name for p in files] == ["frontier.csv", "report.html"] and not (tmp_path / "frontier.png").exists()
    html = (tmp_path / "report.html").read_text()
    assert images(html) == [] and html.count(html_report.PLOTS_OFF) == 1 and "<td>judge=j0</td>" in html
    # one job that drew its figures: the sweep draws its frontier
    (tmp_path / "1" / ".hydra" / "config.yaml").write_text("output:\n  plots: true\n")
    files = write_sweep_report(tmp_path, sweep.collect(tmp_path))
    assert [p.name for p in files] == ["frontier.csv", "frontier.png", "report.html"]
    assert len(images((tmp_path / "report.html").read_text())) == 1
