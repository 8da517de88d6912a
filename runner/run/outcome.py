"""The end of a run, once the judges have answered: the run mode builds its typed report (pairwise, pointwise or an
ensemble's), the run's end adds its calls, skipped rows, gates and partial mark to it (runner.modes.sections.RunEnd),
and runner.outputs.run_files writes the run directory from it (results.jsonl, summary.json, metrics.json,
report.html, view.json last) and prints the console summary, as ``judgesweep aggregate`` does. Nothing here makes a
call or writes to MLflow: the run directory, complete, is then published (runner.outputs.publishing)."""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from runner.core.config import RunConfig
from runner.core.judgments import Judgments
from runner.core.types import Judgment, Status
from runner.judging.calls import CallCounts, RunAborted
from runner.judging.estimate import run_list_cost
from runner.judging.generation import Generation, generation_metrics
from runner.judging.progress import Phases
from runner.modes import drilldown
from runner.modes import summary as summaries
from runner.modes.base import ModeInputs, Report, RunMode
from runner.modes.record import Record
from runner.modes.sections import RunEnd
from runner.outputs import html_report, publisher, publishing, run_files
from runner.run import gates, view
from runner.run.context import Prepared, RunContext, RunOutcome, candidates, member_dirs
from runner.storage import journal, store
from runner.storage.batch_log import BatchLog
from runner.storage.messages import MESSAGES_NAME, MessageStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Judged:
    """What the paid stages returned."""

    generations: dict[str, Generation] | None  # item id -> generated output (runs with a generator)
    judgments: Sequence[Judgment]  # every judge call, an ensemble's members' included (a core.judgments.Judgments)
    by_member: Mapping[str, Sequence[Judgment]] | None = None  # an ensemble's judgments per member
    # an aborted stage's count of every call it finished, also those of the units it left unfinished (None: every
    # call's judgment is in ``judgments``)
    calls: CallCounts | None = None


def finish(ctx: RunContext, prepared: Prepared, judged: Judged, started: float, started_ns: int = 0,
           partial: str | None = None, steps: Phases | None = None) -> RunOutcome:
    """Build the typed report, check the gates, write the run directory (view.json last) and its report, and
    print the summary (runner.outputs.run_files).

    Args:
        ctx: The run's context.
        prepared: Its validated inputs.
        judged: What the judges answered.
        started: ``time.monotonic()`` when the run started (for ``run/wall_s``).
        started_ns: ``time.time_ns()`` when the run started (where its traces' spans start).
        partial: Why the run stopped before judging every item (an aborted run's summary of what completed:
            marked ``"partial": true`` with this reason, and failed), or None.
        steps: Shows which file is being written (default: nothing shown).
    """
    cfg, judgments = ctx.cfg, judged.judgments
    judges = [name for name, js in judged.by_member.items() for _ in js] if judged.by_member is not None else None
    (steps or Phases()).now("summarizing")
    try:
        report, metrics, judge_stats = _report(ctx, prepared, judged, partial)
    except BaseException:  # a bug in a statistic still leaves every answer in results.jsonl (resume rebuilds the rest)
        run_files.write_results(ctx.run_dir, _with_texts(ctx, judged), run_files.item_labels(prepared.refs), judges)
        raise
    typed = report.typed
    failed, reason = _judge_failure(cfg, judgments)
    if not failed:
        failed, reason = _unscored_failure(cfg, prepared.mode, typed)
    crossed = [g.message for g in report.gates if not g.passed]
    if crossed and not failed:
        failed, reason = True, "; ".join(crossed)
    if partial is not None:
        failed, reason = True, partial
    members = {name: functools.partial(journal.with_texts, js, member_dirs(ctx)[name] / store.JOURNAL_NAME)
               for name, js in (judged.by_member or {}).items()}
    written = run_files.write(run_files.RunFiles(
        run_dir=ctx.run_dir, title=ctx.run_name, mode=prepared.mode, report=report, metrics=metrics,
        judge_stats=judge_stats, judgments=lambda: _with_texts(ctx, judged), refs=prepared.refs,
        summary_keys=cfg.output.summary_keys, view=view.of(ctx, prepared, failed, reason, started_ns or time.time_ns()),
        judges=judges, members=members, started=started,
        drilldown=lambda: _drilldown(ctx, prepared, judged, typed, judges), header=report_header(ctx),
        plots=cfg.output.plots), steps)
    return RunOutcome(ctx.run_dir / store.SUMMARY_NAME, report.gold, judge_stats, failed, reason,
                      metrics=written.metrics)


def _report(ctx: RunContext, prepared: Prepared, judged: Judged, partial: str | None
            ) -> tuple[Report, dict[str, float], dict[str, Any]]:
    """The run's typed report, ended (its calls, skipped rows, gates, partial mark), its metrics and its calls'
    statistics."""
    cfg, judgments = ctx.cfg, judged.judgments
    inputs = ModeInputs(cfg=cfg, setup=prepared.setup, refs=prepared.refs, judgments=judgments,
                        by_member=judged.by_member, candidates=candidates(ctx, prepared, judged.generations),
                        not_generated=frozenset(k for k, g in (judged.generations or {}).items() if not g.ok))
    report = prepared.mode.build(inputs)
    metrics = dict(report.metrics)
    if judged.generations is not None:
        metrics.update(summaries.numeric(generation_metrics(list(judged.generations.values()))))
    judge_stats = summaries.judge_metrics(judgments)
    if judged.calls is not None:  # a partial run: the calls of the units it did not finish were made all the same
        judge_stats.update(judged.calls.metrics())
    batches = BatchLog(ctx.run_dir)
    if batches.path.is_file():  # judge.batch: the rows its batches left unanswered, sent again live
        judge_stats["calls/batch_resent"] = batches.resent()
    metrics.update(summaries.numeric(judge_stats))
    metrics.update(run_list_cost(cfg.judge, judgments, judged.by_member))
    metrics["items/skipped_rows"] = float(len(prepared.dataset.skipped))
    point = prepared.point
    gate_results = gates.of_report(cfg.gate, prepared.mode, report.typed, metrics, prepared.baseline,
                                   point.enforced if point is not None else frozenset())
    if gate_results:
        metrics["gate/passed"] = float(all(g.passed for g in gate_results))
    cached = cached_answers(cfg, judge_stats)
    report = report.ended(RunEnd(
        skipped_rows=tuple(f"{s.where}: {s.reason}" for s in prepared.dataset.skipped),
        failed_calls=judge_stats["calls/failed"], retries=judge_stats["calls/retries"],
        batch_resent=judge_stats.get("calls/batch_resent"), answers_from_cache=cached,
        gates=tuple(gate_results), partial_reason=partial))
    return report, metrics, judge_stats


def cached_answers(cfg: RunConfig, judge_stats: Mapping[str, Any]) -> int | None:
    """How many judge answers the response cache served (None: none), said loudly on the console: they are earlier
    runs' answers to the same requests, so a run meant as an independent repetition is a copy (issue 44)."""
    hits = int(judge_stats.get("calls/cache_hits") or 0)
    if not hits:
        return None
    log.warning("%d of %d judge answers came from the response cache (%s): earlier runs' answers to the same "
                "requests, so this run (sample=%d) repeats them and is no independent sample of the judge; for an "
                "independent repetition run with sample=%d (or another unused sample), or cache.mode=off",
                hits, judge_stats["judge/calls"], cfg.cache.path, cfg.sample, cfg.sample + 1)
    return hits


def completed_part(exc: RunAborted, generations: dict[str, Generation] | None, members: int) -> Judged | None:
    """What an aborted judge stage completed, for the partial summary: a single judge's judgments, or an ensemble's
    on the items every member finished (an item some member had not judged has no ensemble verdict yet); None
    when nothing was completed."""
    by_member = exc.completed_by_member
    if by_member:
        common = set.intersection(*({j.request.item_id for j in js} for js in by_member.values()))
        kept = {name: Judgments(j for j in js if j.request.item_id in common) for name, js in by_member.items()}
        if not common or len(kept) < members:  # a member with nothing completed: no item has every vote
            return None
        return Judged(generations, Judgments(j for js in kept.values() for j in js), kept, exc.calls)
    return Judged(generations, exc.completed, calls=exc.calls) if exc.completed else None


def finish_partial(ctx: RunContext, prepared: Prepared, judged: Judged, started: float, started_ns: int,
                   reason: str, by: str = "max_error_rate") -> bool:
    """An aborted run's summary.json, results.jsonl, report and view for the items it judged, marked partial with
    why it stopped (:func:`finish` with ``partial``); a failure here is logged, never raised over the abort, which is
    what the user must see (the journal keeps every answer). ``by`` names the limit that stopped it. Returns whether
    the files were written."""
    judged_ids = {j.request.item_id for j in judged.judgments}
    done = dataclasses.replace(prepared, dataset=prepared.dataset.only(judged_ids))
    why = f"stopped by {by} after {len(judged_ids)} of {len(prepared.refs)} items: {reason}"
    try:
        finish(ctx, done, judged, started, started_ns, partial=why)
    except Exception:  # noqa: BLE001 - see the docstring
        log.exception("the partial summary of the aborted run could not be written")
        return False
    return True


def _with_texts(ctx: RunContext, judged: Judged) -> Iterator[Judgment]:
    """Every judgment, in ``judged.judgments`` order, with the answer text the executor left in the journal."""
    if judged.by_member is None:
        yield from journal.with_texts(judged.judgments, ctx.run_dir / store.JOURNAL_NAME)
        return
    dirs = member_dirs(ctx)
    for name, judgments in judged.by_member.items():
        yield from journal.with_texts(judgments, dirs[name] / store.JOURNAL_NAME)


def _drilldown(ctx: RunContext, prepared: Prepared, judged: Judged, typed: Record, judges: list[str] | None
               ) -> drilldown.Drilldown:
    """The report's items: the mode's outcome of each, its answers (read back from the journal) and its inputs (the
    dataset read again, or the generated outputs), kept only for the items the report draws."""
    return drilldown.build(prepared.refs, prepared.mode.item_outcomes(typed, prepared.refs), judged.judgments,
                           lambda: _with_texts(ctx, judged), lambda: candidates(ctx, prepared, judged.generations),
                           judges, ordered=prepared.mode.ordered, messages=lambda hashes: _messages(ctx, hashes))


def _messages(ctx: RunContext, hashes: Sequence[str]) -> dict[str, list[dict[str, str]]]:
    """The rendered messages of ``hashes`` from the run's message store (none where it is missing)."""
    path = ctx.run_dir / MESSAGES_NAME
    if not path.is_file():
        return {}
    with MessageStore(path, read_only=True) as found:
        return found.get_many(hashes)


def report_header(ctx: RunContext) -> html_report.RunHeader:
    """What report.html says the run is: its judge, prompt, rubric and dataset, its date, where its MLflow run is, and
    the sweep's report for a sweep's job.

    The report is written before the run is published (it is one of the files MLflow gets), so the MLflow run's id
    may not exist yet: the report names the run by its ``judgesweep.run_uid`` tag (the manifest's, fixed before
    any call: publishing finds or makes the run by it) and links to ``mlflow.json``, which publishing writes into the
    run directory with the run's id in each store once it has published.
    """
    cfg = ctx.cfg
    facts: list[tuple[str, str | html_report.Link]] = [
        ("judge", cfg.judge.name), ("model", cfg.judge.model or "-"),
        ("prompt", f"{cfg.prompt.name} ({cfg.prompt.mode.value})"), ("rubric", cfg.rubric.name),
        ("dataset", cfg.dataset.name), ("date", datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))]
    manifest = store.read_manifest(ctx.run_dir)
    if cfg.tracking.enabled and manifest is not None and manifest.run_uid:
        where = f"{publisher.describe(cfg.tracking)}, tagged judgesweep.run_uid = {manifest.run_uid}"
        facts += [("MLflow run", where + (f", id {manifest.mlflow_run_id}" if manifest.mlflow_run_id else "")),
                  ("MLflow run id", html_report.Link(f"{publishing.PUBLISHED_NAME} (written once published)",
                                                     publishing.PUBLISHED_NAME))]
    if (ctx.run_dir.parent / "multirun.yaml").is_file():  # a sweep's job: its report is the sweep's, one level up
        facts.append(("sweep", html_report.Link("the sweep's report.html", f"../{html_report.REPORT_NAME}", back=True)))
    return html_report.RunHeader(tuple(facts), ("judge", "prompt", "rubric", "dataset", "date"))


def _judge_failure(cfg: RunConfig, judgments: Sequence[Judgment]) -> tuple[bool, str]:
    errors = [j for j in judgments if j.status is Status.ERROR]
    if not judgments:
        return True, "no judge call was made"
    rate = len(errors) / len(judgments)
    if rate > cfg.max_error_rate:
        first = errors[0].response
        return True, (f"{len(errors)} of {len(judgments)} judge calls failed ({rate:.1%} > max_error_rate "
                      f"{cfg.max_error_rate:.1%}); first: {first.error_type}: {first.error}")
    return False, ""


def _unscored_failure(cfg: RunConfig, mode: RunMode, typed: Record) -> tuple[bool, str]:
    """A pairwise run fails when more than ``max_unscored_rate`` of its items have no valid final verdict: an
    answer that cannot be read is not a vote, and a run of unreadable answers must not pass for a result."""
    counts = mode.without_verdict(typed)
    if counts is None or not counts[1]:
        return False, ""
    unscored, total = counts
    rate = unscored / total
    if rate > cfg.max_unscored_rate:
        return True, (f"{unscored} of {total} items have no valid verdict ({rate:.1%} > max_unscored_rate "
                      f"{cfg.max_unscored_rate:.1%})")
    return False, ""
