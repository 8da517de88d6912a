"""What code decides of a judgment beside the judge's own Feedback, as ``mlflow.genai.evaluate``'s code scorers
record it (a ``CODE`` source named by the scorer): ``correct`` (the verdict is the gold label) and ``pass`` (the
overall score reaches the rubric's threshold); and the run's ``<name>/mean`` of every numeric or boolean Feedback,
as evaluate aggregates its assessments into run metrics. mlflow-free."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runner.outputs.tracking.trace_record import TraceRecord


def code_feedback(record: TraceRecord) -> dict[str, bool]:
    """What code decides of a scored judgment: ``correct`` (its verdict is the gold label) where there is gold,
    ``pass`` (its overall score reaches the threshold) where there is a threshold; nothing for an unscored or failed
    one (no made-up value)."""
    out: dict[str, bool] = {}
    if record.status != "scored":
        return out
    gold = record.expectations.get("gold")
    if gold is not None and record.winner is not None:
        out["correct"] = record.winner == gold
    if record.pass_threshold is not None and record.score is not None:
        out["pass"] = record.score >= record.pass_threshold
    return out


class FeedbackMeans:
    """The run's ``<name>/mean`` of every numeric or boolean Feedback value (the criteria's scores, ``correct``,
    ``pass``), as ``mlflow.genai.evaluate`` aggregates its assessments: a judgment without a value is left out."""

    def __init__(self) -> None:
        self._sums: dict[str, list[float]] = {}  # name -> [sum, count]

    def add(self, record: TraceRecord) -> None:
        """Count one judgment's Feedback values."""
        values: dict[str, float] = dict(record.scores or {})  # each a Feedback of its trace (traces._assessments)
        values.update(code_feedback(record))
        for name, value in values.items():
            if value is not None:
                acc = self._sums.setdefault(name, [0.0, 0])
                acc[0] += float(value)
                acc[1] += 1

    def metrics(self) -> dict[str, float]:
        """``<name>/mean`` per Feedback name."""
        return {f"{name}/mean": total / n for name, (total, n) in sorted(self._sums.items()) if n}


def code_rationale(name: str, record: TraceRecord) -> str:
    """Why code decided ``name`` as it did: the verdict and the gold label, or the score and the threshold."""
    if name == "correct":
        return f"verdict {record.winner}, gold {record.expectations.get('gold')}"
    return f"overall score {record.score:g}, pass threshold {record.pass_threshold:g}"
