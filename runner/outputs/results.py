"""Results API: a run, a sweep or a run directory as pandas DataFrames, for analysis in a notebook.

``load`` reads runs from the MLflow store (params, metrics, summary.json and results.jsonl) or from a run
directory (run.json, summary.json, results.jsonl, or the journal of an unfinished run) into four DataFrames
that all carry ``run_id`` and the Hydra choices (``judge``, ``prompt``, ...), so they join and group directly.

Example:
    In a notebook started where judgesweep ran (the default store is ./outputs/mlflow.db)::

        from runner.outputs import results

        res = results.load("multirun/2025-06-01/12-00-00")  # a sweep dir, a run dir, or an MLflow run id
        res.metrics.set_index("judge")["accuracy/mean"]
        res.judgments.groupby(["judge", "order"])["winner"].value_counts()
        res.items.merge(res.runs[["run_id", "judge.model"]], on="run_id")
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

# Reading one run (a run directory, a tracked run, a journal) is in results_read.
from runner.outputs.results_read import LoadedRun, read_runs, run_mode

__all__ = ["RUN_PARAMS", "Results", "load"]

# The params shown as columns of ``Results.runs`` (all of them are in the MLflow UI and in run.json).
RUN_PARAMS = ("judge.model", "judge.version", "judge.temperature", "judge.seed", "judge.max_tokens",
              "prompt.template", "prompt.mode", "prompt.strategy", "rubric.parser.name", "rubric.pass_threshold",
              "aggregation.name", "dataset.name", "order", "repeats", "seed", "max_items")
INFO_FIRST, INFO_LAST = ("run_id", "run_name", "status", "start_time"), ("run_dir", "sweep", "git_commit",
                                                                         "judgments_from")


@dataclass(frozen=True, eq=False, repr=False)
class Results:
    """What ``load`` returns; every frame has ``run_id`` and one column per Hydra choice (``judge``, ...).

    ``run_id`` is the MLflow run id, or the run directory for a run that was not tracked.

    Attributes:
        runs: One row per run: ``run_id``, ``run_name``, ``status`` (MLflow's; FINISHED or INCOMPLETE for a
            run directory, by whether it wrote summary.json), ``start_time`` (UTC), the choices, the params in
            :data:`RUN_PARAMS` (numbers where they parse), ``run_dir``, ``sweep``, ``git_commit``, and
            ``judgments_from`` (results.jsonl, journal.jsonl, or None).
        metrics: One row per run: ``run_id``, the choices, then every metric (``accuracy/mean``, ...) as a
            column. Read from a run directory, they are recomputed from summary.json (see
            :func:`runner.outputs.results_read.summary_metrics`).
        judgments: One row per judge call, as in results.jsonl (or the journal of an unfinished run):
            ``item_id``, ``repeat``, ``order``, ``stage``, ``status``, ``winner``, ``score``, ``scores``,
            ``raw_response``, ``gold``, ..., and ``messages``: what the judge was shown (``[{"role",
            "content"}, ...]`` from the run directory's message store; None where that is missing).
        items: One row per item. Pairwise: ``item_id``, ``verdicts``, ``final_verdict``, ``confidence``,
            ``verdict_counts.<label>``, ``gold``. Pointwise (summary.json's detailed_results): ``item_id``,
            ``status``, ``tags``, ``category``, ``overall``, ``passed``, ``scores.<criterion>``, ...
        feedback: Human feedback added to tracked runs' traces (in the MLflow UI, or with
            ``mlflow.log_feedback`` and a HUMAN source): ``item_id``, ``repeat``, ``order``, ``stage``,
            ``judge`` (an ensemble's member), ``name``, ``value``, ``rationale``, ``source_id``, ``trace_id``; empty
            for untracked runs.
    """

    runs: pd.DataFrame
    metrics: pd.DataFrame
    judgments: pd.DataFrame
    items: pd.DataFrame
    feedback: pd.DataFrame = field(default_factory=pd.DataFrame)

    def __repr__(self) -> str:
        return (f"Results(runs={len(self.runs)}, metrics={self.metrics.shape[1]} columns, "
                f"judgments={len(self.judgments)}, items={len(self.items)})")


def load(ref: str | Path, *, tracking_uri: str | None = None) -> Results:
    """Load one run or a whole sweep as DataFrames.

    Args:
        ref: A run directory (read from its files, MLflow is not asked), a Hydra sweep directory (its jobs
            are found in MLflow by the ``judgesweep.sweep`` tag; if the store has none, the job directories
            on disk are read), or an MLflow run id (a sweep-summary run stands for its sweep). Paths are
            absolute or relative to the working directory.
        tracking_uri: The MLflow store; default ``sqlite:///<cwd>/outputs/mlflow.db``, as
            conf/tracking/sqlite.yaml. (MLflow draws a progress bar per downloaded artifact; the
            environment variable ``MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR=false`` silences them.)

    Returns:
        The runs, their metrics, their judgments and their items.

    Raises:
        LookupError: ``ref`` names no run directory, sweep or run, or the store does not exist.
    """
    return _assemble(read_runs(ref, tracking_uri))


def _items(run: LoadedRun) -> pd.DataFrame:
    """One row per item, as the run's mode lays them out (runner.modes.base.RunMode.items); pairwise items get
    the gold label from the judgments."""
    mode = run_mode(run.params)
    if run.summary is None or mode is None:
        return pd.DataFrame()
    frame = pd.DataFrame(mode.items(mode.read(run.summary)))
    if mode.items_take_gold and "gold" in run.judgments.columns and not frame.empty:
        gold = run.judgments.groupby("item_id", sort=False)["gold"].first()
        frame["gold"] = frame["item_id"].map(gold)
    return frame


def _tag(frame: pd.DataFrame, run: LoadedRun) -> pd.DataFrame:
    """Prepend ``run_id`` and the choices (``choice.<group>`` where the frame has a column of that name)."""
    front = {"run_id": run.info["run_id"]}
    front.update({(k if k not in frame.columns else f"choice.{k}"): v for k, v in run.choices.items()})
    return frame.assign(**front)[[*front, *frame.columns]]


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    full = [frame for frame in frames if not frame.empty]
    if not full:
        return frames[0] if frames else pd.DataFrame({"run_id": []})
    return pd.concat(full, ignore_index=True)


def _assemble(runs: list[LoadedRun]) -> Results:
    """Put the runs side by side: one frame per kind of row."""
    rows = [{**{k: r.info[k] for k in INFO_FIRST}, **r.choices,
             **{k: r.params.get(k) for k in RUN_PARAMS}, **{k: r.info[k] for k in INFO_LAST}} for r in runs]
    frame = pd.DataFrame(rows)
    for name in RUN_PARAMS:
        frame[name] = _typed(frame[name])
    metrics = pd.DataFrame([{"run_id": r.info["run_id"], **r.choices, **dict(sorted(r.metrics.items()))}
                            for r in runs])
    return Results(runs=frame, metrics=metrics, judgments=_concat([_tag(r.judgments, r) for r in runs]),
                   items=_concat([_tag(_items(r), r) for r in runs]),
                   feedback=_concat([_tag(r.feedback, r) for r in runs if r.feedback is not None]))


def _typed(values: pd.Series) -> pd.Series:
    """MLflow params are text: numbers where every value parses, None for unset."""
    values = values.replace("", None)
    try:
        return pd.to_numeric(values)
    except (ValueError, TypeError):
        return values
