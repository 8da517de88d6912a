"""A judge run's ``results.jsonl`` rows reduced to one outcome per pairing key (the input of
:mod:`runner.outputs.compare`):

- pairwise with gold: per item, the share of its final judgments (its orders and repeats) whose winner is the
  gold label (unscored and errored judgments count as wrong, as in the run's own summary): the item is the unit;
- pairwise without gold: per item, the score of ``ours`` (win 1, tie 0.5, loss 0) averaged over the item's
  scored judgments;
- pointwise: per item, the mean overall score of its scored judgments.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.core.types import TIE

CORRECT = "correct"  # pairwise with gold
WIN_SCORE = "win_score"  # pairwise without gold
SCORE = "score"  # pointwise

# A later stage replaces an earlier one for the same (item_id, repeat, order); other stages are not verdicts.
STAGE_RANK = {"judge": 0, "synthesis": 1}

Key = tuple[Any, ...]


class ComparisonError(ValueError):
    """The runs cannot be compared (too few, different datasets, different kinds of outcome)."""


@dataclass(frozen=True)
class RunResults:
    """One run to compare: its identity and the rows of its ``results.jsonl``."""

    run_id: str
    choices: Mapping[str, str]  # config group -> option (the run's ``choice.*`` params)
    rows: Sequence[Mapping[str, Any]]
    ours: str | None = None  # pairwise: the first system's name (``dataset.ours.name``)

    @property
    def dataset(self) -> str | None:
        """The dataset option the run judged."""
        return self.choices.get("dataset")


@dataclass(frozen=True)
class Outcomes:
    """A run reduced to one outcome per pairing key."""

    kind: str  # CORRECT | WIN_SCORE | SCORE
    values: Mapping[Key, float]
    verdicts: Mapping[Key, str]  # pairwise: scored final winner per (item_id, repeat, order)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Read a ``results.jsonl`` file (blank lines skipped).

    Raises:
        ComparisonError: If a line is not a JSON object.
    """
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ComparisonError(f"{path}:{number}: not JSON ({exc.msg})") from None
    return rows


def final_rows(rows: Sequence[Mapping[str, Any]]) -> dict[Key, Mapping[str, Any]]:
    """The final row per ``(item_id, repeat, order)``: a synthesis row replaces the judge row, whatever
    the order of the rows; rows of other stages are ignored."""
    final: dict[Key, Mapping[str, Any]] = {}
    for row in rows:
        rank = STAGE_RANK.get(row.get("stage", "judge"))
        if rank is None:
            continue
        key = (row["item_id"], row.get("repeat", 0), row.get("order"))
        held = final.get(key)
        if held is None or rank >= STAGE_RANK[held.get("stage", "judge")]:
            final[key] = row
    return final


def outcomes(run: RunResults) -> Outcomes:
    """Reduce a run's rows to one outcome per pairing key (see the module docstring).

    Raises:
        ComparisonError: A pairwise run without gold labels does not name its ``ours`` system.
    """
    final = final_rows(run.rows)
    pairwise = any(key[2] is not None for key in final)
    verdicts = {k: r["winner"] for k, r in final.items() if pairwise and _scored(r) and r.get("winner")}
    per_item: dict[Key, list[float]] = {}
    if pairwise and any(r.get("gold") is not None for r in final.values()):
        for (item_id, _, _), row in final.items():
            if row.get("gold") is not None:
                per_item.setdefault((item_id,), []).append(float(_scored(row) and row.get("winner") == row["gold"]))
        return Outcomes(CORRECT, {key: sum(v) / len(v) for key, v in per_item.items()}, verdicts)
    for (item_id, _, _), row in final.items():
        value = _win_score(row, run) if pairwise else row.get("score")
        if _scored(row) and value is not None:
            per_item.setdefault((item_id,), []).append(float(value))
    values = {key: sum(v) / len(v) for key, v in per_item.items()}
    return Outcomes(WIN_SCORE if pairwise else SCORE, values, verdicts)


def _scored(row: Mapping[str, Any]) -> bool:
    return row.get("status") == "scored"


def _win_score(row: Mapping[str, Any], run: RunResults) -> float | None:
    """1 when ``ours`` won, 0.5 for a tie, 0 when the other system won; None without a winner."""
    if run.ours is None:
        raise ComparisonError(f"run {run.run_id}: pairwise results without gold need the name of 'ours'")
    winner = row.get("winner")
    if winner is None:
        return None
    return 1.0 if winner == run.ours else 0.5 if winner == TIE else 0.0
