"""A run's spending limit (``budget.max_usd``): a call is sent only while what the run paid plus the worst case of the
calls in flight stays within it.

Before a call is sent its worst case is reserved: its rendered prompt's tokens (litellm's tokenizer) plus the judge's
``max_tokens``, at the model's price in litellm's cost map (``judge.price_as``'s when set; nothing for a judge on a free
tier, ``judge.free_tier``, which the limit never stops). Once the answer is in,
the reservation is released and the answer's own cost booked. A call whose worst case would take the run over the
limit is not sent, nor is any after it (the stop is final): the calls in flight finish and are journaled, the run
writes what completed (marked partial) and exits with :data:`runner.core.errors.BUDGET_REACHED`. Answers known
without paying (the journal of an earlier process, the cache) cost nothing here, so the limit bounds what one
process pays; a resumed run may raise it. The jobs of a sweep share one limit through the sweep's ledger
(:mod:`runner.storage.budget_ledger`). An ensemble's members spend from one limit: each member's call is admitted at
that member's worst case (its prompt's tokens, its ``max_tokens``, its price: :meth:`Budget.for_judge`), and once one
member's call is refused no member sends another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runner.core.config import JudgeConfig, RunConfig
from runner.core.errors import ConfigurationError
from runner.core.types import Message
from runner.judging.calls import BudgetReached
from runner.judging.estimate import pricing_model
from runner.llm.client import count_tokens, price
from runner.storage.budget_ledger import Ledger


def check(cfg: RunConfig) -> None:
    """Refuse, before any call, a budget that is not positive, a judge (or ensemble member) whose calls cannot be
    priced, or a run the budget does not cover yet (a generation stage).

    Raises:
        ConfigurationError: One line naming ``budget.max_usd`` (and ``judge.model``, or a member's
            ``judge.members.<name>.model``, for an unpriced model).
    """
    max_usd, judge = cfg.budget.max_usd, cfg.judge
    if max_usd is None:
        return
    if not max_usd > 0:
        raise ConfigurationError(f"budget.max_usd={max_usd}: must be > 0 (or null: no limit)")
    if cfg.generator is not None:
        raise ConfigurationError(f"budget.max_usd={max_usd}: a budget covers the judges' calls; a generation stage "
                                 "cannot have one yet")
    judges = {f"judge.members.{name}": member for name, member in judge.members.items()} or {"judge": judge}
    for key, one in judges.items():
        if not one.free_tier and price(pricing_model(one), 1, 1) is None:
            raise ConfigurationError(f"budget.max_usd={max_usd} needs priced calls, and litellm's cost map has no "
                                     f"price for {key}.model={one.model}: set {key}.price_as=<a listed model> to "
                                     "charge its calls at that model's price, or drop the budget")


def worst_case(judge: JudgeConfig) -> Callable[[tuple[Message, ...]], float]:
    """The worst-case dollars of one call of ``judge``: its prompt's tokens plus ``max_tokens`` at its price (none on a
    free tier: ``judge.free_tier``)."""
    model = pricing_model(judge)
    if judge.free_tier:
        return lambda messages: 0.0

    def usd(messages: tuple[Message, ...]) -> float:
        return price(model, count_tokens(judge.model, messages), judge.max_tokens) or 0.0

    return usd


class Budget:
    """What a run may still pay: the spent cost plus the reservations of the calls in flight stay within ``limit``.

    Args:
        limit: ``budget.max_usd``.
        worst_case: A call's worst-case dollars from its rendered messages (:func:`worst_case`), for :meth:`admit`;
            None when every judge is admitted through its own :meth:`for_judge` (an ensemble's members).
        ledger: A sweep job's: the sweep's ledger, booked into by every job (runner.storage.budget_ledger); None for
            a single run (its own spending only).
    """

    def __init__(self, limit: float, worst_case: Callable[[tuple[Message, ...]], float] | None = None,
                 ledger: Ledger | None = None) -> None:
        self.limit = limit
        self.worst_case = worst_case
        self.ledger = ledger
        self._spent = 0.0
        self.reserved = 0.0
        self.reached: BudgetReached | None = None
        if ledger is not None:
            ledger.drop_reservations()

    @property
    def spent(self) -> float:
        """Dollars paid: by this run, or by the sweep's jobs when it has a ledger."""
        return self.ledger.spent() if self.ledger is not None else self._spent

    def admit(self, messages: tuple[Message, ...]) -> float:
        """Reserve the worst case of a call about to be sent; returns it, for :meth:`settle`.

        Raises:
            BudgetReached: The reservation would take the run over the limit, or an earlier one would have.
        """
        if self.reached is not None:
            raise self.reached
        assert self.worst_case is not None, "an ensemble's calls are admitted through for_judge"
        return self.book(self.worst_case(messages))

    def for_judge(self, judge: JudgeConfig, what: str) -> JudgeAdmission:
        """The admission of ``judge``'s calls (an ensemble member's) into this budget, at its own worst case;
        ``what`` names its call in the stop line ("member a's next call")."""
        return JudgeAdmission(self, worst_case(judge), what)

    def book(self, worst: float, what: str = "the next call") -> float:
        """Reserve ``worst`` dollars (a call, or a whole batch before it is submitted: ``what`` says which); returns it.

        Raises:
            BudgetReached: As :meth:`admit`.
        """
        if self.reached is not None:
            raise self.reached
        if self.ledger is not None:
            committed = self.ledger.book(worst, self.limit)
        else:
            committed = self._spent + self.reserved if self._spent + self.reserved + worst > self.limit else None
        if committed is not None:
            self.reached = BudgetReached(committed, self.limit, worst, what=what)
            raise self.reached
        self.reserved += worst
        return worst

    def settle(self, reserved: float, cost: float | None) -> None:
        """Release a call's reservation and book what its answer cost (None: unpriced, booked at the reservation)."""
        paid = reserved if cost is None else cost
        self.reserved -= reserved
        self._spent += paid
        if self.ledger is not None:
            self.ledger.settle(reserved, paid)


@dataclass
class JudgeAdmission:
    """One judge's calls admitted into a run's :class:`Budget` (an Admission): each at that judge's worst case; the
    spending, the reservations and the stop are the budget's, shared with the run's other judges."""

    budget: Budget
    worst_case: Callable[[tuple[Message, ...]], float]
    what: str = "the next call"

    def admit(self, messages: tuple[Message, ...]) -> float:
        """Reserve the worst case of this judge's call about to be sent (as :meth:`Budget.admit`)."""
        return self.budget.book(self.worst_case(messages), self.what)

    def book(self, worst: float, what: str = "the next call") -> float:
        """Reserve ``worst`` dollars (as :meth:`Budget.book`)."""
        return self.budget.book(worst, what)

    def settle(self, reserved: float, cost: float | None) -> None:
        """As :meth:`Budget.settle`."""
        self.budget.settle(reserved, cost)
