"""Pairwise runs, before any call: the rubric's labels and parsers, the templates, the answer's schema.

A pairwise run shows the judge two candidates (ours, baseline) in the orders the order policy asks
for; its verdicts are aggregated per item by a registered vote aggregation (majority_vote).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runner.core.choices import OrderPolicy, PairError, Strategy
from runner.core.config import RunConfig
from runner.core.errors import ConfigurationError
from runner.core.types import TIE
from runner.inputs.prompts import Template, check_variables, load_template
from runner.judging import aggregation
from runner.judging.judge import PAIRWISE_VARIABLES, SYNTHESIS_VARIABLES
from runner.judging.parsers.labels import PARSERS, response_schema
from runner.modes import output_formats

POSITIONAL_LABELS = frozenset({"A", "B", TIE})


def check_rubric(cfg: RunConfig) -> None:
    """The rubric offers positional labels, and its parsers and the aggregation take their parameters."""
    output_formats.check_output_format(cfg)
    bad = set(cfg.rubric.labels) - POSITIONAL_LABELS
    if bad or len(cfg.rubric.labels) < 2:
        raise ConfigurationError(f"rubric {cfg.rubric.name}: labels must be two or more of A, B, tie; got "
                                 f"{list(cfg.rubric.labels)}")
    for key, parser in (("parser", cfg.rubric.parser), ("synthesis_parser", cfg.rubric.synthesis_parser)):
        if parser is not None:
            PARSERS.dry_run(parser.name, dict(parser.params), "", tuple(cfg.rubric.labels),
                            key=f"rubric {cfg.rubric.name}: rubric.{key}.params")
    aggregation.AGGREGATIONS.check_params(cfg.aggregation.name, dict(cfg.aggregation.params), fixed=2)
    check_pair_error(cfg)


def check_pair_error(cfg: RunConfig) -> None:
    """``pair_error: drop`` needs pairs (order=both) and one judge: an ensemble's members are not dropped from."""
    if cfg.rubric.pair_error is not PairError.drop:
        return
    if cfg.order is not OrderPolicy.both:
        raise ConfigurationError(f"rubric {cfg.rubric.name}: rubric.pair_error=drop leaves out pairs judged in both "
                                 f"orders; set order=both (got order={cfg.order.value})")
    if cfg.judge.members:
        raise ConfigurationError(f"rubric {cfg.rubric.name}: rubric.pair_error=drop applies to a single judge, not "
                                 f"to the ensemble {cfg.judge.name}")


def load_templates(cfg: RunConfig, prompts_dirs: Sequence[Path]) -> tuple[Template, Template | None]:
    """Load the judge template (and the synthesis template of swap-and-synthesize) and check their variables."""
    provided = set(cfg.dataset.variables)
    where = f"dataset {cfg.dataset.name} (variables: {sorted(cfg.dataset.variables)}) plus the runner"
    template = load_template(prompts_dirs, cfg.prompt.template)
    check_variables(template, provided | PAIRWISE_VARIABLES, where)
    synthesis = None
    if cfg.prompt.strategy is Strategy.swap_synthesize:
        if cfg.prompt.synthesis_template is None:
            raise ConfigurationError(f"prompt {cfg.prompt.name}: strategy swap_synthesize needs synthesis_template")
        if cfg.order is not OrderPolicy.both:
            raise ConfigurationError(f"prompt {cfg.prompt.name}: swap_synthesize judges both orders; "
                                     f"set order=both (got order={cfg.order.value})")
        synthesis = load_template(prompts_dirs, cfg.prompt.synthesis_template)
        check_variables(synthesis, provided | SYNTHESIS_VARIABLES, where)
    return template, synthesis


def response_schema_for(cfg: RunConfig) -> dict[str, Any] | None:
    """The JSON schema of the rubric's verdict, when its parser reads JSON (else None)."""
    parser = cfg.rubric.parser
    return response_schema(parser.name, cfg.rubric.labels, parser.params)
