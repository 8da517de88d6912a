"""A run's judgments as MLflow traces, its prompts in the registry and its dataset as a run input, written while
the judge calls go on.

:class:`TraceLogging` starts once the MLflow run exists (after the first answer) and follows the run's journals
(an ensemble's, one per member) in a process of its own: each journaled judgment becomes a trace within
``POLL_S`` of its line, so writing traces (~10 ms of MLflow ORM work each, on a sqlite store) overlaps the paid
calls instead of following them, and takes no interpreter time from the event loop. :meth:`TraceLogging.join`,
once the paid stages are over, lets it write the rest and waits for it, before the MLflow run is closed.

The journal is the record and the traces a view of it: a failure here is a warning (the run, its files and its
metrics stand), an interrupted writer leaves nothing a resume does not complete (trace ids are fixed by the run
and the judgment; the ones there are skipped), and a failed call's trace waits for the end of the run, since a
resume's retry of it supersedes it. ``tracking.traces=false`` skips all of it. Where a process cannot be started
(inside a daemonic worker process), the same loop runs on a thread.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.core.config import TrackingConfig
from runner.outputs import tracking
from runner.storage import store
from runner.storage.journal import JournalTail
from runner.storage.messages import MESSAGES_NAME, MessageStore

if TYPE_CHECKING:
    from runner.run.context import Prepared, RunContext

log = logging.getLogger(__name__)

POLL_S = 0.2  # how often the writer looks for new journal lines when it has caught up


@dataclass(frozen=True)
class Source:
    """One journal the writer follows, the message store its lines' hashes point into, and the judge that answered."""

    journal: Path
    messages: Path
    judge_model: str
    member: str | None = None  # an ensemble's member


@dataclass(frozen=True)
class TraceJob:
    """Everything the writer needs, picklable (it is sent to the writer's process)."""

    tracking: TrackingConfig
    run_id: str
    sources: tuple[Source, ...]
    labels: Mapping[str, dict]  # item id -> gold / human score
    prompts: tuple[tuple[str, str, str], ...]  # (registry name, template source, its sha256)
    dataset: tuple[str, str, list[dict]]  # (name, path, one row per item: id, gold, human score)


def record(source: Source, row: dict[str, Any], labels: Mapping[str, dict],
           messages: MessageStore) -> tracking.TraceRecord:
    """One journal line as a trace record, its messages read from the store."""
    sha = row["messages_sha256"]
    return tracking.TraceRecord(
        item_id=row["item_id"], repeat=row["repeat"], order=row["order"], stage=row["stage"],
        messages=messages.get(sha) if sha else None, messages_sha256=sha,
        raw_response=row["raw_response"], status=row["status"], label=row["verdict_label"],
        winner=row["winner"], scores=row["scores"], score=row["score"], parse_error=row["parse_error"],
        latency_s=row["latency_s"] or 0.0, attempts=row["attempts"] or 1,
        prompt_tokens=row["prompt_tokens"] or 0, completion_tokens=row["completion_tokens"] or 0,
        error=row["error"], expectations=labels.get(row["item_id"], {}), member=source.member,
        judge_model=source.judge_model)


def write_traces(job: TraceJob, finished: Callable[[], bool], poll_s: float = POLL_S) -> int:
    """Register the prompts, log the dataset, then write a trace per journal line until ``finished()`` and every
    line is written; returns how many traces were written.

    A failed call's line is held back to the end: a later line for the same judgment (a resumed run's retry)
    replaces it.
    """
    for name, template, sha in job.prompts:
        tracking.register_prompt(job.tracking, job.run_id, name, template, sha)
    tracking.log_dataset(job.tracking, job.run_id, *job.dataset)
    writer = tracking.TraceWriter(job.tracking, job.run_id, time.time_ns())
    stores = [MessageStore(s.messages, read_only=True) for s in job.sources]
    tails = [JournalTail(s.journal) for s in job.sources]
    held: dict[tuple, tuple[int, dict[str, Any]]] = {}  # failed calls, by judgment
    try:
        while True:
            last_pass = finished()  # read before the journals: every line written before it was set is seen now
            new = 0
            for k, (source, tail) in enumerate(zip(job.sources, tails, strict=True)):
                for row in tail.read():
                    new += 1
                    key = (k, row["item_id"], row["repeat"], row["order"], row["stage"])
                    if row.get("error_type"):
                        held[key] = (k, row)
                        continue
                    held.pop(key, None)
                    writer.write(record(source, row, job.labels, stores[k]))
            if last_pass and not new:
                break
            if not new:
                writer.flush()  # caught up: the spans so far, then wait for more lines
                time.sleep(poll_s)
        for k, row in held.values():
            writer.write(record(job.sources[k], row, job.labels, stores[k]))
        writer.flush()
    finally:
        for s in stores:
            s.close()
    return writer.written


def _child(job: TraceJob, done: Any, results: Any) -> None:
    """The writer process: its result (traces written, seconds) or its error goes back through ``results``."""
    started = time.monotonic()
    try:
        results.send(("ok", write_traces(job, done.is_set), time.monotonic() - started))
    except BaseException as exc:  # noqa: BLE001 - reported by the run as a warning, never a failed run
        results.send(("error", f"{type(exc).__name__}: {exc}", time.monotonic() - started))


def _job(ctx: RunContext, prepared: Prepared, run_id: str) -> TraceJob:
    from runner.inputs.datasets import resolve_path
    from runner.run.context import member_dirs

    cfg, plan = ctx.cfg, prepared.plan
    members, messages = member_dirs(ctx), ctx.run_dir / MESSAGES_NAME  # one store for an ensemble's members
    if members:
        sources = tuple(Source(d / store.JOURNAL_NAME, messages, cfg.judge.members[name].model, name)
                        for name, d in members.items())
    else:
        sources = (Source(ctx.run_dir / store.JOURNAL_NAME, messages, cfg.judge.model),)
    prompts = [(cfg.prompt.name, plan.template.source, plan.template.sha256)]
    if plan.synthesis_template is not None:  # the second round's template belongs to the same prompt option
        prompts.append((f"{cfg.prompt.name}.synthesis", plan.synthesis_template.source,
                        plan.synthesis_template.sha256))
    refs = prepared.refs
    return TraceJob(
        tracking=cfg.tracking, run_id=run_id, sources=sources,
        labels={r.id: {"gold": r.gold, "human_score": r.human_score} for r in refs
                if r.gold is not None or r.human_score is not None},
        prompts=tuple(prompts),
        dataset=(cfg.dataset.name, str(resolve_path(cfg.dataset.path, ctx.project_root)),
                 [{"item_id": r.id, "gold": r.gold, "human_score": r.human_score} for r in refs]))


class TraceLogging:
    """The trace writer of one run (see the module docstring): started by the constructor, :meth:`join` once the
    paid stages are over, :meth:`cancel` when the run stops without finishing."""

    def __init__(self, ctx: RunContext, prepared: Prepared, run_id: str | None) -> None:
        self.run_id = run_id
        self._process: Any = None
        self._thread: threading.Thread | None = None
        self._results: Any = None
        self._thread_result: tuple = ()
        self._done: Any = None  # a multiprocessing or a threading Event
        if run_id is None or not ctx.cfg.tracking.traces:
            return
        self._where = ctx.run_dir
        job = _job(ctx, prepared, run_id)
        if multiprocessing.current_process().daemon:  # a daemonic worker may not start processes
            self._start_thread(job)
            return
        spawn = multiprocessing.get_context("spawn")  # a fork would copy the parent's threads' locks
        self._done = spawn.Event()
        self._results, sender = spawn.Pipe(duplex=False)
        self._process = spawn.Process(target=_child, args=(job, self._done, sender), name="judgesweep traces",
                                      daemon=True)
        self._process.start()
        sender.close()

    def _start_thread(self, job: TraceJob) -> None:
        self._done = threading.Event()

        def work() -> None:
            started = time.monotonic()
            try:
                self._thread_result = ("ok", write_traces(job, self._done.is_set), time.monotonic() - started)
            except Exception as exc:  # noqa: BLE001 - reported by join as a warning
                self._thread_result = ("error", f"{type(exc).__name__}: {exc}", time.monotonic() - started)

        self._thread = threading.Thread(target=work, name="mlflow traces", daemon=True)
        self._thread.start()

    def join(self) -> None:
        """Let the writer write what is left, wait for it, and say how it went (before the run is marked finished)."""
        if self._process is None and self._thread is None:
            return
        self._done.set()
        if self._thread is not None:
            self._thread.join()
            result = self._thread_result
        else:
            try:
                result = self._results.recv()
            except EOFError:  # the process died without a word (killed, or out of memory)
                result = ("error", "the trace writer process ended without a result", 0.0)
            self._process.join()
        self._process = self._thread = None
        if result[0] == "ok":
            log.info("MLflow: %d traces logged to run %s (the writer ran %.1f s)", result[1], self.run_id, result[2])
        else:
            log.warning("MLflow traces of run %s not all logged (%s); results.jsonl and %s hold every judgment, "
                        "and resume=%s adds the missing traces", self.run_id, result[1],
                        self._where / MESSAGES_NAME, self._where)

    def cancel(self) -> None:
        """Stop the writer now (the run stops without finishing; a resume writes the traces it did not)."""
        if self._process is not None:
            self._process.terminate()
            self._process.join()
        elif self._thread is not None:
            self._done.set()
        self._process = self._thread = None
