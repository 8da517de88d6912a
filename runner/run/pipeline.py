"""One judge run, end to end: validate, judge, aggregate, report, track.

Everything that can be checked without paying for a call is checked in :func:`prepare` first: names
are registered, parameters bind, templates exist and have their variables, the dataset parses, a
resumed run's config matches the one that was interrupted.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from runner.core import locations, metric_names
from runner.core.choices import PromptMode, StructuredOutput
from runner.core.config import JudgeConfig, RunConfig
from runner.core.errors import ConfigurationError, WriteFailed
from runner.core.judgments import Judgments
from runner.inputs.datasets import load_items, resolve_path
from runner.inputs.items import Shape
from runner.judging import batching, budget, stages
from runner.judging.calls import BudgetReached, RunAborted
from runner.judging.estimate import estimate_run
from runner.judging.generation import GENERATIONS_NAME, Generation
from runner.judging.judge import JudgePlan, planned_calls
from runner.judging.progress import Phases
from runner.judging.recorded_plan import check as check_recorded
from runner.judging.recorded_plan import resolved as resolved_judge
from runner.judging.shutdown import Interrupted
from runner.llm import recorded
from runner.llm.client import supports_json_schema
from runner.modes import catalog, ensemble_check, users_formats
from runner.outputs import console, tracking
from runner.run import gates, outcome, publication, view
from runner.run.context import Prepared, RunContext, RunOutcome, candidates, member_dirs
from runner.storage import budget_ledger, store

__all__ = ["execute", "prepare", "run"]

log = logging.getLogger(__name__)

# errors writing the run directory's files: not a bug in the summary but a disk (full, read-only, failing)
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})


def _json_schema_format(judge: JudgeConfig, schema: dict[str, Any] | None) -> dict[str, Any] | None:
    mode = judge.structured_output
    if schema is None or mode is StructuredOutput.off or judge.model == ensemble_check.ENSEMBLE_MODEL:
        return None
    if mode is StructuredOutput.json_object:  # chosen explicitly: sent whatever litellm knows of the model
        return {"type": "json_object"}
    if mode is StructuredOutput.auto and not supports_json_schema(judge.model):
        return None
    return {"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema, "strict": True}}


def _check_generator(cfg: RunConfig) -> None:
    if cfg.generator is not None and cfg.prompt.mode is PromptMode.pairwise:
        raise ConfigurationError(f"generator {cfg.generator.name}: a generation stage needs a pointwise prompt "
                                 f"(prompt {cfg.prompt.name} is pairwise)")
    if cfg.generator is not None and cfg.generator.concurrency < 1:
        raise ConfigurationError("generator.concurrency must be >= 1")


def prepare(ctx: RunContext) -> Prepared:
    """Validate the configuration and load the data; no network, no judge call.

    Raises:
        ConfigurationError (runner.core.errors.ParamsError among them), runner.inputs.datasets.DatasetError,
        runner.inputs.prompts.TemplateError, runner.core.registry.UnknownNameError,
        runner.judging.scoring.RubricError: with a message naming the file, line or key.
    """
    cfg = ctx.cfg
    if cfg.repeats < 1 or cfg.concurrency < 1:
        raise ConfigurationError("repeats and concurrency must be >= 1")
    if cfg.sample < 0:
        raise ConfigurationError(f"sample={cfg.sample}: must be >= 0 (0, 1, 2, ...: which independent repetition)")
    _check_generator(cfg)
    batching.check(cfg.judge)
    budget.check(cfg)
    users_formats.check(cfg.output.summary_keys, cfg.prompt.mode, cfg.rubric.pass_threshold)
    mode = catalog.mode_for(cfg)
    mode_setup = mode.prepare(cfg, locations.directories(cfg.prompts_dir, ctx.input_roots))
    response_format = _json_schema_format(cfg.judge, mode_setup.response_schema)
    member_formats = None
    if ensemble_check.is_ensemble(cfg):
        ensemble_check.check(cfg)
        member_formats = {name: _json_schema_format(m, mode_setup.response_schema)
                          for name, m in cfg.judge.members.items()}
        response_format = None
    shape = Shape(mode=cfg.prompt.mode, with_candidate=cfg.generator is None)
    loaded = load_items(cfg.dataset, resolve_path(cfg.dataset.path, ctx.input_roots), cfg.max_items,
                        on_bad_row=cfg.on_bad_row, shape=shape)
    for skipped in loaded.skipped:
        log.warning("skipped bad row %s: %s", skipped.where, skipped.reason)
    plan = JudgePlan(
        template=mode_setup.template, synthesis_template=mode_setup.synthesis_template, strategy=cfg.prompt.strategy,
        labels=tuple(cfg.rubric.labels), parser=cfg.rubric.parser,
        synthesis_parser=cfg.rubric.synthesis_parser or cfg.rubric.parser, order_policy=cfg.order,
        repeats=cfg.repeats, first_repeat=cfg.sample * cfg.repeats, seed=cfg.seed, concurrency=cfg.concurrency,
        neutralize=cfg.prompt.neutralize_delimiters, max_error_rate=cfg.max_error_rate,
        scoring=mode_setup.point.scoring if mode_setup.point else None, score_truncated=cfg.rubric.score_truncated,
    )
    check_recorded(cfg.judge, plan, (ref.id for ref in loaded.refs), ctx.input_roots)
    return Prepared(dataset=loaded, plan=plan, response_format=response_format, mode=mode, setup=mode_setup,
                    baseline=_baseline(ctx), member_formats=member_formats)


def _baseline(ctx: RunContext) -> gates.Baseline | None:
    """The baseline run's value of the gated metric, looked up before any call (gate.baseline_run)."""
    gate, cfg = ctx.cfg.gate, ctx.cfg
    if gate.baseline_run is None:
        return None
    if metric_names.renamed_to(gate.metric) is not None:
        raise ConfigurationError(f"gate.metric={gate.metric!r} was renamed to {metric_names.renamed_to(gate.metric)!r} "
                                 "(docs/outputs.md, renamed metrics); a baseline logged under the old name "
                                 "still counts")
    if not cfg.tracking.enabled:
        raise ConfigurationError("gate.baseline_run needs tracking (the baseline is an MLflow run); "
                                 "tracking is off")
    try:
        run_id, value = tracking.find_baseline(cfg.tracking, gate.baseline_run, ctx.tags[tracking.CONFIG_TAG],
                                                gate.metric)
    except LookupError as exc:
        raise ConfigurationError(f"gate.baseline_run={gate.baseline_run!r}: {exc}") from None
    return gates.Baseline(gate.baseline_run, run_id, value)


def _resume_state(ctx: RunContext) -> tuple[dict, store.Manifest | None]:
    """Answers already in the journal and the run's manifest; checks the run may be resumed."""
    journal = ctx.run_dir / store.JOURNAL_NAME
    members = member_dirs(ctx)
    manifest = store.read_manifest(ctx.run_dir)
    if not ctx.cfg.resume:
        if any(j.is_file() and j.stat().st_size > 0 for j in [journal, *(d / store.JOURNAL_NAME
                                                                         for d in members.values())]):
            raise ConfigurationError(f"{ctx.run_dir} already holds a journal; continue it with resume={ctx.run_dir}")
        return {}, manifest
    if manifest is None and ctx.tags.get(tracking.SWEEP_TAG):
        # a sweep resumed after a kill: this job never started (or was killed before writing its manifest, so
        # before any call); it starts now as the sweep's other jobs continue
        log.info("resuming the sweep: %s had not started, starting it", ctx.run_dir)
        return {}, None
    if manifest is None:
        raise ConfigurationError(f"resume={ctx.cfg.resume}: {ctx.run_dir} holds no run to continue "
                                 f"(no {store.MANIFEST_NAME})")
    if manifest.config_sha256 != ctx.identity_sha256:
        changed = sorted(k for k in set(manifest.config) | set(ctx.identity)
                         if manifest.config.get(k) != ctx.identity.get(k))
        raise ConfigurationError(f"resume={ctx.cfg.resume}: the config differs from the interrupted run's in "
                                 f"{changed}; resume with the same settings or start a new run")
    answers: Any  # a single judge's answers, or an ensemble's per member
    if members:
        answers = {name: stages.prior_answers(d, store.JOURNAL_NAME) for name, d in members.items()}
        count = sum(map(len, answers.values()))
    else:
        answers = stages.prior_answers(ctx.run_dir, store.JOURNAL_NAME)
        count = len(answers)
    log.info("resuming %s: %d answers already in the journal", ctx.run_dir, count)
    return answers, manifest


def _env(ctx: RunContext, answered: threading.Event) -> stages.StageEnv:
    cfg = ctx.cfg
    return stages.StageEnv(ctx.run_dir, ctx.project_root, cfg.cache, ctx.api_keys, cfg.seed, ctx.progress, answered,
                           cfg.shutdown_grace_s, cfg.batch)


def _generate(ctx: RunContext, prepared: Prepared, answered: threading.Event) -> dict[str, Generation]:
    cfg, gen = ctx.cfg, ctx.cfg.generator
    template = prepared.setup.generator_template
    assert gen is not None and template is not None  # prepare loaded it for the run's generator
    prior = stages.prior_answers(ctx.run_dir, GENERATIONS_NAME) if cfg.resume else {}
    return stages.generate(
        stages.Seat(gen, ctx.generator_limiter, prior=prior), template, prepared.dataset.iter_items(),
        _env(ctx, answered), concurrency=gen.concurrency, total=len(prepared.refs), max_error_rate=cfg.max_error_rate,
        neutralize=cfg.prompt.neutralize_delimiters)


def _judge_panel(ctx: RunContext, prepared: Prepared, prior: dict, total: int,
                 generations: dict[str, Generation] | None, answered: threading.Event,
                 limit: budget.Budget | None) -> dict[str, Judgments]:
    cfg = ctx.cfg
    formats = prepared.member_formats or {}
    seats = {name: stages.Seat(batching.for_member(cfg.judge, member), ctx.member_limiters.get(name),
                               formats.get(name), prior.get(name, {}),
                               limit.for_judge(member, f"member {name}'s next call") if limit is not None else None)
             for name, member in cfg.judge.members.items()}
    return stages.judge_panel(seats, member_dirs(ctx), prepared.plan, lambda: candidates(ctx, prepared, generations),
                              prepared.refs, _env(ctx, answered), total)


def _paid_stages(ctx: RunContext, prepared: Prepared, prior: dict, answered: threading.Event,
                 limit: budget.Budget | None) -> outcome.Judged:
    """Generation (optional) and judging; an ensemble's judgments also come back per member. ``answered`` is set at
    the first answer of a stage; ``limit`` admits the judge's calls (budget.max_usd)."""
    cfg = ctx.cfg
    generations = None
    try:
        generations = _generate(ctx, prepared, answered) if cfg.generator is not None else None
        total = planned_calls(cfg.order, cfg.repeats, len(prepared.refs), pointwise=not prepared.mode.ordered)
        if prepared.member_formats is not None:
            by_member = _judge_panel(ctx, prepared, prior, total, generations, answered, limit)
            return outcome.Judged(generations, Judgments(j for js in by_member.values() for j in js), by_member)
        seat = stages.Seat(resolved_judge(cfg.judge, ctx.input_roots), ctx.limiter, prepared.response_format, prior,
                           limit)
        judgments = stages.judge(seat, prepared.plan, lambda: candidates(ctx, prepared, generations), prepared.refs,
                                 _env(ctx, answered), total)
    except RunAborted as exc:
        exc.generations = generations  # type: ignore[attr-defined]  # what the partial summary needs
        raise
    return outcome.Judged(generations, judgments)


def _write_manifest(ctx: RunContext, manifest: store.Manifest | None) -> None:
    """The run's manifest: its identity (what a resume must match) and its uid (kept from an earlier manifest)."""
    uid = manifest.run_uid if manifest is not None and manifest.run_uid else uuid.uuid4().hex
    mlflow_run_id = manifest.mlflow_run_id if manifest is not None else None
    store.write_manifest(ctx.run_dir, store.Manifest(ctx.identity_sha256, dict(ctx.identity), mlflow_run_id, uid))


def execute(ctx: RunContext, prepared: Prepared) -> RunOutcome:
    """Generate (optional), judge every item, write the run directory, publish it to MLflow, print the summary.

    With tracking on, the publishing process (runner.outputs.publisher), started with the job (run_job), follows
    the run once the first answer is in: importing mlflow, opening the store and writing the traces of the answers
    so far cost the run no time after its last answer; it is handed the run directory once every file is written.
    The manifest is written before any call; an aborted run writes what completed (marked partial) and publishes
    that, failed.
    """
    cfg = ctx.cfg
    started, started_ns = time.monotonic(), time.time_ns()
    ctx.run_dir.mkdir(parents=True, exist_ok=True)
    prior, manifest = _resume_state(ctx)
    _write_manifest(ctx, manifest)
    answered, helper = threading.Event(), None
    limit = None
    if cfg.budget.max_usd is not None:
        sweep_dir = ctx.tags.get("judgesweep.sweep")  # a sweep's jobs share its limit
        ledger = budget_ledger.Ledger(Path(sweep_dir), str(ctx.run_dir)) if sweep_dir else None
        # an ensemble's members are admitted each at its own worst case (budget.Budget.for_judge)
        single = None if cfg.judge.members else budget.worst_case(resolved_judge(cfg.judge, ctx.input_roots))
        limit = budget.Budget(cfg.budget.max_usd, single, ledger)
    if cfg.tracking.enabled and not ctx.publish_here:  # traces written as the answers come: view.json first
        view.write(ctx, prepared, False, "", started_ns)
        helper = publication.Helper(ctx, answered)
    try:
        try:
            judged = _paid_stages(ctx, prepared, prior, answered, limit)
        except RunAborted as exc:
            over = isinstance(exc, BudgetReached) and limit is not None
            with publication.signals_raise(ctx):
                judged_part = outcome.completed_part(exc, getattr(exc, "generations", None),
                                                     len(cfg.judge.members or {}))
                if judged_part is not None and outcome.finish_partial(ctx, prepared, judged_part, started,
                                                                      started_ns, str(exc),
                                                                      "budget.max_usd" if over else "max_error_rate"):
                    publication.publish_run(ctx, helper)
            if over:
                assert limit is not None and isinstance(exc, BudgetReached)
                raise BudgetReached(limit.spent, limit.limit, exc.worst, str(ctx.run_dir), exc.what) from None
            raise RunAborted(f"{exc}. The journal keeps every answer so far: fix the cause and continue with "
                             f"resume={ctx.run_dir}") from None
        except Interrupted as exc:
            raise Interrupted(exc.signum, resume=str(ctx.run_dir)) from None
        del prior  # a resumed run's journal answers (~600 bytes each): the judgments hold what the summary needs
        with Phases(ctx.progress) as steps, publication.signals_raise(ctx, steps):
            try:
                result = outcome.finish(ctx, prepared, judged, started, started_ns, steps=steps)
            except WriteFailed:  # disk full: said in one line (runner.app.cli); the journal keeps every answer
                raise
            except Exception as exc:  # a bug after the paid stages: every answer is kept, and the run says it failed
                if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:  # a report file on a full disk, say
                    raise WriteFailed(exc.filename or ctx.run_dir, exc) from None
                log.error("the run's answers are all in %s; summarizing them failed. Once the cause is fixed, "
                          "resume=%s rebuilds the summary without calling the judge", ctx.run_dir / store.JOURNAL_NAME,
                          ctx.run_dir)
                raise
            published = publication.publish_run(ctx, helper, result, steps)
            assert published is not None
            return published
    finally:
        if helper is not None:
            with publication.signals_raise(ctx):  # the run's last step: a signal still says the resume command
                helper.close()


def _warn_identical_repeats(cfg: RunConfig) -> None:
    """Say once, before any call, that repeats at temperature 0 may be one vote counted k times (not of a recorded
    judge: its file holds each repeat's own answer, whatever temperature it was recorded at)."""
    judges = list(cfg.judge.members.values()) or [cfg.judge]
    if cfg.repeats > 1 and any(j.temperature == 0 and not recorded.is_recorded(j.model) for j in judges):
        log.warning("repeats=%d at temperature 0: a deterministic judge may give the same vote every time; for "
                    "independent samples set judge.temperature > 0 and/or judge.seed (repeat r is sent seed + r)",
                    cfg.repeats)


def run(ctx: RunContext) -> RunOutcome | None:
    """Prepare (validate) then execute one run; with dry_run, print the estimate and call nothing."""
    prepared = prepare(ctx)
    if ctx.cfg.dry_run:  # an ensemble's members each at their own price
        members = [dataclasses.replace(m, name=f"member {name}") for name, m in ctx.cfg.judge.members.items()]
        for n, judge in enumerate(members or [ctx.cfg.judge]):
            for estimate in estimate_run(judge, prepared.plan, prepared.dataset.iter_items(),
                                         ctx.cfg.generator if n == 0 else None, prepared.setup.generator_template):
                console.render_estimate(estimate)
        return None
    _warn_identical_repeats(ctx.cfg)
    how = f"order={ctx.cfg.order.value}" if prepared.mode.ordered else prepared.mode.name
    log.info("judging %d items x %d repeat(s), %s, with %s", len(prepared.refs), ctx.cfg.repeats, how,
             ctx.cfg.judge.model)
    return execute(ctx, prepared)
