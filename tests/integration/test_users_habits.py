"""The reply-quality user's habits (issue 44, point 6), in process against the fake OpenAI server: a new category's
weights without Hydra's ``+``, a free tier under ``budget.max_usd``, an ensemble's consistency line."""

from __future__ import annotations

import json

from runner.app.aggregate_cli import compose_config
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
