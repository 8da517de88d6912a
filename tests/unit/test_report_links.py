"""What the reports' links do (issue 44, point 8): a slot for the MLflow run's link that publishing fills, links that
say where they lead inside MLflow's sandboxed artifact viewer instead of going to about:blank#blocked, a job's way back
to the sweep view it was opened from, an item anchor clear of the sticky filter bar, and each item's own text in the
sweep view, searched. The HTML as written, parsed; tests/integration/test_report_browser.py clicks in chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path

from runner.core.run_settings import TrackingConfig
from runner.outputs import html_report, report_links, sweep_items, sweep_page
from runner.outputs.html_report import Link, Section
from runner.outputs.trace_inputs import cut

DATASET = Path(__file__).resolve().parents[2] / "runner" / "data" / "llmbar" / "natural.jsonl"


def page(tmp_path: Path, *sections: Section) -> Path:
    path = tmp_path / "report.html"
    html_report.write_page(path, "run", [Section("Items", notes=("x" * 100_000,)), *sections])  # a long page
    return path


def test_every_page_has_an_empty_mlflow_slot_and_the_script_that_keeps_its_links_in_a_sandbox(tmp_path):
    run = page(tmp_path).read_text(encoding="utf-8")
    sweep = sweep_page.sweep_report([{"job": 0, "status": "ok"}], None, "s")
    for html in (run, sweep):
        assert f"{report_links.START}{report_links.END}" in html
        assert "data-framed hidden" in html and "location.protocol" in html and "preventDefault" in html


def test_the_slot_takes_the_run_pages_address_over_http_without_credentials(tmp_path):
    path = page(tmp_path)
    before = path.read_bytes()
    cfg = TrackingConfig(enabled=True, uri="http://me:secret@127.0.0.1:5000/", experiment="judgesweep")
    assert report_links.fill(path, report_links.content(cfg, "3", "abc123"))
    after = path.read_text(encoding="utf-8")
    url = "http://127.0.0.1:5000/#/experiments/3/runs/abc123"
    assert f'<a href="{url}" target="_blank" rel="noopener" data-mlflow-run>{url}</a>' in after
    assert "secret" not in after and "me:" not in after
    assert after.replace(re.search(f"{report_links.START}.*?{report_links.END}", after).group(0),
                         report_links.START + report_links.END).encode() == before  # nothing else changed
    sqlite = TrackingConfig(enabled=True, uri="sqlite:///outputs/mlflow.db", experiment="judgesweep")
    assert report_links.fill(path, report_links.content(sqlite, "1", "abc123"))  # filled again: replaced, not added
    text = path.read_text(encoding="utf-8")
    assert text.count("abc123") == 2 and "data-mlflow-run" not in text
    assert ("`mlflow ui --backend-store-uri sqlite:///outputs/mlflow.db` serves it, then the run is at "
            "http://127.0.0.1:5000/#/experiments/1/runs/abc123") in text
    assert not report_links.fill(tmp_path / "absent.html", "x")
    assert report_links.page_url("file:///tmp/mlruns", "1", "r") is None


def test_a_jobs_link_back_to_the_sweep_is_marked_to_keep_the_sweep_views_state(tmp_path):
    html = page(tmp_path, Section("This run", columns=("what", "value"), rows=(
        ("sweep", Link("the sweep's report.html", "../report.html", back=True)),))).read_text(encoding="utf-8")
    assert '<a href="../report.html" data-back>' in html
    column = sweep_items.Column(0, "judge=x", "", {"a": ("ours", "ours", "c")})
    view = sweep_items.ItemView(("a",), {"a": ()}, (column,))
    sweep = sweep_page.sweep_report([{"job": 0, "status": "ok"}], None, "s", links={0: "0/report.html"}, items=view)
    assert "?back=" in sweep and "history.replaceState" in sweep  # the cell carries the view; the page keeps it


def test_an_opened_item_is_not_hidden_under_the_sticky_filter_bar():
    css = html_report.CSS
    assert re.search(r"\.filters\{[^}]*position:sticky", css)
    assert re.search(r"details\.item\{[^}]*scroll-margin-top:var\(--bar,\d", css)


def items_source() -> dict:
    """view.json's ``items`` of a run on the shipped LLMBar Natural file (runner.run.view.item_source)."""
    system = {"aliases": [], "family": None}
    return {"dataset": {"name": "llmbar_natural", "path": str(DATASET), "id_field": "id",
                        "variables": {"instruction": "input"},
                        "ours": {"name": "output_1", "field": "output_1", **system},
                        "baseline": {"name": "output_2", "field": "output_2", **system},
                        "gold_field": "label", "gold_map": {"1": "output_1", "2": "output_2"}},
            "path": str(DATASET), "mode": "pairwise", "with_candidate": True, "generated": None}


def test_the_sweep_view_shows_each_items_text_and_searches_it(tmp_path):
    rows = [json.loads(line) for line in DATASET.read_text(encoding="utf-8").splitlines()[:2]]
    ids = [r["id"] for r in rows]
    for n in (0, 1):
        d = tmp_path / str(n)
        d.mkdir()
        (d / "results.jsonl").write_text("".join(json.dumps({"item_id": i, "gold": "output_1"}) + "\n" for i in ids))
        (d / "view.json").write_text(json.dumps({"params": {"prompt.mode": "pairwise"},
                                                 **({"items": items_source()} if n == 1 else {})}))
    view = sweep_items.collect(tmp_path, [{"job": 0, "status": "ok"}, {"job": 1, "status": "ok"}])
    first = dict(view.texts[ids[0]])
    assert list(first) == ["instruction", "output_1", "output_2"]
    assert first["instruction"] == cut(rows[0]["input"], sweep_items.TEXT_CHARS) and first["instruction"]
    html = sweep_page.sweep_report([{"job": 0, "status": "ok"}, {"job": 1, "status": "ok"}], None, "s", items=view)
    blob = json.loads(re.search(r'<script type="application/json">(.*?)</script>', html, re.S).group(1))
    assert [[blob["s"][k] for k, _ in item] for item in blob["x"]] == [["instruction", "output_1", "output_2"]] * 2
    assert blob["x"][1][2][1] == cut(rows[1]["output_2"], sweep_items.TEXT_CHARS)
    assert 'placeholder="id, item text or verdict"' in html and "d.x[i].map" in html  # the search reads the texts
