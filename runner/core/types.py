"""Frozen records that cross module boundaries.

Every value a module hands to another is one of these dataclasses, never a dict of dicts, so a
misspelt field is an AttributeError at the line that made it rather than a silent ``None`` later.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any

TIE = "tie"


class Order(str, Enum):
    """Which side is shown first in a pairwise prompt."""

    AB = "ab"  # the dataset's first system ("ours") is shown as A
    BA = "ba"  # swapped: the second system ("baseline") is shown as A


class Status(str, Enum):
    """Outcome of one judge call."""

    SCORED = "scored"
    UNSCORED = "unscored"  # the judge answered but its verdict could not be read
    ERROR = "error"  # no usable answer: the call itself failed


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message sent to a judge."""

    role: str
    content: str


def hash_messages(messages: tuple[Message, ...] | list[Message]) -> str:
    """Return the sha256 of the canonical JSON of ``messages``.

    The same function keys the journal, the response cache and the replay recordings, so a recorded
    answer is found again exactly when the rendered request is byte-identical.
    """
    payload = [{"role": m.role, "content": m.content} for m in messages]
    blob = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Candidate:
    """One system's output for an item."""

    system: str
    text: str


@dataclass(frozen=True)
class Item:
    """One dataset row, already mapped to template variables and candidates.

    Attributes:
        id: Stable identifier (from the dataset's id field, else the 1-based line number).
        variables: Template variables other than the candidates (e.g. ``instruction``).
        candidates: Pairwise: (ours, baseline). Pointwise: one candidate.
        gold: The gold winner as a system name or ``"tie"``, when the dataset has one.
        source: ``path:line`` the item came from, for error messages.
        tags: Free labels for per-tag breakdowns (pointwise).
        category: One category for per-category weights and breakdowns (pointwise).
        human_score: A human rating on the rubric's overall scale, when the dataset has one.
    """

    id: str
    variables: Mapping[str, str]
    candidates: tuple[Candidate, ...]
    gold: str | None = None
    source: str = ""
    tags: tuple[str, ...] = ()
    category: str | None = None
    human_score: float | None = None


@dataclass(frozen=True, slots=True)
class JudgeRequest:
    """One planned judge call. The rendered messages travel beside it and are not stored here, so a
    run of 100,000 judgments does not keep 100,000 prompts in memory."""

    item_id: str
    repeat: int
    order: Order | None  # None for pointwise judging and generation
    stage: str  # "judge"; "synthesis" (swap-and-synthesize's second round); "generate" (generation stage)
    messages_hash: str  # sha256 of the rendered messages (see hash_messages); the text is not kept

    @property
    def key(self) -> tuple[str, int, str | None, str, str]:
        """Identity of this call within a run (used to find it again in the journal on resume)."""
        return (self.item_id, self.repeat, self.order.value if self.order else None, self.stage,
                self.messages_hash)


SUBSTITUTED = "substituted"  # a JudgeResponse note saying what was replaced to keep the answer (calls/substituted)


@dataclass(frozen=True, slots=True)
class JudgeResponse:
    """What came back from one judge call (or why nothing usable did)."""

    text: str | None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    latency_s: float = 0.0
    error_type: str | None = None
    error: str | None = None
    attempts: int = 1  # HTTP attempts made (retries included); 0 when served without a call
    rate_limited: int = 0  # how many of those attempts were answered 429
    source: str = "call"  # call | cache | journal (an interrupted run's answer, on resume)
    # answers paid for to obtain this one (source "call"): 0 for a call that failed without an answer, 2 or more
    # when a malformed answer was sent again (judge.retry_malformed)
    paid: int = 1
    # 1 when an earlier process of the run had sent this call too and its answer never reached the journal (killed
    # in flight): the answer was paid for again (calls/repaid)
    repaid: int = 0
    # byte offset of the journal line holding this answer; once set, the executor may drop ``text`` (and the
    # request's messages hash) from memory: runner.storage.store.with_texts reads both back for the results file, so a
    # run's memory does not grow with its texts
    journal_at: int | None = None
    # what was done to keep what the provider sent (runner.llm.responses: a substitution, usage that is not a count,
    # a body that could not be read), one line each; journaled with the answer
    notes: tuple[str, ...] = ()
    # False when the provider's usage was not a token count: the tokens are unknown (0 here, null in the journal)
    tokens_known: bool = True

    @property
    def substituted(self) -> bool:
        """Whether characters of what the provider sent were replaced to keep it (a note starting ``substituted``)."""
        return any(note.startswith(SUBSTITUTED) for note in self.notes)


NOTHING: Mapping[str, Any] = MappingProxyType({})  # the empty scores/extras of a verdict


@dataclass(frozen=True, slots=True)
class Verdict:
    """A parsed judge verdict.

    Pairwise: ``label`` is positional (``"A"``, ``"B"`` or ``"tie"``). Pointwise: ``scores`` holds one
    number per applicable criterion and ``extras`` what else the judge said (reasoning, suggestions,
    its own pass flag). When the output could not be read, ``reason`` says why; an unreadable verdict
    is never a score: it is counted as a parse failure and kept with its raw text.
    """

    label: str | None
    reason: str | None = None
    # one shared empty mapping, not two new dicts per verdict: a million pairwise verdicts kept 128 MB of them
    scores: Mapping[str, float] = field(default_factory=lambda: NOTHING)
    extras: Mapping[str, Any] = field(default_factory=lambda: NOTHING)

    @property
    def ok(self) -> bool:
        """True when the output was read (a label, or every applicable criterion's score)."""
        return self.reason is None


@dataclass(frozen=True, slots=True)
class Judgment:
    """One judge call with its parsed outcome, mapped back to system names."""

    request: JudgeRequest
    response: JudgeResponse
    verdict: Verdict
    winner: str | None  # pairwise: system name or "tie"; None unless status is SCORED
    status: Status
    score: float | None = None  # pointwise: the overall score (weighted mean of the criteria); None unless SCORED

    @property
    def item_id(self) -> str:
        """The judged item's id."""
        return self.request.item_id


@dataclass(frozen=True, slots=True)
class Criterion:
    """One scored criterion of a pointwise rubric, as the parser and the scoring see it.

    Attributes:
        name: The key the judge's JSON uses (``accuracy``).
        min: Lowest allowed score (inclusive).
        max: Highest allowed score (inclusive).
        weight: Weight in the overall score (already resolved for the item's category).
        description: What the criterion means (shown to the judge by the template).
        when: A template variable that must be non-empty for the criterion to apply, or None.
        aliases: Other keys the judge's JSON may use for this criterion (read when ``name`` is absent).
    """

    name: str
    min: float
    max: float
    weight: float = 1.0
    description: str = ""
    when: str | None = None
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ItemResult:
    """The aggregated outcome for one item across all its judgments."""

    item_id: str
    verdicts: tuple[str, ...]  # the valid votes (system names or "tie"), in judgment order
    verdict_counts: Mapping[str, int]
    final_verdict: str | None  # None when the item had no valid vote (a failure, not a tie)
    confidence: str | None  # unanimous | majority | no_consensus; None on failure
    # What an aggregation adds (an ensemble's Dawid-Skene posterior); none is the common case, so the default is
    # one shared empty mapping rather than a dict per item (50,000 items: a few MB at the run's peak).
    details: Mapping[str, Any] = field(default_factory=lambda: NOTHING)


class Secret:
    """A credential that never prints itself.

    ``repr`` and ``str`` show ``***`` so a key cannot leak through logging, an f-string or an
    exception message; only :meth:`reveal` returns the value, at the single place that sends it.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The credential itself, for the transport only."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__
