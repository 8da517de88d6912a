"""Pairwise runs: the judge sees two candidates (ours, baseline) in the orders the order policy asks for; its
verdicts are aggregated per item. setup (before any call), report (the summary), views (console, HTML), mode."""

from runner.modes.pairwise.report import build, summary_metrics
from runner.modes.pairwise.setup import POSITIONAL_LABELS, check_rubric, load_templates, response_schema_for

__all__ = ["POSITIONAL_LABELS", "build", "check_rubric", "load_templates", "response_schema_for", "summary_metrics"]

from runner.modes.pairwise import groups  # noqa: E402, F401 - registers the per-category and per-tag statistics
