"""What judging costs: before a run (dry_run renders every request, counts its tokens and prices it, calling
nothing) and after it (the list price of the answers a run got, whoever served them)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from runner.core.choices import Strategy
from runner.core.config import JudgeConfig
from runner.core.types import Item, JudgeResponse, Judgment, Message
from runner.inputs.prompts import Template
from runner.judging.judge import JudgePlan, pair_variables, plan_orders
from runner.llm.batches import batch_price, supports_batches
from runner.llm.client import count_tokens, price


@dataclass(frozen=True)
class Estimate:
    """What a run would cost before anything is spent.

    Attributes:
        judge: The judge's (or generator's) config name.
        model: Its litellm model string.
        calls: First-round calls (every planned item x repeat x order).
        conditional_calls: Calls that happen only on some answers (swap-and-synthesize: at most this many).
        prompt_tokens: Tokens of every rendered first-round prompt.
        max_completion_tokens: calls x max_tokens, the most the judge can answer.
        usd_prompt: Price of the prompt tokens; None when litellm's cost map has no price for the model.
        usd_max: Price of prompt tokens plus max_completion_tokens (an upper bound), or None.
        role: ``judge`` or ``generator``.
        batch_usd_prompt: ``usd_prompt`` at the cost map's batch prices (runner.llm.batches.batch_price), for a
            judge whose provider has a batch API judgesweep uses; None otherwise or when unpriced.
        batch_usd_max: ``usd_max`` at those prices, or None.
        free: The judge is on a free tier (``judge.free_tier``): every dollar figure is 0.
    """

    judge: str
    model: str
    calls: int
    conditional_calls: int
    prompt_tokens: int
    max_completion_tokens: int
    usd_prompt: float | None
    usd_max: float | None
    role: str = "judge"  # judge | generator
    batch_usd_prompt: float | None = None
    batch_usd_max: float | None = None
    free: bool = False


def _requests(plan: JudgePlan, item: Item, placeholder: str | None) -> Iterator[tuple[Message, ...]]:
    """The first-round requests of one item; a generated output (not written yet) is ``placeholder``."""
    for repeat in plan.repeat_indices:
        if plan.scoring is not None:
            output = item.candidates[0].text if item.candidates else (placeholder or "")
            variables = {**item.variables, "output": output, "criteria": plan.scoring.for_item(item)}
            yield plan.template.render(variables, neutralize=plan.neutralize)
            continue
        for order in plan_orders(plan.order_policy, plan.seed, item.id, repeat):
            yield plan.template.render(pair_variables(item, order), neutralize=plan.neutralize)


def pricing_model(judge: JudgeConfig) -> str:
    """The model whose price a call of ``judge`` is charged at: ``judge.price_as`` when set (a local copy of a listed
    model costs what the listed one would), else ``judge.model``."""
    return judge.price_as or judge.model


def _estimate(model: JudgeConfig, calls: int, prompt_tokens: int, conditional: int = 0,
              role: str = "judge") -> Estimate:
    max_completion = calls * model.max_tokens
    priced = pricing_model(model)
    batched = role == "judge" and supports_batches(model.model) and not model.free_tier
    free = model.free_tier
    return Estimate(
        judge=model.name, model=model.model, calls=calls, conditional_calls=conditional,
        prompt_tokens=prompt_tokens, max_completion_tokens=max_completion,
        usd_prompt=0.0 if free else price(priced, prompt_tokens, 0),
        usd_max=0.0 if free else price(priced, prompt_tokens, max_completion),
        role=role, free=free,
        batch_usd_prompt=batch_price(model.model, prompt_tokens, 0) if batched else None,
        batch_usd_max=batch_price(model.model, prompt_tokens, max_completion) if batched else None,
    )


def estimate_run(judge: JudgeConfig, plan: JudgePlan, items: Iterable[Item], generator: JudgeConfig | None = None,
                 generator_template: Template | None = None) -> list[Estimate]:
    """Render every first-round request and price it with litellm's local cost map.

    With a generator, its requests are rendered and priced too; the judge prompts then carry a
    placeholder of the generator's max_tokens in place of each output not written yet, so the judge's
    prompt tokens are an upper bound.

    Returns:
        The generator's estimate (when there is one), then the judge's.
    """
    calls = prompt_tokens = gen_calls = gen_tokens = 0
    placeholder = "x " * generator.max_tokens if generator is not None else None
    for item in items:
        if generator is not None and generator_template is not None:
            messages = generator_template.render(dict(item.variables), neutralize=plan.neutralize)
            gen_tokens += count_tokens(generator.model, messages)
            gen_calls += 1
        for messages in _requests(plan, item, placeholder):
            prompt_tokens += count_tokens(judge.model, messages)
            calls += 1
    conditional = calls if plan.strategy is Strategy.swap_synthesize else 0
    judged = _estimate(judge, calls, prompt_tokens, conditional)
    return [judged] if generator is None else [_estimate(generator, gen_calls, gen_tokens, role="generator"), judged]


LIST_USD, LIST_UNPRICED = "cost/usd_list", "cost/list_unpriced_calls"


def list_cost(responses: Iterable[JudgeResponse], price_as: str | None) -> dict[str, float]:
    """What a run's answers are worth at list price, whoever served them (a call, the cache, a resumed journal,
    a replay): each answer's own cost where litellm priced it, else its tokens at ``price_as``'s price.

    This is the cost of a configuration rather than of this run, which is what a cost-quality comparison
    needs: a sweep served from the cache paid nothing but is worth what its calls cost, and a replayed judge
    is worth what the recorded model charges. A failed call is worth nothing.

    Returns:
        ``cost/usd_list`` and ``cost/list_unpriced_calls`` (answers neither priced nor priceable: a local
        model without ``price_as``; when there are any, the dollars leave them out).
    """
    usd, unpriced = 0.0, 0
    priceable = price_as is not None  # price() is None for a model litellm cannot price, whatever the tokens
    for response in responses:
        if response.error_type is not None:
            continue
        value = response.cost_usd
        if value is None and priceable:
            value = price(price_as, response.prompt_tokens, response.completion_tokens)  # type: ignore[arg-type]
            priceable = value is not None  # asked once, not once a call (~0.5 ms each)
        if value is None:
            unpriced += 1
        else:
            usd += value
    return {LIST_USD: usd, LIST_UNPRICED: float(unpriced)}


def run_list_cost(judge: JudgeConfig, judgments: Sequence[Judgment],
                  by_member: Mapping[str, Sequence[Judgment]] | None = None) -> dict[str, float]:
    """:func:`list_cost` of a run's judge calls; for an ensemble, each member's calls at its own ``price_as``
    (also as ``member/<name>/cost/...``) and the run's as their sum."""
    if by_member is None:
        return list_cost((j.response for j in judgments), judge.price_as)
    out = {LIST_USD: 0.0, LIST_UNPRICED: 0.0}
    for name, member_judgments in by_member.items():
        member = list_cost((j.response for j in member_judgments), judge.members[name].price_as)
        for key, value in member.items():
            out[f"member/{name}/{key}"] = value
            out[key] += value
    return out
