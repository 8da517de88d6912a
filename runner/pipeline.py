"""One judge run, end to end: validate, judge, aggregate, report, track.

Everything that can be checked without paying for a call is checked in :func:`prepare` first: names
are registered, parameters bind, templates exist and have their variables, the dataset parses, a
resumed run's config matches the one that was interrupted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner import (
    gates,
    html_report,
    pairwise,
    panel,
    pointwise,
    report,
    score_panel,
    scorecard,
    stages,
    store,
    tracking,
    trust,
)
from runner.client import litellm_version, supports_json_schema
from runner.config import JudgeConfig, PromptMode, RunConfig, StructuredOutput
from runner.datasets import ItemRef, LoadedDataset, Shape, load_items, resolve_path
from runner.errors import ConfigurationError
from runner.estimate import estimate_run, run_list_cost
from runner.generation import GENERATIONS_NAME, Generation, generation_metrics, with_outputs
from runner.judge import (
    JudgePlan,
    RunAborted,
    planned_calls,
)
from runner.pacing import RateLimiter
from runner.types import Item, Judgment, Secret, Status

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class RunContext:
    """What the CLI hands down: the typed config plus facts about this job."""

    cfg: RunConfig
    run_dir: Path
    project_root: Path
    api_keys: Mapping[str, Secret]  # API-key variable name -> key, for every variable the config names
    run_name: str
    params: Mapping[str, Any] = field(default_factory=dict)  # flattened, secret-free, for MLflow
    tags: Mapping[str, str] = field(default_factory=dict)
    resolved_config_yaml: str = ""
    identity: Mapping[str, Any] = field(default_factory=dict)  # settings a resume must not change
    identity_sha256: str = ""
    limiter: RateLimiter | None = None  # the judge's, shared across the jobs of this process
    generator_limiter: RateLimiter | None = None
    member_limiters: Mapping[str, RateLimiter | None] = field(default_factory=dict)  # ensemble: member -> limiter


@dataclass(frozen=True)
class Prepared:
    """A validated run, ready to judge."""

    dataset: LoadedDataset
    plan: JudgePlan
    response_format: dict[str, Any] | None
    point: pointwise.PointwiseSetup | None = None  # pointwise runs: scoring, checks, generator template
    baseline: gates.Baseline | None = None  # gate.baseline_run, resolved before any call
    member_formats: Mapping[str, dict[str, Any] | None] | None = None  # ensemble: member -> response_format

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


def _json_schema_format(judge: JudgeConfig, schema: dict[str, Any] | None) -> dict[str, Any] | None:
    mode = judge.structured_output
    if schema is None or mode is StructuredOutput.off or judge.model == panel.ENSEMBLE_MODEL:
        return None
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
        ConfigurationError, runner.datasets.DatasetError, runner.prompts.TemplateError,
        runner.registry.UnknownNameError, runner.scoring.RubricError, TypeError: with a message naming
        the file, line or key.
    """
    cfg = ctx.cfg
    if cfg.repeats < 1 or cfg.concurrency < 1:
        raise ConfigurationError("repeats and concurrency must be >= 1")
    _check_generator(cfg)
    point = None
    if cfg.prompt.mode is PromptMode.pointwise:
        template, point = pointwise.prepare(cfg, resolve_path(cfg.prompts_dir, ctx.project_root))
        synthesis = None
        schema = pointwise.response_format_schema(point, cfg.rubric.parser.name)
        response_format = _json_schema_format(cfg.judge, schema)
    else:
        pairwise.check_rubric(cfg)
        template, synthesis = pairwise.load_templates(cfg, resolve_path(cfg.prompts_dir, ctx.project_root))
        response_format = _json_schema_format(cfg.judge, pairwise.response_schema_for(cfg))
    member_formats = None
    if panel.is_ensemble(cfg):
        panel.check(cfg)
        schema = (pointwise.response_format_schema(point, cfg.rubric.parser.name) if point is not None
                  else pairwise.response_schema_for(cfg))
        member_formats = {name: _json_schema_format(m, schema) for name, m in cfg.judge.members.items()}
        response_format = None
    shape = Shape(mode=cfg.prompt.mode, with_candidate=cfg.generator is None)
    loaded = load_items(cfg.dataset, resolve_path(cfg.dataset.path, ctx.project_root), cfg.max_items,
                        on_bad_row=cfg.on_bad_row, shape=shape)
    for skipped in loaded.skipped:
        log.warning("skipped bad row %s: %s", skipped.where, skipped.reason)
    plan = JudgePlan(
        template=template, synthesis_template=synthesis, strategy=cfg.prompt.strategy,
        labels=tuple(cfg.rubric.labels), parser=cfg.rubric.parser,
        synthesis_parser=cfg.rubric.synthesis_parser or cfg.rubric.parser, order_policy=cfg.order,
        repeats=cfg.repeats, seed=cfg.seed, concurrency=cfg.concurrency,
        neutralize=cfg.prompt.neutralize_delimiters, max_error_rate=cfg.max_error_rate,
        scoring=point.scoring if point else None, score_truncated=cfg.rubric.score_truncated,
    )
    return Prepared(dataset=loaded, plan=plan, response_format=response_format, point=point,
                    baseline=_baseline(ctx), member_formats=member_formats)


def _baseline(ctx: RunContext) -> gates.Baseline | None:
    """The baseline run's value of the gated metric, looked up before any call (gate.baseline_run)."""
    gate, cfg = ctx.cfg.gate, ctx.cfg
    if gate.baseline_run is None:
        return None
    if not cfg.tracking.enabled:
        raise ConfigurationError("gate.baseline_run needs tracking (the baseline is an MLflow run); "
                                 "tracking is off")
    try:
        run_id, value = tracking.find_baseline(cfg.tracking, gate.baseline_run, ctx.run_name, gate.metric)
    except LookupError as exc:
        raise ConfigurationError(f"gate.baseline_run={gate.baseline_run!r}: {exc}") from None
    return gates.Baseline(gate.baseline_run, run_id, value)


def _resume_state(ctx: RunContext) -> tuple[dict, str | None]:
    """Answers already in the journal and the MLflow run to continue; checks the run may be resumed."""
    journal = ctx.run_dir / store.JOURNAL_NAME
    members = _member_dirs(ctx)
    manifest = store.read_manifest(ctx.run_dir)
    if not ctx.cfg.resume:
        if any(j.is_file() and j.stat().st_size > 0 for j in [journal, *(d / store.JOURNAL_NAME
                                                                         for d in members.values())]):
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
    if members:
        answers = {name: stages.prior_answers(d, store.JOURNAL_NAME) for name, d in members.items()}
        count = sum(map(len, answers.values()))
    else:
        answers = store.journal_answers(store.read_journal(journal))
        count = len(answers)
    log.info("resuming %s: %d answers already in the journal", ctx.run_dir, count)
    return answers, manifest.mlflow_run_id


def _member_dirs(ctx: RunContext) -> dict[str, Path]:
    """Ensemble runs: member -> its directory (journal, results, summary); empty for a single judge."""
    return {name: ctx.run_dir / panel.MEMBERS_DIR / name for name in ctx.cfg.judge.members}


def _run_params(ctx: RunContext, prepared: Prepared) -> dict[str, Any]:
    plan = prepared.plan
    return {**ctx.params,
            "prompt_sha256": plan.template.sha256,
            "synthesis_prompt_sha256": plan.synthesis_template.sha256 if plan.synthesis_template else "",
            "litellm_version": litellm_version(),
            "judge_version": ctx.cfg.judge.version,
            "response_format": "json_schema" if prepared.response_format else "none",
            "n_items": len(prepared.refs)}


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


def _generate(ctx: RunContext, prepared: Prepared) -> dict[str, Generation]:
    cfg, gen = ctx.cfg, ctx.cfg.generator
    assert gen is not None and prepared.point is not None and prepared.point.generator_template is not None
    return stages.generate(
        gen, prepared.point.generator_template, prepared.dataset.iter_items(), run_dir=ctx.run_dir,
        root=ctx.project_root, cache_cfg=cfg.cache, api_keys=ctx.api_keys, limiter=ctx.generator_limiter,
        seed=cfg.seed, concurrency=gen.concurrency, total=len(prepared.refs),
        prior=stages.prior_answers(ctx.run_dir, GENERATIONS_NAME) if cfg.resume else {},
        max_error_rate=cfg.max_error_rate, progress=cfg.progress, neutralize=cfg.prompt.neutralize_delimiters)


def _candidates(ctx: RunContext, prepared: Prepared, generations: dict[str, Generation] | None) -> Iterable[Item]:
    """The items to judge, streamed: from the dataset, or with the generated outputs as candidates."""
    items = prepared.dataset.iter_items()
    if generations is None:
        return items
    assert ctx.cfg.generator is not None
    return with_outputs(items, generations, ctx.cfg.generator.name)


def _judge_panel(ctx: RunContext, prepared: Prepared, prior: dict, total: int,
                 generations: dict[str, Generation] | None) -> dict[str, list[Judgment]]:
    cfg = ctx.cfg
    return stages.judge_panel(
        cfg.judge.members, prepared.plan, lambda: _candidates(ctx, prepared, generations), prepared.refs,
        member_dirs=_member_dirs(ctx),
        root=ctx.project_root, cache_cfg=cfg.cache, api_keys=ctx.api_keys, limiters=ctx.member_limiters,
        response_formats=prepared.member_formats or {}, seed=cfg.seed, total=total, priors=prior,
        progress=cfg.progress)


def _paid_stages(ctx: RunContext, prepared: Prepared, prior: dict, mlflow_run_id: str | None
                 ) -> tuple[dict[str, Generation] | None, list[Judgment], dict[str, list[Judgment]] | None]:
    """Generation (optional) and judging; an ensemble's judgments also come back per member."""
    cfg = ctx.cfg
    pointwise_run = prepared.point is not None
    by_member = None
    try:
        generations = _generate(ctx, prepared) if cfg.generator is not None else None
        total = planned_calls(cfg.order, cfg.repeats, len(prepared.refs), pointwise=pointwise_run)
        if prepared.member_formats is not None:
            by_member = _judge_panel(ctx, prepared, prior, total, generations)
            return generations, [j for js in by_member.values() for j in js], by_member
        judgments = stages.judge(
            cfg.judge, prepared.plan, _candidates(ctx, prepared, generations), prepared.refs, run_dir=ctx.run_dir,
            root=ctx.project_root, cache_cfg=cfg.cache, api_keys=ctx.api_keys, limiter=ctx.limiter,
            response_format=prepared.response_format, seed=cfg.seed, total=total, prior=prior, progress=cfg.progress)
    except RunAborted as exc:
        if mlflow_run_id is not None:
            tracking.fail_run(cfg.tracking, mlflow_run_id, str(exc))
        raise RunAborted(f"{exc}. The journal keeps every answer so far: fix the cause and continue with "
                         f"resume={ctx.run_dir}") from None
    return generations, judgments, by_member


def _write_members(ctx: RunContext, members: Mapping[str, tuple[dict, dict | None, dict[str, float]]],
                   by_member: Mapping[str, list[Judgment]], labels: Mapping[str, dict]) -> None:
    """Each member's own results, summary and metrics beside its journal (members/<name>/)."""
    for name, (summary, _, metrics) in members.items():
        member_dir = _member_dirs(ctx)[name]
        store.write_results(member_dir / store.RESULTS_NAME, by_member[name], labels)
        store.write_json(member_dir / store.SUMMARY_NAME, summary)
        store.write_json(member_dir / store.METRICS_NAME, dict(sorted(metrics.items())))


def _pointwise_report(ctx: RunContext, prepared: Prepared, judgments: list[Judgment],
                      generations: dict[str, Generation] | None, by_member: dict[str, list[Judgment]] | None = None
                      ) -> tuple[dict, dict[str, float], dict[str, tuple[dict, None, dict[str, float]]]]:
    point = prepared.point
    assert point is not None
    violations = pointwise.check_candidates(_candidates(ctx, prepared, generations), point.check_calls)
    failed_gen = frozenset(k for k, g in (generations or {}).items() if not g.ok)
    members: dict[str, tuple[dict, None, dict[str, float]]] = {}
    if by_member is None:
        rep = pointwise.build(ctx.cfg, point, prepared.refs, judgments, violations, failed_gen)
        metrics = scorecard.report_metrics(rep)
    else:
        rep, reports = pointwise.build_panel(ctx.cfg, point, prepared.refs, by_member, violations, failed_gen)
        metrics = {**scorecard.report_metrics(rep), **score_panel.ensemble_metrics(rep["ensemble"])}
        for name, member_rep in reports.items():
            member_metrics = {**scorecard.report_metrics(member_rep), **report.numeric(
                report.judge_metrics(by_member[name]))}
            members[name] = (member_rep, None, member_metrics)
            metrics.update({f"member/{name}/{k}": v for k, v in member_metrics.items()})
    if generations is not None:
        metrics.update({k: float(v) for k, v in generation_metrics(list(generations.values())).items()
                        if v is not None})
    return rep, metrics, members


def _gate_results(ctx: RunContext, prepared: Prepared, summary: dict, metrics: dict[str, float]
                  ) -> list[gates.GateResult]:
    point = prepared.point
    results = gates.evaluate(ctx.cfg.gate, summary.get("summary", {}), metrics,
                             has_threshold=point is not None and point.scoring.pass_threshold is not None,
                             baseline=prepared.baseline)
    if point is not None:
        results += gates.check_results(summary["summary"].get("checks") or {}, point.enforced)
    return results


def execute(ctx: RunContext, prepared: Prepared) -> RunOutcome:
    """Generate (optional), judge every item, write the run directory, log to MLflow, print the summary."""
    cfg = ctx.cfg
    started = time.monotonic()
    ctx.run_dir.mkdir(parents=True, exist_ok=True)
    prior, mlflow_run_id = _resume_state(ctx)
    if cfg.tracking.enabled:
        mlflow_run_id = tracking.start_run(cfg.tracking, ctx.run_name, _run_params(ctx, prepared), ctx.tags,
                                           run_id=mlflow_run_id)
    store.write_manifest(ctx.run_dir, store.Manifest(ctx.identity_sha256, dict(ctx.identity), mlflow_run_id))
    generations, judgments, by_member = _paid_stages(ctx, prepared, prior, mlflow_run_id)
    gold = None
    labels = {r.id: {"gold": r.gold, "human_score": r.human_score} for r in prepared.refs
              if r.gold is not None or r.human_score is not None}
    judges: list[str] | None = None
    if prepared.point is not None:
        summary, metrics, members = _pointwise_report(ctx, prepared, judgments, generations, by_member)
    elif by_member is not None:
        summary, metrics, members = panel.build(cfg, prepared.refs, by_member)
    else:
        summary, gold, metrics = pairwise.build(cfg, prepared.refs, judgments)
    if by_member is not None:
        _write_members(ctx, members, by_member, labels)
        judges = [name for name, js in by_member.items() for _ in js]
    summary["summary"]["skipped_rows"] = [f"{s.where}: {s.reason}" for s in prepared.dataset.skipped]
    judge_stats = report.judge_metrics(judgments)
    metrics.update({k: float(v) for k, v in judge_stats.items() if v is not None})
    metrics.update(run_list_cost(cfg.judge, judgments, by_member))
    metrics["items/skipped_rows"] = float(len(prepared.dataset.skipped))
    gate_results = _gate_results(ctx, prepared, summary, metrics)
    if gate_results:
        summary["gates"] = [g.to_dict() for g in gate_results]
        metrics["gate/passed"] = float(all(g.passed for g in gate_results))
    store.write_results(ctx.run_dir / store.RESULTS_NAME, judgments, labels, judges)
    store.write_json(ctx.run_dir / store.SUMMARY_NAME, summary)
    metrics["run/wall_s"] = time.monotonic() - started
    store.write_json(ctx.run_dir / store.METRICS_NAME, dict(sorted(metrics.items())))
    report_path = html_report.write_run_report(ctx.run_dir, summary, metrics, ctx.run_name)
    failed, reason = _judge_failure(cfg, judgments)
    crossed = [g.message for g in gate_results if not g.passed]
    if crossed and not failed:
        failed, reason = True, "; ".join(crossed)
    if mlflow_run_id is not None:
        tracking.finish_run(cfg.tracking, mlflow_run_id, tracking.RunRecord(
            metrics=metrics, run_dir=ctx.run_dir, resolved_config_yaml=ctx.resolved_config_yaml,
            rows=_rows(judgments, judges), failed=failed))
    _print(ctx.run_name, summary, gold, judge_stats, [("PASS " if g.passed else "FAIL ") + g.message
                                                      for g in gate_results], report_path)
    return RunOutcome(summary, gold, judge_stats, failed, reason, mlflow_run_id)


def _print(title: str, summary: dict, gold: dict | None, judge_stats: dict, gate_lines: list[str],
           report_path: Path | None) -> None:
    """The end-of-run console summary: pairwise or pointwise, an ensemble's section, gates, the report's path."""
    ensemble = summary.get("ensemble")
    if "detailed_results" not in summary:
        report.render_console(summary, gold, judge_stats, title=title)
        extra = panel.console_lines(ensemble) if ensemble else trust.bias_lines(summary["bias"])
        lines = [*trust.console_lines(summary["trust"]), *extra, *gate_lines]
    else:
        pointwise.render_console(summary, judge_stats, title, gate_lines)
        lines = score_panel.console_lines(ensemble) if ensemble else []
    if report_path is not None:
        lines.append(f"report: {report_path}")
    for line in lines:
        report.print_line(line)


def _rows(judgments: list[Judgment], judges: list[str] | None) -> list[dict[str, Any]]:
    rows = [store.judgment_record(j) for j in judgments]
    if judges is not None:
        rows = [{"judge": judge, **row} for judge, row in zip(judges, rows, strict=True)]
    return rows


def run(ctx: RunContext) -> RunOutcome | None:
    """Prepare (validate) then execute one run; with dry_run, print the estimate and call nothing."""
    prepared = prepare(ctx)
    if ctx.cfg.dry_run:
        gen_template = prepared.point.generator_template if prepared.point is not None else None
        for estimate in estimate_run(ctx.cfg.judge, prepared.plan, prepared.dataset.iter_items(), ctx.cfg.generator,
                                     gen_template):
            report.render_estimate(estimate)
        return None
    how = "pointwise" if prepared.point is not None else f"order={ctx.cfg.order.value}"
    log.info("judging %d items x %d repeat(s), %s, with %s", len(prepared.refs), ctx.cfg.repeats, how,
             ctx.cfg.judge.model)
    return execute(ctx, prepared)
