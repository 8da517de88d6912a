"""One judge run, end to end: validate, judge, aggregate, report, track.

Everything that can be checked without paying for a call is checked in :func:`prepare` first: names
are registered, parameters bind, templates exist and have their variables, the dataset parses.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner import aggregation, report, store, tracking
from runner.client import JudgeClient, litellm_version
from runner.config import OrderPolicy, PromptMode, RunConfig, Strategy
from runner.datasets import load_items, resolve_path
from runner.judge import PAIRWISE_VARIABLES, SYNTHESIS_VARIABLES, Executor, JudgePlan
from runner.parsing import PARSERS
from runner.prompts import Template, check_variables, load_template
from runner.types import TIE, Item, Judgment, Secret, Status

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


@dataclass(frozen=True)
class Prepared:
    """A validated run, ready to judge."""

    items: list[Item]
    plan: JudgePlan


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
    items = load_items(cfg.dataset, resolve_path(cfg.dataset.path, ctx.project_root), cfg.max_items)
    plan = JudgePlan(
        template=template,
        synthesis_template=synthesis,
        strategy=cfg.prompt.strategy,
        labels=tuple(cfg.rubric.labels),
        parser=cfg.rubric.parser,
        synthesis_parser=cfg.rubric.synthesis_parser or cfg.rubric.parser,
        order_policy=cfg.order,
        repeats=cfg.repeats,
        seed=cfg.seed,
        concurrency=cfg.concurrency,
    )
    return Prepared(items=items, plan=plan)


def _sort_key(index: Mapping[str, int]):
    def key(j: Judgment) -> tuple:
        return (index[j.item_id], j.request.repeat, j.request.order.value, j.request.stage != "judge")

    return key


def _run_params(ctx: RunContext, prepared: Prepared) -> dict[str, Any]:
    plan = prepared.plan
    params = dict(ctx.params)
    params.update({
        "prompt_sha256": plan.template.sha256,
        "synthesis_prompt_sha256": plan.synthesis_template.sha256 if plan.synthesis_template else "",
        "litellm_version": litellm_version(),
        "judge_version": ctx.cfg.judge.version,
        "n_items": len(prepared.items),
    })
    return params


def execute(ctx: RunContext, prepared: Prepared) -> RunOutcome:
    """Judge every item, write the run directory, log to MLflow, print the summary."""
    cfg = ctx.cfg
    ctx.run_dir.mkdir(parents=True, exist_ok=True)
    client = JudgeClient(cfg.judge, ctx.api_key)
    with store.Journal(ctx.run_dir / store.JOURNAL_NAME) as journal:
        judgments = asyncio.run(Executor(prepared.plan, client, journal).run(prepared.items))
    index = {item.id: n for n, item in enumerate(prepared.items)}
    judgments.sort(key=_sort_key(index))
    item_results = aggregation.aggregate_items(judgments, [i.id for i in prepared.items],
                                               cfg.aggregation.name, cfg.aggregation.params)
    summary = report.build_summary(item_results, judgments, cfg.dataset.ours.name, cfg.dataset.baseline.name,
                                   cfg.repeats)
    gold = report.gold_metrics(prepared.items, judgments)
    judge_stats = report.judge_metrics(judgments)
    if gold is not None:
        summary["gold"] = gold
    store.write_results(ctx.run_dir / store.RESULTS_NAME, judgments)
    store.write_json(ctx.run_dir / store.SUMMARY_NAME, summary)
    failed, reason = _judge_failure(cfg, judgments)
    run_id = None
    if cfg.tracking.enabled:
        run_id = tracking.log_run(cfg.tracking, tracking.RunRecord(
            run_name=ctx.run_name,
            params=_run_params(ctx, prepared),
            tags=dict(ctx.tags),
            metrics=report.flat_metrics(summary, gold, judge_stats),
            run_dir=ctx.run_dir,
            resolved_config_yaml=ctx.resolved_config_yaml,
            rows=[store.judgment_record(j) for j in judgments],
        ))
    report.render_console(summary, gold, judge_stats, title=ctx.run_name)
    return RunOutcome(summary, gold, judge_stats, failed, reason, run_id)


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


def run(ctx: RunContext) -> RunOutcome:
    """Prepare (validate) then execute one run."""
    prepared = prepare(ctx)
    log.info("judging %d items x %d repeat(s), order=%s, with %s", len(prepared.items), ctx.cfg.repeats,
             ctx.cfg.order.value, ctx.cfg.judge.model)
    return execute(ctx, prepared)
