"""Reading existing evaluation files for ``judgesweep aggregate``: one file at a time, into :class:`Vote` records.

Three formats, told apart by the file name and the first row:

- a JSON document (any name not ending in ``.jsonl``): the users' per-run evaluation file, one run over the items:
  ``{"evaluations": [{"id": ..., "verdict": ..., "reasoning": ...}, ...]}`` (``subset_id`` or ``item_id`` for
  ``id``, ``winner`` for ``verdict``; ``results`` for ``evaluations``), the entries keyed by item id
  ``{"results": {id: {"verdict": ..., "reasoning": ...}}}`` (an entry without a verdict but with an ``error`` is a
  failed vote), a bare list of entries, a mapping ``{id: verdict}`` or ``{id: entry}``; other top-level keys
  (``evaluation_completed``, ...) are ignored;
- a ``.jsonl`` file whose rows have ``item_id`` and ``status``: judgesweep's own results.jsonl;
- a ``.jsonl`` file whose rows have ``id``: the generic format, one vote a line, ``{"id", "verdict"}`` or
  ``{"id", "scores": {...}}`` / ``{"id", "score"}``, optionally ``repeat``, ``order``, ``judge``, ``reasoning``,
  ``gold``, ``human_score``, ``tags``, ``category``.

A verdict is ``ours``, ``baseline`` or ``tie`` (or a system's own name); ``null`` is an unscored vote. Every error
names the file and, where there is one, the line.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from runner.core.errors import DatasetError
from runner.core.types import NOTHING, TIE

__all__ = ["ID_KEYS", "VERDICT_KEYS", "EvaluationFile", "EvaluationFileError", "Systems", "Vote",
           "read_evaluation_file"]

ID_KEYS = ("id", "subset_id", "item_id")  # the users' JSON: the key naming the item
VERDICT_KEYS = ("verdict", "winner")  # the users' JSON: the key holding the vote
TEXT_KEYS = ("reasoning", "explanation")  # kept as the vote's text
LIST_KEYS = ("evaluations", "results")  # the users' JSON: where the entries are
ORDERS = ("ab", "ba")
VERDICT, SCORE = "verdict", "score"  # the two kinds of vote
USERS_JSON, RESULTS_JSONL, GENERIC_JSONL = "users_json", "results_jsonl", "generic_jsonl"
_ACCEPTED = ('a JSON document {"evaluations"|"results": [{"id"|"subset_id"|"item_id": ..., "verdict"|"winner": '
             '...}]} or {"evaluations"|"results": {id: {"verdict"|"winner": ...}}}, a list of such entries or a '
             'mapping {id: verdict}; or a .jsonl file of judgesweep results rows ("item_id", "status", ...) or of '
             'generic votes ("id" with "verdict", "scores" or "score")')


class EvaluationFileError(DatasetError):
    """An evaluation file cannot be read or does not fit the others; the message names the file and line."""


@dataclass(frozen=True)
class Systems:
    """The two compared systems' names: what the role words ``ours`` / ``baseline`` stand for."""

    ours: str
    baseline: str

    def name_of(self, verdict: str) -> str | None:
        """The system name (or ``tie``) a verdict names; None when it names neither system nor a tie."""
        table = {"ours": self.ours, "baseline": self.baseline, self.ours: self.ours,
                 self.baseline: self.baseline, TIE: TIE}
        return table.get(verdict)

    def allowed(self) -> list[str]:
        """The verdicts accepted, for error messages."""
        return list(dict.fromkeys(["ours", "baseline", TIE, self.ours, self.baseline]))


@dataclass(frozen=True)
class Vote:
    """One judge verdict or score read from a file, before the files are put together.

    ``verdict`` is a system name or ``tie`` (pairwise); ``scores`` / ``score`` a pointwise vote. A vote without
    any (``status`` unscored or error) counts as a judgment that gave no valid vote.
    """

    item_id: str
    where: str  # file:line
    kind: str  # VERDICT | SCORE
    status: str = "scored"  # scored | unscored | error
    verdict: str | None = None
    label: str | None = None  # the positional label (A, B, tie) when known
    scores: Mapping[str, float] = field(default_factory=lambda: NOTHING)
    score: float | None = None
    repeat: int = 0
    order: str | None = None
    stage: str = "judge"
    judge: str | None = None
    reason: str | None = None
    text: str | None = None
    gold: str | None = None
    human_score: float | None = None
    tags: tuple[str, ...] = ()
    category: str | None = None


@dataclass(frozen=True)
class EvaluationFile:
    """One file's votes, its format and its sha256."""

    path: Path
    format: str
    kind: str
    sha256: str
    votes: tuple[Vote, ...]


def read_evaluation_file(path: Path, systems: Systems) -> EvaluationFile:
    """Read one evaluation file (format detected as the module says).

    Raises:
        EvaluationFileError: Missing, not UTF-8, invalid JSON, no known format, a bad key or a verdict outside the
            labels: naming the file and line.
    """
    if not path.is_file():
        raise EvaluationFileError(f"{path}: evaluation file not found")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EvaluationFileError(f"{path}: not valid UTF-8 (byte {exc.start})") from None
    if path.suffix == ".jsonl":
        fmt, votes = _read_jsonl(path, text, systems)
    else:
        fmt, votes = USERS_JSON, tuple(_users_json(path, text, systems))
    if not votes:
        raise EvaluationFileError(f"{path}: holds no evaluation (expected {_ACCEPTED})")
    kinds = {v.kind for v in votes}
    if len(kinds) > 1:
        first = next(v for v in votes if v.kind != votes[0].kind)
        raise EvaluationFileError(f"{first.where}: a {first.kind} vote in a file of {votes[0].kind} votes")
    return EvaluationFile(path, fmt, votes[0].kind, hashlib.sha256(data).hexdigest(), votes)


# --- the users' per-run JSON document ---------------------------------------------------------------------------

def _users_json(path: Path, text: str, systems: Systems) -> Iterator[Vote]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EvaluationFileError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno})") from None
    lines = _Lines(text)
    key = next((k for k in LIST_KEYS if isinstance(doc, dict) and isinstance(doc.get(k), list | dict)), None)
    entries = doc if key is None else doc[key]
    if key is not None:
        lines.after(json.dumps(key))  # the entries' ids are looked for after it
    if isinstance(entries, list):
        for n, entry in enumerate(entries):
            yield _entry_vote(path, n, entry, lines, systems)
    elif isinstance(entries, dict) and entries and all(isinstance(v, str | None) for v in entries.values()):
        for item_id, verdict in entries.items():
            where = f"{path}:{lines.after(json.dumps(item_id))}"
            yield _verdict_vote(_item_id(item_id, where), where, verdict, systems)
    elif isinstance(entries, dict) and entries and all(isinstance(v, dict) for v in entries.values()):
        for item_id, entry in entries.items():  # {"results": {id: {"verdict": ..., "reasoning": ...}}}
            where = f"{path}:{lines.after(json.dumps(item_id))}"
            yield _keyed_vote(_item_id(item_id, where), where, entry, systems)
    else:
        raise EvaluationFileError(f"{path}: not an evaluation file: expected {_ACCEPTED}")


def _entry_vote(path: Path, n: int, entry: Any, lines: _Lines, systems: Systems) -> Vote:
    if not isinstance(entry, dict):
        raise EvaluationFileError(f"{path}: evaluation {n} is not an object (expected {_ACCEPTED})")
    ids = [k for k in ID_KEYS if k in entry]
    verdicts = [k for k in VERDICT_KEYS if k in entry]
    if len(ids) != 1 or len(verdicts) != 1:
        where = f"{path}:{lines.after(json.dumps(entry[ids[0]])) if ids else lines.current}"
        raise EvaluationFileError(f"{where}: evaluation {n} needs one id key of {list(ID_KEYS)} and one verdict key "
                                  f"of {list(VERDICT_KEYS)}; it has {sorted(entry)}")
    where = f"{path}:{lines.after(json.dumps(entry[ids[0]]))}"
    return _entry_fields(_verdict_vote(_item_id(entry[ids[0]], where), where, entry[verdicts[0]], systems), entry)


def _keyed_vote(item_id: str, where: str, entry: dict[str, Any], systems: Systems) -> Vote:
    """One entry of a mapping id -> entry: its verdict, or a failed vote when it has none but an ``error``."""
    verdicts = [k for k in VERDICT_KEYS if k in entry]
    error = entry.get("error")
    if len(verdicts) > 1 or (not verdicts and error is None):
        raise EvaluationFileError(f"{where}: item {item_id!r} needs one verdict key of {list(VERDICT_KEYS)} (or an "
                                  f"\"error\" for a failed vote); it has {sorted(entry)}")
    if error is not None and (not verdicts or entry[verdicts[0]] is None):  # the run's call failed: no vote
        return _entry_fields(Vote(item_id, where, VERDICT, status="error", reason=str(error)), entry)
    return _entry_fields(_verdict_vote(item_id, where, entry[verdicts[0]], systems), entry)


def _entry_fields(vote: Vote, entry: dict[str, Any]) -> Vote:
    """``vote`` with its entry's ``order`` and text (``reasoning`` or ``explanation``)."""
    order = entry.get("order")
    if order is not None and order not in ORDERS:
        raise EvaluationFileError(f"{vote.where}: order {order!r} is not one of {list(ORDERS)}")
    text = next((entry[k] for k in TEXT_KEYS if isinstance(entry.get(k), str)), None)
    return _with(vote, order=order, text=text)


def _verdict_vote(item_id: str, where: str, verdict: Any, systems: Systems, label: str | None = None) -> Vote:
    if verdict is None:
        return Vote(item_id, where, VERDICT, status="unscored", reason="no verdict in the file")
    name = systems.name_of(verdict) if isinstance(verdict, str) else None
    if name is None:
        raise EvaluationFileError(f"{where}: item {item_id!r}: verdict {verdict!r} is not one of "
                                  f"{systems.allowed()}")
    return Vote(item_id, where, VERDICT, verdict=name, label=label)


def _item_id(value: Any, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise EvaluationFileError(f"{where}: the item id must be a non-empty string or an integer, got {value!r}")
    return str(value)


class _Lines:
    """Line numbers of a JSON text's entries, found in order: the line of the next occurrence of a token."""

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.current = text, 0, 1

    def after(self, token: str) -> int:
        found = self.text.find(token, self.pos)
        if found >= 0:
            self.current += self.text.count("\n", self.pos, found)
            self.pos = found + len(token)
        return self.current


# --- JSONL: judgesweep's results rows, generic votes ------------------------------------------------------------

def _read_jsonl(path: Path, text: str, systems: Systems) -> tuple[str, tuple[Vote, ...]]:
    fmt: str | None = None
    votes = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise EvaluationFileError(f"{where}: not valid JSON ({exc.msg}, column {exc.colno})") from None
        if not isinstance(row, dict):
            raise EvaluationFileError(f"{where}: a row must be a JSON object (expected {_ACCEPTED})")
        if fmt is None:
            fmt = (RESULTS_JSONL if "item_id" in row and "status" in row else GENERIC_JSONL if "id" in row else None)
            if fmt is None:
                raise EvaluationFileError(f"{where}: not an evaluation file: the row has {sorted(row)}; expected "
                                          f"{_ACCEPTED}")
        votes.append(_results_row(row, where, systems) if fmt == RESULTS_JSONL else _generic_row(row, where, systems))
    return fmt or GENERIC_JSONL, tuple(votes)


def _results_row(row: dict[str, Any], where: str, systems: Systems) -> Vote:
    missing = [k for k in ("item_id", "repeat", "order", "status") if k not in row]
    if missing:
        raise EvaluationFileError(f"{where}: a judgesweep results row lacks {missing}")
    item_id = _item_id(row["item_id"], where)
    kind = VERDICT if row["order"] is not None else SCORE
    common: dict[str, Any] = {
        "repeat": _repeat(row["repeat"], where), "order": row["order"], "stage": row.get("stage") or "judge",
        "judge": row.get("judge"), "text": row.get("raw_response"), "gold": row.get("gold"),
        "human_score": _number(row.get("human_score"), where, "human_score", optional=True),
    }
    if row["status"] != "scored":
        return Vote(item_id, where, kind, status=str(row["status"]), reason=row.get("parse_error") or row.get("error")
                    or row["status"], **common)
    if kind == VERDICT:
        vote = _verdict_vote(item_id, where, row.get("winner"), systems, label=row.get("verdict_label"))
        if vote.status != "scored":
            raise EvaluationFileError(f"{where}: a scored results row without a winner")
        return _with(vote, **common)
    return Vote(item_id, where, SCORE, scores=_scores(row.get("scores") or {}, where),
                score=_number(row.get("score"), where, "score"), **common)


def _generic_row(row: dict[str, Any], where: str, systems: Systems) -> Vote:
    item_id = _item_id(row["id"], where)
    has_verdict, has_scores = "verdict" in row, "scores" in row or "score" in row
    if has_verdict == has_scores:
        raise EvaluationFileError(f"{where}: a generic row needs either \"verdict\" or \"scores\"/\"score\"; it has "
                                  f"{sorted(row)}")
    order = row.get("order")
    if order is not None and order not in ORDERS:
        raise EvaluationFileError(f"{where}: order {order!r} is not one of {list(ORDERS)}")
    tags = row.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise EvaluationFileError(f"{where}: tags must be a list of strings")
    common: dict[str, Any] = {
        "repeat": _repeat(row.get("repeat", 0), where), "order": order, "judge": _opt_str(row, "judge", where),
        "text": _opt_str(row, "reasoning", where), "gold": _opt_str(row, "gold", where), "tags": tuple(tags),
        "human_score": _number(row.get("human_score"), where, "human_score", optional=True),
        "category": _opt_str(row, "category", where),
    }
    if has_verdict:
        if common["gold"] is not None:  # a gold label names a system (or a tie) as a verdict does
            common["gold"] = _verdict_vote(item_id, f"{where} (gold)", common["gold"], systems).verdict
        return _with(_verdict_vote(item_id, where, row["verdict"], systems), **common)
    scores = _scores(row.get("scores") or {}, where)
    score = _number(row.get("score"), where, "score", optional=True)
    if not scores and score is None:
        return Vote(item_id, where, SCORE, status="unscored", reason="no score in the file", **common)
    return Vote(item_id, where, SCORE, scores=scores, score=score, **common)


def _with(vote: Vote, **changes: Any) -> Vote:
    return replace(vote, **changes)


def _repeat(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise EvaluationFileError(f"{where}: repeat must be an integer >= 0, got {value!r}")
    return value


def _number(value: Any, where: str, key: str, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise EvaluationFileError(f"{where}: {key} must be a number, got {value!r}")
    return float(value)


def _scores(value: Any, where: str) -> Mapping[str, float]:
    if not isinstance(value, dict):
        raise EvaluationFileError(f"{where}: scores must be an object of criterion -> number, got {value!r}")
    return {str(k): _number(v, where, f"scores.{k}") or 0.0 for k, v in value.items()}


def _opt_str(row: Mapping[str, Any], key: str, where: str) -> str | None:
    value = row.get(key)
    if value is not None and not isinstance(value, str):
        raise EvaluationFileError(f"{where}: {key} must be a string, got {value!r}")
    return value
