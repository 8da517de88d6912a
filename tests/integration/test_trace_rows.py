"""The bulk trace writer (runner.outputs.tracking.trace_rows.SqlSink) goes below MLflow's public API for speed:
here the same judgments are written through MLflow's own ``start_trace`` + ``log_spans`` (ClientSink) into one
fresh sqlite store and through the bulk path into another, and every row of every trace table must match (ids
derived from the run, random assessment ids and creation stamps aside). An MLflow upgrade that changes what a
trace is fails here. Then the bulk-written traces are read back through MLflow's public search."""

from __future__ import annotations

import json
import shutil
import sqlite3

import mlflow
import pytest

from runner.core.run_settings import TrackingConfig
from runner.outputs import tracking
from runner.outputs.tracking import trace_rows
from runner.outputs.tracking.traces import TraceWriter

pytestmark = pytest.mark.integration

MESSAGES = [{"role": "system", "content": "Pick the better output."}, {"role": "user", "content": "Which? é ✓"}]
TABLES = ("trace_info", "trace_tags", "trace_request_metadata", "assessments", "spans")
VOLATILE = ("assessment_id", "created_timestamp", "last_updated_timestamp", "span_id", "parent_span_id")


def _records() -> list[tracking.TraceRecord]:
    return [
        tracking.TraceRecord(item_id="i1", repeat=0, order="ab", stage="judge", messages=MESSAGES,
                             messages_sha256="ab" * 32, raw_response="Output (a)", status="scored", label="A",
                             winner="ours", scores=None, score=None, parse_error=None, latency_s=0.5, attempts=2,
                             prompt_tokens=50, completion_tokens=3, expectations={"gold": "ours"},
                             judge_model="openai/gpt-4"),
        tracking.TraceRecord(item_id="i2", repeat=1, order="ba", stage="judge", messages=None, messages_sha256=None,
                             raw_response="no idea", status="unscored", label=None, winner=None, scores=None,
                             score=None, parse_error="no verdict label", expectations={}, judge_model="openai/gpt-4"),
        tracking.TraceRecord(item_id="i3", repeat=0, order=None, stage="judge", messages=MESSAGES,
                             messages_sha256="cd" * 32, raw_response='{"accuracy": 4, "format": 3}', status="scored",
                             label=None, winner=None, scores={"accuracy": 4.0, "format": 3.0}, score=3.5,
                             parse_error=None, expectations={"human_score": 4}, judge_model="openai/gpt-4",
                             member="gpt4"),
        tracking.TraceRecord(item_id="i4", repeat=0, order="ab", stage="judge", messages=MESSAGES,
                             messages_sha256="ef" * 32, raw_response=None, status="failed", label=None, winner=None,
                             scores=None, score=None, parse_error=None, error="HTTP 500", attempts=3,
                             judge_model="openai/gpt-4"),
    ]


def _write(path, bulk: bool, monkeypatch, empty) -> tuple[str, str]:
    shutil.copyfile(empty, path)
    cfg = TrackingConfig(uri=f"sqlite:///{path}")
    client = tracking._client(cfg)
    run_id = client.create_run(tracking._experiment_id(client, cfg)).info.run_id
    with monkeypatch.context() as patch:
        if not bulk:  # MLflow's own path: one start_trace per trace, their spans in one log_spans
            patch.setattr(trace_rows, "sink", lambda c, e: trace_rows.ClientSink(c.tracking_uri, e))
        writer = TraceWriter(cfg, run_id, 1_700_000_000_000_000_000)
        assert isinstance(writer._sink, trace_rows.SqlSink if bulk else trace_rows.ClientSink)
        for record in _records():
            writer.write(record)
        writer.flush()
    return cfg.uri, run_id


def _rows(path, run_id: str) -> dict[str, list[str]]:
    """Every row of the trace tables, the run id, trace ids and span ids replaced by what they stand for."""
    db = sqlite3.connect(path)
    items = dict(db.execute("SELECT request_id, value FROM trace_request_metadata WHERE key = 'judgesweep.item_id'"))

    def same(value: object) -> str:
        text = str(value).replace(run_id, "RUN")
        for tid, item in items.items():
            text = text.replace(tid, f"T{item}").replace(tid[3:], f"H{item}")
        return text

    out = {}
    for table in TABLES:
        cursor = db.execute(f"SELECT * FROM {table}")  # noqa: S608 - our own table names
        names = [c[0] for c in cursor.description]
        rows = []
        for values in cursor:
            row = {k: v for k, v in zip(names, values, strict=True) if k not in VOLATILE}
            if table == "trace_tags" and row["key"] == "mlflow.artifactLocation":
                row["value"] = row["value"].rsplit("/traces/", 1)[-1]
            if "content" in row:  # the span's own JSON: its ids are the trace's, in base64
                content = json.loads(row["content"])
                for key in ("trace_id", "span_id", "parent_span_id"):
                    content.pop(key)
                row["content"] = json.dumps(content, sort_keys=True)
            rows.append(repr(sorted((k, same(v)) for k, v in row.items())))
        out[table] = sorted(rows)
    return out


def test_bulk_rows_are_mlflows_own_rows(tmp_path, monkeypatch, empty_mlflow_store):
    _, official_run = _write(tmp_path / "official.db", False, monkeypatch, empty_mlflow_store())
    uri, bulk_run = _write(tmp_path / "bulk.db", True, monkeypatch, empty_mlflow_store())
    official, bulk = _rows(tmp_path / "official.db", official_run), _rows(tmp_path / "bulk.db", bulk_run)
    for table in TABLES:
        assert bulk[table] == official[table], table
    assert len(bulk["spans"]) == 16 and len(bulk["trace_info"]) == 4

    mlflow.set_tracking_uri(uri)
    experiment = mlflow.MlflowClient(uri).get_run(bulk_run).info.experiment_id
    traces = mlflow.search_traces(locations=[experiment], run_id=bulk_run, return_type="list")
    by_item = {t.info.trace_metadata["judgesweep.item_id"]: t for t in traces}
    assert sorted(by_item) == ["i1", "i2", "i3", "i4"]
    assert [s.name for s in by_item["i1"].data.spans] == ["judge", "render", "call", "parse"]
    assert {(a.name, a.value) for a in by_item["i3"].info.assessments} >= {("accuracy", 4.0), ("human_score", 4)}
    assert by_item["i2"].info.assessments[0].error.error_code == "UNSCORED"


def test_writing_again_adds_nothing(tmp_path, empty_mlflow_store):
    shutil.copyfile(empty_mlflow_store(), tmp_path / "mlflow.db")
    cfg = TrackingConfig(uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    client = tracking._client(cfg)
    run_id = client.create_run(tracking._experiment_id(client, cfg)).info.run_id
    assert tracking.log_traces(cfg, run_id, _records(), 0) == 4
    assert tracking.log_traces(cfg, run_id, [*_records(), *_records()], 0) == 0
    db = sqlite3.connect(tmp_path / "mlflow.db")
    assert db.execute("SELECT count(*) FROM trace_info").fetchone() == (4,)
