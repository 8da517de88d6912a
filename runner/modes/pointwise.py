"""Pointwise runs: validate a scored rubric before any call, then turn judgments into the report.

A pointwise run judges one candidate per item (from the dataset, or written first by a generator)
on the rubric's criteria. This module holds what only such runs need: the start-up checks (rubric,
parser, aggregation, checks, template variables, the generator's template) and the step from
judgments to the users' report (scores per item, checks on the candidates, metrics, console lines).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from runner.core.config import RunConfig, Strategy
from runner.core.errors import ConfigurationError
from runner.core.types import Item, Judgment
from runner.inputs.prompts import Template, check_variables, load_template
from runner.judging import checks as checks_mod
from runner.judging.judge import POINTWISE_VARIABLES
from runner.judging.score_parsing import SCORE_PARSERS, score_schema
from runner.judging.scoring import SCORE_AGGREGATIONS, Scoring
from runner.modes import bias, score_panel, scorecard


@dataclass(frozen=True)
class PointwiseSetup:
    """What a validated pointwise run carries besides its judge plan."""

    scoring: Scoring
    checks: tuple[scorecard.CheckSpec, ...]
    check_calls: tuple[tuple[str, Mapping[str, Any]], ...]  # (registered name, params) per check
    enforced: frozenset[str]  # checks whose target fails the run
    generator_template: Template | None


def prepare(cfg: RunConfig, prompts_dir: Path) -> tuple[Template, PointwiseSetup]:
    """Validate a pointwise configuration and load its templates; no network, no call.

    Raises:
        ConfigurationError, runner.judging.scoring.RubricError, runner.inputs.prompts.TemplateError,
        runner.core.registry.UnknownNameError, runner.core.errors.ParamsError: naming the rubric, template or key.
    """
    if cfg.prompt.strategy is not Strategy.single:
        raise ConfigurationError(f"prompt {cfg.prompt.name}: strategy {cfg.prompt.strategy.value} is pairwise only")
    scoring = Scoring.from_config(cfg.rubric)
    SCORE_PARSERS.dry_run(cfg.rubric.parser.name, dict(cfg.rubric.parser.params), "", scoring.criteria,
                          key=f"rubric {cfg.rubric.name}: rubric.parser.params")
    SCORE_AGGREGATIONS.check_params(cfg.aggregation.name, dict(cfg.aggregation.params), fixed=1)
    for check in cfg.rubric.checks:
        checks_mod.check_params(check.name, dict(check.params))
    names = [c.name for c in cfg.rubric.checks]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"rubric {cfg.rubric.name}: checks repeat: {names}")
    provided = set(cfg.dataset.variables) | set(cfg.dataset.optional_variables)
    missing_when = sorted(scoring.when_variables - provided)
    if missing_when:
        raise ConfigurationError(f"rubric {cfg.rubric.name}: criteria depend on variable(s) {missing_when} that "
                                 f"dataset {cfg.dataset.name} does not map (variables or optional_variables)")
    where = f"dataset {cfg.dataset.name} (variables: {sorted(provided)}) plus the runner"
    template = load_template(prompts_dir, cfg.prompt.template)
    check_variables(template, provided | POINTWISE_VARIABLES, where)
    generator_template = None
    if cfg.generator is not None:
        generator_template = load_template(prompts_dir, cfg.generator.template)
        check_variables(generator_template, provided, f"dataset {cfg.dataset.name} (for generator "
                        f"{cfg.generator.name})")
    setup = PointwiseSetup(
        scoring=scoring,
        checks=tuple(scorecard.CheckSpec(c.name, c.max_rate) for c in cfg.rubric.checks),
        check_calls=tuple((c.name, dict(c.params)) for c in cfg.rubric.checks),
        enforced=frozenset(c.name for c in cfg.rubric.checks if c.enforce),
        generator_template=generator_template,
    )
    return template, setup


def response_format_schema(setup: PointwiseSetup, parser_name: str) -> dict[str, Any] | None:
    """The JSON schema a judge can be asked to follow, or None when the parser does not read JSON."""
    return score_schema(setup.scoring.criteria) if parser_name == "json_scores" else None


def check_candidates(items: Iterable[Item], check_calls: Sequence[tuple[str, Mapping[str, Any]]]
                     ) -> dict[str, dict[str, list[str]]]:
    """Run the deterministic checks on each item's candidate: item id -> check name -> violations."""
    if not check_calls:
        return {}
    return {item.id: checks_mod.run_checks(item.candidates[0].text, check_calls) for item in items if item.candidates}


def build(cfg: RunConfig, setup: PointwiseSetup, refs: Sequence[Any], judgments: Sequence[Judgment],
          violations: Mapping[str, Mapping[str, Sequence[str]]], not_generated: frozenset[str]) -> dict[str, Any]:
    """The users' report for a pointwise run (see runner.modes.scorecard)."""
    items = scorecard.score_items(refs, judgments, setup.scoring, cfg.aggregation.name, cfg.aggregation.params,
                                  violations, not_generated)
    return report_of(cfg, setup, items, cfg.repeats)


def build_panel(cfg: RunConfig, setup: PointwiseSetup, refs: Sequence[Any], by_member: Mapping[str, Sequence[Judgment]],
                violations: Mapping[str, Mapping[str, Sequence[str]]], not_generated: frozenset[str]
                ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """An ensemble's report (runner.modes.score_panel) and each member's own report."""
    items = {m: scorecard.score_items(refs, js, setup.scoring, cfg.aggregation.name, cfg.aggregation.params,
                                      violations, not_generated) for m, js in by_member.items()}
    reports = {m: report_of(cfg, setup, member_items, cfg.repeats) for m, member_items in items.items()}
    weights = {m: float(cfg.judge.weights.get(m, 1.0)) for m in by_member}
    # the ensemble's items carry no repeats of their own: its consistency is each member's
    report, _ = score_panel.build(reports, items, setup.scoring, cfg.judge.combine, weights,
                                  lambda combined: report_of(cfg, setup, combined, 1))
    return report, reports


def report_of(cfg: RunConfig, setup: PointwiseSetup, items: Sequence[scorecard.ItemScore], repeats: int
              ) -> dict[str, Any]:
    """The users' report over scored items: the scorecard plus the length-preference check."""
    report = scorecard.build_report(items, setup.scoring, repeats, cfg.rubric.consistency_threshold,
                                    setup.checks, ci=(cfg.metrics.ci_level, cfg.metrics.ci_resamples, cfg.seed))
    # length preference, where the outputs' lengths are known (dataset candidates; not generated ones)
    measured = [i for i in items if i.status == scorecard.SCORED and i.ref.lengths]
    report["bias"] = {"length": bias.length_score_bias([i.ref.lengths[0] for i in measured],
                                                       [i.overall for i in measured],
                                                       [i.ref.human_score for i in measured])}
    return report


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value * 100:.1f}%" if pct else f"{value:.2f}"


def render_console(rep: Mapping[str, Any], judge: Mapping[str, Any], title: str, gate_lines: Sequence[str] = (),
                   console: Console | None = None) -> None:
    """Print a compact pointwise summary with rich (labels and reasons are printed as data, not markup)."""
    console = console or Console()
    s = rep["summary"]
    crit = ", ".join(f"{name} {_fmt(v)}" for name, v in s["average_by_criterion"].items())
    lines = [f"items {s['total']}: scored {s['scored']}, unscored {s['unscored']}, errors {s['errors']}",
             f"average overall {_fmt(s['average_overall'])} on [{s['scale'][0]:g}, {s['scale'][1]:g}]; {crit}"]
    if s["pass_rate"] is not None:
        lines.append(f"passed {s['passed']}, failed {s['failed']}: pass rate {_fmt(s['pass_rate'], True)} "
                     f"(threshold {s['pass_threshold']:g})")
    for tag, sec in rep["by_tag"].items():
        lines.append(f"  tag {tag}: {sec['scored']} scored, pass rate {_fmt(sec['pass_rate'], True)}, "
                     f"mean {_fmt(sec['average_overall'])}")
    if "consistency" in s:
        c = s["consistency"]
        lines.append(f"consistency over {c['repeats']} repeats: mean std {_fmt(c['mean_std'])}, "
                     f"above {c['threshold']:g}: {_fmt(c['share_above_threshold'], True)}")
    if "human_correlation" in s:
        h = s["human_correlation"]
        lines.append(f"human agreement (n={h['n']}): pearson {_fmt(h['pearson']['r'])}, spearman "
                     f"{_fmt(h['spearman']['rho'])}, within +-{h['tolerance']:g} {_fmt(h['within_1_rate'], True)}")
    for name, chk in (s.get("checks") or {}).items():
        lines.append(f"check {name}: {chk['items_with_violations']} of {chk['items_checked']} items "
                     f"({_fmt(chk['violation_rate'], True)}; target < {_fmt(chk['max_rate'], True)})")
    lines.append(f"judge calls {judge['judge/calls']}: unscored {judge['judge/unscored']} "
                 f"({_fmt(judge['judge/parse_failure_rate'], True)}), errors {judge['judge/errors']}, "
                 f"cost ${judge['cost/usd_total']:.4f}")
    console.print(Text(title, style="bold"), soft_wrap=True)
    for line in [*lines, *gate_lines]:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
