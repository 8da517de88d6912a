"""Unit tests for runner.judging.estimate's list price of a run's answers (litellm's local cost map, no sockets)."""

from __future__ import annotations

import pytest

from runner.core.config import JudgeConfig
from runner.core.types import JudgeResponse, Judgment
from runner.judging.estimate import LIST_UNPRICED, LIST_USD, list_cost, run_list_cost
from tests.builders import won

# gpt-4 in litellm's local cost map: $30 per million prompt tokens, $60 per million completion tokens
GPT4_1000_IN_100_OUT = 1000 * 30e-6 + 100 * 60e-6


def answer(cost: float | None = None, source: str = "call", error: bool = False) -> JudgeResponse:
    if error:
        return JudgeResponse(text=None, error_type="Timeout", error="timed out")
    return JudgeResponse(text="Output (a)", prompt_tokens=1000, completion_tokens=100, cost_usd=cost, source=source)


def judgment(response: JudgeResponse) -> Judgment:
    return won("i", "x", response=response, messages_hash="h")


def test_priced_answers_count_at_their_own_cost_whoever_served_them():
    responses = [answer(0.5), answer(0.25, source="cache"), answer(0.125, source="journal")]
    assert list_cost(responses, None) == {LIST_USD: 0.875, LIST_UNPRICED: 0.0}
    assert list_cost(responses, "gpt-4")[LIST_USD] == 0.875  # litellm's own price wins over price_as


def test_unpriced_answers_are_priced_as_the_named_model_else_counted():
    assert list_cost([answer()], "gpt-4") == {LIST_USD: pytest.approx(GPT4_1000_IN_100_OUT), LIST_UNPRICED: 0.0}
    assert list_cost([answer(), answer(0.5)], None) == {LIST_USD: 0.5, LIST_UNPRICED: 1.0}
    assert list_cost([answer()], "no-such-model-anywhere") == {LIST_USD: 0.0, LIST_UNPRICED: 1.0}


def test_failed_calls_are_worth_nothing_and_are_not_unpriced():
    assert list_cost([answer(error=True)], None) == {LIST_USD: 0.0, LIST_UNPRICED: 0.0}


def test_an_ensemble_prices_each_member_as_its_own_model_and_sums_them():
    members = {"gpt4": JudgeConfig(name="gpt4", model="replay/gpt-4", price_as="gpt-4"),
               "local": JudgeConfig(name="local", model="openai/local")}
    ensemble = JudgeConfig(name="ensemble", model="ensemble", members=members)
    by_member = {"gpt4": [judgment(answer())] * 2, "local": [judgment(answer())]}
    out = run_list_cost(ensemble, [j for js in by_member.values() for j in js], by_member)
    assert out["member/gpt4/cost/usd_list"] == pytest.approx(2 * GPT4_1000_IN_100_OUT)
    assert out["member/local/cost/list_unpriced_calls"] == 1.0
    assert out[LIST_USD] == pytest.approx(2 * GPT4_1000_IN_100_OUT) and out[LIST_UNPRICED] == 1.0
    single = JudgeConfig(name="gpt4", model="replay/gpt-4", price_as="gpt-4")
    assert run_list_cost(single, by_member["gpt4"])[LIST_USD] == pytest.approx(2 * GPT4_1000_IN_100_OUT)
