"""A judge stage's calls through the provider's batch API (``judge.batch``), resumable across processes.

1. Plan: the executor's own rendering (:class:`runner.judging.judge.Executor`, its ``_call`` taken over by
   :class:`Planner`) renders every first-round call exactly as a live run would, and asks the answer sources (the
   journal of the run being resumed, the response cache) first; each call left to pay for becomes one line of the
   batch input file (``batch_input_<n>.jsonl`` in the run directory): ``custom_id`` is the call's journal key, the
   body the chat request a live call sends (same messages, same decoding parameters, ``seed + repeat``).
2. Submit: the input file, its upload and the batch are noted in ``batches.jsonl`` (:mod:`runner.storage.batch_log`)
   before each next step; a process that died between upload and creation is followed by one that first asks the
   provider for a batch over that file. A run whose batches are all collected submits no other.
3. Wait: the batch is polled every ``batch.poll_s`` (a log line per poll: status, rows done and failed, elapsed; on a
   terminal a live bar of the same, :class:`runner.judging.batch_progress.BatchBar`); with ``batch.wait=false`` the
   run ends here (:class:`runner.core.errors.BatchPending`, exit 0) and a later ``resume=<run dir>`` polls the same
   batch. SIGINT/SIGTERM while waiting ends the stage at once (Interrupted: exit 130/143 with the resume command);
   the batch goes on at the provider and the resume collects it.
4. Collect: the output and error files are saved in the run directory (``batch_output_<n>.jsonl``,
   ``batch_errors_<n>.jsonl``) before anything is read from them (an ``ended`` event notes the batch's end). With
   ``batch.retry=batch`` the rows the provider failed, expired or cancelled go in batch n+1 (its input file holds the
   same lines), waited for and saved the same way, as long as a batch answers any of its rows; a resumed run reads
   the saved answers of its earlier batches again. Then the stage runs as live with :class:`BatchedClient`: each call
   is answered from the batches' outputs through the same path as a live answer (journal, cache, parsing, unscored
   with its reason, tokens, cost at the batch price, MLflow); rows still unanswered (``batch.retry=live``: every
   failed, expired or cancelled row), and a synthesis round's calls (they depend on the first round's answers), are
   sent live. A batch that ended cancelled or failed is logged with what it returned.

An ensemble's members are batched each as a judge is (``judge.batch`` and ``judge.batch_threshold`` of the ensemble
apply to every member: :func:`for_member`), each in its member directory; their batches are all submitted before the
first is waited for (:func:`collect`). The whole batch phase runs in one event loop, whose HTTP clients are closed
before it ends (runner.llm.batches.release_clients). The planner and the client answering from the batches are
:mod:`runner.judging.batch_answers`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from runner.core.choices import BatchMode, BatchRetry
from runner.core.config import JudgeConfig
from runner.core.errors import BatchPending, ConfigurationError
from runner.core.run_settings import BatchConfig
from runner.core.types import Item, JudgeRequest, JudgeResponse, Message
from runner.judging.batch_answers import AnswerKey, BatchedClient, Planner, key_of, line_messages
from runner.judging.batch_progress import BatchBar
from runner.judging.calls import Admission, AnswerSource
from runner.judging.estimate import pricing_model
from runner.judging.judge import JudgePlan
from runner.judging.progress import ProgressOptions
from runner.judging.shutdown import SHUTDOWN, Interrupted, run_stage
from runner.llm.batches import BatchState, BatchTransport, batch_price, release_clients, supports_batches
from runner.llm.client import JudgeClient, count_tokens
from runner.storage.batch_log import BatchLog, Submission

log = logging.getLogger(__name__)

USABLE = "openai/, hosted_vllm/ or litellm_proxy/ models only"


def check(judge: JudgeConfig) -> None:
    """Refuse a batch setting that cannot work, before any call (the ranges of ``batch.poll_s`` and
    ``judge.batch_threshold`` are checked with every number: runner.core.values).

    Raises:
        ConfigurationError: ``judge.batch=on`` for a judge, or an ensemble member, whose provider has no batch API
            judgesweep can use (runner.llm.batches).
    """
    if judge.batch is not BatchMode.on:
        return
    for name, member in judge.members.items():
        if not supports_batches(member.model):
            raise ConfigurationError(f"judge.batch=on: ensemble member {name} ({member.model}) has no batch API "
                                     f"judgesweep can use ({USABLE}); judge.batch=auto batches the members that "
                                     "have one and sends the others' calls live")
    if not judge.members and not supports_batches(judge.model):
        raise ConfigurationError(f"judge.batch=on: judge {judge.name} ({judge.model}) has no batch API judgesweep "
                                 f"can use ({USABLE})")


def for_member(ensemble: JudgeConfig, member: JudgeConfig) -> JudgeConfig:
    """An ensemble's member as the ensemble's ``judge.batch`` and ``judge.batch_threshold`` batch it."""
    return replace(member, batch=ensemble.batch, batch_threshold=ensemble.batch_threshold)


def wanted(judge: JudgeConfig) -> bool:
    """Whether the judge's calls may go through a batch (``on``, or ``auto`` with a provider that has one)."""
    return judge.batch is BatchMode.on or (judge.batch is BatchMode.auto and supports_batches(judge.model))


def collect(stages: Mapping[str, BatchStage], lives: Mapping[str, JudgeClient],
            progress: ProgressOptions | None = None, run_dir: Path | None = None) -> dict[str, BatchedClient]:
    """Collect the planned batches of one judge or several (an ensemble's members, by name) in one event loop: every
    batch is submitted first, then each is waited for, saved and read in turn (:meth:`BatchStage.gather`). The
    clients answering each judge's calls from its batches, live for the rest.

    Raises:
        BatchPending: ``batch.wait=false`` and a batch has not ended: one message naming every batch not ended (each
            member's) and the ``resume=`` of ``run_dir`` (the run's directory, a panel's members' parent).
        Interrupted: SIGINT/SIGTERM while waiting (the batches go on; ``resume=<run dir>`` collects them).
    """
    async def phase() -> dict[str, tuple[dict[AnswerKey, JudgeResponse], frozenset[AnswerKey]]]:
        try:
            for stage in stages.values():  # all at the provider before the first is waited for
                await stage.submit()
            got, pending = {}, []
            for name, stage in stages.items():
                try:
                    got[name] = await stage.gather(progress)
                except BatchPending as exc:  # the others are still looked at: one message names them all
                    pending.append((stage, str(exc)))
            if len(pending) == 1:
                stage, said = pending[0]
                raise BatchPending(f"{said}; collect it with resume={run_dir or stage.run_dir}")
            if pending:
                named = "; ".join(f"{stage.judge.name}: {said}" for stage, said in pending)
                raise BatchPending(f"{named}; collect them with resume={run_dir or pending[0][0].run_dir}")
            return got
        finally:
            await release_clients()

    # no grace period: nothing paid is in flight while waiting (a poll is free), the batches go on regardless
    got = asyncio.run(run_stage(phase(), 0.0))
    return {name: BatchedClient(lives[name], answers, unanswered, admission=stages[name].admission)
            for name, (answers, unanswered) in got.items()}


class BatchStage:
    """One judge stage's batch: plan, submit, wait and collect (see the module docstring).

    Args:
        judge: The judge's config.
        cfg: ``batch.*``.
        run_dir: The run's (or member's) directory.
        transport: The judge's batch API.
        params: The judge client's decoding parameters (as every live call sends them).
        admission: ``budget.max_usd``: a new batch's worst case (every call's prompt and ``max_tokens`` at the batch
            price) is booked before its upload, and settled at what its answers cost once collected.
    """

    def __init__(self, judge: JudgeConfig, cfg: BatchConfig, run_dir: Path, transport: BatchTransport,
                 params: Mapping[str, Any], admission: Admission | None = None) -> None:
        self.judge, self.cfg, self.run_dir = judge, cfg, run_dir
        self.admission, self.booked = admission, 0.0
        self.transport, self.params = transport, dict(params)
        self.log = BatchLog(run_dir)
        self.submission: Submission | None = None
        self.state: BatchState | None = None
        self.submitted: BatchState | None = None  # the current batch's state right after its submission

    def plan(self, plan: JudgePlan, items: Iterable[Item], sources: AnswerSource | None) -> int:
        """Write the next batch's input file when the run has none in flight; returns its calls (0: nothing to
        batch: all answered, below ``judge.batch_threshold`` with ``auto``, or a batch already collected)."""
        known = self.log.submissions()
        pending = [s for s in known if not s.collected]
        if pending:
            self.submission = pending[-1]
            return -1
        if known:  # batch.retry=live: what a collected batch left unanswered goes live
            return 0
        path = self.run_dir / f"batch_input_{len(known)}.jsonl"
        seen: set[AnswerKey] = set()
        worst = [0.0]  # the batch's worst case, when a budget is to book it
        with path.open("w", encoding="utf-8") as fh:
            def planned(request: JudgeRequest, messages: tuple[Message, ...]) -> None:
                key = (request.messages_hash, request.repeat)
                if key not in seen:  # the same request twice (a duplicated item) is asked once, as the cache would
                    seen.add(key)
                    if self.admission is not None:
                        worst[0] += batch_price(pricing_model(self.judge), count_tokens(self.judge.model, messages),
                                                self.judge.max_tokens) or 0.0
                    fh.write(self.transport.request_line(json.dumps(list(request.key)), messages, self.params,
                                                         request.repeat))
            asyncio.run(Planner(plan, sources, planned).run(items))
        calls = len(seen)
        if calls == 0 or (self.judge.batch is BatchMode.auto and calls <= self.judge.batch_threshold):
            log.info("%s: %d calls to pay for: sent live (judge.batch=%s, batch_threshold=%d)", self.judge.name,
                     calls, self.judge.batch.value, self.judge.batch_threshold)
            path.unlink()
            return 0
        if self.admission is not None:
            try:  # before the upload: a batch over the budget is never submitted
                self.booked = self.admission.book(worst[0], f"a batch of {calls} calls")
            except BaseException:
                path.unlink()
                raise
        self.log.append(event="input", n=len(known), path=path.name, calls=calls)
        self.submission = Submission(len(known), path.name)
        return calls

    async def _submit(self) -> BatchState:
        """Upload and create what the batch journal lacks; the batch's current state."""
        s = self.submission
        assert s is not None
        file_id, batch_id = s.file_id, s.batch_id
        if file_id is None:
            file_id = await self.transport.upload(s.input_path, (self.run_dir / s.input_path).read_bytes())
            self.log.append(event="file", n=s.n, file_id=file_id)
        if batch_id is None:
            found = await self.transport.find(file_id)  # created by a process that died before noting it?
            state = found or await self.transport.create(file_id, {"judgesweep_run": self.run_dir.name})
            batch_id = state.batch_id
            self.log.append(event="batch", n=s.n, file_id=file_id, batch_id=batch_id)
            log.info("%s: batch %s %s (input %s)", self.judge.name, batch_id, "found" if found else "created",
                     s.input_path)
        self.submission = Submission(s.n, s.input_path, file_id, batch_id)
        return await self.transport.retrieve(batch_id)

    async def submit(self) -> None:
        """Upload the planned batch and create it, as far as the batch journal lacks them (see :meth:`_submit`)."""
        self.submitted = await self._submit()

    async def _wait(self, bar: BatchBar) -> BatchState:
        state = self.submitted or await self._submit()
        self.submitted, started = None, time.monotonic()
        bar.start(state)
        while True:
            bar.update(state)
            log.info("%s: batch %s %s: %d of %d rows done, %d failed, %.0f s waited", self.judge.name,
                     state.batch_id, state.status, state.completed, state.total, state.failed,
                     time.monotonic() - started)
            if state.final:
                return state
            if not self.cfg.wait:
                raise BatchPending(f"batch {state.batch_id} is {state.status} ({state.completed} of {state.total} "
                                   "rows done)")  # collect() adds the resume command
            await _sleep(self.cfg.poll_s)
            state = await self.transport.retrieve(state.batch_id)

    async def _round(self, progress: ProgressOptions | None
                     ) -> tuple[dict[AnswerKey, JudgeResponse], set[AnswerKey]]:
        """Wait for the current batch (Ctrl-C: Interrupted, the batch is collected by a resume), save its files;
        its answers and the rows it was asked."""
        assert self.submission is not None
        bar = BatchBar(self.judge.name, progress)
        with bar:
            self.state = state = await self._wait(bar)
        n = self.submission.n
        for name, file_id in ((f"batch_output_{n}.jsonl", state.output_file_id),
                              (f"batch_errors_{n}.jsonl", state.error_file_id)):
            path = self.run_dir / name
            if file_id and not path.is_file():  # saved before it is read: the answers are paid for
                data = await self.transport.content(file_id)
                tmp = path.with_suffix(".part")
                tmp.write_bytes(data)
                tmp.replace(path)
        answers, asked = self._read(self.submission)
        if not any(e.get("n") == n for e in self.log.events("ended")):
            self.log.append(event="ended", n=n, batch_id=self.submission.batch_id, status=state.status,
                            answered=len(answers), unanswered=len(asked - set(answers)))
        if self.admission is not None and self.booked:  # this process booked the batch: its answers cost this much
            self.admission.settle(self.booked, sum(a.cost_usd or 0.0 for a in answers.values()))
            self.booked = 0.0
        return answers, asked

    def _read(self, s: Submission) -> tuple[dict[AnswerKey, JudgeResponse], set[AnswerKey]]:
        """A saved batch's answers (its rows answered 200 with a body) and the rows it was asked."""
        answers: dict[AnswerKey, JudgeResponse] = {}
        for name in (f"batch_output_{s.n}.jsonl", f"batch_errors_{s.n}.jsonl"):
            path = self.run_dir / name
            for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else ():
                row = json.loads(line) if line.strip() else {}
                response = row.get("response") or {}
                if response.get("status_code") == 200 and isinstance(response.get("body"), dict):
                    answers[key_of(row["custom_id"])] = self.transport.read_answer(response["body"])
        asked = {key_of(json.loads(line)["custom_id"])
                 for line in (self.run_dir / s.input_path).read_text(encoding="utf-8").splitlines()}
        return answers, asked

    def collect(self, live: JudgeClient, progress: ProgressOptions | None = None) -> BatchedClient:
        """This judge's batches collected (:func:`collect`): the client that answers from them, live for the rest."""
        return collect({self.judge.name: self}, {self.judge.name: live}, progress)[self.judge.name]

    async def gather(self, progress: ProgressOptions | None = None
                     ) -> tuple[dict[AnswerKey, JudgeResponse], frozenset[AnswerKey]]:
        """Wait for the batch (or raise BatchPending), save and read its files; with ``batch.retry=batch`` the rows it
        left unanswered go in a new batch, waited for and read the same way, as long as a batch answers any of its
        rows. The answers of every batch of the run not yet journaled, and the rows they left unanswered.

        Raises:
            BatchPending: ``batch.wait=false`` and the batch has not ended.
            Interrupted: SIGINT/SIGTERM while waiting (the batch goes on; ``resume=<run dir>`` collects it).
        """
        assert self.submission is not None
        answers: dict[AnswerKey, JudgeResponse] = {}
        asked: set[AnswerKey] = set()
        for earlier in self.log.submissions():  # a resumed run's earlier rounds: their saved answers
            if not earlier.collected and earlier.n < self.submission.n:
                got, rows = self._read(earlier)
                answers.update(got)
                asked |= rows
        while True:
            got, rows = await self._round(progress)
            answers.update(got)
            asked |= rows
            unanswered = asked - set(answers)
            assert self.state is not None
            again = self.cfg.retry is BatchRetry.batch and unanswered and got
            level = logging.WARNING if self.state.status != "completed" or unanswered else logging.INFO
            log.log(level, "%s: batch %s ended %s: %d answers, %d rows unanswered (sent %s)", self.judge.name,
                    self.state.batch_id, self.state.status, len(got), len(unanswered),
                    "again in a new batch" if again else "live")
            if not again:
                return answers, frozenset(unanswered)
            self._next(unanswered)

    def _next(self, unanswered: set[AnswerKey]) -> None:
        """The next batch's input file: the current one's lines for the rows left unanswered (its worst case booked
        first, with a budget)."""
        assert self.submission is not None
        n = self.submission.n + 1
        lines = [line for line in (self.run_dir / self.submission.input_path).read_text(encoding="utf-8")
                 .splitlines(keepends=True) if key_of(json.loads(line)["custom_id"]) in unanswered]
        if self.admission is not None:
            worst = sum(batch_price(pricing_model(self.judge), count_tokens(self.judge.model, line_messages(line)),
                                    self.judge.max_tokens) or 0.0 for line in lines)
            self.booked = self.admission.book(worst, f"a batch of {len(lines)} calls sent again")
        path = self.run_dir / f"batch_input_{n}.jsonl"
        path.write_text("".join(lines), encoding="utf-8")
        self.log.append(event="input", n=n, path=path.name, calls=len(lines))
        self.submission = Submission(n, path.name)

    def finished(self, client: BatchedClient) -> None:
        """Note in the batch journal that the answers of the run's batches are all in the judge journal: per batch,
        its answers and its rows sent again (in the next batch, or live after the last)."""
        ended = {e["n"]: e for e in self.log.events("ended")}
        open_ = [s for s in self.log.submissions() if not s.collected]
        for s in open_:
            e = ended.get(s.n, {})
            last = s is open_[-1]
            self.log.append(event="collected", n=s.n, batch_id=s.batch_id, status=e.get("status"),
                            answered=e.get("answered", 0),
                            resent=client.sent_again if last else e.get("unanswered", 0))


async def _sleep(seconds: float) -> None:
    """Sleep between two polls; a signal (runner.judging.shutdown) ends the wait at once."""
    shutdown, end = SHUTDOWN.get(), time.monotonic() + seconds
    while time.monotonic() < end:
        if shutdown is not None and shutdown.signum is not None:
            raise Interrupted(shutdown.signum)
        await asyncio.sleep(min(0.1, max(end - time.monotonic(), 0.0)))
    if shutdown is not None and shutdown.signum is not None:
        raise Interrupted(shutdown.signum)
