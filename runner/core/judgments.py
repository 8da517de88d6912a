"""A run's judgments stored column by column, read back as :class:`~runner.core.types.Judgment` objects.

Held as objects, a journaled judgment costs about 480 bytes (the Judgment, its JudgeRequest, JudgeResponse
and Verdict, and their numbers), so a million of them took 480 MB before any statistic ran. Here a typical
one (its answer text in the journal, no error, a label rather than per-criterion scores) is one entry in
each of a few typed arrays, under 100 bytes; any other judgment is kept whole. Indexing and iterating build
Judgment objects on demand, equal to the ones appended, so every consumer of ``Sequence[Judgment]`` reads a
store as it reads a list; it only has to avoid keeping all of them at once.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

import numpy as np

from runner.core.types import NOTHING, JudgeRequest, JudgeResponse, Judgment, Order, Status, Verdict

__all__ = ["Judgments"]

_ORDERS: tuple[Order | None, ...] = (None, Order.AB, Order.BA)  # code -> order; codes sort as their values do
_ORDER_CODE = {order: code for code, order in enumerate(_ORDERS)}
_STATUSES = tuple(Status)
_STATUS_CODE = {status: code for code, status in enumerate(_STATUSES)}
_NONE = -1  # an integer column's None (token counts and offsets are never negative)


def _number(value: object) -> bool:
    """True when ``value`` round-trips through a float column (None is stored as NaN)."""
    return value is None or (type(value) is float and not math.isnan(value))


def _compact(j: Judgment) -> bool:
    """True when ``j`` fits the columns exactly: its text and messages hash were dropped (they are in the
    journal), the call did not fail, the verdict has no scores or extras, and every number has its usual type."""
    req, resp, verdict = j.request, j.response, j.verdict
    return (resp.text is None and req.messages_hash == "" and resp.error_type is None and resp.error is None
            and verdict.scores is NOTHING and verdict.extras is NOTHING
            and type(resp.prompt_tokens) is int and type(resp.completion_tokens) is int
            and type(resp.attempts) is int and type(resp.rate_limited) is int and type(req.repeat) is int
            and resp.paid == 1 and resp.repaid == 0 and not resp.notes and resp.tokens_known
            and resp.prompt_tokens >= 0 and resp.completion_tokens >= 0
            and (resp.journal_at is None or (type(resp.journal_at) is int and resp.journal_at >= 0))
            and type(resp.latency_s) is float and _number(resp.cost_usd) and _number(j.score)
            and all(s is None or type(s) is str for s in (req.stage, resp.finish_reason, resp.source, verdict.label,
                                                            verdict.reason, j.winner)))


class Judgments(Sequence[Judgment]):
    """Judgments in the order they were appended; see the module docstring.

    Strings (item ids, stages, labels, winners, finish reasons, sources, reasons) are stored once in a table
    and referenced by code. The request's item, repeat, order and stage are columns for every judgment, the
    whole ones included, so :meth:`requests` never builds a Judgment.
    """

    __hash__ = None  # type: ignore[assignment]  # compared by content, like a list

    def __init__(self, judgments: Iterable[Judgment] = ()) -> None:
        self._strings: list[str | None] = [None]
        self._codes: dict[str | None, int] = {None: 0}
        self._item, self._repeat, self._stage = array("i"), array("i"), array("i")
        self._order, self._status = array("b"), array("b")
        self._label, self._winner, self._reason, self._finish, self._source = (array("i") for _ in range(5))
        self._prompt_tokens, self._completion_tokens, self._journal_at = array("q"), array("q"), array("q")
        self._attempts, self._rate_limited = array("i"), array("i")
        self._cost, self._latency, self._score = array("d"), array("d"), array("d")
        self._whole: dict[int, Judgment] = {}  # position -> a judgment the columns cannot hold exactly
        self.extend(judgments)

    def _code(self, text: str | None) -> int:
        code = self._codes.get(text)
        if code is None:
            code = self._codes[text] = len(self._strings)
            self._strings.append(text)
        return code

    def append(self, judgment: Judgment) -> None:
        """Add ``judgment`` at the end."""
        req, resp, verdict = judgment.request, judgment.response, judgment.verdict
        self._item.append(self._code(req.item_id))
        self._repeat.append(req.repeat)
        self._order.append(_ORDER_CODE[req.order])
        self._stage.append(self._code(req.stage))
        if not _compact(judgment):
            self._whole[len(self._item) - 1] = judgment
            resp, verdict = JudgeResponse(text=None), Verdict(label=None)  # placeholders in the other columns
            judgment = Judgment(req, resp, verdict, None, judgment.status)
        self._status.append(_STATUS_CODE[judgment.status])
        self._label.append(self._code(verdict.label))
        self._winner.append(self._code(judgment.winner))
        self._reason.append(self._code(verdict.reason))
        self._finish.append(self._code(resp.finish_reason))
        self._source.append(self._code(resp.source))
        self._prompt_tokens.append(resp.prompt_tokens)
        self._completion_tokens.append(resp.completion_tokens)
        self._journal_at.append(_NONE if resp.journal_at is None else resp.journal_at)
        self._attempts.append(resp.attempts)
        self._rate_limited.append(resp.rate_limited)
        self._cost.append(math.nan if resp.cost_usd is None else resp.cost_usd)
        self._latency.append(resp.latency_s)
        self._score.append(math.nan if judgment.score is None else judgment.score)

    def extend(self, judgments: Iterable[Judgment]) -> None:
        """Add every judgment of ``judgments`` at the end, in order."""
        for judgment in judgments:
            self.append(judgment)

    def _build(self, i: int) -> Judgment:
        whole = self._whole.get(i)
        if whole is not None:
            return whole
        s = self._strings
        journal_at, cost, score = self._journal_at[i], self._cost[i], self._score[i]
        request = JudgeRequest(s[self._item[i]], self._repeat[i], _ORDERS[self._order[i]],  # type: ignore[arg-type]
                               s[self._stage[i]], "")  # type: ignore[arg-type]
        response = JudgeResponse(
            text=None, finish_reason=s[self._finish[i]], prompt_tokens=self._prompt_tokens[i],
            completion_tokens=self._completion_tokens[i], cost_usd=None if math.isnan(cost) else cost,
            latency_s=self._latency[i], attempts=self._attempts[i], rate_limited=self._rate_limited[i],
            source=s[self._source[i]], journal_at=None if journal_at == _NONE else journal_at)  # type: ignore[arg-type]
        verdict = Verdict(label=s[self._label[i]], reason=s[self._reason[i]])
        return Judgment(request, response, verdict, s[self._winner[i]], _STATUSES[self._status[i]],
                        None if math.isnan(score) else score)

    def __len__(self) -> int:
        return len(self._item)

    @overload
    def __getitem__(self, index: int) -> Judgment: ...

    @overload
    def __getitem__(self, index: slice) -> list[Judgment]: ...

    def __getitem__(self, index: int | slice) -> Judgment | list[Judgment]:
        if isinstance(index, slice):
            return [self._build(i) for i in range(*index.indices(len(self)))]
        n = len(self)
        if not -n <= index < n:
            raise IndexError("judgment index out of range")
        return self._build(index % n)

    def __iter__(self) -> Iterator[Judgment]:
        return map(self._build, range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __repr__(self) -> str:
        return f"Judgments({len(self)} judgments, {len(self._whole)} kept whole)"

    def requests(self) -> Iterator[tuple[str, int, Order | None, str]]:
        """``(item_id, repeat, order, stage)`` of every judgment, in order, read from the columns alone."""
        s = self._strings
        for item, repeat, order, stage in zip(self._item, self._repeat, self._order, self._stage, strict=True):
            yield s[item], repeat, _ORDERS[order], s[stage]  # type: ignore[misc]

    def keys_unique(self, stages: Iterable[str]) -> bool:
        """True when every judgment's stage is one of ``stages`` and no two judgments share (item, repeat, order):
        checked on the columns, in one array of 8 bytes per judgment built and sorted in place rather than a dict of
        key tuples (the arithmetic's temporaries and ``np.unique``'s copies held ~80 MB at 1,000,000 judgments)."""
        wanted = [self._codes[s] for s in stages if s in self._codes]
        stage = np.frombuffer(self._stage, dtype=np.int32)
        if not np.isin(stage, wanted).all():
            return False
        if not len(self):
            return True
        repeat = np.frombuffer(self._repeat, dtype=np.int32)
        low = int(repeat.min())
        key = np.frombuffer(self._item, dtype=np.int32).astype(np.int64)
        key *= int(repeat.max()) - low + 1
        key += repeat
        key -= low
        key *= len(_ORDERS)
        key += np.frombuffer(self._order, dtype=np.int8)
        key.sort()
        return not bool((key[1:] == key[:-1]).any())

    def taken(self, positions: Iterable[int]) -> Judgments:
        """A new store of the judgments at ``positions``, in that order (a reordering or a selection)."""
        out = Judgments()
        out._strings, out._codes, out._whole = list(self._strings), dict(self._codes), dict(self._whole)
        for name in _COLUMNS:
            setattr(out, name, getattr(self, name))
        out.reorder(positions)
        return out

    def reorder(self, positions: Iterable[int]) -> None:
        """Keep only the judgments at ``positions``, in that order, in place; one column is copied at a time, so a
        million judgments are reordered in a few megabytes beyond the store itself."""
        where = np.fromiter(positions, dtype=np.int64) if not isinstance(positions, np.ndarray) else positions
        for name in _COLUMNS:
            column: array[int] | array[float] = getattr(self, name)
            reordered = array(column.typecode)
            if len(where):  # the taken values copied once into the new column (no bytes object between them)
                reordered.frombytes(np.frombuffer(column, dtype=_DTYPES[column.typecode])[where].view(np.uint8).data)
            setattr(self, name, reordered)
            del column
        whole = self._whole
        self._whole = {n: whole[int(p)] for n, p in enumerate(where) if int(p) in whole} if whole else {}


_COLUMNS = ("_item", "_repeat", "_stage", "_order", "_status", "_label", "_winner", "_reason", "_finish", "_source",
            "_prompt_tokens", "_completion_tokens", "_journal_at", "_attempts", "_rate_limited", "_cost", "_latency",
            "_score")
_DTYPES = {"b": np.int8, "i": np.int32, "q": np.int64, "d": np.float64}
