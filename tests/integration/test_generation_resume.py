"""A generated output that was paid for is never paid for again: a resumed run reuses generations.jsonl."""

from __future__ import annotations

import json

from tests.fakes.openai_server import Reply
from tests.integration.conftest import live_judge

SCORES = {"accuracy": 4, "completeness": 4, "format_compliance": 4, "scope_adherence": 4, "context_usage": 4,
          "tool_usage": 4}


def test_resume_reuses_every_generation_and_only_judges_again(run_cli, fake_server, tmp_path):
    judge_up = {"value": False}

    def reply(body: dict) -> Reply | str:
        if body["model"] == "fake-generator":
            return "Generated: " + body["messages"][-1]["content"][:40]
        if not judge_up["value"]:
            return Reply(status=500, error_message="judge down")
        return json.dumps({"scores": SCORES, "reasoning": "Fine."})

    fake_server.reply = reply
    args = ["experiment=agent_rubric_generate", *live_judge(fake_server), "judge.max_retries=0",
            "generator=local_openai", f"generator.api_base={fake_server.base_url}",
            "generator.model=openai/fake-generator", "generator.template=generate_agent",
            "cache.mode=off", "tracking=off"]
    first = run_cli(*args)
    assert first.proc.returncode == 1, first.output  # every judge call failed
    generations = [json.loads(line) for line in (first.run_dir / "generations.jsonl").read_text().splitlines()]
    assert len(generations) == 12 and {g["status"] for g in generations} == {"ok"}
    paid = [r for r in fake_server.requests if r["model"] == "fake-generator"]
    assert len(paid) == 12

    judge_up["value"] = True
    fake_server.reset()
    fake_server.reply = reply
    second = run_cli(*args, f"resume={first.run_dir}", run_dir=first.run_dir)

    assert second.proc.returncode == 0, second.output
    models = [r["model"] for r in fake_server.requests]
    assert models.count("fake-generator") == 0  # every output came from the generations journal
    assert models.count("fake-judge") == 12
    report = second.summary()
    assert report["summary"]["scored"] == 12
    # the judge saw the very outputs generated (and paid for) by the first run
    judged = {g["raw_response"] for g in generations}
    prompts = "\n".join(m["content"] for r in fake_server.requests for m in r["messages"])
    assert all(text in prompts for text in judged)
