"""One judge run, end to end: validate, judge, aggregate, report, track.

Everything that can be checked without paying for a call is checked in :func:`prepare` first: names
are registered, parameters bind, templates exist and have their variables, the dataset parses, a
resumed run's config matches the one that was interrupted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner import aggregation, report, store, tracking
from runner.cache import ResponseCache
from runner.client import JudgeClient, litellm_version, supports_json_schema
from runner.config import CacheMode, OrderPolicy, PromptMode, RunConfig, Strategy, StructuredOutput
from runner.datasets import ItemRef, LoadedDataset, load_items, resolve_path
from runner.estimate import estimate_run
from runner.judge import (
    PAIRWISE_VARIABLES,
    SYNTHESIS_VARIABLES,
    Executor,
    JudgePlan,
    RunAborted,
    planned_calls,
)
from runner.pacing import RateLimiter
from runner.parsing import PARSERS, response_schema
from runner.progress import ProgressBar, Sinks
from runner.prompts import Template, check_variables, load_template
from runner.sources import AnswerSources
from runner.types import TIE, Judgment, Secret, Status

log = logging.getLogger(__name__)

POSITIONAL_LABELS = frozenset({"A", "B", TIE})


class ConfigurationError(ValueError):
    """The composed configuration cannot run; raised before any judge call."""


@dataclass(frozen=True)
class RunContext:
    """What the CLI hands down: the typed config plus facts about this job."""

    cfg: RunConfig
    run_dir: Path
    project_root: Path
    api_key: Secret | None
    run_name: str
    params: Mapping[str, Any] = field(default_factory=dict)  # flattened, secret-free, for MLflow
    tags: Mapping[str, str] = field(default_factory=dict)
    resolved_config_yaml: str = ""
    identity: Mapping[str, Any] = field(default_factory=dict)  # settings a resume must not change
    identity_sha256: str = ""
    limiter: RateLimiter | None = None  # the judge's, shared across the jobs of this process


@dataclass(frozen=True)
class Prepared:
    """A validated run, ready to judge."""

    dataset: LoadedDataset
    plan: JudgePlan
    response_format: dict[str, Any] | None

    @property
    def refs(self) -> tuple[ItemRef, ...]:
        """Id, gold and location of every item, in dataset order."""
        return self.dataset.refs


@dataclass(frozen=True)
class RunOutcome:
    """What the run produced, for the CLI's exit code and for tests."""

    summary: dict
    gold: dict | None
    judge: dict
    failed: bool
    reason: str = ""
    mlflow_run_id: str | None = None


def _check_rubric(cfg: RunConfig) -> None:
    bad = set(cfg.rubric.labels) - POSITIONAL_LABELS
    if bad or len(cfg.rubric.labels) < 2:
        raise ConfigurationError(f"rubric {cfg.rubric.name}: labels must be two or more of A, B, tie; got "
                                 f"{list(cfg.rubric.labels)}")
    for parser in (cfg.rubric.parser, cfg.rubric.synthesis_parser):
        if parser is not None:
            PARSERS.check_params(parser.name, dict(parser.params), fixed=2)
    aggregation.AGGREGATIONS.check_params(cfg.aggregation.name, dict(cfg.aggregation.params), fixed=2)


def _load_templates(cfg: RunConfig, root: Path) -> tuple[Template, Template | None]:
    prompts_dir = resolve_path(cfg.prompts_dir, root)
    provided = set(cfg.dataset.variables)
    where = f"dataset {cfg.dataset.name} (variables: {sorted(cfg.dataset.variables)}) plus the runner"
    template = load_template(prompts_dir, cfg.prompt.template)
    check_variables(template, provided | PAIRWISE_VARIABLES, where)
    synthesis = None
    if cfg.prompt.strategy is Strategy.swap_synthesize:
        if cfg.prompt.synthesis_template is None:
            raise ConfigurationError(f"prompt {cfg.prompt.name}: strategy swap_synthesize needs synthesis_template")
        if cfg.order is not OrderPolicy.both:
            raise ConfigurationError(f"prompt {cfg.prompt.name}: swap_synthesize judges both orders; "
                                     f"set order=both (got order={cfg.order.value})")
        synthesis = load_template(prompts_dir, cfg.prompt.synthesis_template)
        check_variables(synthesis, provided | SYNTHESIS_VARIABLES, where)
    return template, synthesis


def _response_format(cfg: RunConfig) -> dict[str, Any] | None:
    """JSON-schema response_format from the rubric, when the parser reads JSON and the judge takes it."""
    parser = cfg.rubric.parser
    schema = response_schema(parser.name, cfg.rubric.labels, parser.params)
    mode = cfg.judge.structured_output
    if schema is None or mode is StructuredOutput.off:
        return None
    if mode is StructuredOutput.auto and not supports_json_schema(cfg.judge.model):
        return None
    return {"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema, "strict": True}}


def prepare(ctx: RunContext) -> Prepared:
    """Validate the configuration and load the data; no network, no judge call.

    Raises:
        ConfigurationError, runner.datasets.DatasetError, runner.prompts.TemplateError,
        runner.registry.UnknownNameError, TypeError: with a message naming the file, line or key.
    """
    cfg = ctx.cfg
    if cfg.prompt.mode is not PromptMode.pairwise:
        raise ConfigurationError(f"prompt {cfg.prompt.name}: mode {cfg.prompt.mode.value} is not supported "
                                 "by this runner yet; only pairwise")
    if cfg.repeats < 1 or cfg.concurrency < 1:
        raise ConfigurationError("repeats and concurrency must be >= 1")
    _check_rubric(cfg)
    template, synthesis = _load_templates(cfg, ctx.project_root)
    loaded = load_items(cfg.dataset, resolve_path(cfg.dataset.path, ctx.project_root), cfg.max_items,
                        on_bad_row=cfg.on_bad_row)
    for skipped in loaded.skipped:
        log.warning("skipped bad row %s: %s", skipped.where, skipped.reason)
    plan = JudgePlan(
        template=template, synthesis_template=synthesis, strategy=cfg.prompt.strategy,
        labels=tuple(cfg.rubric.labels), parser=cfg.rubric.parser,
        synthesis_parser=cfg.rubric.synthesis_parser or cfg.rubric.parser, order_policy=cfg.order,
        repeats=cfg.repeats, seed=cfg.seed, concurrency=cfg.concurrency,
        neutralize=cfg.prompt.neutralize_delimiters, max_error_rate=cfg.max_error_rate,
    )
    return Prepared(dataset=loaded, plan=plan, response_format=_response_format(cfg))


def _resume_state(ctx: RunContext) -> tuple[dict, str | None]:
    """Answers already in the journal and the MLflow run to continue; checks the run may be resumed."""
    journal = ctx.run_dir / store.JOURNAL_NAME
    manifest = store.read_manifest(ctx.run_dir)
    if not ctx.cfg.resume:
        if journal.is_file() and journal.stat().st_size > 0:
            raise ConfigurationError(f"{ctx.run_dir} already holds a journal; continue it with resume={ctx.run_dir}")
        return {}, None
    if manifest is None:
        raise ConfigurationError(f"resume={ctx.cfg.resume}: {ctx.run_dir} holds no run to continue "
                                 f"(no {store.MANIFEST_NAME})")
    if manifest.config_sha256 != ctx.identity_sha256:
        changed = sorted(k for k in set(manifest.config) | set(ctx.identity)
                         if manifest.config.get(k) != ctx.identity.get(k))
        raise ConfigurationError(f"resume={ctx.cfg.resume}: the config differs from the interrupted run's in "
                                 f"{changed}; resume with the same settings or start a new run")
    answers = store.journal_answers(store.read_journal(journal))
    log.info("resuming %s: %d answers already in the journal", ctx.run_dir, len(answers))
    return answers, manifest.mlflow_run_id


def _run_params(ctx: RunContext, prepared: Prepared) -> dict[str, Any]:
    plan = prepared.plan
    return {**ctx.params,
            "prompt_sha256": plan.template.sha256,
            "synthesis_prompt_sha256": plan.synthesis_template.sha256 if plan.synthesis_template else "",
            "litellm_version": litellm_version(),
            "judge_version": ctx.cfg.judge.version,
            "response_format": "json_schema" if prepared.response_format else "none",
            "n_items": len(prepared.refs)}


def _judge_all(ctx: RunContext, prepared: Prepared, prior: dict) -> list[Judgment]:
    cfg = ctx.cfg
    client = JudgeClient(cfg.judge, ctx.api_key, ctx.limiter, prepared.response_format, cfg.seed)
    cache = None
    if cfg.cache.mode is not CacheMode.off:
        cache = ResponseCache(resolve_path(cfg.cache.path, ctx.project_root), cfg.cache.mode)
    sources = AnswerSources(prior, cache, cfg.judge.model, cfg.judge.api_base, client.decoding_params)
    total = planned_calls(cfg.order, cfg.repeats, len(prepared.refs))
    try:
        with store.Journal(ctx.run_dir / store.JOURNAL_NAME) as journal, \
                ProgressBar(total, enabled=cfg.progress) as bar:
            executor = Executor(prepared.plan, client, Sinks(journal, bar), sources)
            judgments = asyncio.run(executor.run(prepared.dataset.iter_items()))
    finally:
        if cache is not None:
            cache.close()
    index = {ref.id: n for n, ref in enumerate(prepared.refs)}
    judgments.sort(key=lambda j: (index[j.item_id], j.request.repeat, j.request.order.value,
                                  j.request.stage != "judge"))
    return judgments


def _judge_failure(cfg: RunConfig, judgments: list[Judgment]) -> tuple[bool, str]:
    errors = [j for j in judgments if j.status is Status.ERROR]
    if not judgments:
        return True, "no judge call was made"
    rate = len(errors) / len(judgments)
    if rate > cfg.max_error_rate:
        first = errors[0].response
        return True, (f"{len(errors)} of {len(judgments)} judge calls failed ({rate:.1%} > max_error_rate "
                      f"{cfg.max_error_rate:.1%}); first: {first.error_type}: {first.error}")
    return False, ""


def execute(ctx: RunContext, prepared: Prepared) -> RunOutcome:
    """Judge every item, write the run directory, log to MLflow, print the summary."""
    cfg = ctx.cfg
    ctx.run_dir.mkdir(parents=True, exist_ok=True)
    prior, mlflow_run_id = _resume_state(ctx)
    if cfg.tracking.enabled:
        mlflow_run_id = tracking.start_run(cfg.tracking, ctx.run_name, _run_params(ctx, prepared), ctx.tags,
                                           run_id=mlflow_run_id)
    store.write_manifest(ctx.run_dir, store.Manifest(ctx.identity_sha256, dict(ctx.identity), mlflow_run_id))
    try:
        judgments = _judge_all(ctx, prepared, prior)
    except RunAborted as exc:
        if mlflow_run_id is not None:
            tracking.fail_run(cfg.tracking, mlflow_run_id, str(exc))
        raise RunAborted(f"{exc}. The journal keeps every answer so far: fix the cause and continue with "
                         f"resume={ctx.run_dir}") from None
    item_results = aggregation.aggregate_items(judgments, [r.id for r in prepared.refs],
                                               cfg.aggregation.name, cfg.aggregation.params)
    summary = report.build_summary(item_results, judgments, cfg.dataset.ours.name, cfg.dataset.baseline.name,
                                   cfg.repeats)
    summary["summary"]["skipped_rows"] = [f"{s.where}: {s.reason}" for s in prepared.dataset.skipped]
    gold = report.gold_metrics(prepared.refs, judgments)
    judge_stats = report.judge_metrics(judgments)
    if gold is not None:
        summary["gold"] = gold
    store.write_results(ctx.run_dir / store.RESULTS_NAME, judgments)
    store.write_json(ctx.run_dir / store.SUMMARY_NAME, summary)
    failed, reason = _judge_failure(cfg, judgments)
    if mlflow_run_id is not None:
        metrics = {**report.flat_metrics(summary, gold, judge_stats),
                   "items/skipped_rows": len(prepared.dataset.skipped)}
        tracking.finish_run(cfg.tracking, mlflow_run_id, tracking.RunRecord(
            metrics=metrics, run_dir=ctx.run_dir, resolved_config_yaml=ctx.resolved_config_yaml,
            rows=[store.judgment_record(j) for j in judgments], failed=failed))
    report.render_console(summary, gold, judge_stats, title=ctx.run_name)
    return RunOutcome(summary, gold, judge_stats, failed, reason, mlflow_run_id)


def run(ctx: RunContext) -> RunOutcome | None:
    """Prepare (validate) then execute one run; with dry_run, print the estimate and call nothing."""
    prepared = prepare(ctx)
    if ctx.cfg.dry_run:
        report.render_estimate(estimate_run(ctx.cfg.judge, prepared.plan, prepared.dataset.iter_items()))
        return None
    log.info("judging %d items x %d repeat(s), order=%s, with %s", len(prepared.refs), ctx.cfg.repeats,
             ctx.cfg.order.value, ctx.cfg.judge.model)
    return execute(ctx, prepared)
