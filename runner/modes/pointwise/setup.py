"""Pointwise runs before any call: the scored rubric, its parser and aggregation, the checks, the template
variables and the generator's template; and the deterministic checks on the candidates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.core.choices import Strategy
from runner.core.config import RunConfig
from runner.core.errors import ConfigurationError
from runner.core.types import Item
from runner.inputs.prompts import Template, check_variables, load_template
from runner.judging import checks as checks_mod
from runner.judging.judge import POINTWISE_VARIABLES
from runner.judging.parsers.scores import SCORE_PARSERS, score_schema
from runner.judging.scoring import SCORE_AGGREGATIONS, Scoring
from runner.modes import output_formats, scorecard


@dataclass(frozen=True)
class PointwiseSetup:
    """What a validated pointwise run carries besides its judge plan."""

    scoring: Scoring
    checks: tuple[scorecard.CheckSpec, ...]
    check_calls: tuple[tuple[str, Mapping[str, Any]], ...]  # (registered name, params) per check
    enforced: frozenset[str]  # checks whose target fails the run
    generator_template: Template | None


def prepare(cfg: RunConfig, prompts_dirs: Sequence[Path]) -> tuple[Template, PointwiseSetup]:
    """Validate a pointwise configuration and load its templates; no network, no call.

    Raises:
        ConfigurationError, runner.judging.scoring.RubricError, runner.inputs.prompts.TemplateError,
        runner.core.registry.UnknownNameError, runner.core.errors.ParamsError: naming the rubric, template or key.
    """
    if cfg.prompt.strategy is not Strategy.single:
        raise ConfigurationError(f"prompt {cfg.prompt.name}: strategy {cfg.prompt.strategy.value} is pairwise only")
    output_formats.check_output_format(cfg)
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
    template = load_template(prompts_dirs, cfg.prompt.template)
    check_variables(template, provided | POINTWISE_VARIABLES, where)
    generator_template = None
    if cfg.generator is not None:
        generator_template = load_template(prompts_dirs, cfg.generator.template)
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


def read_candidates(items: Iterable[Item], check_calls: Sequence[tuple[str, Mapping[str, Any]]],
                    input_variable: str | None, expected_variable: str | None
                    ) -> tuple[dict[str, dict[str, list[str]]], dict[str, scorecard.ItemTexts]]:
    """One pass over the judged items: the checks' violations (as :func:`check_candidates`) and each item's input,
    expected output and judged output for the report (the items are streamed: read once, not kept)."""
    violations: dict[str, dict[str, list[str]]] = {}
    texts: dict[str, scorecard.ItemTexts] = {}
    for item in items:
        output = item.candidates[0].text if item.candidates else None
        texts[item.id] = scorecard.ItemTexts(
            input=item.variables.get(input_variable) if input_variable else None,
            expected_output=item.variables.get(expected_variable) if expected_variable else None, output=output)
        if check_calls and output is not None:
            violations[item.id] = checks_mod.run_checks(output, check_calls)
    return violations, texts
