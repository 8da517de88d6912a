"""A finished run's judgments as MLflow traces, its prompts in the registry and its dataset as a run input.

Started by :func:`runner.run.outcome.finish` once results.jsonl is written (every paid answer is on disk), on a
thread of its own while the summary and the report are built; joined before the MLflow run is closed. A failure
here is a warning: the run, its files and its metrics stand without traces. ``tracking.traces=false`` skips it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from runner.core.config import JudgeConfig
from runner.core.types import Judgment
from runner.inputs.datasets import resolve_path
from runner.outputs import tracking
from runner.run.context import Prepared, RunContext
from runner.storage.journal import judgment_record
from runner.storage.messages import MESSAGES_NAME, MessageStore

log = logging.getLogger(__name__)


def records(judgments: Iterable[Judgment], messages: MessageStore, labels: Mapping[str, dict], judge: JudgeConfig,
            members: Sequence[str] | None = None) -> Iterator[tracking.TraceRecord]:
    """One trace record per judgment (with its answer text), its messages read from the store; ``members`` (an
    ensemble run) names the member of each judgment, aligned with ``judgments``."""
    for n, j in enumerate(judgments):
        row = judgment_record(j)
        member = members[n] if members is not None else None
        yield tracking.TraceRecord(
            item_id=row["item_id"], repeat=row["repeat"], order=row["order"], stage=row["stage"],
            messages=messages.get(row["messages_sha256"]) if row["messages_sha256"] else None,
            messages_sha256=row["messages_sha256"],
            raw_response=row["raw_response"], status=row["status"], label=row["verdict_label"],
            winner=row["winner"], scores=row["scores"], score=row["score"], parse_error=row["parse_error"],
            latency_s=row["latency_s"] or 0.0, attempts=row["attempts"] or 1,
            prompt_tokens=row["prompt_tokens"] or 0, completion_tokens=row["completion_tokens"] or 0,
            error=row["error"], expectations=labels.get(row["item_id"], {}), member=member,
            judge_model=judge.members[member].model if member is not None else judge.model)


def _log(ctx: RunContext, prepared: Prepared, run_id: str, judgments: Iterable[Judgment],
         labels: Mapping[str, dict], members: Sequence[str] | None) -> None:
    cfg, plan = ctx.cfg, prepared.plan
    with MessageStore(ctx.run_dir / MESSAGES_NAME, read_only=True) as messages:
        started = time.time_ns()
        written = tracking.log_traces(cfg.tracking, run_id,
                                      records(judgments, messages, labels, cfg.judge, members), started)
    log.info("MLflow: %d traces logged to run %s in %.1f s", written, run_id, (time.time_ns() - started) / 1e9)
    tracking.register_prompt(cfg.tracking, run_id, cfg.prompt.name, plan.template.source, plan.template.sha256)
    if plan.synthesis_template is not None:  # the second round's template belongs to the same prompt option
        tracking.register_prompt(cfg.tracking, run_id, f"{cfg.prompt.name}.synthesis", plan.synthesis_template.source,
                                 plan.synthesis_template.sha256)
    tracking.log_dataset(cfg.tracking, run_id, cfg.dataset.name, str(resolve_path(cfg.dataset.path, ctx.project_root)),
                         [{"item_id": r.id, "gold": r.gold, "human_score": r.human_score} for r in prepared.refs])


class TraceLogging:
    """The background logging of one run (see the module docstring); :meth:`join` waits for it."""

    def __init__(self, ctx: RunContext, prepared: Prepared, run_id: str | None, judgments: Iterable[Judgment],
                 labels: Mapping[str, dict], members: Sequence[str] | None = None) -> None:
        self._thread: threading.Thread | None = None
        if run_id is None or not ctx.cfg.tracking.traces:
            return

        def work() -> None:
            try:
                _log(ctx, prepared, run_id, judgments, labels, members)
            except Exception as exc:  # noqa: BLE001 - traces are a view of what is already on disk: never fail the run for them
                log.warning("MLflow traces of run %s not logged (%s: %s); results.jsonl and %s hold every "
                            "judgment", run_id, type(exc).__name__, exc, Path(ctx.run_dir) / MESSAGES_NAME,
                            exc_info=log.isEnabledFor(logging.DEBUG))

        self._thread = threading.Thread(target=work, name="mlflow traces", daemon=True)
        self._thread.start()

    def join(self) -> None:
        """Wait for the traces (before the run is marked finished)."""
        if self._thread is not None:
            self._thread.join()
