"""Pointwise rubric judging end to end: the real CLI, litellm over HTTP to a loopback fake judge (and
generator), and the MLflow sqlite store read back.

The fake server finds the item a request is about from the rendered prompt (each item's input text, or
the chat message replied to, appears in it) and answers with the scores scripted here, so every number
the runner reports is checked against a value computed in the test from the script and the dataset.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf
from scipy import stats as scipy_stats

from runner.checks import ai_phrases
from runner.config import DatasetConfig, PromptMode
from runner.datasets import Shape, load_items, resolve_path
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.integration.conftest import REPO, CliRun, cli_args, live_judge, mlflow_uri, offline_env

EXAMPLES = REPO / "runner" / "data" / "examples"
AGENT_CRITERIA = ("accuracy", "completeness", "format_compliance", "scope_adherence", "context_usage")
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
JUDGE_SAYS_FAIL = {"agent-004"}  # the judge's own "pass" is false here (and true everywhere else)

# Reply quality, per item: (naturalness, appropriateness, intent_match) on 0-10; SPREAD moves naturalness
# by -s, 0, +s over the three repeats (in the order the calls arrive).
REPLY_BASE = {
    "reply-001": (3, 3, 2), "reply-002": (9, 9, 8), "reply-003": (5, 6, 5), "reply-004": (9, 9, 8),
    "reply-005": (4, 3, 4), "reply-006": (6, 6, 5), "reply-007": (8, 9, 8), "reply-008": (6, 5, 6),
    "reply-009": (9, 9, 9), "reply-010": (3, 3, 3), "reply-011": (8, 9, 9), "reply-012": (5, 5, 4),
    "reply-013": (7, 6, 7), "reply-014": (4, 4, 3), "reply-015": (7, 8, 7), "reply-016": (7, 7, 6),
}
REPLY_SPREAD = {"reply-001": 2, "reply-004": 1, "reply-010": 2, "reply-012": 1, "reply-014": 2}


# ---------------------------------------------------------------------------------------------- helpers


def cli(tmp: Path, name: str, *overrides: str) -> CliRun:
    """One CLI run with its run dir ``tmp/name`` and the cache and MLflow store of ``tmp``."""
    run_dir = tmp / name
    proc = subprocess.run(cli_args(tmp, run_dir, overrides), cwd=REPO, env=offline_env(), capture_output=True,
                          text=True, timeout=600)
    return CliRun(proc=proc, run_dir=run_dir, mlflow_uri=mlflow_uri(tmp))


def git(*args: str) -> str:
    """What git says about the repo the CLI runs from (runs are tagged with it)."""
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


def mlflow_run(result: CliRun):
    """The MLflow run of a CLI run (its id is in the run dir's run.json)."""
    run_id = json.loads((result.run_dir / "run.json").read_text())["mlflow_run_id"]
    return MlflowClient(tracking_uri=result.mlflow_uri).get_run(run_id)


def results_rows(result: CliRun) -> list[dict]:
    """The run's results.jsonl."""
    return [json.loads(line) for line in (result.run_dir / "results.jsonl").read_text().splitlines()]


def dataset_rows(name: str) -> list[dict]:
    """A shipped dataset's rows, read as plain JSON (independent of the runner's loader)."""
    path = EXAMPLES / name
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return json.loads(path.read_text())["examples"]


def markers(dataset: str, variable: str, wrap: str = "{}") -> dict[str, str]:
    """Item id -> text that appears in the prompts about that item (and in no other item's prompt)."""
    node = OmegaConf.merge(OmegaConf.structured(DatasetConfig), OmegaConf.load(REPO / "conf" / "dataset" /
                                                                                f"{dataset}.yaml"))
    cfg: DatasetConfig = OmegaConf.to_object(node)  # type: ignore[assignment]
    loaded = load_items(cfg, resolve_path(cfg.path, REPO), shape=Shape(mode=PromptMode.pointwise))
    return {item.id: wrap.format(item.variables[variable]) for item in loaded.items}


class Router:
    """Tells which item a chat request is about, and counts the calls per (model, item)."""

    def __init__(self, item_markers: dict[str, str]) -> None:
        self.markers = item_markers
        self.calls: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def route(self, body: dict) -> tuple[str, str, int]:
        """(model, item id, how many earlier calls this model got for this item)."""
        text = body["messages"][-1]["content"]
        hits = [item_id for item_id, marker in self.markers.items() if marker in text]
        if len(hits) != 1:  # a broken script must fail loudly (the server answers 500), never guess
            raise LookupError(f"request matches items {hits}")
        with self._lock:
            n = self.calls[body["model"], hits[0]]
            self.calls[body["model"], hits[0]] += 1
        return body["model"], hits[0], n


def agent_answer(item_id: str, scores: tuple[int, ...]) -> str:
    """The judge's JSON for an agent example: scores for all six criteria, reasoning, suggestions, pass."""
    return json.dumps({
        "scores": dict(zip((*AGENT_CRITERIA, "tool_usage"), scores, strict=True)),
        "reasoning": f"{item_id}: one-sentence verdict.\nSecond line with the details.",
        "improvement_suggestions": [f"tighten {item_id}", "cite the context"],
        "pass": item_id not in JUDGE_SAYS_FAIL,
    })


def agent_judge(router: Router, scores: dict[str, tuple[int, ...]]) -> Callable[[dict], str]:
    """A reply policy answering each agent example's judge request with its scripted scores."""
    def reply(body: dict) -> str:
        item_id = router.route(body)[1]
        return agent_answer(item_id, scores[item_id])
    return reply


def tool_items() -> set[str]:
    """The examples that list expected tool calls (read from the dataset file)."""
    return {row["id"] for row in dataset_rows("agent_examples.json") if row.get("mcp_calls_expected")}


def agent_overall(item_id: str, scores: tuple[int, ...], tools: set[str]) -> float:
    """Mean of the criteria that apply: tool_usage only where tool calls are expected."""
    applied = scores if item_id in tools else scores[:5]
    return sum(applied) / len(applied)


@pytest.fixture(scope="module")
def agent_markers() -> dict[str, str]:
    return markers("agent_examples", "input")


# ------------------------------------------------------------------------------ agent preset end to end


@pytest.fixture(scope="module")
def agent(tmp_path_factory, agent_markers):
    """The agent preset judged once with AGENT_SCORES (JSON dataset); the server stays up for the module."""
    tmp = tmp_path_factory.mktemp("agent")
    router = Router(agent_markers)
    with FakeOpenAIServer(agent_judge(router, AGENT_SCORES)) as server:
        result = cli(tmp, "json", "experiment=agent_rubric", *live_judge(server))
        yield {"tmp": tmp, "server": server, "result": result, "requests": server.requests}


def test_agent_preset_summary_counts_threshold_not_judge_pass(agent):
    result = agent["result"]
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
    assert s["failed_examples"] == [
        {"id": i, "overall": pytest.approx(overall[i]), "reasoning": f"{i}: one-sentence verdict."}
        for i in AGENT_FAILING]
    assert s["unscored_items"] == []


def test_agent_preset_by_tag_pass_rates(agent):
    by_tag = agent["result"].summary()["by_tag"]
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


def test_agent_preset_detailed_results_keep_reasoning_and_the_judges_own_pass(agent):
    tools = tool_items()
    details = {d["id"]: d for d in agent["result"].summary()["detailed_results"]}
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


def test_agent_preset_below_the_default_gate_exits_1_naming_it(agent):
    result = agent["result"]
    assert result.proc.returncode == 1, result.output
    assert "FAIL gate.min_pass_rate: pass rate 75.0% < 80.0% (9 of 12 scored items passed)" in result.output
    assert "run failed: gate.min_pass_rate" in result.output
    [gate] = result.summary()["gates"]
    assert gate["name"] == "gate.min_pass_rate" and gate["passed"] is False and gate["value"] == 0.75


def test_agent_preset_is_in_mlflow(agent, tmp_path):
    result = agent["result"]
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
    assert tags["git.commit"] == git("rev-parse", "HEAD")
    assert tags["git.branch"] == git("rev-parse", "--abbrev-ref", "HEAD")
    assert run.info.status == "FAILED"  # a crossed gate fails the run, so it cannot become a baseline
    client = MlflowClient(tracking_uri=result.mlflow_uri)
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"summary.json", "results.jsonl", "journal.jsonl", "config.yaml"} <= artifacts
    logged = client.download_artifacts(run.info.run_id, "summary.json", str(tmp_path))
    assert json.loads(Path(logged).read_text()) == summary
    logged_rows = client.download_artifacts(run.info.run_id, "results.jsonl", str(tmp_path))
    assert [json.loads(line)["item_id"] for line in Path(logged_rows).read_text().splitlines()] == list(AGENT_SCORES)


def test_jsonl_dataset_gives_the_same_prompts_and_summary_as_json(agent):
    server = agent["server"]
    server.reset()  # keeps the reply policy; forgets the JSON run's requests
    jsonl = cli(agent["tmp"], "jsonl", "experiment=agent_rubric", *live_judge(server), "dataset=agent_examples_jsonl",
                "cache.mode=off")
    assert jsonl.proc.returncode == 1, jsonl.output  # the same 75% pass rate under the same 80% gate

    def prompts(requests: list[dict]) -> list[str]:
        return sorted(json.dumps(r["messages"]) for r in requests)

    assert len(server.requests) == 12
    assert prompts(server.requests) == prompts(agent["requests"])
    want, got = agent["result"].summary(), jsonl.summary()
    for key in ("summary", "by_tag", "by_category", "detailed_results", "gates"):
        assert got[key] == want[key], key


# ------------------------------------------------------------------------------------------------ gates


def test_min_pass_rate_and_min_mean_score_exactly_met_exit_0(agent):
    tools = tool_items()
    mean = statistics.fmean(agent_overall(i, s, tools) for i, s in AGENT_SCORES.items())
    result = cli(agent["tmp"], "gates_met", "experiment=agent_rubric", *live_judge(agent["server"]),
                 "gate.min_pass_rate=0.75", f"gate.min_mean_score={mean!r}")
    assert result.proc.returncode == 0, result.output
    assert "PASS gate.min_pass_rate: pass rate 75.0% >= 75.0% (9 of 12 scored items passed)" in result.output
    assert f"PASS gate.min_mean_score: mean score {mean:.3f} >= {mean:g}" in result.output
    assert [g["passed"] for g in result.summary()["gates"]] == [True, True]
    assert mlflow_run(result).data.metrics["gate/passed"] == 1.0


def test_min_mean_score_below_exits_1_naming_it(agent):
    tools = tool_items()
    mean = statistics.fmean(agent_overall(i, s, tools) for i, s in AGENT_SCORES.items())
    result = cli(agent["tmp"], "mean_below", "experiment=agent_rubric", *live_judge(agent["server"]),
                 "gate.min_pass_rate=0.75", "gate.min_mean_score=4.05")
    assert result.proc.returncode == 1, result.output
    assert "PASS gate.min_pass_rate" in result.output
    assert f"FAIL gate.min_mean_score: mean score {mean:.3f} < 4.05" in result.output
    assert "run failed: gate.min_mean_score" in result.output


def uniform_judge(router: Router, per_item: dict[str, int]) -> Callable[[dict], str]:
    """Every criterion of an item gets the same score, so its overall is exactly that score."""
    return agent_judge(router, {item_id: (score,) * 6 for item_id, score in per_item.items()})


def test_baseline_gate_latest_on_branch(run_cli, fake_server, agent_markers):
    branch = git("rev-parse", "--abbrev-ref", "HEAD")
    router = Router(agent_markers)
    common = ["experiment=agent_rubric", *live_judge(fake_server), "max_items=2", "cache.mode=off"]
    baseline = [f"gate.baseline_run='latest on {branch}'", "gate.max_drop=0.5"]

    missing = run_cli(*common, *baseline)
    assert missing.proc.returncode == 1, missing.output
    assert f"gate.baseline_run='latest on {branch}'" in missing.output
    assert "no finished run" in missing.output
    assert fake_server.requests == []  # the baseline is looked up before any call is paid for

    fake_server.reply = uniform_judge(router, {"agent-001": 5, "agent-002": 5})
    first = run_cli(*common)
    assert first.proc.returncode == 0, first.output
    first_id = mlflow_run(first).info.run_id
    assert mlflow_run(first).data.metrics["score/mean"] == 5.0

    fake_server.reply = uniform_judge(router, {"agent-001": 4, "agent-002": 4})
    dropped = run_cli(*common, *baseline)
    assert dropped.proc.returncode == 1, dropped.output
    assert (f"FAIL gate.max_drop: score/mean 4.0000 vs 5.0000 in baseline run {first_id} (latest on {branch}): "
            f"drop +1.0000 > 0.5") in dropped.output
    assert "run failed: gate.max_drop" in dropped.output

    fake_server.reply = uniform_judge(router, {"agent-001": 5, "agent-002": 4})
    within = run_cli(*common, *baseline)
    assert within.proc.returncode == 0, within.output
    # The failed run in between is no baseline: the comparison is still with the first one.
    assert f"PASS gate.max_drop: score/mean 4.5000 vs 5.0000 in baseline run {first_id}" in within.output
    assert within.summary()["gates"][-1]["value"] == 0.5


# ------------------------------------------------------------------------------------ unscored answers

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


def test_unparsable_answers_are_unscored_never_scored(run_cli, fake_server, agent_markers):
    router = Router(agent_markers)

    def reply(body: dict) -> str:
        item_id = router.route(body)[1]
        if item_id in BAD_ANSWERS:
            return BAD_ANSWERS[item_id][0]
        return agent_answer(item_id, GOOD_ANSWERS[item_id])

    fake_server.reply = reply
    result = run_cli("experiment=agent_rubric", *live_judge(fake_server), "max_items=6", "gate.min_pass_rate=0.5")
    # 1 of the 2 scored items passes: 50% meets the gate; counting the unscored as failures would not.
    assert result.proc.returncode == 0, result.output
    s = result.summary()["summary"]
    assert (s["total"], s["scored"], s["unscored"], s["errors"]) == (6, 2, 4, 0)
    assert (s["passed"], s["failed"], s["pass_rate"]) == (1, 1, 0.5)
    assert s["average_overall"] == pytest.approx((4.2 + 3.0) / 2)
    assert s["average_by_criterion"]["accuracy"] == 3.5 and "tool_usage" not in s["average_by_criterion"]
    assert [u["id"] for u in s["unscored_items"]] == list(BAD_ANSWERS)
    for u in s["unscored_items"]:
        assert u["status"] == "unscored"
        [reason] = u["reasons"]
        assert reason.startswith(BAD_ANSWERS[u["id"]][1]), reason
    assert [f["id"] for f in s["failed_examples"]] == ["agent-006"]
    rows = {r["item_id"]: r for r in results_rows(result)}
    for item_id, (text, reason) in BAD_ANSWERS.items():
        row = rows[item_id]
        assert row["status"] == "unscored" and row["score"] is None and row["scores"] is None
        assert row["raw_response"] == text
        assert row["parse_error"].startswith(reason)
    details = {d["id"]: d for d in result.summary()["detailed_results"]}
    assert all(details[i]["overall"] is None and details[i]["passed"] is None for i in BAD_ANSWERS)
    m = mlflow_run(result).data.metrics
    assert m["judge/unscored"] == 4 and m["judge/scored"] == 2 and m["items/unscored"] == 4
    assert m["judge/parse_failure_rate"] == pytest.approx(4 / 6)
    for reason in ("invalid_json", "missing_key", "out_of_range", "not_a_number"):
        assert m[f"parse_failures/{reason}"] == 1.0, reason
    assert m["score/mean"] == pytest.approx(3.6)


# ------------------------------------------------------------------------------- reply-quality preset


def reply_weights(category: str) -> tuple[float, ...]:
    return REPLY_WEIGHTS.get(category, DEFAULT_REPLY_WEIGHTS)


def reply_repeats(item_id: str) -> list[tuple[int, int, int]]:
    """The three scripted (naturalness, appropriateness, intent_match) answers of an item."""
    n, a, i = REPLY_BASE[item_id]
    s = REPLY_SPREAD.get(item_id, 0)
    return [(n + d, a, i) for d in (-s, 0, s)]


def weighted(scores: tuple[int, ...], weights: tuple[float, ...]) -> float:
    return sum(s * w for s, w in zip(scores, weights, strict=True)) / sum(weights)


@pytest.fixture(scope="module")
def reply_quality(tmp_path_factory):
    """The reply-quality preset (3 repeats, category weights, human scores, AI-phrase check), run once."""
    tmp = tmp_path_factory.mktemp("reply_quality")
    router = Router(markers("reply_quality", "message", "<latest_message>\n{}\n</latest_message>"))

    def reply(body: dict) -> str:
        _, item_id, n = router.route(body)
        scores = reply_repeats(item_id)[n]
        return json.dumps({"scores": dict(zip(REPLY_CRITERIA, scores, strict=True)), "reasoning": f"{item_id} #{n}"})

    with FakeOpenAIServer(reply) as server:
        result = cli(tmp, "run", "experiment=reply_quality", *live_judge(server))
        assert len(server.requests) == 16 * 3
    rows = dataset_rows("reply_quality.jsonl")
    expected = {}
    for row in rows:
        per_repeat = [weighted(s, reply_weights(row["category"])) for s in reply_repeats(row["id"])]
        expected[row["id"]] = {"overall": statistics.fmean(per_repeat), "std": statistics.pstdev(per_repeat),
                               "repeats": per_repeat, "human": float(row["human_score"]),
                               "category": row["category"], "reply": row["reply"]}
    return result, expected


def consistency_of(expected: dict[str, dict]) -> dict:
    stds = [e["std"] for e in expected.values()]
    above = [i for i, e in expected.items() if e["std"] > 0.5]
    return {"items_measured": len(stds), "mean_std": pytest.approx(statistics.fmean(stds)),
            "max_std": pytest.approx(max(stds)), "share_above_threshold": pytest.approx(len(above) / len(stds)),
            "items_above_threshold": above, "repeats": 3, "threshold": 0.5}


def test_reply_quality_weights_per_category_and_consistency(reply_quality):
    result, expected = reply_quality
    assert result.proc.returncode == 0, result.output  # mean 6.175 >= the preset's 6.0
    assert "PASS gate.min_mean_score" in result.output
    doc = result.summary()
    s = doc["summary"]
    assert (s["total"], s["scored"], s["repeats"], s["pass_rate"]) == (16, 16, 3, None)
    assert s["average_overall"] == pytest.approx(statistics.fmean(e["overall"] for e in expected.values()))
    details = {d["id"]: d for d in doc["detailed_results"]}
    for item_id, e in expected.items():
        d = details[item_id]
        assert d["overall"] == pytest.approx(e["overall"]), item_id
        assert sorted(d["repeat_scores"]) == pytest.approx(sorted(e["repeats"])), item_id
        assert d["std"] == pytest.approx(e["std"], abs=1e-9), item_id
        assert d["human_score"] == e["human"]
    # The weights really differ: reply-001 (emotion, 3/3/2) is 2.8 with 0.5/0.3/0.2, 2.7 with 0.4/0.3/0.3.
    assert details["reply-001"]["overall"] == pytest.approx(0.5 * 3 + 0.3 * 3 + 0.2 * 2)
    assert details["reply-003"]["overall"] == pytest.approx(0.4 * 5 + 0.3 * 6 + 0.3 * 5)
    assert s["consistency"] == consistency_of(expected)
    assert s["consistency"]["items_above_threshold"] == ["reply-001", "reply-010", "reply-014"]


def test_reply_quality_human_correlation_matches_scipy(reply_quality):
    result, expected = reply_quality
    judge = [e["overall"] for e in expected.values()]
    human = [e["human"] for e in expected.values()]
    h = result.summary()["summary"]["human_correlation"]
    pearson, spearman = scipy_stats.pearsonr(judge, human), scipy_stats.spearmanr(judge, human)
    assert h["n"] == 16
    assert h["pearson"] == {"r": pytest.approx(pearson.statistic), "p": pytest.approx(pearson.pvalue)}
    assert h["spearman"] == {"rho": pytest.approx(spearman.statistic), "p": pytest.approx(spearman.pvalue)}
    diffs = [abs(j - hs) for j, hs in zip(judge, human, strict=True)]
    assert h["within_1_rate"] == pytest.approx(sum(d <= 1 for d in diffs) / 16)
    assert h["within_1_rate"] == 13 / 16  # reply-003, -008 and -016 are off by more than 1
    assert h["mean_abs_error"] == pytest.approx(statistics.fmean(diffs))


def test_reply_quality_ai_phrases_check_counts_the_replies_with_them(reply_quality):
    result, expected = reply_quality
    phrases = list(OmegaConf.load(REPO / "conf" / "rubric" / "reply_quality.yaml").checks[0].params.phrases)
    found = {i: ai_phrases(e["reply"], phrases=phrases) for i, e in expected.items()}
    hits = [i for i, f in found.items() if f]
    assert hits == ["reply-001", "reply-006", "reply-010", "reply-013"]
    check = result.summary()["summary"]["checks"]["ai_phrases"]
    assert check["items_checked"] == 16 and check["items_with_violations"] == len(hits)
    assert check["violation_rate"] == pytest.approx(len(hits) / 16)
    assert check["max_rate"] == 0.05 and check["met"] is False
    assert check["by_violation"] == dict(Counter(p for f in found.values() for p in f))
    details = {d["id"]: d for d in result.summary()["detailed_results"]}
    assert {i: details[i]["violations"].get("ai_phrases", []) for i in expected} == found


def test_reply_quality_by_category_has_every_metric_section(reply_quality):
    result, expected = reply_quality
    doc = result.summary()
    categories = sorted({e["category"] for e in expected.values()})
    assert sorted(doc["by_category"]) == categories
    phrases = list(OmegaConf.load(REPO / "conf" / "rubric" / "reply_quality.yaml").checks[0].params.phrases)
    for category in categories:
        sec = doc["by_category"][category]
        mine = {i: e for i, e in expected.items() if e["category"] == category}
        assert set(sec) >= {"total", "scored", "unscored", "errors", "pass_rate", "average_overall",
                            "average_by_criterion", "consistency", "human_correlation", "checks"}, category
        assert sec["total"] == sec["scored"] == len(mine)
        assert sec["average_overall"] == pytest.approx(statistics.fmean(e["overall"] for e in mine.values()))
        assert sec["consistency"] == consistency_of(mine), category
        judge, human = [e["overall"] for e in mine.values()], [e["human"] for e in mine.values()]
        assert sec["human_correlation"]["n"] == len(mine)
        assert sec["human_correlation"]["pearson"]["r"] == pytest.approx(scipy_stats.pearsonr(judge, human).statistic)
        hits = sum(bool(ai_phrases(e["reply"], phrases=phrases)) for e in mine.values())
        assert sec["checks"]["ai_phrases"]["items_with_violations"] == hits, category
    m = mlflow_run(result).data.metrics
    assert m["by_category/emotion/score/mean"] == pytest.approx(doc["by_category"]["emotion"]["average_overall"])
    assert m["consistency/share_above_threshold"] == pytest.approx(3 / 16)
    assert m["human/pearson_r"] == pytest.approx(doc["summary"]["human_correlation"]["pearson"]["r"])
    assert m["checks/ai_phrases/violation_rate"] == pytest.approx(4 / 16)
    assert m["judge/calls"] == 48


# ------------------------------------------------------------------------------------ generation stage

NOT_GENERATED = "agent-005"


def generated_text(item_id: str) -> str:
    return f"GENERATED-ANSWER-{item_id}: a distinctive output written by fake-gen."


@pytest.fixture(scope="module")
def generated(tmp_path_factory, agent_markers):
    """The generate-then-judge preset with one generation answered 400; every other item passes."""
    tmp = tmp_path_factory.mktemp("generate")
    router = Router(agent_markers)

    def reply(body: dict) -> Reply | str:
        model, item_id, _ = router.route(body)
        if model == "fake-gen":
            if item_id == NOT_GENERATED:
                return Reply(status=400, error_message="scripted bad request")
            return generated_text(item_id)
        return agent_answer(item_id, (4, 4, 4, 4, 4, 4))

    with FakeOpenAIServer(reply) as server:
        result = cli(tmp, "run", "experiment=agent_rubric_generate", *live_judge(server), "generator=local_openai",
                     f"generator.api_base={server.base_url}", "generator.model=openai/fake-gen",
                     "generator.template=generate_agent")
        return result, server.requests


def test_generation_outputs_are_journaled_and_judged(generated):
    result, requests = generated
    assert result.proc.returncode == 0, result.output
    gen_requests = [r for r in requests if r["model"] == "fake-gen"]
    judge_requests = [r for r in requests if r["model"] == "fake-judge"]
    assert len(gen_requests) == 12 and len(judge_requests) == 11  # a 400 is not retried
    rows = [json.loads(line) for line in (result.run_dir / "generations.jsonl").read_text().splitlines()]
    assert sorted(r["item_id"] for r in rows) == sorted(AGENT_SCORES)
    assert {r["stage"] for r in rows} == {"generate"}
    for row in rows:
        if row["item_id"] != NOT_GENERATED:
            assert row["status"] == "ok" and row["raw_response"] == generated_text(row["item_id"])
    # Each judge prompt holds that item's generated output, and never the dataset's own output.
    outputs = {row["id"]: row["output"] for row in dataset_rows("agent_examples.json")}
    for body in judge_requests:
        prompt = body["messages"][-1]["content"]
        [item_id] = [i for i in AGENT_SCORES if generated_text(i) in prompt]
        assert f"<agent_output>\n{generated_text(item_id)}\n</agent_output>" in prompt
        assert outputs[item_id] not in prompt
    m = mlflow_run(result).data.metrics
    assert m["generation/calls"] == 12 and m["generation/errors"] == 1 and m["generation/made"] == 12
    assert m["generation/tokens_completion"] > 0
    assert m["judge/calls"] == 11
    client = MlflowClient(tracking_uri=result.mlflow_uri)
    assert "generations.jsonl" in {a.path for a in client.list_artifacts(mlflow_run(result).info.run_id)}


def test_failed_generation_leaves_the_item_unjudged_and_listed(generated):
    result, requests = generated
    [row] = [json.loads(line) for line in (result.run_dir / "generations.jsonl").read_text().splitlines()
             if json.loads(line)["item_id"] == NOT_GENERATED]
    assert row["status"] == "error" and row["error_type"]
    doc = result.summary()
    s = doc["summary"]
    assert (s["total"], s["scored"], s["errors"], s["passed"], s["failed"]) == (12, 11, 1, 11, 0)
    assert s["unscored_items"] == [{"id": NOT_GENERATED, "status": "not_generated", "reasons": []}]
    detail = next(d for d in doc["detailed_results"] if d["id"] == NOT_GENERATED)
    assert detail["status"] == "not_generated" and detail["overall"] is None and detail["passed"] is None
    assert NOT_GENERATED not in {r["item_id"] for r in results_rows(result)}
    assert "PASS gate.min_pass_rate" in result.output
