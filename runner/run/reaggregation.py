"""``judgesweep aggregate``: existing evaluation files re-aggregated without any judge call.

The files' votes (runner.inputs.evaluation_sets) become the run's judgments, and the run's own mode builds the
report from them as it does at the end of a run (``RunMode.build``: the registered aggregation, the users'
summary, trust, bias, statistics): there is no second aggregation path. Files that are an ensemble's members
(runner.run.reaggregation_members) are built as a ``judge=ensemble`` run's, through the same mode. What a run
writes follows, through the run's own path (runner.outputs.run_files): summary.json, results.jsonl, metrics.json,
report.html, the gates, the console summary and an MLflow run tagged ``judgesweep.kind=aggregation``.
"""

from __future__ import annotations

import functools
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from runner.core.choices import PromptMode
from runner.core.config import RunConfig
from runner.core.types import TIE, JudgeRequest, JudgeResponse, Judgment, Order, Status, Verdict
from runner.inputs.datasets import ItemRef
from runner.inputs.evaluation_files import SCORE, EvaluationFileError, Vote
from runner.inputs.evaluation_sets import EvaluationSet, members_of
from runner.judging.scoring import Scoring
from runner.modes import base as modes
from runner.modes import catalog, ensemble_check, users_formats
from runner.modes import summary as summaries
from runner.modes.base import ModeInputs
from runner.modes.sections import RunEnd
from runner.outputs import publishing, run_files, tracking
from runner.outputs.publisher import describe
from runner.run import gates, reaggregation_members

__all__ = ["AGGREGATION_KIND", "AggregateJob", "AggregateOutcome", "judgments_of", "reaggregate", "refs_of"]

AGGREGATION_KIND = "aggregation"  # the MLflow run's judgesweep.kind tag
USED_CHOICES = ("experiment", "aggregation")  # the config groups an aggregation uses (and ``rubric`` for scores)
FILE_SOURCE = "file"  # JudgeResponse.source of a vote read from a file: no call was made
_POSITIONAL = {Order.AB: ("A", "B"), Order.BA: ("B", "A")}  # (label of ours, label of baseline)


@dataclass(frozen=True)
class AggregateJob:
    """Where and under what name one aggregation writes."""

    run_dir: Path
    run_name: str
    resolved_config_yaml: str
    prompts_dirs: tuple[Path, ...]  # where the mode's templates are looked up (its start-up checks)
    choices: Mapping[str, str]  # the composed config's group choices (MLflow params choice.<group>)
    members: str | None = None  # members=: true | false | name,name,... (None: members when the aggregation needs)


@dataclass(frozen=True)
class AggregateOutcome:
    """What an aggregation wrote and whether a gate failed."""

    run_dir: Path
    failed: bool
    reason: str
    mlflow_run_id: str | None
    tracking_error: str | None = None  # the files are written; MLflow could not be (one line, with `judgesweep sync`)


def reaggregate(cfg: RunConfig, evaluation: EvaluationSet, job: AggregateJob) -> AggregateOutcome:
    """Build the report of ``evaluation`` with the mode and aggregation of ``cfg``; write, log and print it.

    Raises:
        ConfigurationError and its kin (an unknown aggregation, bad params), EvaluationFileError (votes that do not
        fit the mode or the rubric, naming file and line).
    """
    mode = _mode(cfg, evaluation)
    inputs, scoring = _inputs(cfg, evaluation, job, mode)
    cfg, refs, judgments, by_member = inputs.cfg, inputs.refs, inputs.judgments, inputs.by_member
    judges = None if by_member is None else [m for m, js in by_member.items() for _ in js]
    report = mode.build(inputs)
    metrics = dict(report.metrics)
    judge_stats = summaries.judge_metrics(judgments)
    metrics.update({k: float(v) for k, v in judge_stats.items() if v is not None})
    results = gates.of_report(cfg.gate, mode, report.typed, metrics, baseline=None)
    if results:
        metrics["gate/passed"] = float(all(g.passed for g in results))
    # skipped_rows as a run's summary says (a row that cannot be read refuses the file); no call was made
    report = report.ended(RunEnd(skipped_rows=(), gates=tuple(results)))
    crossed = [g.message for g in results if not g.passed]
    run_dir = job.run_dir
    view = {"run_uid": uuid.uuid4().hex, "run_name": job.run_name, "params": _params(cfg, evaluation, job),
            "tags": {tracking.KIND_TAG: AGGREGATION_KIND}, "failed": bool(crossed), "reason": "; ".join(crossed),
            "traces": False, "config_yaml": job.resolved_config_yaml}
    # as an ensemble run: each member's own results, summary and metrics
    members = {name: functools.partial(iter, js) for name, js in (by_member or {}).items()}
    run_files.write(run_files.RunFiles(
        run_dir=run_dir, title=job.run_name, mode=mode, report=report, metrics=metrics, judge_stats=judge_stats,
        judgments=lambda: judgments, refs=refs, summary_keys=cfg.output.summary_keys, view=view, judges=judges,
        members=members, closing=(f"written to {run_dir}",), plots=cfg.output.plots))
    mlflow_run_id, tracking_error = None, None
    if cfg.tracking.enabled:  # the same publishing path as a run's, in this process (no calls to overlap it with)
        try:
            mlflow_run_id = publishing.publish(run_dir, cfg.tracking).run_id
        except Exception as exc:  # noqa: BLE001 - the files are written; said in one line with the command
            tracking_error = (f"tracking failed: {describe(cfg.tracking)}: {type(exc).__name__}: "
                              f"{' '.join(str(exc).split())[:500]}. The files are complete in {run_dir}; finish the "
                              f"tracking with: judgesweep sync {run_dir}")
    return AggregateOutcome(run_dir, bool(crossed), "; ".join(crossed), mlflow_run_id, tracking_error)


def _inputs(cfg: RunConfig, evaluation: EvaluationSet, job: AggregateJob, mode: modes.RunMode
            ) -> tuple[ModeInputs, Scoring | None]:
    """The mode's inputs (and the rubric's scoring, pointwise): the votes as one judge's repeats, or as an
    ensemble's members with ``cfg`` as that ensemble's run (runner.run.reaggregation_members)."""
    members = None
    if reaggregation_members.wants_members(cfg, job.members):
        members = members_of(evaluation, reaggregation_members.member_names(job.members))
        cfg = reaggregation_members.ensemble_config(cfg, members)
    else:
        cfg = replace(cfg, repeats=evaluation.repeats)
    setup = mode.prepare(cfg, job.prompts_dirs)
    scoring = None
    if setup.point is not None:  # no candidate texts here: the deterministic checks cannot run
        setup = replace(setup, point=replace(setup.point, checks=(), check_calls=(), enforced=frozenset()))
        scoring = setup.point.scoring
    refs = refs_of(evaluation)
    if members is None:
        return ModeInputs(cfg=cfg, setup=setup, refs=refs, judgments=judgments_of(evaluation, cfg, scoring)), scoring
    by_member = {m: _judgments(votes, cfg, scoring) for m, votes in members.items()}
    judgments = [j for js in by_member.values() for j in js]
    return ModeInputs(cfg=cfg, setup=setup, refs=refs, judgments=judgments, by_member=by_member), scoring


def _mode(cfg: RunConfig, evaluation: EvaluationSet) -> modes.RunMode:
    """The config's mode, which must be the files' kind (verdicts: pairwise; scores: pointwise)."""
    wanted = PromptMode.pointwise if evaluation.kind == SCORE else PromptMode.pairwise
    if cfg.prompt.mode is not wanted:
        hint = ("a pointwise preset (experiment=agent_rubric | experiment=reply_quality) or prompt= and rubric= "
                "of a pointwise rubric" if wanted is PromptMode.pointwise else "a pairwise prompt and rubric")
        raise EvaluationFileError(f"{evaluation.files[0].path} holds {evaluation.kind} votes, a {wanted.value} "
                                  f"evaluation, but prompt {cfg.prompt.name} is {cfg.prompt.mode.value}: choose {hint}")
    users_formats.check(cfg.output.summary_keys, cfg.prompt.mode, cfg.rubric.pass_threshold)
    return catalog.mode_for(cfg)


def refs_of(evaluation: EvaluationSet) -> list[ItemRef]:
    """One ItemRef per item (first file's order): where it was first read, its gold, human score, tags, category."""
    first: dict[str, Vote] = {}
    gold: dict[str, str] = {}
    for v in evaluation.votes:
        first.setdefault(v.item_id, v)
        if v.gold is not None:
            gold.setdefault(v.item_id, v.gold)
    return [ItemRef(id=i, gold=gold.get(i), source=first[i].where, tags=first[i].tags, category=first[i].category,
                    human_score=first[i].human_score) for i in evaluation.item_ids]


def judgments_of(evaluation: EvaluationSet, cfg: RunConfig, scoring: Scoring | None) -> list[Judgment]:
    """Each vote as the judgment a run would have made of it (no call: ``source`` is ``file``).

    Raises:
        EvaluationFileError: A score outside the rubric's scale or criteria it does not know, naming file and line.
    """
    return _judgments(evaluation.votes, cfg, scoring)


def _judgments(votes: Sequence[Vote], cfg: RunConfig, scoring: Scoring | None) -> list[Judgment]:
    ours = cfg.dataset.ours.name if cfg.dataset.ours is not None else "ours"
    return [_judgment(v, ours, scoring) for v in votes]


def _judgment(v: Vote, ours: str, scoring: Scoring | None) -> Judgment:
    status = Status(v.status) if v.status in {s.value for s in Status} else Status.ERROR
    order = None if v.kind == SCORE else Order(v.order or Order.AB.value)
    request = JudgeRequest(v.item_id, v.repeat, order, v.stage, "")
    response = JudgeResponse(text=v.text, source=FILE_SOURCE, attempts=0,
                             error=v.reason if status is Status.ERROR else None)
    extras = {"reasoning": v.text} if v.text and v.kind == SCORE else {}
    if status is not Status.SCORED:
        return Judgment(request, response, Verdict(None, reason=v.reason or status.value), None, status)
    if v.kind == SCORE:
        assert scoring is not None
        return Judgment(request, response, Verdict(None, scores=v.scores, extras=extras), None, status,
                        score=_overall(v, scoring))
    label = v.label
    if label is None and v.order is not None and order is not None:  # positional label only when the order is known
        label = TIE if v.verdict == TIE else _POSITIONAL[order][0 if v.verdict == ours else 1]
    return Judgment(request, response, Verdict(label), v.verdict, status)


def _overall(v: Vote, scoring: Scoring) -> float:
    """The vote's overall score: its own ``score``, else the rubric's weighted mean of its criteria."""
    names = {c.name for c in scoring.criteria}
    unknown = sorted(set(v.scores) - names)
    if unknown:
        raise EvaluationFileError(f"{v.where}: item {v.item_id!r}: criteria {unknown} are not in the rubric "
                                  f"(its criteria: {sorted(names)})")
    for c in scoring.criteria:
        value = v.scores.get(c.name)
        if value is not None and not (c.min <= value <= c.max and math.isfinite(value)):
            raise EvaluationFileError(f"{v.where}: item {v.item_id!r}: {c.name} {value} is outside [{c.min}, {c.max}]")
    if v.score is not None:
        if not scoring.low <= v.score <= scoring.high:
            raise EvaluationFileError(f"{v.where}: item {v.item_id!r}: score {v.score} is outside the rubric's scale "
                                      f"[{scoring.low}, {scoring.high}]")
        return v.score
    weights = scoring.category_weights.get(v.category or "", {})
    criteria = [replace(c, weight=weights.get(c.name, c.weight)) for c in scoring.criteria
                if c.when is None or c.name in v.scores]
    missing = [c.name for c in criteria if c.name not in v.scores]
    if missing:
        raise EvaluationFileError(f"{v.where}: item {v.item_id!r}: no score for {missing} (give every criterion "
                                  f"of the rubric, or an overall \"score\")")
    return scoring.overall(v.scores, criteria)


def _params(cfg: RunConfig, evaluation: EvaluationSet, job: AggregateJob) -> dict[str, Any]:
    """What the aggregation used, as MLflow params: the aggregation, the files (name, format, sha256), the preset and
    (scores) the rubric; not the judge, prompt or dataset of the composed config, which no file came from."""
    used = USED_CHOICES + (("rubric",) if evaluation.kind == SCORE else ())
    params: dict[str, Any] = {f"choice.{k}": v for k, v in job.choices.items() if k in used}
    params["aggregate.mode"] = cfg.prompt.mode.value
    chosen = ensemble_check.combine_of(cfg) if cfg.judge.members else cfg.aggregation  # the user's aggregation
    params.update({"aggregation.name": chosen.name, "aggregation.params": dict(chosen.params),
                   "aggregate.files": len(evaluation.files), "aggregate.repeats": evaluation.repeats,
                   "aggregate.kind": evaluation.kind, "aggregate.orders_known": evaluation.orders_known,
                   "n_items": len(evaluation.item_ids)})
    if cfg.judge.members:  # the files as an ensemble's members; each member's repeats aggregated by this one
        params.update({"aggregate.members": ",".join(cfg.judge.members),
                       "aggregate.member_repeats_aggregation": cfg.aggregation.name})
    for n, f in enumerate(evaluation.files):
        params[f"aggregate.file.{n}"] = str(f.path)
        params[f"aggregate.file.{n}.sha256"] = f.sha256
        params[f"aggregate.file.{n}.format"] = f.format
    if cfg.dataset.ours is not None and cfg.dataset.baseline is not None and evaluation.kind != SCORE:
        # what the role words ours / baseline in the files stand for (ours=, baseline=); `judgesweep compare` reads it
        params.update({"dataset.ours.name": cfg.dataset.ours.name, "dataset.baseline.name": cfg.dataset.baseline.name})
    return params
