"""Each judgment of a run as an MLflow trace, the way ``mlflow.genai.evaluate`` leaves its rows.

A trace's request is the item's own fields (its id, variables and candidates, as evaluate's row ``inputs``, so
the UI pairs two runs' traces of an item), its response the judge's raw answer; spans for render, call (the
judge's messages and answer, its attempts as events) and parse; the verdict or scores as ``Feedback`` from the
judge model (an ``LLM_JUDGE`` source), and, as code scorers' ``Feedback`` (a ``CODE`` source), ``correct`` (the
verdict is the gold label) where gold exists and ``pass`` (the overall score reaches the rubric's threshold) where
a threshold does (:mod:`~runner.outputs.tracking.feedback`, which also gives the run their ``<name>/mean``
metrics, as evaluate logs them); the gold label / human score as ``Expectation``. Its ``mlflow.sourceRun``
metadata links it to the run (what ``search_traces(run_id=...)`` and the run's Evaluations tab read); the run gets
``mlflow.runType=genai_evaluate``.

Traces are written from the run directory (its journal and message store) once the run's files are complete,
never in the call path (:mod:`runner.outputs.publishing`). Their ids are derived from the MLflow run and the
judgment, and the ones the run already has are skipped, so publishing again adds no duplicate. A batch of traces
goes into a SQL store in one transaction (:mod:`~runner.outputs.tracking.trace_rows`, which says why it goes
below MLflow's public API), into any other store through MLflow's tracing client. mlflow is imported inside the
functions.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from runner.core.run_settings import TrackingConfig
from runner.outputs.tracking import connection
from runner.outputs.tracking.feedback import FeedbackMeans, code_feedback, code_rationale
from runner.outputs.tracking.trace_record import TraceRecord

log = logging.getLogger(__name__)

RUN_TYPE_TAG, EVALUATE_RUN_TYPE = "mlflow.runType", "genai_evaluate"  # mlflow.utils.mlflow_tags
SPAN_BATCH = 1000  # traces written in one transaction (a SQL store) or one log_spans call (another store)
PREVIEW_CHARS = 1000
KEY_PREFIX = "judgesweep."


def trace_id(run_id: str, record: TraceRecord) -> str:
    """A trace id fixed by the run and the judgment, so logging the same judgment twice is recognised."""
    return "tr-" + hashlib.sha256(f"{run_id}|{record.key}".encode()).hexdigest()[:32]


class TraceWriter:
    """Writes a run's judgments as traces into its experiment, linked to the run, a batch at a time (into a SQL
    store in bulk: :mod:`~runner.outputs.tracking.trace_rows`); the ones already there are skipped (see the module
    docstring).

    Args:
        cfg: Where MLflow records runs.
        run_id: The judge run.
        started_ns: Where the first trace's spans start.
    """

    def __init__(self, cfg: TrackingConfig, run_id: str, started_ns: int) -> None:
        from runner.outputs.tracking import trace_rows

        client = connection.client(cfg)
        self.run_id, self._started = run_id, started_ns
        self._experiment = client.get_run(run_id).info.experiment_id
        self._sink = trace_rows.sink(client, self._experiment)
        self._existing = self._sink.existing(run_id)
        if client.get_run(run_id).data.tags.get(RUN_TYPE_TAG) != EVALUATE_RUN_TYPE:
            client.set_tag(run_id, RUN_TYPE_TAG, EVALUATE_RUN_TYPE)
        self._batch: list[tuple[Any, list[Any]]] = []
        self._seen = 0  # records offered so far: the n-th starts n ms after started_ns
        self.written = 0  # traces written
        self.means = FeedbackMeans()  # over every judgment offered, the ones already in the store included

    def write(self, record: TraceRecord) -> None:
        """Queue one judgment's trace (info, assessments, spans); a full batch is written at once (:meth:`flush`)."""
        n, self._seen = self._seen, self._seen + 1
        self.means.add(record)
        tid = trace_id(self.run_id, record)
        if tid in self._existing:
            return
        self._existing.add(tid)  # a judgment offered twice is written once
        # 1 ms apart in the run's order (the calls have no wall-clock stamps of their own), each lasting its latency
        start = self._started + n * 1_000_000
        trace_spans, end = _spans(tid, record, start)
        self._batch.append((_trace_info(tid, self._experiment, self.run_id, record, start, end), trace_spans))
        if len(self._batch) >= SPAN_BATCH:
            self.flush()

    def flush(self) -> None:
        """Write the queued traces (one transaction on a SQL store)."""
        if self._batch:
            self._sink.write(self._batch)
            self.written += len(self._batch)
            self._batch = []


def log_traces(cfg: TrackingConfig, run_id: str, records: Iterable[TraceRecord], started_ns: int) -> int:
    """Write one trace per judgment into the run's experiment (a :class:`TraceWriter` over ``records``).

    Returns:
        How many traces were written.
    """
    writer = TraceWriter(cfg, run_id, started_ns)
    for record in records:
        writer.write(record)
    writer.flush()
    return writer.written


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _request(record: TraceRecord) -> dict[str, Any]:
    """The item's own fields, as evaluate's row ``inputs`` (the judge's messages are the call span's), after what
    tells the item's judgments apart (an ensemble's member, the order, a repeat after the first, a stage after the
    judge's): the UI pairs two runs' traces by their request and leaves a run's second trace of one request
    unpaired, so each judgment's request is its own and the same in every run that made that judgment."""
    request: dict[str, Any] = {"item_id": record.item_id}
    if record.member:
        request["judge"] = record.member
    if record.order:
        request["order"] = record.order
    if record.repeat:
        request["repeat"] = record.repeat
    if record.stage != "judge":
        request["stage"] = record.stage
    for key, value in (record.inputs or {}).items():
        request.setdefault(key, value)
    return request


def _span(tid: str, span_id: int, parent: int | None, name: str, span_type: str, start: int, end: int,
          inputs: Any, outputs: Any, ok: bool = True, attributes: Mapping[str, Any] | None = None,
          events: Sequence[dict[str, Any]] = ()) -> Any:
    from mlflow.entities import Span

    attrs = {"mlflow.traceRequestId": _json(tid), "mlflow.spanType": _json(span_type),
             "mlflow.spanInputs": _json(inputs), "mlflow.spanOutputs": _json(outputs),
             **{k: _json(v) for k, v in (attributes or {}).items()}}
    return Span.from_dict({
        "trace_id": tid, "span_id": f"{span_id:016x}", "parent_span_id": f"{parent:016x}" if parent else None,
        "name": name, "start_time_unix_nano": start, "end_time_unix_nano": end, "attributes": attrs,
        "status": {"code": "STATUS_CODE_OK" if ok else "STATUS_CODE_ERROR", "message": ""}, "events": list(events)})


def _spans(tid: str, record: TraceRecord, start: int) -> tuple[list[Any], int]:
    """(root, render, call, parse) spans laid out from ``start`` (the call lasts its latency); their end."""
    base = root_span_id(tid)
    call_ns = max(int(record.latency_s * 1e9), 1000)
    render_end, call_end = start + 1000, start + 1000 + call_ns
    end = call_end + 1000
    request, answer = _request(record), record.raw_response
    messages = list(map(dict, record.messages)) if record.messages is not None else None
    verdict = {"label": record.label, "winner": record.winner, "scores": record.scores, "score": record.score,
               "status": record.status, "parse_error": record.parse_error}
    attempts = [{"name": "attempt", "time_unix_nano": start + 1000, "attributes": {"attempt": n}}
                for n in range(1, max(record.attempts, 1) + 1)]
    usage = {"input_tokens": record.prompt_tokens, "output_tokens": record.completion_tokens,
             "total_tokens": record.prompt_tokens + record.completion_tokens}
    return [
        _span(tid, base, None, "judge", "EVALUATOR", start, end, request, answer, ok=record.error is None),
        # the messages are the call's input: the render span names them by hash, not a second copy
        _span(tid, base + 1, base, "render", "PARSER", start, render_end, {"item_id": record.item_id},
              {"messages_sha256": record.messages_sha256, "messages": len(record.messages or ())}),
        _span(tid, base + 2, base, "call", "CHAT_MODEL", render_end, call_end, messages, answer,
              ok=record.error is None, attributes={"attempts": record.attempts, "mlflow.chat.tokenUsage": usage,
                                                   "error": record.error}, events=attempts),
        _span(tid, base + 3, base, "parse", "PARSER", call_end, end, answer, verdict),
    ], end


def root_span_id(tid: str) -> int:
    """The root span's id (its children are the next three): fixed by the trace id, so the assessments can name
    it before the spans exist, as evaluate's do."""
    return int(tid[3:19], 16) & 0x7FFFFFFFFFFFFFF0 or 16


def _trace_info(tid: str, experiment: str, run_id: str, record: TraceRecord, start: int, end: int) -> Any:
    from mlflow.entities import TraceInfo, TraceLocation, TraceState

    request, response = _json(_request(record))[:PREVIEW_CHARS], _json(record.raw_response)[:PREVIEW_CHARS]
    # as mlflow.genai.evaluate's traces carry them: the run link, the row's inputs/outputs, the eval request id
    metadata = {"mlflow.sourceRun": run_id, "mlflow.trace_schema.version": "3", "mlflow.traceInputs": request,
                "mlflow.traceOutputs": response,
                f"{KEY_PREFIX}item_id": record.item_id, f"{KEY_PREFIX}repeat": str(record.repeat),
                f"{KEY_PREFIX}order": record.order or "", f"{KEY_PREFIX}stage": record.stage,
                "mlflow.trace.tokenUsage": _json({"input_tokens": record.prompt_tokens,
                                                  "output_tokens": record.completion_tokens,
                                                  "total_tokens": record.prompt_tokens + record.completion_tokens}),
                **({f"{KEY_PREFIX}judge": record.member} if record.member else {})}
    return TraceInfo(
        trace_id=tid, trace_location=TraceLocation.from_experiment_id(experiment), request_time=start // 1_000_000,
        state=TraceState.OK if record.error is None else TraceState.ERROR,
        request_preview=request, response_preview=response,
        execution_duration=max((end - start) // 1_000_000, 0), trace_metadata=metadata,
        tags={"mlflow.traceName": "judge", "mlflow.eval.requestId": tid.removeprefix("tr-")},
        assessments=_assessments(tid, run_id, record))


def _assessments(tid: str, run_id: str, record: TraceRecord) -> list[Any]:
    from mlflow.entities import AssessmentError, AssessmentSource, AssessmentSourceType, Expectation, Feedback

    judge = AssessmentSource(source_type=AssessmentSourceType.LLM_JUDGE, source_id=record.judge_model)
    meta = {"mlflow.assessment.sourceRunId": run_id}
    rationale, span = record.raw_response, f"{root_span_id(tid):016x}"
    out: list[Any] = []
    if record.scores:
        out += [Feedback(name=name, value=value, source=judge, rationale=rationale, trace_id=tid, metadata=meta,
                         span_id=span) for name, value in record.scores.items()]
    elif record.label is not None:
        out.append(Feedback(name="verdict", value=record.winner or record.label, source=judge, rationale=rationale,
                            trace_id=tid, metadata=meta, span_id=span))
    else:  # unscored or failed: a Feedback that says why, never a made-up value
        why = record.parse_error or record.error or record.status
        out.append(Feedback(name="verdict", error=AssessmentError(error_code=record.status.upper(),
                                                                  error_message=why),
                            source=judge, rationale=rationale, trace_id=tid, metadata=meta, span_id=span))
    # as evaluate records a code scorer's Feedback: a CODE source named by the scorer
    out += [Feedback(name=name, value=value, source=AssessmentSource(source_type=AssessmentSourceType.CODE,
                                                                     source_id=name),
                     rationale=code_rationale(name, record), trace_id=tid, metadata=meta, span_id=span)
            for name, value in code_feedback(record).items()]
    dataset = AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id="dataset")
    out += [Expectation(name=name, value=value, source=dataset, trace_id=tid, metadata=meta, span_id=span)
            for name, value in record.expectations.items() if value is not None]
    return out


def human_feedback(cfg: TrackingConfig, run_id: str) -> list[dict[str, Any]]:
    """Feedback a person added to the run's traces (an assessment whose source is HUMAN, not an expectation).

    Returns:
        One row per assessment: the judgment's ``item_id``, ``repeat``, ``order``, ``stage``, ``judge`` (an
        ensemble's member, else None), then ``name``,
        ``value``, ``rationale``, ``source_id``, ``trace_id``.
    """
    from mlflow.entities import AssessmentSourceType, Feedback
    from mlflow.tracing.client import TracingClient

    client = connection.client(cfg)
    experiment = client.get_run(run_id).info.experiment_id
    tracing = TracingClient(cfg.uri) if cfg.uri else TracingClient()
    rows, token = [], None
    while True:
        page = tracing.search_traces(locations=[experiment], run_id=run_id, max_results=500, page_token=token,
                                     include_spans=False)
        for trace in page:
            meta = trace.info.trace_metadata
            for a in trace.info.assessments:
                if isinstance(a, Feedback) and a.source.source_type == AssessmentSourceType.HUMAN:
                    rows.append({"item_id": meta.get(f"{KEY_PREFIX}item_id"),
                                 "repeat": int(meta.get(f"{KEY_PREFIX}repeat", 0)),
                                 "order": meta.get(f"{KEY_PREFIX}order") or None,
                                 "stage": meta.get(f"{KEY_PREFIX}stage"), "judge": meta.get(f"{KEY_PREFIX}judge"),
                                 "name": a.name, "value": a.value,
                                 "rationale": a.rationale, "source_id": a.source.source_id,
                                 "trace_id": trace.info.trace_id})
        token = page.token
        if not token:
            return rows
