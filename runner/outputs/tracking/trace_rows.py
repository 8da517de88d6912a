"""Traces written in bulk into a SQL tracking store (sqlite, PostgreSQL, MySQL): the rows MLflow's own
``start_trace`` + ``log_spans`` write, many traces to one transaction.

Why below MLflow's public API: MLflow 3.17 has no batch form of ``start_trace`` (nor of ``log_feedback`` /
``log_expectation``). Each ``start_trace`` is its own session, experiment lookup and flush: ~13 CPU-ms per trace on
a sqlite store, and ``log_spans`` ~4 ms more (measured with cProfile, README "Tracking"), which made a tracked
run 2.3x a run without tracking. Here a batch of traces is a handful of multi-row INSERTs through MLflow's own
ORM tables (``mlflow.store.tracking.dbmodels.models``) and its own helpers for what a row holds (the span JSON,
the assessment row, the promoted token columns, the trace's artifact location), in one transaction: a trace
and its spans and assessments land together or not at all. tests/integration/test_trace_rows.py writes the
same judgment through MLflow's own path and through this one and compares every row, so an MLflow upgrade
that changes what a trace is fails there, not in a user's store.

The bulk path is taken only for a ``SqlAlchemyStore`` without MLflow's opt-in SQL trace rollups (which keep
aggregates this path does not maintain); any other store (an ``mlflow server`` over HTTP) gets the public
client calls (:class:`ClientSink`). mlflow is imported inside the functions, as everywhere in this package.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

SPANS_LOGGED = "mlflow.trace.spansLocation"  # the trace tag log_spans sets
TRACKING_STORE = "TRACKING_STORE"  # the value of mlflow.trace.spansLocation once a trace's spans are stored


def sink(client: Any, experiment_id: str) -> Any:
    """The fastest way to write traces into this client's store: a :class:`SqlSink` or a :class:`ClientSink`."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.store.tracking.utils.sql_trace_rollups import rollups_enabled

    store = client._tracking_client.store  # the client's own store object (no public accessor in 3.17)
    if isinstance(store, SqlAlchemyStore) and not rollups_enabled():
        return SqlSink(store, experiment_id)
    return ClientSink(client.tracking_uri, experiment_id)


class ClientSink:
    """Traces through MLflow's tracing client: one ``start_trace`` per trace, the spans of a batch in one
    ``log_spans`` (any store, a server's included).

    ``mlflow.tracing.client.TracingClient`` is not MLflow's documented API, but MLflow 3.17 has no public call that
    logs a finished trace as it is: ``mlflow.log_trace`` makes one root span with a new random id and no
    assessments; ``MlflowClient.start_trace``/``start_span``/``end_trace`` record live spans (new ids, the clock's
    times, one export per trace); ``mlflow.log_feedback``/``log_expectation`` add one assessment per request;
    ``MlflowClient._log_trace`` is private and lets the backend choose the id. A judgment's trace needs its id
    fixed by the run and the judgment (so a republish adds no duplicate), its four spans, its times and its
    assessments in one write, which only ``TracingClient.start_trace(TraceInfo)`` (its assessments included) +
    ``log_spans`` give.
    """

    def __init__(self, uri: str, experiment_id: str) -> None:
        from mlflow.tracing.client import TracingClient

        self._tracing, self._experiment = TracingClient(uri), experiment_id

    def existing(self, run_id: str) -> set[str]:
        """The ids of the run's traces whose spans are in the store too (a trace without spans is written again:
        ``start_trace`` and ``log_spans`` are separate calls here)."""
        found, token = set(), None
        while True:
            page = self._tracing.search_traces(locations=[self._experiment], run_id=run_id, max_results=500,
                                               page_token=token, include_spans=False)
            found |= {t.info.trace_id for t in page if SPANS_LOGGED in t.info.tags}
            token = page.token
            if not token:
                return found

    def write(self, traces: Sequence[tuple[Any, list[Any]]]) -> None:
        """Write (TraceInfo, spans) pairs."""
        from mlflow.exceptions import MlflowException

        for info, _ in traces:
            try:
                self._tracing.start_trace(info)
            except MlflowException:  # its info is there already (an interrupted write): its spans follow
                pass
        spans = [s for _, trace_spans in traces for s in trace_spans]
        if spans:
            self._tracing.log_spans(self._experiment, spans)


class SqlSink:
    """Traces as rows of a SQL store's tables, a batch per transaction (see the module docstring)."""

    def __init__(self, store: Any, experiment_id: str) -> None:
        self._store = store
        self._experiment = store.get_experiment(experiment_id)
        self._experiment_id = int(experiment_id)

    def existing(self, run_id: str) -> set[str]:
        """The ids of the run's traces in the store (their spans came in the same transaction)."""
        from mlflow.store.tracking.dbmodels.models import SqlTraceMetadata

        with self._store.ManagedSessionMaker() as session:
            rows = session.query(SqlTraceMetadata.request_id).filter(
                SqlTraceMetadata.key == "mlflow.sourceRun", SqlTraceMetadata.value == run_id)
            return {request_id for (request_id,) in rows}

    def write(self, traces: Sequence[tuple[Any, list[Any]]]) -> None:
        """Write (TraceInfo, spans) pairs in one transaction."""
        from mlflow.store.tracking.dbmodels.models import (
            SqlAssessments,
            SqlSpan,
            SqlTraceInfo,
            SqlTraceMetadata,
            SqlTraceTag,
        )
        infos: list[dict] = []
        tags: list[dict] = []
        metadata: list[dict] = []
        assessments: list[dict] = []
        spans: list[dict] = []
        for info, trace_spans in traces:
            info_row, info_tags, info_metadata = self._info_rows(info)
            infos.append(info_row)
            tags += info_tags
            metadata += info_metadata
            assessments += [self._assessment_row(a, info) for a in info.assessments]
            spans += [self._span_row(s) for s in trace_spans]
        with self._store.ManagedSessionMaker(read_only=False) as session:
            for model, rows in ((SqlTraceInfo, infos), (SqlTraceTag, tags), (SqlTraceMetadata, metadata),
                                (SqlAssessments, assessments), (SqlSpan, spans)):
                # the table's own INSERT, an executemany per set of columns (the ORM's bulk insert goes row by row
                # here); a column a row leaves out gets its default, as the ORM's INSERT gives it
                by_columns: dict[tuple[str, ...], list[dict]] = {}
                for row in rows:
                    by_columns.setdefault(tuple(row), []).append(row)
                for same in by_columns.values():
                    session.execute(model.__table__.insert(), same)

    def _info_rows(self, info: Any) -> tuple[dict, list[dict], list[dict]]:
        """The trace_info row, its tags and its metadata, as ``start_trace`` and then ``log_spans`` leave them."""
        from mlflow.store.tracking.utils.trace_analytics import (
            PROMOTED_TRACE_METADATA_KEYS,
            analytics_columns_from_metadata,
        )
        from mlflow.tracing.constant import TraceMetadataKey, TraceTagKey

        tid = info.trace_id
        meta = dict(info.trace_metadata)
        row = {"request_id": tid, "experiment_id": self._experiment_id, "timestamp_ms": info.request_time,
               "execution_time_ms": info.execution_duration, "status": info.state.value,
               "client_request_id": info.client_request_id, "request_preview": info.request_preview,
               "response_preview": info.response_preview, "trace_name": info.tags.get(TraceTagKey.TRACE_NAME),
               "db_payload_generation": 1,  # its spans written once, as log_spans leaves it
               **analytics_columns_from_metadata(meta)}
        location = self._store._get_trace_artifact_location_tag(self._experiment, tid)
        tags = [{"request_id": tid, "key": k, "value": v} for k, v in info.tags.items() if k != TraceTagKey.TRACE_NAME]
        tags += [{"request_id": tid, "key": location.key, "value": location.value},
                 {"request_id": tid, "key": TraceTagKey.SPANS_LOCATION, "value": TRACKING_STORE}]
        for key in PROMOTED_TRACE_METADATA_KEYS:
            meta.pop(key, None)
        meta[TraceMetadataKey.TRACE_INFO_FINALIZED] = "true"
        return row, tags, [{"request_id": tid, "key": k, "value": v} for k, v in sorted(meta.items())]

    def _assessment_row(self, assessment: Any, info: Any) -> dict:
        from mlflow.store.tracking.dbmodels.models import SqlAssessments
        from sqlalchemy import inspect

        sql = SqlAssessments.from_mlflow_entity(assessment)
        sql.trace_id, sql.experiment_id, sql.trace_timestamp_ms = info.trace_id, self._experiment_id, info.request_time
        return {attr.columns[0].name: getattr(sql, attr.key) for attr in inspect(SqlAssessments).column_attrs
                if getattr(sql, attr.key) is not None}

    def _span_row(self, span: Any) -> dict:
        from mlflow.tracing.otel.translation import sanitize_attributes
        from mlflow.tracing.utils import TraceJSONEncoder

        # log_spans stores translate_span_when_storing(span): its attributes sanitized (a JSON text inside a JSON
        # string stored as the JSON itself), then other tracing schemas' attributes (OTel GenAI token usage, chat
        # messages, model) mapped onto MLflow's, which these spans, MLflow's own, have; that mapping costs a third
        # of a trace's time, so it is the sanitizing only (test_trace_rows compares the stored rows with
        # log_spans' and fails if that ever differs)
        stored = span.to_dict()
        stored["attributes"] = sanitize_attributes(stored.get("attributes", {}))
        content = json.dumps(stored, cls=TraceJSONEncoder, ensure_ascii=False)
        return {"trace_id": span.trace_id, "experiment_id": self._experiment_id, "span_id": span.span_id,
                "parent_span_id": span.parent_id, "name": span.name, "type": span.span_type,
                "status": span.status.status_code, "start_time_unix_nano": span.start_time_ns,
                "end_time_unix_nano": span.end_time_ns, "content": content}
