"""The users' own report files (issue 44, point 5): each workflow's preset (``output.summary_keys=<workflow>``)
writes users_summary.json with exactly the keys, in the order, of a hand-made file in the users' format
(tests/fixtures/users/formats/reports/), in their units, with counts that add up. In process: the tutorial's
recorded answers (one of them unreadable) and the fake OpenAI server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import REPO, live_judge

REPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "users" / "formats" / "reports"
TUTORIAL = REPO / "runner" / "data" / "examples"
# mappings keyed by the users' data (item ids, tags, categories, verdict labels, check names): their entries are
# compared with each other, not their keys
DATA_KEYED = {"aggregated_results", "by_tag", "by_category", "final_verdict_distribution", "verdict_counts",
              "violations", "checks"}


def layout(doc: Any) -> dict[str, list[str]]:
    """Every mapping's path -> its keys in order (the union over a list's elements and a data-keyed mapping's
    entries, in the order first seen)."""
    out: dict[str, list[str]] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, list):
            for element in node:
                walk(element, f"{path}[]")
        elif isinstance(node, dict):
            if path.rsplit(".", 1)[-1] in DATA_KEYED:
                for value in node.values():
                    walk(value, f"{path}.*")
                return
            keys = out.setdefault(path, [])
            keys += [k for k in node if k not in keys]
            for key, value in node.items():
                walk(value, f"{path}.{key}")

    walk(doc, "")
    return out


def users_file(result) -> dict:
    assert result.proc.returncode == 0, result.output
    return json.loads((result.run_dir / "users_summary.json").read_text())


def fixture(name: str) -> dict:
    return json.loads((REPORTS / name).read_text())


def test_agent_rubric_users_report_has_their_keys_units_and_counts(run_cli):
    result = run_cli("experiment=agent_rubric", "judge=recorded", f"judge.path={TUTORIAL / 'agent_answers.jsonl'}",
                     "tracking=off")
    theirs = users_file(result)
    assert layout(theirs) == layout(fixture("agent_report.json"))
    ours = result.summary()["summary"]
    s = theirs["summary"]
    assert (s["total"], s["passed"], s["failed"]) == (12, 10, 2) and ours["unscored"] == 1  # the unscored one failed
    for section in (s, *theirs["by_tag"].values()):
        assert section["failed"] == section["total"] - section["passed"]
        assert section["pass_rate"] == pytest.approx(100 * section["passed"] / section["total"])  # percent
    assert [f["id"] for f in s["failed_examples"]] == ["agent-003", "agent-006"] and len(s["failed_examples"]) == 2
    unscored = next(d for d in theirs["detailed_results"] if d["id"] == "agent-006")
    assert (unscored["pass"], unscored["overall"], unscored["reasoning"]) == (False, None, "unscored: invalid_json")
    tools = [d["scores"] for d in theirs["detailed_results"] if "mcp_usage" in d["scores"]]
    assert tools and not any("tool_usage" in d["scores"] for d in theirs["detailed_results"])
    assert s["average_by_criterion"]["mcp_usage"] == ours["average_by_criterion"]["tool_usage"]
    assert sum(d["pass"] for d in theirs["detailed_results"]) == s["passed"]


def test_reply_quality_users_report_has_their_keys(run_cli):
    result = run_cli("experiment=reply_quality", "judge=recorded", f"judge.path={TUTORIAL / 'reply_answers.jsonl'}",
                     "gate.min_mean_score=null", "tracking=off")
    theirs = users_file(result)
    assert layout(theirs) == layout(fixture("reply_quality_report.json"))
    s = theirs["summary"]
    assert s["unscored"] == s["total"] - s["scored"] and s["total"] == 16
    assert s["consistency"]["std"] == "sample (n-1)" and s["human_correlation"]["n"] == 16
    assert s["average_score"] == result.summary()["summary"]["average_overall"]


def test_robust_pairwise_users_summary_has_their_ten_keys(run_cli, fake_server):
    # greet-01's three answers are unreadable: an item without a valid vote, counted but not successful
    fake_server.reply = lambda body: "no verdict" if "hey, you around?" in json.dumps(body) else "[[A]]"
    result = run_cli("experiment=robust_pairwise", *live_judge(fake_server), "tracking=off", "cache.mode=off")
    theirs = users_file(result)
    assert layout(theirs) == layout(fixture("robust_pairwise_summary.json"))
    s = theirs["summary"]
    assert len(s) == 10 and list(theirs) == ["summary", "aggregated_results"]
    failed = [i for i, r in theirs["aggregated_results"].items() if r["final_verdict"] is None]
    assert failed == ["greet-01"] and s["total_subsets"] - s["successful_evaluations"] == 1
    assert sum(s["final_verdict_distribution"].values()) == s["successful_evaluations"] == 7
    assert result.summary()["summary"]["failed_items"] == ["greet-01"]  # summary.json keeps judgesweep's keys


def test_a_users_format_of_the_other_mode_fails_before_any_call(run_cli, fake_server):
    result = run_cli("experiment=reply_quality", *live_judge(fake_server), "output.summary_keys=robust_pairwise",
                     "tracking=off")
    assert result.proc.returncode == 1
    assert ("output.summary_keys=robust_pairwise is the format of a pairwise run; this run is pointwise (prompt.mode)"
            in result.output)
    assert fake_server.requests == []
