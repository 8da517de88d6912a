"""What a run's MLflow view needs beyond its files (view.json): its name, params, tags, prompts, dataset and
judges, where its items' own fields are read again (each trace's request), the pass threshold, written beside
summary.json by the end of the run (:func:`runner.outputs.publishing.write_view`), so that publishing, now or later
(``judgesweep sync``), reads the run directory alone."""

from __future__ import annotations

import dataclasses
from typing import Any

from runner.core.choices import PromptMode
from runner.inputs.datasets import resolve_path
from runner.judging.generation import GENERATIONS_NAME
from runner.llm.client import litellm_version
from runner.outputs import publishing
from runner.run.context import Prepared, RunContext, member_dirs


def run_params(ctx: RunContext, prepared: Prepared) -> dict[str, Any]:
    """The MLflow params of a judge run: the flattened config, the prompt hashes, litellm's version, the item count."""
    plan = prepared.plan
    return {**ctx.params,
            "prompt_sha256": plan.template.sha256,
            "synthesis_prompt_sha256": plan.synthesis_template.sha256 if plan.synthesis_template else "",
            "litellm_version": litellm_version(),
            "judge_version": ctx.cfg.judge.version,
            "response_format": "json_schema" if prepared.response_format else "none",
            "n_items": len(prepared.refs)}


def write(ctx: RunContext, prepared: Prepared, failed: bool, reason: str, started_ns: int) -> None:
    """Write the run's view.json when the run starts, so that its traces can be written while the calls go on (the
    run's end writes it again, failed or not: runner.outputs.run_files)."""
    publishing.write_view(ctx.run_dir, of(ctx, prepared, failed, reason, started_ns))


def of(ctx: RunContext, prepared: Prepared, failed: bool, reason: str, started_ns: int) -> dict[str, Any]:
    """The run's view.json content (see :func:`runner.outputs.publishing.write_view`)."""
    cfg, plan = ctx.cfg, prepared.plan
    members = member_dirs(ctx)
    judges: list[dict[str, Any]]
    if members:
        judges = [{"member": name, "model": cfg.judge.members[name].model, "dir": str(d.relative_to(ctx.run_dir))}
                  for name, d in members.items()]
    else:
        judges = [{"member": None, "model": cfg.judge.model, "dir": "."}]
    prompts = [[cfg.prompt.name, plan.template.source, plan.template.sha256]]
    if plan.synthesis_template is not None:  # the second round's template belongs to the same prompt option
        prompts.append([f"{cfg.prompt.name}.synthesis", plan.synthesis_template.source,
                        plan.synthesis_template.sha256])
    return {
        "run_name": ctx.run_name, "params": run_params(ctx, prepared), "tags": dict(ctx.tags), "failed": failed,
        "reason": reason, "traces": cfg.tracking.traces, "prompts": prompts,
        "dataset": [cfg.dataset.name, str(resolve_path(cfg.dataset.path, ctx.project_root))], "judges": judges,
        "config_yaml": ctx.resolved_config_yaml, "started_ns": started_ns,
        "tracking": dataclasses.asdict(cfg.tracking),  # where `judgesweep sync` publishes it unless told otherwise
        "items": item_source(ctx, prepared),
        "pass_threshold": cfg.rubric.pass_threshold if cfg.prompt.mode is PromptMode.pointwise else None,
        # what a trace written while the calls go on needs before results.jsonl exists (publishing.follow)
        "labels": {r.id: {k: v for k, v in (("gold", r.gold), ("human_score", r.human_score)) if v is not None}
                   for r in prepared.refs}}


def item_source(ctx: RunContext, prepared: Prepared) -> dict[str, Any]:
    """Where the publisher reads the items' own fields again (:mod:`runner.outputs.trace_inputs`): the dataset
    config and the file the run loaded, its shape, and the generations journal that holds a generated candidate
    (its system's name), so that a trace's request is the item, not the judge's prompt."""
    loaded, generator = prepared.dataset, ctx.cfg.generator
    return {"dataset": dataclasses.asdict(loaded.cfg), "path": str(loaded.path), "mode": loaded.shape.mode.value,
            "with_candidate": loaded.shape.with_candidate,
            "generated": {"system": generator.name, "file": GENERATIONS_NAME} if generator is not None else None}
