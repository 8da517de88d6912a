"""Pointwise rubric judging end to end: the real CLI, litellm over HTTP to a loopback fake judge (and
generator), and the MLflow sqlite store read back.

Each fake server finds the item a request is about from the rendered prompt (each item's input text, or
the chat message replied to, appears in it) and answers with the scores scripted here, so every number
the runner reports is checked against a value computed in the test from the script and the dataset.
The CLI runs are independent (own server, run dir, cache and MLflow store each) and start together once
per module, a few at a time; the tests below read what they left.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf
from scipy import stats as scipy_stats

from runner.judging.checks import ai_phrases
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.conftest import REPO, CliRun, live_judge, mlflow_uri, run_in_process
from tests.integration.shared import (
    AGENT_CRITERIA,
    JUDGE_SAYS_FAIL,
    NOT_GENERATED,
    Router,
    agent_answer,
    generated_text,
    generation_overrides,
    generator_and_judge,
    loaded,
)

EXAMPLES = REPO / "runner" / "data" / "examples"
REPLY_CRITERIA = ("naturalness", "appropriateness", "intent_match")
REPLY_WEIGHTS = {"emotion": (0.5, 0.3, 0.2)}  # every other category: DEFAULT_REPLY_WEIGHTS
DEFAULT_REPLY_WEIGHTS = (0.4, 0.3, 0.3)

# The five base criteria, then tool_usage. The judge sends tool_usage for every example; it may only count
# where the example lists expected tool calls (agent-002, -007, -008, -011).
AGENT_SCORES = {
    "agent-001": (4, 4, 4, 4, 3, 1),  # 3.8 passes; it would fail if its tool_usage counted
    "agent-002": (3, 4, 3, 4, 3, 4),  # 21/6 = 3.5: exactly at the threshold passes
    "agent-003": (2, 3, 4, 1, 3, 5),  # 2.6 fails
    "agent-004": (5, 5, 5, 5, 5, 1),
    "agent-005": (4, 5, 4, 4, 4, 1),
    "agent-006": (5, 4, 5, 5, 5, 1),
    "agent-007": (4, 4, 4, 4, 4, 5),
    "agent-008": (4, 4, 3, 4, 4, 1),  # 20/6 fails; it would pass (3.8) without its tool_usage
    "agent-009": (5, 5, 4, 5, 5, 1),
    "agent-010": (3, 4, 3, 4, 3, 1),  # 3.4: just under
    "agent-011": (5, 5, 5, 5, 4, 3),
    "agent-012": (4, 4, 4, 5, 4, 1),
}
AGENT_FAILING = ["agent-003", "agent-008", "agent-010"]
# For the gates: every criterion of an item gets one score, so 9 items at 4 and 3 at 3 give a pass rate of
# exactly 0.75 and a mean of exactly 3.75.
GATE_SCORES = {item_id: 3 if item_id in AGENT_FAILING else 4 for item_id in AGENT_SCORES}

# Reply quality, per item: (naturalness, appropriateness, intent_match) on 0-10; REPLY_SPREAD moves
# naturalness by -s, 0, +s over the three repeats (in the order the calls arrive). No two items tie.
REPLY_BASE = {
    "reply-001": (3, 3, 2), "reply-002": (9, 9, 8), "reply-003": (5, 6, 5), "reply-004": (9, 9, 8),
    "reply-005": (4, 3, 4), "reply-006": (6, 6, 5), "reply-007": (8, 9, 8), "reply-008": (6, 5, 5),
    "reply-009": (9, 9, 9), "reply-010": (3, 3, 3), "reply-011": (8, 9, 9), "reply-012": (5, 5, 4),
    "reply-013": (7, 6, 7), "reply-014": (4, 4, 2), "reply-015": (7, 8, 7), "reply-016": (7, 6, 6),
}
REPLY_SPREAD = {"reply-001": 2, "reply-004": 1, "reply-010": 2, "reply-012": 1, "reply-014": 2}

BAD_ANSWERS = {  # item -> (judge text, the start of the reason it is unscored)
    "agent-001": ('{"scores": {"accuracy": 4, "completeness": 4,, }, "reasoning": "x"}', "invalid_json"),
    "agent-002": (json.dumps({"scores": dict(zip(AGENT_CRITERIA, (4, 4, 4, 4, 4), strict=True)),
                              "reasoning": "no tool_usage"}), "missing_key: tool_usage"),
    "agent-003": (json.dumps({"scores": dict(zip(AGENT_CRITERIA, (7, 4, 4, 4, 4), strict=True))}),
                  "out_of_range: accuracy=7"),
    "agent-004": (json.dumps({"scores": dict(zip(AGENT_CRITERIA, (4, "very good", 4, 4, 4), strict=True))}),
                  "not_a_number: completeness"),
}
GOOD_ANSWERS = {"agent-005": (4, 5, 4, 4, 4, 1), "agent-006": (3, 3, 3, 3, 3, 1)}  # 4.2 passes, 3.0 fails


# ---------------------------------------------------------------------------------------------- helpers


def cli(tmp: Path, name: str, *overrides: str) -> CliRun:
    """One run (in this process, as the CLI would make it) with its run dir ``tmp/name`` and the cache and MLflow
    store of ``tmp``; without MLflow traces or report.html's figures, as run_cli's runs (no test here reads them:
    test_genai_traces and test_plots do)."""
    run_dir = tmp / name
    return CliRun(proc=run_in_process(tmp, run_dir, (*overrides, "tracking.traces=false", "output.plots=false")),
                  run_dir=run_dir, mlflow_uri=mlflow_uri(tmp))


def git(*args: str) -> str:
    """What git says about the repo the CLI runs from (runs are tagged with it)."""
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


def mlflow_run(result: CliRun):
    """The MLflow run of a CLI run (its id is in the run dir's run.json)."""
    run_id = json.loads((result.run_dir / "run.json").read_text())["mlflow_run_id"]
    return MlflowClient(tracking_uri=result.mlflow_uri).get_run(run_id)


def jsonl(path: Path) -> list[dict]:
    """The JSON objects of a .jsonl file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def dataset_rows(name: str) -> list[dict]:
    """A shipped dataset's rows, read as plain JSON (independent of the runner's loader)."""
    path = EXAMPLES / name
    return jsonl(path) if path.suffix == ".jsonl" else json.loads(path.read_text())["examples"]


def tool_items() -> set[str]:
    """The examples that list expected tool calls (read from the dataset file)."""
    return {row["id"] for row in dataset_rows("agent_examples.json") if row.get("mcp_calls_expected")}


def agent_overall(item_id: str, scores: tuple[int, ...], tools: set[str]) -> float:
    """Mean of the criteria that apply: tool_usage only where tool calls are expected."""
    applied = scores if item_id in tools else scores[:5]
    return sum(applied) / len(applied)


def agent_judge(scores: dict[str, tuple[int, ...]]) -> Callable[[dict], str]:
    """A reply policy answering each agent example's judge request with its scripted scores."""
    router = Router.agent()

    def reply(body: dict) -> str:
        item_id = router.route(body)[1]
        return agent_answer(item_id, scores[item_id])
    return reply


def uniform(per_item: dict[str, int]) -> dict[str, tuple[int, ...]]:
    """The same score on every criterion, so an item's overall is exactly that score."""
    return {item_id: (score,) * 6 for item_id, score in per_item.items()}


def unscored_judge() -> Callable[[dict], str]:
    """BAD_ANSWERS for the first four examples, GOOD_ANSWERS for the next two."""
    router = Router.agent()

    def reply(body: dict) -> str:
        item_id = router.route(body)[1]
        return BAD_ANSWERS[item_id][0] if item_id in BAD_ANSWERS else agent_answer(item_id, GOOD_ANSWERS[item_id])
    return reply


def reply_repeats(item_id: str) -> list[tuple[int, int, int]]:
    """The three scripted (naturalness, appropriateness, intent_match) answers of an item."""
    n, a, i = REPLY_BASE[item_id]
    s = REPLY_SPREAD.get(item_id, 0)
    return [(n + d, a, i) for d in (-s, 0, s)]


def reply_judge() -> Callable[[dict], str]:
    """Each reply's scripted scores, the k-th call for an item getting its k-th repeat."""
    router = Router.reply_quality()

    def reply(body: dict) -> str:
        _, item_id, n = router.route(body)
        scores = reply_repeats(item_id)[n]
        return json.dumps({"scores": dict(zip(REPLY_CRITERIA, scores, strict=True)), "reasoning": f"{item_id} #{n}"})
    return reply


# ------------------------------------------------------------------------------------- the CLI runs


@dataclass
class Finished:
    """A CLI run, and the chat requests its server received."""

    result: CliRun
    requests: list[dict]
    extra: dict = field(default_factory=dict)


def baseline_chain(tmp: Path, server: FakeOpenAIServer) -> Finished:
    """gate.baseline_run="latest on <branch>": with no baseline yet, then a first run, one whose mean fell
    by more than max_drop and one whose mean fell by exactly max_drop (one store, in that order)."""
    branch = git("rev-parse", "--abbrev-ref", "HEAD")
    common = ["experiment=agent_rubric", *live_judge(server), "max_items=2", "cache.mode=off"]
    baseline = [f"gate.baseline_run='latest on {branch}'", "gate.max_drop=0.5"]
    missing = cli(tmp, "missing", *common, *baseline)
    requests_after_missing = server.requests
    server.reply = agent_judge(uniform({"agent-001": 5, "agent-002": 5}))
    first = cli(tmp, "first", *common)
    server.reply = agent_judge(uniform({"agent-001": 4, "agent-002": 4}))
    dropped = cli(tmp, "dropped", *common, *baseline)
    server.reply = agent_judge(uniform({"agent-001": 5, "agent-002": 4}))
    within = cli(tmp, "within", *common, *baseline)
    return Finished(first, server.requests, {"branch": branch, "missing": missing, "dropped": dropped,
                                             "within": within, "requests_after_missing": requests_after_missing})


# name -> (reply policy, overrides given the server); "baseline" is the chain above.
RUNS: dict[str, tuple[Callable[[], Callable], Callable[[FakeOpenAIServer], list[str]]]] = {
    "agent_json": (lambda: agent_judge(AGENT_SCORES), lambda s: ["experiment=agent_rubric", *live_judge(s)]),
    "agent_jsonl": (lambda: agent_judge(AGENT_SCORES),
                    lambda s: ["experiment=agent_rubric", *live_judge(s), "dataset=agent_examples_jsonl",
                               "tracking=off"]),
    "gates_met": (lambda: agent_judge(uniform(GATE_SCORES)),
                  lambda s: ["experiment=agent_rubric", *live_judge(s), "tracking=off", "gate.min_pass_rate=0.75",
                             "gate.min_mean_score=3.75"]),
    "mean_below": (lambda: agent_judge(uniform(GATE_SCORES)),
                   lambda s: ["experiment=agent_rubric", *live_judge(s), "tracking=off", "gate.min_pass_rate=0.75",
                              "gate.min_mean_score=3.76"]),
    "unscored": (unscored_judge, lambda s: ["experiment=agent_rubric", *live_judge(s), "max_items=6",
                                            "gate.min_pass_rate=0.5"]),
    "reply_quality": (reply_judge, lambda s: ["experiment=reply_quality", *live_judge(s)]),
    "generation": (generator_and_judge, generation_overrides),
    "baseline": (lambda: None, lambda s: []),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, empty_mlflow_store) -> dict[str, Finished]:
    """Every run of this module, each with its own fake server and tmp dir, one after another (runs in this
    process share its environment, working directory and output streams).

    Each tmp dir starts with a copy of the test process's empty MLflow store (empty_mlflow_store, made once per
    process and shared with the other modules): creating the tables costs a run seconds of CPU.
    """
    with ExitStack() as stack:
        servers = {name: stack.enter_context(FakeOpenAIServer(policy())) for name, (policy, _) in RUNS.items()}

        def one(name: str) -> Finished:
            tmp = tmp_path_factory.mktemp(name)
            shutil.copyfile(empty_mlflow_store(), tmp / "mlflow.db")
            if name == "baseline":
                return baseline_chain(tmp, servers[name])
            result = cli(tmp, "run", *RUNS[name][1](servers[name]))
            return Finished(result, servers[name].requests)

        return {name: one(name) for name in RUNS}


# ------------------------------------------------------------------------------ agent preset end to end


def test_agent_preset_summary_counts_the_threshold_not_the_judges_pass(runs):
    result = runs["agent_json"].result
    tools = tool_items()
    assert len(tools) == 4
    overall = {i: agent_overall(i, s, tools) for i, s in AGENT_SCORES.items()}
    s = result.summary()["summary"]
    assert (s["total"], s["scored"], s["unscored"], s["errors"]) == (12, 12, 0, 0)
    assert (s["passed"], s["failed"], s["pass_rate"]) == (9, 3, 0.75)
    assert s["pass_threshold"] == 3.5 and s["scale"] == [1.0, 5.0]
    assert s["average_overall"] == pytest.approx(statistics.fmean(overall.values()))
    expected_criteria = {c: statistics.fmean(AGENT_SCORES[i][k] for i in AGENT_SCORES)
                         for k, c in enumerate(AGENT_CRITERIA)}
    expected_criteria["tool_usage"] = statistics.fmean(AGENT_SCORES[i][5] for i in sorted(tools))
    assert s["average_by_criterion"] == pytest.approx(expected_criteria)
    assert s["average_by_criterion"]["tool_usage"] == 3.25  # over the 4 tool examples, not the 1s of the rest
    items = {item.id: item for item in loaded("agent_examples")}  # the texts as the judge was shown them
    assert s["failed_examples"] == [  # with each example's input, expected and actual output (issue 15)
        {"id": i, "overall": pytest.approx(overall[i]), "reasoning": f"{i}: one-sentence verdict.",
         "input": items[i].variables["input"], "expected_output": items[i].variables["expected_output"],
         "output": items[i].candidates[0].text} for i in AGENT_FAILING]
    assert s["unscored_items"] == []


def test_agent_preset_by_tag_pass_rates(runs):
    by_tag = runs["agent_json"].result.summary()["by_tag"]
    rows = dataset_rows("agent_examples.json")
    tags = {t for row in rows for t in row["tags"]}
    assert set(by_tag) == tags
    for tag in tags:
        ids = [row["id"] for row in rows if tag in row["tags"]]
        passed = sum(i not in AGENT_FAILING for i in ids)
        sec = by_tag[tag]
        assert (sec["total"], sec["passed"], sec["failed"]) == (len(ids), passed, len(ids) - passed), tag
        assert sec["pass_rate"] == pytest.approx(passed / len(ids)), tag
    assert by_tag["tool_use"]["pass_rate"] == 0.75  # agent-008 fails on its tool calls


def test_agent_preset_detailed_results_keep_reasoning_and_the_judges_own_pass(runs):
    tools = tool_items()
    details = {d["id"]: d for d in runs["agent_json"].result.summary()["detailed_results"]}
    assert list(details) == list(AGENT_SCORES)
    for item_id, scores in AGENT_SCORES.items():
        d = details[item_id]
        expected_scores = dict(zip(AGENT_CRITERIA, map(float, scores), strict=False))
        if item_id in tools:
            expected_scores["tool_usage"] = float(scores[5])
        assert d["scores"] == expected_scores, item_id
        assert d["overall"] == pytest.approx(agent_overall(item_id, scores, tools))
        assert d["passed"] is (item_id not in AGENT_FAILING)
        assert d["reasoning"] == f"{item_id}: one-sentence verdict.\nSecond line with the details."
        assert d["improvement_suggestions"] == [f"tighten {item_id}", "cite the context"]
        assert d["judge_pass"] == [item_id not in JUDGE_SAYS_FAIL]
    # The judge said pass on the failing ones and fail on agent-004: the threshold decides, not the judge.
    assert details["agent-003"]["judge_pass"] == [True] and details["agent-003"]["passed"] is False
    assert details["agent-004"]["judge_pass"] == [False] and details["agent-004"]["passed"] is True


def test_agent_preset_below_its_gate_exits_1_naming_it(runs):
    result = runs["agent_json"].result
    assert result.proc.returncode == 1, result.output
    assert ("FAIL gate.min_pass_rate: pass rate 75.0% < 80.0% (9 of 12 items passed, 0 unscored counted as not "
            "passed)") in result.output
    assert "run failed: gate.min_pass_rate" in result.output
    [gate] = result.summary()["gates"]
    assert gate["name"] == "gate.min_pass_rate" and gate["passed"] is False and gate["value"] == 0.75
    report = (result.run_dir / "report.html").read_text()  # the report's gates, drawn after the summary's dict
    assert "pass rate 75.0% &lt; 80.0%" in report  # is dropped (issue 12), first and in the title (issue 33)
    assert report.index("<h2>This run</h2>") < report.index("<td>gate gate.min_pass_rate</td>") < report.index(
        "<h2>Headline</h2>") and " - gates FAIL</title>" in report


def test_agent_preset_report_drills_down_to_each_item_with_its_failed_ones_flagged(runs):
    import re

    result = runs["agent_json"].result
    report = (result.run_dir / "report.html").read_text()
    flagged = {m.group(1) for m in re.finditer(r'data-id="([^"]+)" data-flags="[^"]*failed', report)}
    assert flagged == set(AGENT_FAILING)  # below the pass threshold: the report's "failed" filter finds them
    assert "<h2>Items (12)</h2>" in report and "below the pass threshold" in report
    # an item's raw answer (the judge's JSON, escaped) beside its parsed scores
    assert "agent-003: one-sentence verdict." in report and "-&gt; overall" in report


def test_agent_preset_is_in_mlflow(runs, tmp_path):
    result = runs["agent_json"].result
    run = mlflow_run(result)
    m, p, tags = run.data.metrics, run.data.params, run.data.tags
    summary = result.summary()
    assert m["score/mean"] == pytest.approx(summary["summary"]["average_overall"])
    assert m["pass/rate"] == 0.75 and m["items/passed"] == 9 and m["items/failed"] == 3
    assert m["score/tool_usage_mean"] == 3.25
    for tag, sec in summary["by_tag"].items():
        assert m[f"by_tag/{tag}/pass/rate"] == pytest.approx(sec["pass_rate"]), tag
    assert m["judge/calls"] == 12 and m["judge/unscored"] == 0 and m["gate/passed"] == 0.0
    assert p["choice.judge"] == "local_openai" and p["choice.rubric"] == "agent_output"
    assert p["choice.dataset"] == "agent_examples" and p["judge.model"] == "openai/fake-judge"
    assert p["rubric.pass_threshold"] == "3.5" and p["gate.min_pass_rate"] == "0.8" and p["n_items"] == "12"
    # The repo may gain commits while the suite runs: the tagged commit is HEAD's or an ancestor of it.
    assert tags["git.commit"] == p["git_sha"] and len(tags["git.commit"]) == 40
    assert subprocess.run(["git", "merge-base", "--is-ancestor", tags["git.commit"], "HEAD"], cwd=REPO).returncode == 0
    assert tags["git.branch"] == git("rev-parse", "--abbrev-ref", "HEAD")
    assert run.info.status == "FAILED"  # a crossed gate fails the run, so it cannot become a baseline
    client = MlflowClient(tracking_uri=result.mlflow_uri)
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"summary.json", "results.jsonl", "journal.jsonl", "config.yaml"} <= artifacts
    logged = client.download_artifacts(run.info.run_id, "summary.json", str(tmp_path))
    assert json.loads(Path(logged).read_text()) == summary
    logged_rows = jsonl(Path(client.download_artifacts(run.info.run_id, "results.jsonl", str(tmp_path))))
    assert [r["item_id"] for r in logged_rows] == list(AGENT_SCORES)
    assert [r["raw_response"] for r in logged_rows] == [agent_answer(i, s) for i, s in AGENT_SCORES.items()]


def test_jsonl_dataset_gives_the_same_prompts_and_summary_as_json(runs):
    json_run, jsonl_run = runs["agent_json"], runs["agent_jsonl"]
    assert jsonl_run.result.proc.returncode == 1, jsonl_run.result.output  # the same 75% under the same 80% gate

    def prompts(requests: list[dict]) -> list[str]:
        return sorted(json.dumps(r["messages"]) for r in requests)

    assert len(jsonl_run.requests) == 12
    assert prompts(jsonl_run.requests) == prompts(json_run.requests)
    want, got = json_run.result.summary(), jsonl_run.result.summary()
    for key in ("summary", "by_tag", "by_category", "detailed_results", "gates"):
        assert got[key] == want[key], key


# ------------------------------------------------------------------------------------------------ gates


def test_pass_rate_and_mean_exactly_at_their_gates_exit_0(runs):
    result = runs["gates_met"].result
    assert result.proc.returncode == 0, result.output
    s = result.summary()["summary"]
    assert (s["pass_rate"], s["average_overall"]) == (0.75, 3.75)
    assert ("PASS gate.min_pass_rate: pass rate 75.0% >= 75.0% (9 of 12 items passed, 0 unscored counted as not "
            "passed)") in result.output
    assert "PASS gate.min_mean_score: mean score 3.750 >= 3.75" in result.output
    assert [(g["name"], g["passed"]) for g in result.summary()["gates"]] == [
        ("gate.min_pass_rate", True), ("gate.min_mean_score", True)]


def test_mean_below_min_mean_score_exits_1_naming_it(runs):
    result = runs["mean_below"].result
    assert result.proc.returncode == 1, result.output
    assert "PASS gate.min_pass_rate" in result.output
    assert "FAIL gate.min_mean_score: mean score 3.750 < 3.76" in result.output
    assert "run failed: gate.min_mean_score" in result.output


def test_a_missing_baseline_fails_before_any_call(runs):
    chain = runs["baseline"].extra
    missing = chain["missing"]
    assert missing.proc.returncode == 1, missing.output
    assert f"gate.baseline_run='latest on {chain['branch']}'" in missing.output
    assert "no finished run" in missing.output
    assert chain["requests_after_missing"] == []
    assert not (missing.run_dir / "journal.jsonl").exists()


def test_baseline_latest_on_branch_gates_the_drop(runs):
    chain = runs["baseline"].extra
    first, dropped, within, branch = runs["baseline"].result, chain["dropped"], chain["within"], chain["branch"]
    assert first.proc.returncode == 0, first.output
    first_id = mlflow_run(first).info.run_id
    assert mlflow_run(first).data.metrics["score/mean"] == 5.0
    assert mlflow_run(first).data.tags["git.branch"] == branch

    assert dropped.proc.returncode == 1, dropped.output
    assert (f"FAIL gate.max_drop: score/mean 4.0000 vs 5.0000 in baseline run {first_id} (latest on {branch}): "
            f"drop +1.0000 > 0.5") in dropped.output
    assert "run failed: gate.max_drop" in dropped.output
    assert mlflow_run(dropped).info.status == "FAILED"

    assert within.proc.returncode == 0, within.output
    # The failed run in between is no baseline: the comparison is still with the first one.
    assert f"PASS gate.max_drop: score/mean 4.5000 vs 5.0000 in baseline run {first_id}" in within.output
    gate = within.summary()["gates"][-1]
    assert (gate["name"], gate["passed"], gate["value"], gate["threshold"]) == ("gate.max_drop", True, 0.5, 0.5)


# ------------------------------------------------------------------------------------ unscored answers


def test_unparsable_answers_are_unscored_never_scored(runs):
    result = runs["unscored"].result
    # 1 of the 2 scored items passes (50%), but the pass rate counts every item, an unscored one as not passed (issues
    # 15, 30): 1 of 6 is below the 0.5 gate (gate.unscored_as=exclude would gate pass_rate_scored)
    assert result.proc.returncode == 1, result.output
    assert ("FAIL gate.min_pass_rate: pass rate 16.7% < 50.0% (1 of 6 items passed, 4 unscored counted as not "
            "passed)") in result.output
    s = result.summary()["summary"]
    assert (s["total"], s["scored"], s["unscored"], s["errors"]) == (6, 2, 4, 0)
    # issue 30: summary.pass_rate is the gate's, over every item; the scored-only share has its own name
    assert (s["passed"], s["failed"], s["pass_rate"], s["pass_rate_scored"]) == (1, 1, pytest.approx(1 / 6), 0.5)
    assert s["average_overall"] == pytest.approx((4.2 + 3.0) / 2)
    assert s["average_by_criterion"]["accuracy"] == 3.5 and "tool_usage" not in s["average_by_criterion"]
    assert [u["id"] for u in s["unscored_items"]] == list(BAD_ANSWERS)
    for u in s["unscored_items"]:
        assert u["status"] == "unscored"
        [reason] = u["reasons"]
        assert reason.startswith(BAD_ANSWERS[u["id"]][1]), reason
    assert [f["id"] for f in s["failed_examples"]] == ["agent-006"]
    details = {d["id"]: d for d in result.summary()["detailed_results"]}
    assert all(details[i]["overall"] is None and details[i]["passed"] is None for i in BAD_ANSWERS)


def test_unscored_answers_keep_raw_text_and_reason_in_results_and_mlflow(runs):
    result = runs["unscored"].result
    rows = {r["item_id"]: r for r in jsonl(result.run_dir / "results.jsonl")}
    for item_id, (text, reason) in BAD_ANSWERS.items():
        row = rows[item_id]
        assert row["status"] == "unscored" and row["score"] is None and row["scores"] is None
        assert row["raw_response"] == text
        assert row["parse_error"].startswith(reason)
    m = mlflow_run(result).data.metrics
    assert m["judge/unscored"] == 4 and m["judge/scored"] == 2 and m["items/unscored"] == 4
    assert m["judge/parse_failure_rate"] == pytest.approx(4 / 6)
    for reason in ("invalid_json", "missing_key", "out_of_range", "not_a_number"):
        assert m[f"judge/parse_failures/{reason}"] == 1.0, reason
    assert m["score/mean"] == pytest.approx(3.6)


# ------------------------------------------------------------------------------- reply-quality preset


def weighted(scores: tuple[int, ...], weights: tuple[float, ...]) -> float:
    """The weighted mean of one answer's criterion scores."""
    return sum(s * w for s, w in zip(scores, weights, strict=True)) / sum(weights)


@pytest.fixture(scope="module")
def reply_expected() -> dict[str, dict]:
    """Per reply: the overall, std and repeat scores the script implies, with the dataset's fields."""
    expected = {}
    for row in dataset_rows("reply_quality.jsonl"):
        weights = REPLY_WEIGHTS.get(row["category"], DEFAULT_REPLY_WEIGHTS)
        per_repeat = [weighted(s, weights) for s in reply_repeats(row["id"])]
        expected[row["id"]] = {"overall": statistics.fmean(per_repeat), "std": statistics.stdev(per_repeat),
                               "repeats": per_repeat, "human": float(row["human_score"]),
                               "category": row["category"], "reply": row["reply"]}
    return expected


def consistency_of(expected: dict[str, dict]) -> dict:
    """The consistency section expected over these items (sample std per item, threshold 0.5)."""
    stds = [e["std"] for e in expected.values()]
    above = [i for i, e in expected.items() if e["std"] > 0.5]
    return {"items_measured": len(stds), "mean_std": pytest.approx(statistics.fmean(stds)),
            "max_std": pytest.approx(max(stds)), "share_above_threshold": pytest.approx(len(above) / len(stds)),
            "items_above_threshold": above, "repeats": 3, "threshold": 0.5, "std": "sample (n-1)"}


def rubric_phrases() -> list[str]:
    """The AI phrases the reply_quality rubric's check looks for."""
    return list(OmegaConf.load(REPO / "conf" / "rubric" / "reply_quality.yaml").checks[0].params.phrases)


def test_reply_quality_weights_per_category_and_consistency(runs, reply_expected):
    result = runs["reply_quality"].result
    assert len(runs["reply_quality"].requests) == 16 * 3
    assert result.proc.returncode == 0, result.output  # mean 6.12 >= the preset's 6.0
    assert "PASS gate.min_mean_score" in result.output
    doc = result.summary()
    s = doc["summary"]
    assert (s["total"], s["scored"], s["repeats"], s["pass_rate"]) == (16, 16, 3, None)
    assert s["average_overall"] == pytest.approx(statistics.fmean(e["overall"] for e in reply_expected.values()))
    details = {d["id"]: d for d in doc["detailed_results"]}
    for item_id, e in reply_expected.items():
        d = details[item_id]
        assert d["overall"] == pytest.approx(e["overall"]), item_id
        assert sorted(d["repeat_scores"]) == pytest.approx(sorted(e["repeats"])), item_id
        assert d["std"] == pytest.approx(e["std"], abs=1e-6), item_id
        assert d["human_score"] == e["human"]
    # The weights really differ: reply-001 (emotion, 3/3/2) is 2.8 with 0.5/0.3/0.2, 2.7 with 0.4/0.3/0.3.
    assert details["reply-001"]["overall"] == pytest.approx(0.5 * 3 + 0.3 * 3 + 0.2 * 2)
    assert details["reply-003"]["overall"] == pytest.approx(0.4 * 5 + 0.3 * 6 + 0.3 * 5)
    assert s["consistency"] == consistency_of(reply_expected)
    assert s["consistency"]["items_above_threshold"] == ["reply-001", "reply-010", "reply-014"]


def test_reply_quality_human_correlation_matches_scipy(runs, reply_expected):
    judge = [e["overall"] for e in reply_expected.values()]
    human = [e["human"] for e in reply_expected.values()]
    h = runs["reply_quality"].result.summary()["summary"]["human_correlation"]
    pearson, spearman = scipy_stats.pearsonr(judge, human), scipy_stats.spearmanr(judge, human)
    assert h["n"] == 16
    assert h["pearson"] == {"r": pytest.approx(pearson.statistic), "p": pytest.approx(pearson.pvalue)}
    assert h["spearman"] == {"rho": pytest.approx(spearman.statistic), "p": pytest.approx(spearman.pvalue)}
    diffs = [abs(j - hs) for j, hs in zip(judge, human, strict=True)]
    assert h["within_1_rate"] == pytest.approx(sum(d <= 1 for d in diffs) / 16)
    assert h["within_1_rate"] == 13 / 16  # reply-003, -008 and -016 are off by more than 1
    assert h["mean_abs_error"] == pytest.approx(statistics.fmean(diffs))


def test_reply_quality_ai_phrases_check_counts_the_replies_with_them(runs, reply_expected):
    doc = runs["reply_quality"].result.summary()
    found = {i: ai_phrases(e["reply"], phrases=rubric_phrases()) for i, e in reply_expected.items()}
    hits = [i for i, f in found.items() if f]
    assert hits == ["reply-001", "reply-006", "reply-010", "reply-013"]
    check = doc["summary"]["checks"]["ai_phrases"]
    assert check["items_checked"] == 16 and check["items_with_violations"] == len(hits)
    assert check["violation_rate"] == pytest.approx(len(hits) / 16)
    assert check["max_rate"] == 0.05 and check["met"] is False
    assert check["by_violation"] == dict(Counter(p for f in found.values() for p in f))
    details = {d["id"]: d for d in doc["detailed_results"]}
    assert {i: details[i]["violations"].get("ai_phrases", []) for i in reply_expected} == found


def test_reply_quality_by_category_has_every_metric_section(runs, reply_expected):
    result = runs["reply_quality"].result
    doc = result.summary()
    categories = sorted({e["category"] for e in reply_expected.values()})
    assert sorted(doc["by_category"]) == categories
    for category in categories:
        sec = doc["by_category"][category]
        mine = {i: e for i, e in reply_expected.items() if e["category"] == category}
        assert set(sec) >= {"total", "scored", "unscored", "errors", "pass_rate", "average_overall",
                            "average_by_criterion", "consistency", "human_correlation", "checks"}, category
        assert sec["total"] == sec["scored"] == len(mine)
        assert sec["average_overall"] == pytest.approx(statistics.fmean(e["overall"] for e in mine.values()))
        assert sec["consistency"] == consistency_of(mine), category
        judge, human = [e["overall"] for e in mine.values()], [e["human"] for e in mine.values()]
        assert sec["human_correlation"]["n"] == len(mine)
        assert sec["human_correlation"]["pearson"]["r"] == pytest.approx(scipy_stats.pearsonr(judge, human).statistic)
        hits = sum(bool(ai_phrases(e["reply"], phrases=rubric_phrases())) for e in mine.values())
        assert sec["checks"]["ai_phrases"]["items_with_violations"] == hits, category
    m = mlflow_run(result).data.metrics
    assert m["by_category/emotion/score/mean"] == pytest.approx(doc["by_category"]["emotion"]["average_overall"])
    assert m["consistency/share_above_threshold"] == pytest.approx(3 / 16)
    assert m["human/pearson_r"] == pytest.approx(doc["summary"]["human_correlation"]["pearson"]["r"])
    assert m["checks/ai_phrases/violation_rate"] == pytest.approx(4 / 16)
    assert m["judge/calls"] == 48


# ------------------------------------------------------------------------------------ generation stage


def test_generated_outputs_are_journaled_and_are_what_the_judge_sees(runs):
    result, requests = runs["generation"].result, runs["generation"].requests
    assert result.proc.returncode == 0, result.output
    gen_requests = [r for r in requests if r["model"] == "fake-gen"]
    judge_requests = [r for r in requests if r["model"] == "fake-judge"]
    assert len(gen_requests) == 12 and len(judge_requests) == 11  # a 400 is not retried
    rows = jsonl(result.run_dir / "generations.jsonl")
    assert sorted(r["item_id"] for r in rows) == sorted(AGENT_SCORES)
    assert {r["stage"] for r in rows} == {"generate"}
    for row in rows:
        if row["item_id"] != NOT_GENERATED:
            assert row["status"] == "ok" and row["raw_response"] == generated_text(row["item_id"])
    # The output each judge prompt shows is that item's generated one (not the dataset's own output).
    router = Router.agent()
    shown = {}
    for body in judge_requests:
        prompt = body["messages"][-1]["content"]
        shown[router.route(body)[1]] = prompt.split("<agent_output>\n", 1)[1].split("\n</agent_output>", 1)[0]
    assert shown == {i: generated_text(i) for i in AGENT_SCORES if i != NOT_GENERATED}
    m = mlflow_run(result).data.metrics
    assert m["generation/calls"] == 12 and m["generation/errors"] == 1 and m["generation/made"] == 12
    assert m["tokens/generation_completion"] > 0 and m["judge/calls"] == 11
    client = MlflowClient(tracking_uri=result.mlflow_uri)
    assert "generations.jsonl" in {a.path for a in client.list_artifacts(mlflow_run(result).info.run_id)}


def test_a_failed_generation_leaves_its_item_unjudged_and_listed(runs):
    result = runs["generation"].result
    [row] = [r for r in jsonl(result.run_dir / "generations.jsonl") if r["item_id"] == NOT_GENERATED]
    assert row["status"] == "error" and row["error_type"]
    doc = result.summary()
    s = doc["summary"]
    assert (s["total"], s["scored"], s["errors"], s["passed"], s["failed"]) == (12, 11, 1, 11, 0)
    assert s["unscored_items"] == [{"id": NOT_GENERATED, "status": "not_generated", "reasons": []}]
    detail = next(d for d in doc["detailed_results"] if d["id"] == NOT_GENERATED)
    assert detail["status"] == "not_generated" and detail["overall"] is None and detail["passed"] is None
    assert NOT_GENERATED not in {r["item_id"] for r in jsonl(result.run_dir / "results.jsonl")}
    assert "PASS gate.min_pass_rate" in result.output
