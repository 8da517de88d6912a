"""dry_run: render every request a run would send, count its tokens and price it; call nothing."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from runner.client import count_tokens, price
from runner.config import JudgeConfig, Strategy
from runner.judge import JudgePlan, pair_variables, plan_orders
from runner.types import Item


@dataclass(frozen=True)
class Estimate:
    """What a run would cost before anything is spent.

    Attributes:
        judge: The judge's config name.
        model: Its litellm model string.
        calls: First-round calls (every planned item x repeat x order).
        conditional_calls: Calls that happen only on some answers (swap-and-synthesize: at most this many).
        prompt_tokens: Tokens of every rendered first-round prompt.
        max_completion_tokens: calls x max_tokens, the most the judge can answer.
        usd_prompt: Price of the prompt tokens; None when litellm's cost map has no price for the model.
        usd_max: Price of prompt tokens plus max_completion_tokens (an upper bound), or None.
    """

    judge: str
    model: str
    calls: int
    conditional_calls: int
    prompt_tokens: int
    max_completion_tokens: int
    usd_prompt: float | None
    usd_max: float | None


def estimate_run(judge: JudgeConfig, plan: JudgePlan, items: Iterable[Item]) -> Estimate:
    """Render every first-round request of the plan and price it with litellm's local cost map."""
    calls = prompt_tokens = 0
    for item in items:
        for repeat in range(plan.repeats):
            for order in plan_orders(plan.order_policy, plan.seed, item.id, repeat):
                messages = plan.template.render(pair_variables(item, order), neutralize=plan.neutralize)
                prompt_tokens += count_tokens(judge.model, messages)
                calls += 1
    conditional = calls if plan.strategy is Strategy.swap_synthesize else 0
    max_completion = calls * judge.max_tokens
    return Estimate(
        judge=judge.name, model=judge.model, calls=calls, conditional_calls=conditional,
        prompt_tokens=prompt_tokens, max_completion_tokens=max_completion,
        usd_prompt=price(judge.model, prompt_tokens, 0), usd_max=price(judge.model, prompt_tokens, max_completion),
    )
