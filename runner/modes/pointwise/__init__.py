"""Pointwise runs: the judge scores one candidate per item (from the dataset, or written first by a generator)
on the rubric's criteria. setup (before any call), report (the scorecard), views (console, HTML), mode."""

from runner.modes.pointwise.report import build, build_panel, report_of, summary_metrics
from runner.modes.pointwise.setup import PointwiseSetup, check_candidates, prepare, response_format_schema

__all__ = ["PointwiseSetup", "build", "build_panel", "check_candidates", "prepare", "report_of",
           "response_format_schema", "summary_metrics"]
