"""output.plots (issue 32): a run without figures writes the same summary.json, results.jsonl and metrics.json as a
run with them and a report.html with every table, logs no figure to MLflow, and a resume may turn them on or off
(an operational setting, not the run's identity). Whether matplotlib is imported: tests/unit/test_startup.py."""

from __future__ import annotations

import json
import re

import pytest
from mlflow.tracking import MlflowClient

from runner.outputs.html_report import PLOTS_OFF

pytestmark = pytest.mark.plots  # these tests look at report.html's figures (each run sets output.plots itself)

IMG = re.compile(r'<img alt="[^"]*" src="data:image/png;base64,[A-Za-z0-9+/=]+">')
RUN = ("max_items=10", "cache.mode=off")  # replayed GPT-4 on LLMBar Natural, every call made by each run


def result_files(run_dir) -> dict:
    """summary.json, results.jsonl and metrics.json, without the moment the run ended and how long it and its calls
    took (run/wall_s, latency/...)."""
    summary = json.loads((run_dir / "summary.json").read_text())
    del summary["summary"]["evaluation_completed"]
    metrics = {k: v for k, v in json.loads((run_dir / "metrics.json").read_text()).items()
               if k != "run/wall_s" and not k.startswith("latency/")}
    return {"summary": summary, "results": (run_dir / "results.jsonl").read_text(), "metrics": metrics}


def logged_report(run) -> tuple[set[str], str]:
    """The run's MLflow artifacts and the report.html logged among them."""
    client = MlflowClient(tracking_uri=run.mlflow_uri)
    [run_id] = json.loads((run.run_dir / "mlflow.json").read_text()).values()
    path = client.download_artifacts(run_id, "report.html", str(run.run_dir.parent / f"logged-{run.run_dir.name}"))
    return {a.path for a in client.list_artifacts(run_id)}, open(path, encoding="utf-8").read()


def test_a_run_without_plots_writes_the_same_results_and_every_table_and_logs_no_figure(run_cli):
    drawn, off = run_cli(*RUN, "output.plots=true"), run_cli(*RUN, "output.plots=false")
    assert drawn.proc.returncode == 0 and off.proc.returncode == 0, drawn.output + off.output
    assert result_files(off.run_dir) == result_files(drawn.run_dir)
    page_drawn, page_off = ((r.run_dir / "report.html").read_text() for r in (drawn, off))
    figures = len(IMG.findall(page_drawn))
    assert figures == 2 and "data:image" not in page_off and page_off.count(PLOTS_OFF) == figures
    # the same headings and tables, in the same order (the drill-down's ids and the dates differ between two runs)
    assert re.findall(r"<h2>.*?</h2>|<th>.*?</th>", page_off) == re.findall(r"<h2>.*?</h2>|<th>.*?</th>", page_drawn)
    artifacts_drawn, logged_drawn = logged_report(drawn)
    artifacts_off, logged_off = logged_report(off)
    assert artifacts_off == artifacts_drawn and not any(a.endswith(".png") for a in artifacts_off)
    assert logged_off == page_off and len(IMG.findall(logged_drawn)) == figures


def test_a_resume_may_turn_the_plots_on(run_cli):
    first = run_cli(*RUN, "output.plots=false")
    assert first.proc.returncode == 0, first.output
    paid = (first.run_dir / "journal.jsonl").read_text()
    again = run_cli(*RUN, "output.plots=true", f"resume={first.run_dir}", run_dir=first.run_dir)
    assert again.proc.returncode == 0, again.output
    assert (first.run_dir / "journal.jsonl").read_text() == paid  # nothing paid twice
    page = (first.run_dir / "report.html").read_text()
    assert len(IMG.findall(page)) == 2 and PLOTS_OFF not in page
