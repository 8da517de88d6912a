"""The sweep table prints its rates as the run's headline does (issue 30): the unscored column is a count and a
percentage (``1 (3.3%)``, as ``judge calls 30: unscored 1 (3.3%)``), the pass rate a percentage; the CSV and JSON
keep the fractions."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from runner.outputs import sweep


def job(sweep_dir: Path, number: int, metrics: dict[str, float]) -> None:
    directory = sweep_dir / str(number)
    (directory / ".hydra").mkdir(parents=True)
    (directory / ".hydra" / "overrides.yaml").write_text(f"- judge=judge_{number}\n")
    (directory / "metrics.json").write_text(json.dumps(metrics))


def test_unscored_and_pass_rate_print_as_the_run_headline(tmp_path: Path) -> None:
    job(tmp_path, 0, {"judge/calls": 30.0, "judge/unscored": 1.0, "judge/parse_failure_rate": 1 / 30,
                      "pass/rate": 0.5, "score/mean": 3.25})
    job(tmp_path, 1, {"judge/calls": 30.0, "judge/unscored": 0.0, "judge/parse_failure_rate": 0.0,
                      "pass/rate": 0.8, "score/mean": 4.0})
    rows = sweep.collect(tmp_path)
    assert (rows[0]["unscored"], rows[0]["unscored n"], rows[0]["pass rate"]) == (1 / 30, 1.0, 0.5)  # files: as is
    screen = io.StringIO()
    sweep.render(rows, Console(file=screen, width=120, color_system=None))
    text = screen.getvalue()
    assert "1 (3.3%)" in text and "0 (0.0%)" in text and "50.0%" in text and "80.0%" in text
    assert "0.03333" not in text and "unscored n" not in text  # no raw fraction, the count is in its column


def test_a_run_reports_headline_prints_the_same_cells() -> None:
    from runner.outputs.html_report import _headline

    section = _headline({"judge/calls": 30.0, "judge/unscored": 1.0, "judge/parse_failure_rate": 1 / 30,
                         "pass/rate": 0.5})
    assert dict(section.rows) == {"unscored calls (share of calls)": "1 (3.3%)", "calls": "30", "pass rate": "50.0%"}


def test_the_headline_prints_one_number_once_with_readable_labels() -> None:
    """Issue 33.2: accuracy equal to agreement is one row; a count without its rate is still a count; no raw keys."""
    from runner.outputs.html_report import _headline

    rows = dict(_headline({"accuracy/mean": 0.8, "agreement/accuracy_all": 0.8, "judge/unscored": 2.0,
                           "items/total": 10.0, "cost/unknown_calls": 3.0}).rows)
    assert rows == {"agreement (= accuracy)": "0.8", "unscored calls (share of calls)": "2", "items": "10",
                    "calls litellm could not price": "3"}
    assert "accuracy" in dict(_headline({"accuracy/mean": 0.7, "agreement/accuracy_all": 0.8}).rows)
