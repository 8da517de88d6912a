"""Unit tests for what runner.outputs.publishing reads from a run directory, no store: the journal's final line per
judgment (a retry replaces a failure, wherever it comes), the results table cut at TABLE_ROWS, and mlflow.json
saying which stores hold the run."""

from __future__ import annotations

import json
from pathlib import Path

from runner.core.run_settings import TrackingConfig
from runner.outputs import publishing


def _row(item: str, *, failed: bool = False) -> dict:
    return {"item_id": item, "repeat": 0, "order": "ab", "stage": "judge", "status": "failed" if failed else "scored",
            "error_type": "server_error" if failed else None}


def _write(path: Path, rows: list[dict], torn: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + torn, encoding="utf-8")
    return path


def test_a_retry_replaces_the_failed_line_and_an_unretried_failure_comes_last(tmp_path):
    journal = _write(tmp_path / "journal.jsonl", [_row("a", failed=True), _row("b", failed=True), _row("c"),
                                                  _row("a")], torn='{"item_id": "d", "rep')
    rows = list(publishing._final_rows(journal))
    assert [(r["item_id"], r["status"]) for r in rows] == [("c", "scored"), ("a", "scored"), ("b", "failed")]


def test_the_results_table_holds_the_first_rows_only(tmp_path, monkeypatch):
    monkeypatch.setattr(publishing, "TABLE_ROWS", 3)
    _write(tmp_path / "results.jsonl", [_row(f"q{n}") for n in range(10)])
    assert [r["item_id"] for r in publishing._table_rows(tmp_path)] == ["q0", "q1", "q2"]


def test_published_is_per_store(tmp_path):
    a, b = TrackingConfig(uri="sqlite:///a.db"), TrackingConfig(uri="sqlite:///b.db")
    assert not publishing.is_published(tmp_path, a)
    (tmp_path / "run.json").write_text(json.dumps({"config_sha256": "x", "config": {}}), encoding="utf-8")
    publishing._record(tmp_path, a, "run-a")
    assert publishing.is_published(tmp_path, a) and not publishing.is_published(tmp_path, b)
    assert json.loads((tmp_path / "run.json").read_text())["mlflow_run_id"] == "run-a"
