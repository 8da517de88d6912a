"""A recorded judge (``judge=recorded``) checked against the run's plan before anything runs.

Every first-round call the plan will make, (item id, order, repeat), must have a line in the recordings file
(:mod:`runner.llm.recorded`); the file is found like a dataset (the user's project first).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from runner.core.choices import Strategy
from runner.core.config import JudgeConfig
from runner.core.errors import ConfigurationError
from runner.inputs.datasets import resolve_path
from runner.judging.judge import JudgePlan, plan_orders
from runner.llm import recorded


def planned_keys(plan: JudgePlan, item_ids: Iterable[str]) -> Iterator[recorded.Key]:
    """The (item id, order, repeat) of every first-round call ``plan`` makes, in the order they are planned."""
    for item_id in item_ids:
        for repeat in plan.repeat_indices:
            if plan.scoring is not None:  # pointwise: one call per repeat, no order
                yield item_id, None, repeat
                continue
            for order in plan_orders(plan.order_policy, plan.seed, item_id, repeat):
                yield item_id, order.value, repeat


def resolved(judge: JudgeConfig, roots: Sequence[Path]) -> JudgeConfig:
    """``judge`` with its recordings file as an absolute path (resolved like a dataset path); other judges as
    they are."""
    if not recorded.is_recorded(judge.model):
        return judge
    if not judge.path:
        raise ConfigurationError(f"judge {judge.name}: a recorded judge ({judge.model}) needs judge.path=<recordings "
                                 "jsonl> (docs/bring-your-own-data.md: Score recorded judge outputs)")
    return replace(judge, path=str(resolve_path(judge.path, roots).resolve()))


def check(judge: JudgeConfig, plan: JudgePlan, item_ids: Iterable[str], roots: Sequence[Path]) -> None:
    """Check a recorded judge against the plan: its file parses and answers every planned call.

    Raises:
        ConfigurationError: No judge.path, or a strategy with a second round (a recordings file answers the first
            round only).
        runner.llm.recorded.RecordingsError: The file is missing, a line does not parse, a key is recorded twice,
            or a planned call has no recording (naming the first missing items and how many are missing).
    """
    if not recorded.is_recorded(judge.model):
        return
    path = Path(str(resolved(judge, roots).path))
    if plan.strategy is Strategy.swap_synthesize:
        raise ConfigurationError(f"judge {judge.name}: a recorded judge answers first-round calls only; "
                                 f"prompt strategy {plan.strategy.value} needs a synthesis round")
    recorded.check_coverage(path, planned_keys(plan, item_ids))
