"""Which rubric output formats fit which prompt mode: a rubric whose parser reads the other mode's format is refused
naming both (``rubric=agent_output`` on a pairwise prompt), not as an unknown parser."""

from __future__ import annotations

from runner.core.choices import PromptMode
from runner.core.config import RunConfig
from runner.core.errors import ConfigurationError
from runner.judging.parsers.labels import PARSERS
from runner.judging.parsers.scores import SCORE_PARSERS

# mode -> (what its rubrics read, the registry of its parsers)
FORMATS = {PromptMode.pairwise: ("a verdict between two candidates", PARSERS),
           PromptMode.pointwise: ("scores per criterion", SCORE_PARSERS)}


def check_output_format(cfg: RunConfig) -> None:
    """Refuse a rubric whose parser is only the other mode's, naming the rubric, its parser, the prompt, both modes."""
    mode, name = cfg.prompt.mode, cfg.rubric.parser.name
    fits = FORMATS[mode][1]
    for other, (reads, registry) in FORMATS.items():
        if other is not mode and name in registry.names() and name not in fits.names():
            raise ConfigurationError(
                f"rubric {cfg.rubric.name} reads {reads} (parser {name}), an output format for {other.value} prompts; "
                f"prompt {cfg.prompt.name} is {mode.value} (mode={mode.value}): pick a {mode.value} rubric "
                f"(parser {', '.join(fits.names())}) or a {other.value} prompt")
