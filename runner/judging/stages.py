"""The paid stages of a run: generation (optional, pointwise) and judging.

Each stage has its own client (model, limits, retries), its own journal in the run directory, and
looks answers up in the interrupted run's journal and the response cache before paying for them.
"""

from __future__ import annotations

import asyncio
import threading
from array import array
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from runner.core.choices import CacheMode
from runner.core.config import JudgeConfig
from runner.core.judgments import Judgments
from runner.core.run_settings import BatchConfig, CacheConfig
from runner.core.types import Item, JudgeResponse, Order, Secret
from runner.inputs.datasets import ItemRef, resolve_path
from runner.inputs.prompts import Template
from runner.judging import batching
from runner.judging.batching import BatchStage
from runner.judging.calls import Admission, BudgetReached, CallCounts, RunAborted
from runner.judging.generation import GENERATIONS_NAME, Generation, Generator
from runner.judging.judge import Executor, JudgePlan
from runner.judging.progress import FirstAnswer, ProgressBar, ProgressOptions, Sinks
from runner.judging.shutdown import run_stage
from runner.llm import recorded
from runner.llm.batches import BatchTransport
from runner.llm.client import JudgeClient, release_loop_clients
from runner.llm.pacing import RateLimiter
from runner.storage import store
from runner.storage.cache import ResponseCache
from runner.storage.journal import Journal, JournalAnswers
from runner.storage.messages import MESSAGES_NAME, MessageStore
from runner.storage.sent import SENT_NAME, SentLog
from runner.storage.sources import AnswerSources

R = TypeVar("R")


@dataclass(frozen=True)
class StageEnv:
    """What every paid stage of a run shares: where it writes, its cache, keys, seed, progress and how it stops."""

    run_dir: Path
    root: Path  # the project root a relative cache path resolves against
    cache: CacheConfig
    api_keys: Mapping[str, Secret]
    seed: int
    progress: ProgressOptions
    answered: threading.Event | None = None  # set at the stage's first answer
    shutdown_grace_s: float = 10.0  # SIGINT/SIGTERM: how long the answers in flight may take to arrive
    batch: BatchConfig | None = None  # judge.batch's settings (runner.judging.batching); None: never batched


@dataclass(frozen=True)
class Seat:
    """One model of a stage (the judge, a panel's member, the generator) and what it is given."""

    cfg: JudgeConfig
    limiter: RateLimiter | None = None
    response_format: dict[str, Any] | None = None  # the structured output the judge is asked for
    prior: Mapping[tuple, JudgeResponse] = field(default_factory=dict)  # an interrupted run's answers
    admission: Admission | None = None  # budget.max_usd (runner.judging.budget): admits each live call


@contextmanager
def _cache(cfg: CacheConfig, root: Path) -> Iterator[ResponseCache | None]:
    cache = None if cfg.mode is CacheMode.off else ResponseCache(resolve_path(cfg.path, root), cfg.mode)
    try:
        yield cache
    finally:
        if cache is not None:
            cache.close()


def _sinks(journal: Journal, bar: ProgressBar, answered: threading.Event | None) -> Sinks:
    return Sinks(journal, bar, *([FirstAnswer(answered)] if answered is not None else []))


def prior_answers(run_dir: Path, name: str) -> Mapping[tuple, JudgeResponse]:
    """Answers an interrupted run already has in its journal ``name`` (judge or generation journal)."""
    return JournalAnswers(run_dir / name)


def generate(seat: Seat, template: Template, items: Iterable[Item], env: StageEnv, *, concurrency: int, total: int,
             max_error_rate: float, neutralize: bool) -> dict[str, Generation]:
    """Run the generation stage: one output per item, journaled to generations.jsonl as it completes;
    ``env.answered`` is set at its first answer. SIGINT/SIGTERM stop it (runner.judging.shutdown: Interrupted) once
    the answers in flight arrived or ``env.shutdown_grace_s`` passed."""
    model = seat.cfg
    client = JudgeClient(model, env.api_keys, seat.limiter, None, env.seed)
    with _cache(env.cache, env.root) as cache, SentLog(env.run_dir / SENT_NAME) as sent:
        sources = AnswerSources(seat.prior, cache, model.model, model.api_base, client.decoding_params, sent)
        with Journal(env.run_dir / GENERATIONS_NAME) as journal, \
                ProgressBar(total, env.progress, label="generating") as bar:
            bar.watch(client)
            generator = Generator(template, client, _sinks(journal, bar, env.answered), sources, concurrency,
                                  max_error_rate=max_error_rate, neutralize=neutralize)
            return asyncio.run(run_stage(_released(generator.run(items)), env.shutdown_grace_s))


def judge(seat: Seat, plan: JudgePlan, items: Callable[[], Iterable[Item]], refs: tuple[ItemRef, ...], env: StageEnv,
          total: int) -> Judgments:
    """Run the judge stage over ``items()``: a panel of one (:func:`judge_panel`) whose journal is the run's own.
    Judgments come back in dataset order (item, repeat, order, stage); on an abort its ``completed`` is the
    judge's judgments so far, in that order."""
    name = seat.cfg.name or "judge"
    try:
        return judge_panel({name: seat}, {name: env.run_dir}, plan, items, refs, env, total)[name]
    except RunAborted as exc:
        if exc.completed_by_member is not None:  # a single judge's abort carries its judgments, not a panel's
            exc.completed, exc.completed_by_member = exc.completed_by_member.get(name, exc.completed), None
        raise


def _in_dataset_order(judgments: Judgments, refs: tuple[ItemRef, ...]) -> Judgments:
    """Sorted in place by (item's place in the dataset, repeat, order, a later stage after "judge"), stably; one
    integer key per judgment, so a million of them are sorted without a million key tuples."""
    index = {ref.id: n for n, ref in enumerate(refs)}
    repeats = 1 + max((repeat for _, repeat, _, _ in judgments.requests()), default=0)
    orders = {None: 0, Order.AB: 1, Order.BA: 2}  # as "" < "ab" < "ba"
    keys = array("q", (((index[item_id] * repeats + repeat) * 3 + orders[order]) * 2 + (stage != "judge")
                       for item_id, repeat, order, stage in judgments.requests()))
    judgments.reorder(np.argsort(np.frombuffer(keys, dtype=np.int64), kind="stable"))
    return judgments


def judge_panel(seats: Mapping[str, Seat], member_dirs: Mapping[str, Path], plan: JudgePlan,
                items: Callable[[], Iterable[Item]], refs: tuple[ItemRef, ...], env: StageEnv,
                total: int) -> dict[str, Judgments]:
    """Run the judge stage: every member judges every item (a single judge is a panel of one), all members at once in
    one event loop, each with its own client (limits, retries), concurrency slots and journal in ``member_dirs[name]``.
    ``env.answered`` is set at the first answer; SIGINT/SIGTERM stop it as :func:`generate` says.
    The seats' ``admission`` (``budget.max_usd``) admits each member's calls before they are sent, all into one
    budget: once it stops a call, every member finishes the calls it has in flight and sends no other. With
    ``env.batch``, the members whose ``batch`` wants it (runner.judging.batching.for_member) have their planned calls
    batched first, each in its member directory, as :func:`judge` does for one judge.

    Returns:
        Member name -> its judgments in dataset order.
    """
    with _cache(env.cache, env.root) as cache, ExitStack() as stack:
        clients: dict[str, Any] = {}
        sources: dict[str, AnswerSources] = {}
        batches: dict[str, BatchStage] = {}
        for name, seat in seats.items():
            member = seat.cfg
            clients[name] = JudgeClient(member, env.api_keys, seat.limiter, seat.response_format, env.seed)
            member_dirs[name].mkdir(parents=True, exist_ok=True)
            sent = stack.enter_context(SentLog(member_dirs[name] / SENT_NAME))  # a member's keys are its own
            # a recorded answer is keyed by its call, not by the messages the cache keys on (and costs nothing):
            # cached, another recordings file's answer to the same messages would be served
            sources[name] = AnswerSources(seat.prior, None if recorded.is_recorded(member.model) else cache,
                                          member.model, member.api_base, clients[name].decoding_params, sent)
            if env.batch is not None and batching.wanted(member):
                stage = BatchStage(member, env.batch, member_dirs[name], BatchTransport(member, env.api_keys),
                                   clients[name].decoding_params, seat.admission)
                if stage.plan(plan, items(), sources[name]):
                    batches[name] = stage
        if batches:  # a CallClient, as JudgeClient is
            clients.update(batching.collect(batches, {name: clients[name] for name in batches}, env.progress,
                                              env.run_dir))
        bar = stack.enter_context(ProgressBar(total * len(seats), env.progress))
        # one store for every member: they are shown the same messages, stored once
        messages = stack.enter_context(MessageStore(env.run_dir / MESSAGES_NAME))
        executors = {}
        for name, seat in seats.items():
            bar.watch(clients[name])
            journal = stack.enter_context(Journal(member_dirs[name] / store.JOURNAL_NAME))
            executors[name] = Executor(plan, clients[name], _sinks(journal, bar, env.answered), sources[name],
                                       messages, admission=None if name in batches else seat.admission)
        done = asyncio.run(run_stage(_released(_all_members(executors, items, refs)), env.shutdown_grace_s))
    for name, stage in batches.items():
        stage.finished(clients[name])
    return {name: _in_dataset_order(judgments, refs) for name, judgments in zip(executors, done, strict=True)}


async def _all_members(executors: Mapping[str, Executor], items: Callable[[], Iterable[Item]],
                       refs: tuple[ItemRef, ...]) -> list[Judgments]:
    """Every member's executor at once; when one aborts, the others are stopped (at the budget: they stop sending,
    their calls in flight finish) and what each completed goes with the abort."""
    tasks = [asyncio.ensure_future(executor.run(items())) for executor in executors.values()]
    try:
        return list(await asyncio.gather(*tasks))
    except RunAborted as exc:  # one member aborted: stop the others and keep what each completed
        if not isinstance(exc, BudgetReached):  # at the budget, the others' calls in flight finish and are
            for task in tasks:  # kept (each member's next call is refused by the same budget)
                task.cancel()
        ended = await asyncio.gather(*tasks, return_exceptions=True)
        completed = {name: result if isinstance(result, Judgments) else executor.completed
                     for (name, executor), result in zip(executors.items(), ended, strict=True)}
        exc.completed_by_member = {name: _in_dataset_order(js, refs) for name, js in completed.items()
                                   if js is not None}
        exc.calls = sum((executor.calls for executor in executors.values()), CallCounts())
        raise


async def _released(main: Awaitable[R]) -> R:
    """Await a stage's ``main``, then close the HTTP clients litellm cached for this event loop before it ends
    (runner.llm.client.release_loop_clients)."""
    try:
        return await main
    finally:
        await release_loop_clients()
