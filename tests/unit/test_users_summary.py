"""The users' summary keys (runner.modes.users_summary; issue 30, point 6): judgesweep's names renamed at the places
the run modes write them, never a key that is the user's data, and never by overwriting a number."""

from __future__ import annotations

import copy

import pytest

from runner.core.choices import PromptMode, SummaryKeys
from runner.core.errors import ConfigurationError
from runner.modes.users_formats import agent_rubric, check
from runner.modes.users_summary import users_keys


def pointwise_doc() -> dict:
    """A pointwise summary.json's shape, with a category, a tag, an item and a member named like the renamed keys."""
    section = {"total": 2, "average_overall": 7.5, "pass_rate": 0.5}
    return {
        "summary": {**section, "average_overall_ci": {"low": 6.0, "high": 9.0},
                    "failed_examples": [{"id": "output", "overall": 3.0, "input": "q", "output": "the reply"}]},
        "by_tag": {"output": dict(section)},
        "by_category": {"average_overall": dict(section)},
        "detailed_results": [{"id": "output", "overall": 3.0, "expected_output": "e", "output": "the reply"}],
        "ensemble": {"members": ["output"], "member_headline": {"output": {"average_overall": 7.0, "scored": 2}}},
    }


def test_the_pointwise_sections_and_examples_get_the_users_names():
    doc = pointwise_doc()
    before = copy.deepcopy(doc)
    users = users_keys(doc)
    assert doc == before  # summary.json's own document is left as it is
    s = users["summary"]
    assert (s["average_score"], s["average_score_ci"]) == (7.5, {"low": 6.0, "high": 9.0})
    assert "average_overall" not in s and "average_overall_ci" not in s
    assert list(s)[:3] == ["total", "average_score", "pass_rate"]  # each key where ours was
    assert s["failed_examples"] == [{"id": "output", "overall": 3.0, "input": "q", "actual": "the reply"}]
    assert users["detailed_results"] == [{"id": "output", "overall": 3.0, "expected_output": "e",
                                          "actual": "the reply"}]
    # a tag, a category and a member named like a key stay as the user named them; their sections are renamed
    assert users["by_tag"] == {"output": {"total": 2, "average_score": 7.5, "pass_rate": 0.5}}
    assert users["by_category"] == {"average_overall": {"total": 2, "average_score": 7.5, "pass_rate": 0.5}}
    assert users["ensemble"]["member_headline"] == {"output": {"average_score": 7.0, "scored": 2}}
    assert users["ensemble"]["members"] == ["output"]


def test_a_pairwise_summary_is_already_the_users_format():
    doc = {"summary": {"total_subsets": 2, "failed_items": ["q2"], "skipped_rows": []},
           "aggregated_results": {"output": {"final_verdict": "chat", "verdicts": ["chat"]}, "q2": {"verdicts": []}}}
    assert users_keys(doc) == doc


def test_a_place_holding_both_names_is_refused_rather_than_overwritten():
    with pytest.raises(ValueError, match="'output' and 'actual' in one place"):
        users_keys({"detailed_results": [{"id": "a", "output": "x", "actual": "y"}]})


def test_the_agent_format_needs_a_pass_threshold_and_counts_unscored_as_failed() -> None:
    with pytest.raises(ConfigurationError, match="output.summary_keys=agent_rubric .* needs rubric.pass_threshold"):
        check(SummaryKeys.agent_rubric, PromptMode.pointwise, None)
    check(SummaryKeys.users, PromptMode.pairwise, None)  # not a workflow's format: nothing to check
    section = {"total": 3, "passed": 1, "failed": 1, "pass_rate": 1 / 3, "average_overall": 3.0,
               "average_by_criterion": {"accuracy": 3.0, "tool_usage": 2.0}}
    row = {"id": "a", "status": "scored", "tags": [], "scores": {"tool_usage": 2.0}, "overall": 2.0, "passed": False,
           "reasoning": "weak", "improvement_suggestions": ["more"], "unscored_reasons": []}
    rows = [row, {**row, "id": "b", "passed": True}, {**row, "id": "c", "status": "error", "scores": {},
                                                     "overall": None, "passed": None, "unscored_reasons": ["Timeout"]}]
    doc = {"summary": {**section, "failed_examples": [{"id": "a", "overall": 2.0, "reasoning": "weak"}]},
           "by_tag": {}, "detailed_results": rows}
    s = agent_rubric(doc)["summary"]
    assert (s["failed"], s["pass_rate"]) == (2, pytest.approx(100 / 3))
    assert [(f["id"], f["reasoning"]) for f in s["failed_examples"]] == [("a", "weak"), ("c", "error: Timeout")]
    assert s["average_by_criterion"] == {"accuracy": 3.0, "mcp_usage": 2.0}
