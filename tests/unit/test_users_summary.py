"""The users' summary keys (runner.modes.users_summary; issue 30, point 6): judgesweep's names renamed at the places
the run modes write them, never a key that is the user's data, and never by overwriting a number."""

from __future__ import annotations

import copy

import pytest

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
