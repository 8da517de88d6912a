"""Several evaluation files put together for ``judgesweep aggregate``: the same items in every file, one kind of
vote, each file's repeats numbered after the previous file's (k files of one run each give k votes per item).

Read as an ensemble's members instead (:func:`members_of`), each vote belongs to a member: the name given for its
file, else its ``judge`` column, else its file's name; a member's repeats are numbered from 0."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from runner.inputs.evaluation_files import EvaluationFile, EvaluationFileError, Systems, Vote, read_evaluation_file

__all__ = ["EvaluationSet", "copies", "members_of", "read_evaluation_set"]

SHOWN = 5  # ids named in a mismatch message


@dataclass(frozen=True)
class EvaluationSet:
    """The votes of every file, with repeats renumbered across files.

    Attributes:
        files: The files, in the order given.
        votes: Every vote, file by file; ``repeat`` is unique across files.
        item_ids: The items, in the first file's order.
        kind: ``verdict`` (pairwise) or ``score`` (pointwise).
        repeats: Votes per item and order (the distinct repeats over all files).
        orders_known: Whether the votes say which order the candidates were shown in.
    """

    files: tuple[EvaluationFile, ...]
    votes: tuple[Vote, ...]
    item_ids: tuple[str, ...]
    kind: str
    repeats: int
    orders_known: bool


def read_evaluation_set(paths: Sequence[Path], systems: Systems) -> EvaluationSet:
    """Read every file and check they fit together.

    Raises:
        EvaluationFileError: A file does not read (see read_evaluation_file), holds another kind of vote than the
            first, other item ids than the first, or two votes for the same item, repeat and order: naming it.
    """
    if not paths:
        raise EvaluationFileError("no evaluation file given")
    files = tuple(read_evaluation_file(path, systems) for path in paths)
    first = files[0]
    ids = tuple(dict.fromkeys(v.item_id for v in first.votes))
    votes: list[Vote] = []
    base = 0
    for f in files:
        if f.kind != first.kind:
            raise EvaluationFileError(f"{f.path}: holds {f.kind} votes, {first.path} {first.kind} votes: "
                                      f"aggregate files of one kind at a time")
        _check_ids(f, first, ids)
        renumbered, base = _renumber(f, base)
        votes += renumbered
    _check_gold(votes)
    return EvaluationSet(files, tuple(votes), ids, first.kind, base, any(v.order is not None for v in votes))


def copies(files: Sequence[EvaluationFile]) -> list[str]:
    """One line for each two files that are copies of each other, in whole or in part: the same bytes, or the same
    answer (status, verdict or score, and raw text) to some items in every order. Separate runs whose answers came
    from the response cache are such copies (issue 44): their votes are one sample counted twice."""
    lines = []
    answers = [_answers(f) for f in files]
    for i, a in enumerate(files):
        for j in range(i + 1, len(files)):
            b = files[j]
            if a.sha256 == b.sha256:
                lines.append(f"{a.path} and {b.path} are the same file (sha256 {a.sha256[:12]}): their votes are "
                             "one run's, counted twice")
                continue
            same = [item for item, answer in answers[i].items()
                    if answer is not None and answers[j].get(item) == answer]
            if same:
                lines.append(f"{a.path} and {b.path}: {len(same)} of {len(answers[i])} items have the same raw answers "
                             f"in both ({', '.join(same[:SHOWN])}{', ...' if len(same) > SHOWN else ''}): copies (from "
                             "the response cache?), not independent votes; separate runs meant as repetitions need "
                             "sample=1, 2, ... (docs/tutorials/robust-pairwise.md)")
    return lines


def _answers(f: EvaluationFile) -> dict[str, tuple | None]:
    """Item id -> its answers in the file (sorted by order and stage: status, verdict, score, raw text); None for an
    item one of whose votes has no raw text (nothing to tell a copy from an agreeing vote by)."""
    by_item: dict[str, list[tuple]] = {}
    for v in f.votes:
        by_item.setdefault(v.item_id, []).append((v.order or "", v.stage, v.status, v.verdict, v.score,
                                                  tuple(sorted(v.scores.items())), v.text))
    return {item: None if any(not answer[-1] for answer in votes) else tuple(sorted(votes, key=str))
            for item, votes in by_item.items()}


def _check_ids(f: EvaluationFile, first: EvaluationFile, ids: tuple[str, ...]) -> None:
    own = set(v.item_id for v in f.votes)
    missing, extra = [i for i in ids if i not in own], sorted(own - set(ids))
    if missing or extra:
        parts = [f"{len(missing)} missing ({', '.join(missing[:SHOWN])})" if missing else "",
                 f"{len(extra)} not in {first.path} ({', '.join(extra[:SHOWN])})" if extra else ""]
        raise EvaluationFileError(f"{f.path}: its item ids do not match {first.path}'s: "
                                  f"{'; '.join(p for p in parts if p)}")


def _renumber(f: EvaluationFile, base: int) -> tuple[list[Vote], int]:
    """The file's votes with each (judge, repeat) of the file given the next repeat number after ``base``."""
    numbers: dict[tuple[str | None, int], int] = {}
    for v in f.votes:
        numbers.setdefault((v.judge, v.repeat), base + len(numbers))
    seen: dict[tuple[str, int, str | None, str], str] = {}
    out = []
    for v in f.votes:
        repeat = numbers[(v.judge, v.repeat)]
        key = (v.item_id, repeat, v.order, v.stage)
        if key in seen:
            raise EvaluationFileError(f"{v.where}: a second vote for item {v.item_id!r} in the same run "
                                      f"(repeat {v.repeat}, order {v.order}; the first is at {seen[key]})")
        seen[key] = v.where
        out.append(replace(v, repeat=repeat))
    return out, base + len(numbers)


def _check_gold(votes: Sequence[Vote]) -> None:
    gold: dict[str, Vote] = {}
    for v in votes:
        if v.gold is None:
            continue
        other = gold.setdefault(v.item_id, v)
        if other.gold != v.gold:
            raise EvaluationFileError(f"{v.where}: item {v.item_id!r} has gold {v.gold!r}, {other.where} "
                                      f"{other.gold!r}")


def members_of(evaluation: EvaluationSet, names: Sequence[str] | None = None) -> dict[str, list[Vote]]:
    """Member -> its votes, in file order, each member's repeats renumbered 0, 1, ...

    A vote's member is ``names[n]`` for the n-th file when ``names`` is given, else its ``judge`` column (an
    ensemble run's results.jsonl, a generic JSONL's ``judge``), else its file's stem (with the parent directory's
    name when two files share a stem, as results.jsonl of several runs do). A ``/`` in a name becomes ``_``: the
    ensemble's annotators are ``member/order/repeat``.

    Raises:
        EvaluationFileError: ``names`` does not give one name per file.
    """
    if names is not None and len(names) != len(evaluation.files):
        raise EvaluationFileError(f"members={','.join(names)} names {len(names)} members for "
                                  f"{len(evaluation.files)} files: give one name per file, in the files' order")
    labels = list(names) if names is not None else _file_labels([f.path for f in evaluation.files])
    members: dict[str, list[Vote]] = {}
    repeats: dict[str, dict[int, int]] = {}
    votes = iter(evaluation.votes)  # file by file, as read_evaluation_set put them
    for label, f in zip(labels, evaluation.files, strict=True):
        for _ in f.votes:
            v = next(votes)
            member = (label if names is not None or v.judge is None else v.judge).replace("/", "_")
            numbers = repeats.setdefault(member, {})
            members.setdefault(member, []).append(replace(v, repeat=numbers.setdefault(v.repeat, len(numbers))))
    return members


def _file_labels(paths: Sequence[Path]) -> list[str]:
    stems = [p.stem for p in paths]
    labels = [s if stems.count(s) == 1 else f"{p.parent.name}-{s}" for s, p in zip(stems, paths, strict=True)]
    return [label if labels.count(label) == 1 else f"{label}{n + 1}" for n, label in enumerate(labels)]
