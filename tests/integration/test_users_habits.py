"""The reply-quality user's habits (issue 44, point 6), in process against the fake OpenAI server: a new category's
weights without Hydra's ``+``, a free tier under ``budget.max_usd``, an ensemble's consistency line."""

from __future__ import annotations

import json

from runner.app.aggregate_cli import compose_config
from runner.llm.client import price
from tests.fakes.openai_server import Reply
from tests.integration.conftest import live_judge
from tests.integration.shared import live_members

SCORES = {"naturalness": 9, "appropriateness": 1, "intent_match": 1}


def scripted(body: dict) -> str:
    return json.dumps({**SCORES, "reasoning": "scripted"})


def test_a_new_category_s_weights_need_no_plus(run_cli, fake_server):
    fake_server.reply = scripted
    casual = ["rubric.category_weights.casual.naturalness=1.0", "rubric.category_weights.casual.appropriateness=0",
              "rubric.category_weights.casual.intent_match=0"]
    result = run_cli("experiment=reply_quality", *live_judge(fake_server), "repeats=1", "gate.min_mean_score=null",
                     "tracking=off", "cache.mode=off", *casual, "rubric.category_weights.emotion.naturalness=0.6")
    assert result.proc.returncode == 0, result.output
    overall = {d["category"]: d["overall"] for d in result.summary()["detailed_results"]}
    assert overall["casual"] == 9.0  # the new category: naturalness alone
    assert overall["emotion"] == round((0.6 * 9 + 0.3 + 0.2) / 1.1, 9)  # an existing one's weight overridden
    assert overall["question"] == round(0.4 * 9 + 0.3 + 0.3, 9)  # the rubric's defaults
    # the aggregate command composes the same way; a key outside the open mappings stays closed
    dcfg, _ = compose_config(["experiment=reply_quality", "rubric.category_weights.work.naturalness=2"], None)
    assert dict(dcfg.rubric.category_weights.work) == {"naturalness": 2.0}
    sent = len(fake_server.requests)
    failed = run_cli("experiment=reply_quality", *live_judge(fake_server), "rubric.naturalnes=1", "tracking=off")
    assert failed.proc.returncode == 1 and "naturalnes" in failed.output and len(fake_server.requests) == sent


def test_a_free_tier_is_free_and_never_stops_under_a_budget(run_cli, fake_server):
    # the users' Cerebras judge (litellm's cost map lists a price for it) on its free tier, served by the fake server
    fake_server.reply = lambda body: Reply(content=scripted(body), prompt_tokens=400, completion_tokens=60)
    cerebras = ["experiment=reply_quality", "judge=cerebras_llama70b", f"judge.api_base={fake_server.base_url}",
                "judge.rpm=null", "judge.free_tier=true", "budget.max_usd=0.002", "repeats=1", "max_items=6",
                "gate.min_mean_score=null", "tracking=off", "cache.mode=off"]
    env = {"CEREBRAS_API_KEY": "test-key"}
    assert price("cerebras/llama-3.3-70b", 400, 60) > 0.002 / 6  # priced, six calls would pass the budget
    dry = run_cli(*cerebras, "dry_run=true", env=env)
    assert dry.proc.returncode == 0 and "cost: free (judge.free_tier)" in dry.output, dry.output
    result = run_cli(*cerebras, env=env)
    assert result.proc.returncode == 0, result.output
    assert len(fake_server.requests) == 6
    metrics = json.loads((result.run_dir / "metrics.json").read_text())
    assert metrics["cost/usd_total"] == 0.0 and "cost $0.0000" in result.output


def test_an_ensemble_prints_each_member_s_consistency(run_cli, fake_server):
    # repeat r is sent with seed + r: member a (seeds 1-3) always scores 8, member b (seeds 11-13) 6, 7, 8
    def reply(body: dict) -> str:
        score = 8 if body["seed"] < 10 else body["seed"] - 5
        return json.dumps({"naturalness": score, "appropriateness": score, "intent_match": score, "reasoning": "x"})

    fake_server.reply = reply
    result = run_cli("experiment=reply_quality", *live_members(fake_server, seeds=(1, 11)), "judge.combine=mean",
                     "repeats=3", "max_items=3", "gate.min_mean_score=null", "tracking=off", "cache.mode=off")
    assert result.proc.returncode == 0, result.output
    assert len(fake_server.requests) == 2 * 3 * 3
    assert ("member a: consistency over 3 repeats (std dev sample (n-1)): mean std 0.00, above 0.5: 0.0%"
            in result.output), result.output
    assert ("member b: consistency over 3 repeats (std dev sample (n-1)): mean std 1.00, above 0.5: 100.0%"
            in result.output)
    heads = result.summary()["ensemble"]["member_headline"]
    assert heads["b"]["consistency"]["mean_std"] == 1.0 and heads["b"]["consistency"]["items_measured"] == 3
    metrics = json.loads((result.run_dir / "metrics.json").read_text())
    assert metrics["member/b/consistency/mean_std"] == 1.0
