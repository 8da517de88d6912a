"""The report's per-item drill-down, as data: for each item what the judge saw (the dataset fields the prompt used
and the candidates), every call's raw answer and parsed verdict or scores, the final outcome, gold, and flags to
filter on.

The mode says what an item's outcome is (:meth:`runner.modes.base.RunMode.item_outcomes`, from its typed report);
:func:`build` adds what every mode shares (calls that were not scored, verdicts that change with the order) and the
texts, read in one streaming pass over the judgments and one over the dataset, keeping only the items shown. A run
of 100,000 items shows :data:`LIMIT` of them (flagged ones first): the report stays a file a browser opens, and
results.jsonl holds every row.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from runner.core.types import Item, Judgment, Status
from runner.inputs.datasets import ItemRef

LIMIT = 2_000  # items drawn in full; ~5 KB each for LLMBar-sized texts (10 MB at the limit)
PROMPT_CHUNK = 100  # items whose stored messages are read at once for their prompts, as the report is written
TEXT_LIMIT = 20_000  # characters of one text kept in the report (the full text is in the dataset / results.jsonl)
# The filters, in the order the report offers them: flag -> its label.
FLAGS = {"wrong": "wrong vs gold", "flip": "position flip", "unscored": "unscored",
         "failed": "failed (pass threshold or check)"}
# a run without orders (pointwise): ``flip`` is a score that spreads across repeats
UNORDERED = {**FLAGS, "wrong": "wrong vs human score", "flip": "inconsistent across repeats"}


@dataclass(frozen=True)
class ItemOutcome:
    """What the mode's report says of one item: its final verdict or score, its flags, why it is flagged."""

    final: str
    flags: frozenset[str] = frozenset()
    reasons: tuple[str, ...] = ()
    verdict: str = ""  # what configurations agree or disagree on (the label, pass/fail, the score): final's core

    @property
    def key(self) -> str:
        """The verdict two configurations are compared on: :attr:`verdict`, else :attr:`final`."""
        return self.verdict or self.final


@dataclass(frozen=True, slots=True)  # 2,000 items x 20 calls of a 1,000,000-judgment run: 40,000 of them
class Answer:
    """One judge call of an item: which call, its status, what was parsed, the raw answer."""

    call: str  # "order ab, repeat 0" (an ensemble's member first)
    status: str
    parsed: str
    raw: str
    prompt: str = ""  # the messages the judge was sent ("system: ...", "user: ..."); "" where not stored
    messages_hash: str = ""  # where :meth:`Drilldown.filled` finds the prompt


@dataclass(frozen=True)
class ItemEntry:
    """One item of the drill-down."""

    id: str
    inputs: tuple[tuple[str, str], ...]  # (field or system, text), as the prompt used them
    answers: tuple[Answer, ...]
    final: str
    gold: str  # the gold label or human score; "-" without one
    flags: tuple[str, ...]  # keys of FLAGS
    groups: tuple[str, ...]  # tags and the category (the report's tag/category filter)
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Drilldown:
    """The items drawn, how many items the run has, and how many of them carry each flag."""

    entries: tuple[ItemEntry, ...]
    total: int
    counts: Mapping[str, int]
    ordered: bool = True  # the run judges candidates in orders (pairwise): a flip is a position flip
    # the prompt text of each of the given messages hashes (the run's message store); None: no prompts
    prompts: Callable[[Sequence[str]], Mapping[str, str]] | None = field(default=None, compare=False, repr=False)

    def filled(self) -> Iterator[ItemEntry]:
        """The entries with each answer's prompt, read :data:`PROMPT_CHUNK` items at a time as they are drawn: the
        prompts are never all held at once (2,000 items x 20 calls of a 1,000,000-judgment run would be ~170 MB)."""
        if self.prompts is None:
            yield from self.entries
            return
        for start in range(0, len(self.entries), PROMPT_CHUNK):
            chunk = self.entries[start:start + PROMPT_CHUNK]
            found = self.prompts([a.messages_hash for e in chunk for a in e.answers if a.messages_hash])
            for e in chunk:
                yield replace(e, answers=tuple(replace(a, prompt=found.get(a.messages_hash, "")) for a in e.answers))

    @property
    def labels(self) -> Mapping[str, str]:
        """Each flag's label as the filters say it, in the run's terms."""
        return FLAGS if self.ordered else UNORDERED

    @property
    def groups(self) -> list[str]:
        """Every tag and category of the drawn items, sorted."""
        return sorted({g for e in self.entries for g in e.groups})


def _call(j: Judgment, judge: str | None) -> str:
    parts = [f"member {judge}"] if judge else []
    if j.request.stage != "judge":
        parts.append(j.request.stage)
    if j.request.order is not None:
        parts.append(f"order {j.request.order.value}")
    parts.append(f"repeat {j.request.repeat}")  # 0-based, as results.jsonl and MLflow
    return ", ".join(parts)


def parsed(j: Judgment) -> str:
    """The parsed verdict of one call: the label and the system it names, or the scores and their overall."""
    if j.status is Status.ERROR:
        return f"error: {j.response.error_type}: {j.response.error}"
    if j.verdict.reason is not None:
        return f"unscored: {j.verdict.reason}"
    if j.verdict.scores:
        scores = ", ".join(f"{k} {v:g}" for k, v in j.verdict.scores.items())
        return scores + ("" if j.score is None else f" -> overall {j.score:.3g}")
    return f"{j.verdict.label} -> {j.winner}"


def _flip_and_unscored(judgments: Iterable[Judgment], judges: Sequence[str] | None
                       ) -> tuple[set[str], set[str]]:
    """Items with a call not scored, and items whose verdict changes with the order within a judge and repeat.

    The scored first-round calls are kept as four integer columns (item, judge, repeat, winner) of 4 bytes, grouped
    by sorting one 8-byte key: a dict of winner sets per (item, judge, repeat) held 126 MB at the peak of a
    1,000,000-judgment run, and 8-byte columns sorted with ``np.lexsort`` into a stacked key ~85 MB.
    """
    unscored: set[str] = set()
    codes: dict[str | None, int] = {}  # item ids, judge names and winners -> a small integer
    item, judge_col, repeat, winner = array("i"), array("i"), array("i"), array("i")
    names = iter(judges) if judges is not None else None
    for j in judgments:
        judge = next(names) if names is not None else None
        if j.status is not Status.SCORED:
            unscored.add(j.item_id)
        elif j.request.order is not None and j.request.stage == "judge" and j.winner is not None:
            item.append(codes.setdefault(j.item_id, len(codes)))
            judge_col.append(codes.setdefault(judge, len(codes)))
            repeat.append(j.request.repeat)
            winner.append(codes.setdefault(j.winner, len(codes)))
    if not item:
        return set(), unscored
    items = np.frombuffer(item, dtype=np.int32)
    key = _group_key(items, np.frombuffer(judge_col, dtype=np.int32), np.frombuffer(repeat, dtype=np.int32),
                     len(codes))
    del judge_col, repeat
    order = np.argsort(key)
    key = key[order]
    won = np.frombuffer(winner, dtype=np.int32)[order]
    starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    del key
    flipped = np.minimum.reduceat(won, starts) != np.maximum.reduceat(won, starts)
    names_of = list(codes)
    return {names_of[int(code)] for code in items[order[starts[flipped]]]}, unscored  # type: ignore[misc]


def _group_key(item: np.ndarray, judge: np.ndarray, repeat: np.ndarray, codes: int) -> np.ndarray:
    """One int64 per call, equal for two calls exactly when their (item, judge, repeat) are (codes below ``codes``,
    repeats from 0), built in place."""
    key = item.astype(np.int64)
    key *= codes
    key += judge
    key *= int(repeat.max()) + 1
    key += repeat
    return key


def _selected(refs: Sequence[ItemRef], flags: Mapping[str, frozenset[str]], limit: int) -> set[str]:
    """The items drawn: all of them up to ``limit``, else the flagged ones first, then in dataset order."""
    if len(refs) <= limit:
        return {r.id for r in refs}
    flagged = [r.id for r in refs if flags[r.id]]
    rest = [r.id for r in refs if not flags[r.id]]
    return set((flagged + rest)[:limit])


def _clip(text: str) -> str:
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + f"\n[... {len(text) - TEXT_LIMIT} more characters]"


def _inputs(item: Item) -> tuple[tuple[str, str], ...]:
    return (*((k, _clip(str(v))) for k, v in item.variables.items()),
            *((c.system, _clip(c.text)) for c in item.candidates))


def _once(shared: dict[str, str], text: str) -> str:
    """``text``, or the equal string already in ``shared``: one object for every answer that says it."""
    return shared.setdefault(text, text)


def prompt_text(messages: Sequence[Mapping[str, str]]) -> str:
    """Rendered messages as the report shows them: ``role: content`` blocks, each clipped to TEXT_LIMIT."""
    return "\n\n".join(f"{m.get('role')}: {_clip(str(m.get('content')))}" for m in messages)


def _gold(ref: ItemRef) -> str:
    if ref.gold is not None:
        return ref.gold
    return "-" if ref.human_score is None else f"human {ref.human_score:g}"


def build(refs: Sequence[ItemRef], outcomes: Mapping[str, ItemOutcome], judgments: Iterable[Judgment],
          texts: Callable[[], Iterable[Judgment]], items: Callable[[], Iterable[Item]],
          judges: Sequence[str] | None = None, limit: int = LIMIT, ordered: bool = True,
          messages: Callable[[Sequence[str]], Mapping[str, list[dict[str, str]]]] | None = None) -> Drilldown:
    """The drill-down of a run.

    Args:
        refs: The run's items, in dataset order.
        outcomes: The mode's outcome per item id (:meth:`runner.modes.base.RunMode.item_outcomes`).
        judgments: Every judgment (read once for the flags; texts not needed).
        texts: A fresh stream of the same judgments with their answer texts (read once, for the items drawn).
        items: A fresh stream of the judged items (read once, for the items drawn).
        judges: An ensemble's member of each judgment, aligned with both streams; None for a single judge.
        limit: Items drawn at most.
        ordered: Whether the run judges in orders (pairwise), which names its ``flip`` flag.
        messages: Looks up the rendered messages of the given hashes (the run's message store), so each call shows
            the prompt the judge saw (read as the report is written: :meth:`Drilldown.filled`); None: no prompts.
    """
    flips, unscored = _flip_and_unscored(judgments, judges)
    flags: dict[str, frozenset[str]] = {}
    for ref in refs:
        outcome = outcomes.get(ref.id, ItemOutcome("-"))
        flags[ref.id] = outcome.flags | ({"flip"} if ref.id in flips else set()) | (
            {"unscored"} if ref.id in unscored else set())
    shown = _selected(refs, flags, limit)
    answers: dict[str, list[Answer]] = defaultdict(list)
    names = iter(judges) if judges is not None else None
    shared: dict[str, str] = {}  # one object per distinct call, parsed verdict and prompt hash: repeats share them
    for j in texts():
        judge = next(names) if names is not None else None
        if j.item_id in shown:
            answers[j.item_id].append(Answer(
                _once(shared, _call(j, judge)), j.status.value, _once(shared, parsed(j)), _clip(j.response.text or ""),
                messages_hash=_once(shared, j.request.messages_hash or "")))
    del shared
    inputs = {item.id: _inputs(item) for item in items() if item.id in shown}
    entries = tuple(
        ItemEntry(ref.id, inputs.get(ref.id, ()), tuple(answers.get(ref.id, ())),
                  outcomes.get(ref.id, ItemOutcome("-")).final, _gold(ref),
                  tuple(f for f in FLAGS if f in flags[ref.id]),
                  (*ref.tags, *((ref.category,) if ref.category else ())),
                  outcomes.get(ref.id, ItemOutcome("-")).reasons)
        for ref in refs if ref.id in shown)
    counts = {f: sum(f in fl for fl in flags.values()) for f in FLAGS}
    prompts = None if messages is None else (
        lambda hashes: {h: prompt_text(m) for h, m in messages(hashes).items() if m})
    return Drilldown(entries, len(refs), counts, ordered, prompts)
