"""The users' own files, as they are, through whole runs (issue 15, part 5): their plain-text pairwise prompt, their
Jinja agent prompt and judge JSON with json_object, their validation file's texts in the report, the single-score
judge format with the sample std dev and the AI-phrase check. In process, against the fake OpenAI server."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

from tests.integration.conftest import live_judge

USERS = Path(__file__).resolve().parents[1] / "fixtures" / "users" / "formats"
PROMPTS = USERS / "prompts"


def pairwise_overrides(server) -> list[str]:
    return [*live_judge(server), "prompt=mtbench_pair", "prompt.template=evaluation_prompt", f"prompts_dir={PROMPTS}",
            "rubric=mtbench_verdict", "dataset=chat_vs_simple", f"dataset.path={USERS / 'pairs.jsonl'}",
            "order=fixed", "tracking=off", "cache.mode=off"]


def test_users_plain_text_prompt_runs_as_one_user_message(run_cli, fake_server):
    fake_server.reply = lambda body: "A is more helpful. [[A]]"
    result = run_cli(*pairwise_overrides(fake_server), "~dataset.variables.instruction",
                     "+dataset.variables.question=question")
    assert result.proc.returncode == 0, result.output
    assert len(fake_server.requests) == 2
    messages = next(r["messages"] for r in fake_server.requests if "sleeping" in r["messages"][0]["content"])
    assert [m["role"] for m in messages] == ["user"]
    expected = (PROMPTS / "evaluation_prompt.txt").read_text().strip().format(
        question="Any tips for sleeping better?", response_a="Keep a fixed wake-up time, skip caffeine after noon, "
        "and keep the room cool and dark.", response_b="Sleep more.")
    assert messages[0]["content"] == expected
    assert result.summary()["summary"]["final_verdict_distribution"]["chat"] == 2


def test_users_plain_text_prompt_with_an_unmapped_placeholder_fails_before_any_call(run_cli, fake_server):
    result = run_cli(*pairwise_overrides(fake_server))  # chat_vs_simple maps `instruction`, not `question`
    assert result.proc.returncode == 1
    assert f"template {PROMPTS / 'evaluation_prompt.txt'} uses variable(s) ['question']" in result.output
    assert fake_server.requests == []


def agent_answer(body: dict) -> str:
    """The users' judge JSON for the example whose input the prompt shows (tests/fixtures/users/formats)."""
    answers = json.loads((USERS / "judge_answers.json").read_text())
    prompt = body["messages"][-1]["content"]
    inputs = {row["id"]: row["input"] for row in json.loads((USERS / "validation.json").read_text())["examples"]}
    return json.dumps(next(answers[i] for i, text in inputs.items() if text in prompt))


def test_users_agent_files_judge_json_and_json_object(run_cli, fake_server):
    fake_server.reply = agent_answer
    result = run_cli(*live_judge(fake_server), "experiment=agent_rubric", "judge=local_openai",
                     f"judge.api_base={fake_server.base_url}", "judge.model=openai/fake-judge",
                     "judge.structured_output=json_object", f"dataset.path={USERS / 'validation.json'}",
                     f"prompts_dir={PROMPTS}", "prompt.template=agent_prompt.jinja", "cache.mode=off")
    assert all(r["response_format"] == {"type": "json_object"} for r in fake_server.requests)
    assert all([m["role"] for m in r["messages"]] == ["user"] for r in fake_server.requests)  # blockless Jinja
    assert fake_server.requests[0]["messages"][0]["content"].startswith("You evaluate one output of our support")
    summary = result.summary()
    s = summary["summary"]
    assert (s["scored"], s["unscored"], s["passed"], s["failed"]) == (3, 0, 2, 1)  # mcp_usage_correct read
    assert result.proc.returncode == 1 and "pass rate 66.7% < 80.0%" in result.output  # the users' 80% gate
    details = {d["id"]: d for d in summary["detailed_results"]}
    refund = details["refund-1"]
    assert refund["scores"]["tool_usage"] == 5.0
    assert refund["overall"] == round((5 + 4 + 5 + 5 + 4 + 5) / 6, 9)  # ours: the mean
    assert refund["judge_overall_score"] == [4.7] and refund["judge_pass"] == [True]  # the judge's: recorded
    rows = {row["id"]: row for row in json.loads((USERS / "validation.json").read_text())["examples"]}
    assert refund["input"] == rows["refund-1"]["input"] and refund["output"] == rows["refund-1"]["output"]
    assert refund["expected_output"] == rows["refund-1"]["expected_output"]
    failed = s["failed_examples"]
    assert [f["id"] for f in failed] == ["hours-2"]
    assert failed[0]["output"] == rows["hours-2"]["output"]  # whole in summary.json ...
    assert failed[0]["reasoning"] == "Contradicts the opening hours in the context."
    assert rows["hours-2"]["output"] not in result.output  # ... clipped on the console
    assert "  failed hours-2 (" in result.output, result.output
    assert f"    actual: {rows['hours-2']['output'][:77]}..." in result.output  # 80 characters
    assert "    expected: We are closed on Sundays; Monday to Saturday 9-18." in result.output
    results = [json.loads(line) for line in (result.run_dir / "results.jsonl").read_text().splitlines()]
    assert {r["item_id"]: r["judge_extras"]["overall_score"] for r in results} == {
        "refund-1": 4.7, "hours-2": 2.0, "refund-3": 4.5}


def test_users_actual_output_field_works_as_it_is(run_cli, fake_server):
    # issue 30: the README's one-liner with the users' file whose outputs are under "actual_output", no override
    fake_server.reply = agent_answer
    data = USERS / "validation_actual_output.json"
    result = run_cli(*live_judge(fake_server), "experiment=agent_rubric", "judge=local_openai",
                     f"judge.api_base={fake_server.base_url}", "judge.model=openai/fake-judge",
                     f"dataset.path={data}", "cache.mode=off", "tracking=off")
    rows = {row["id"]: row for row in json.loads(data.read_text())["examples"]}
    assert "output" not in rows["refund-1"]
    s = result.summary()["summary"]
    assert (s["scored"], s["unscored"], s["passed"], s["failed"]) == (3, 0, 2, 1), result.output
    shown = "\n".join(r["messages"][-1]["content"] for r in fake_server.requests)
    assert all(row["actual_output"] in shown for row in rows.values())  # each judged output reached the judge
    details = {d["id"]: d for d in result.summary()["detailed_results"]}
    assert details["hours-2"]["output"] == rows["hours-2"]["actual_output"]


def test_users_single_score_format_sample_std_and_phrases(run_cli, fake_server):
    lock, given = threading.Lock(), {"r1": 0}

    def reply(body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        if "I got the job!!" in prompt:
            with lock:  # r1's five repeats score 1, 2, 3, 4, 5: population std 1.414, sample std 1.581
                given["r1"] += 1
                score = given["r1"]
        else:
            score = 8 if "pasta" in prompt else 7
        return json.dumps({"score": score, "reasoning": "scripted"})

    fake_server.reply = reply
    result = run_cli(*live_judge(fake_server), "experiment=reply_quality", "judge=local_openai",
                     f"judge.api_base={fake_server.base_url}", "judge.model=openai/fake-judge", "rubric=single_score",
                     "prompt=single_score", f"dataset.path={USERS / 'replies.jsonl'}", "repeats=5",
                     "gate.min_mean_score=5.0", "cache.mode=off")
    assert result.proc.returncode == 0, result.output
    assert len(fake_server.requests) == 15
    prompt = fake_server.requests[0]["messages"][0]["content"]
    assert '{"score": <number from 0 to 10>, "reasoning": "<2-3 sentences>"}' in prompt  # {{ }} in the .txt
    summary = result.summary()
    details = {d["id"]: d for d in summary["detailed_results"]}
    assert math.isclose(details["r1"]["std"], math.sqrt(2.5)) and round(details["r1"]["std"], 3) == 1.581
    assert details["r1"]["overall"] == 3.0 and details["r2"]["std"] == 0.0
    assert details["r1"]["input"] == "I got the job!!"  # dataset reply_quality: input_variable message
    assert details["r1"]["expected_output"] == "NO WAY, congrats!! When do you start?"
    consistency = summary["summary"]["consistency"]
    assert consistency["std"] == "sample (n-1)" and consistency["max_std"] == details["r1"]["std"]
    assert "consistency over 5 repeats (std dev sample (n-1)): mean std 0.53" in result.output
    assert details["r1"]["violations"] == {"ai_phrases": ["I would be happy to", "Let me know"]}


def test_single_score_rubric_with_the_reply_quality_prompt_needs_no_other_override(run_cli, fake_server):
    fake_server.reply = lambda body: '{"score": 6, "reasoning": "fine"}'
    result = run_cli(*live_judge(fake_server), "experiment=reply_quality", "judge=local_openai",
                     f"judge.api_base={fake_server.base_url}", "judge.model=openai/fake-judge", "rubric=single_score",
                     f"dataset.path={USERS / 'replies.jsonl'}", "repeats=1", "gate.min_mean_score=5.0",
                     "cache.mode=off")
    assert result.proc.returncode == 0, result.output
    assert "- score (0 to 10): Overall quality" in fake_server.requests[0]["messages"][-1]["content"]
    s = result.summary()["summary"]
    assert (s["scored"], s["average_overall"], s["scale"]) == (3, 6.0, [0.0, 10.0])
