"""A batch answer is priced at the cost map's batch prices (runner.llm.batches.batch_price)."""

from __future__ import annotations

import pytest

from runner.llm.batches import batch_price
from runner.llm.client import price as read_cost_map_price


def test_batch_price_is_the_cost_maps_batch_price_and_none_for_an_unpriced_model():
    live = read_cost_map_price("gpt-4o-mini", 1000, 1000)
    assert batch_price("gpt-4o-mini", 1000, 1000) == pytest.approx(1000 * 7.5e-08 + 1000 * 3e-07)
    assert live is not None and batch_price("gpt-4o-mini", 1000, 1000) == pytest.approx(live / 2)
    # not fake-judge: a test that prices fake-judge registers it in litellm.model_cost, process-wide
    assert batch_price("openai/judgesweep-unpriced", 1000, 1000) is None
