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

import json
import logging
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from runner.core.config import TrackingConfig
from runner.modes import base as modes
from runner.modes import panel
from runner.modes.base import RunMode
from runner.outputs import tracking
from runner.storage import store

log = logging.getLogger(__name__)

# The params shown as columns of ``Results.runs`` (all of them are in the MLflow UI and in run.json).
RUN_PARAMS = ("judge.model", "judge.version", "judge.temperature", "judge.seed", "judge.max_tokens",
              "prompt.template", "prompt.mode", "prompt.strategy", "rubric.parser.name", "rubric.pass_threshold",
              "aggregation.name", "dataset.name", "order", "repeats", "seed", "max_items")
RUN_ID = re.compile(r"[0-9a-f]{32}")
RUN_FILES = (store.MANIFEST_NAME, store.SUMMARY_NAME, store.RESULTS_NAME, store.JOURNAL_NAME)
JOURNAL_KEY = ["item_id", "repeat", "order", "stage", "messages_sha256"]  # as store.JournalAnswers
NAME_GROUPS = ("generator", "judge", "prompt", "rubric", "dataset")  # the CLI's run name
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
            :func:`summary_metrics`).
        judgments: One row per judge call, as in results.jsonl (or the journal of an unfinished run):
            ``item_id``, ``repeat``, ``order``, ``stage``, ``status``, ``winner``, ``score``, ``scores``,
            ``raw_response``, ``gold``, ...
        items: One row per item. Pairwise: ``item_id``, ``verdicts``, ``final_verdict``, ``confidence``,
            ``verdict_counts.<label>``, ``gold``. Pointwise (summary.json's detailed_results): ``item_id``,
            ``status``, ``tags``, ``category``, ``overall``, ``passed``, ``scores.<criterion>``, ...
    """

    runs: pd.DataFrame
    metrics: pd.DataFrame
    judgments: pd.DataFrame
    items: pd.DataFrame

    def __repr__(self) -> str:
        return (f"Results(runs={len(self.runs)}, metrics={self.metrics.shape[1]} columns, "
                f"judgments={len(self.judgments)}, items={len(self.items)})")


@dataclass(frozen=True, eq=False)
class _Run:
    """One run as read, before the runs are put side by side."""

    info: dict[str, Any]
    choices: dict[str, str]
    params: dict[str, str]
    metrics: Mapping[str, float]
    summary: dict[str, Any] | None
    judgments: pd.DataFrame


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
    path = Path(ref).expanduser()
    if _is_run_dir(path):
        runs = [_read_run_dir(path)]
    elif path.is_dir():
        runs = _load_sweep(path, tracking_uri)
    else:
        runs = _load_ref(str(ref), tracking_uri)
    return _assemble(runs)


def store_config(tracking_uri: str | None) -> TrackingConfig:
    """The MLflow store to read (default: the sqlite store under ./outputs).

    Raises:
        LookupError: The sqlite file does not exist (MLflow would silently create an empty store).
    """
    uri = tracking_uri or f"sqlite:///{Path.cwd() / 'outputs' / 'mlflow.db'}"
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        raise LookupError(f"no MLflow store at {uri} (pass tracking_uri=...)")
    return TrackingConfig(uri=uri)


def _is_run_dir(path: Path) -> bool:
    return not (path / "multirun.yaml").is_file() and any((path / name).is_file() for name in RUN_FILES)


def _load_sweep(path: Path, tracking_uri: str | None) -> list[_Run]:
    try:
        cfg = store_config(tracking_uri)
        return _load_tracked(cfg, tracking.find_sweep_runs(cfg, path))
    except LookupError as exc:
        jobs = sorted((d for d in path.iterdir() if d.is_dir() and _is_run_dir(d)), key=_job_order)
        if not jobs:
            raise LookupError(f"{path} is neither a run directory nor a sweep: no job directories on disk, "
                              f"and {exc}") from None
        log.info("%s; reading the %d job directories of %s instead", exc, len(jobs), path)
        return [_read_run_dir(job) for job in jobs]


def _job_order(path: Path) -> tuple[bool, int, str]:
    return not path.name.isdigit(), int(path.name) if path.name.isdigit() else 0, path.name


def _load_ref(ref: str, tracking_uri: str | None) -> list[_Run]:
    cfg = store_config(tracking_uri)
    if RUN_ID.fullmatch(ref):
        (run,) = tracking.get_runs(cfg, [ref])
        kind, sweep = run.tags.get(tracking.KIND_TAG), run.tags.get(tracking.SWEEP_TAG)
        if kind and sweep:  # a sweep-summary run: its jobs
            return _load_tracked(cfg, tracking.find_sweep_runs(cfg, sweep))
        if kind:
            raise LookupError(f"MLflow run {ref} is a {kind} run, not a judge run")
        return _load_tracked(cfg, [run])
    try:  # a sweep whose directory is gone still has its runs in the store
        return _load_tracked(cfg, tracking.find_sweep_runs(cfg, ref))
    except LookupError as exc:
        raise LookupError(f"{ref!r} is not a run directory, a sweep directory or an MLflow run id ({exc})") from None


def _load_tracked(cfg: TrackingConfig, found: Sequence[tracking.TrackedRun]) -> list[_Run]:
    metrics = tracking.get_run_metrics(cfg, [run.run_id for run in found])
    with tempfile.TemporaryDirectory(prefix="judgesweep-results-") as tmp:
        return [_read_tracked(cfg, run, metrics[run.run_id], Path(tmp) / run.run_id) for run in found]


def _read_tracked(cfg: TrackingConfig, run: tracking.TrackedRun, metrics: Mapping[str, float], tmp: Path) -> _Run:
    """A run's artifacts; the files of its run directory where the artifacts are missing (an aborted run)."""
    local = Path(run.tags["hydra.run_dir"]) if run.tags.get("hydra.run_dir") else None

    def fetch(name: str) -> Path | None:
        try:
            return tracking.download_artifact(cfg, run.run_id, name, tmp)
        except LookupError:
            return local / name if local is not None and (local / name).is_file() else None

    summary_path = fetch(store.SUMMARY_NAME)
    rows_path = fetch(store.RESULTS_NAME)
    judgments = _read_rows(rows_path) if rows_path is not None else None
    if judgments is None and local is not None:
        judgments, rows_path = _unfinished_rows(local)
    info = {"run_id": run.run_id, "run_name": run.run_name, "status": run.status,
            "start_time": pd.Timestamp(run.start_time, unit="ms", tz="UTC"),
            "run_dir": run.tags.get("hydra.run_dir") or None, "sweep": run.tags.get(tracking.SWEEP_TAG) or None,
            "git_commit": run.tags.get("git.commit") or None,
            "judgments_from": rows_path.name if rows_path is not None else None}
    return _Run(info=info, choices=_choices(run.params), params=dict(run.params), metrics=metrics,
                summary=_read_json(summary_path), judgments=judgments)


def _read_run_dir(path: Path) -> _Run:
    """A run from its directory alone: run.json for params, summary.json for metrics and items."""
    path = path.resolve()
    manifest = store.read_manifest(path)
    params = tracking.safe_params(manifest.config if manifest is not None else {})
    choices = _choices(params)
    summary = _read_json(path / store.SUMMARY_NAME)
    rows_path: Path | None = path / store.RESULTS_NAME
    if rows_path is not None and rows_path.is_file():
        judgments = _read_rows(rows_path)
    else:
        judgments, rows_path = _unfinished_rows(path)
    started = path / store.MANIFEST_NAME if (path / store.MANIFEST_NAME).is_file() else path
    info = {"run_id": (manifest.mlflow_run_id if manifest is not None else None) or str(path),
            "run_name": ",".join(f"{k}={choices[k]}" for k in NAME_GROUPS if k in choices) or path.name,
            "status": "FINISHED" if summary is not None else "INCOMPLETE",
            "start_time": pd.Timestamp(started.stat().st_mtime, unit="s", tz="UTC"), "run_dir": str(path),
            "sweep": str(path.parent) if (path.parent / "multirun.yaml").is_file() else None, "git_commit": None,
            "judgments_from": rows_path.name if rows_path is not None else None}
    mode = run_mode(params)
    return _Run(info=info, choices=choices, params=params, metrics=summary_metrics(summary, mode) if summary and mode
                else {}, summary=summary, judgments=judgments)


def _unfinished_rows(run_dir: Path) -> tuple[pd.DataFrame, Path | None]:
    """The judgments of a run without results.jsonl: its journal, or an ensemble's member journals (with a
    ``judge`` column); an empty frame and None when there is neither."""
    if (run_dir / store.JOURNAL_NAME).is_file():
        return _read_rows(run_dir / store.JOURNAL_NAME), run_dir / store.JOURNAL_NAME
    journals = sorted((run_dir / panel.MEMBERS_DIR).glob(f"*/{store.JOURNAL_NAME}"))
    frames = [_read_rows(j).assign(judge=j.parent.name) for j in journals if j.stat().st_size]
    if not frames:
        return pd.DataFrame(), None
    return pd.concat(frames, ignore_index=True), journals[0]


def run_mode(params: Mapping[str, str]) -> RunMode | None:
    """The run's mode from its recorded ``prompt.mode`` (MLflow params or run.json), or None when not recorded."""
    name = params.get("prompt.mode")
    return modes.mode_named(name) if name else None


def summary_metrics(summary: Mapping[str, Any], mode: RunMode) -> dict[str, float]:
    """The MLflow metrics a run's summary.json determines, named as the run logged them.

    What the calls themselves determine is only in MLflow and left out: the families ``judge/``, ``calls/``,
    ``tokens/``, ``cost/``, ``latency/``, ``generation/`` and ``run/wall_s``.
    """
    out = mode.summary_metrics(summary)
    out["items/skipped_rows"] = float(len(summary["summary"].get("skipped_rows") or []))
    if summary.get("gates"):
        out["gate/passed"] = float(all(gate["passed"] for gate in summary["gates"]))
    return out


def _choices(params: Mapping[str, str]) -> dict[str, str]:
    return {k.removeprefix("choice."): v for k, v in sorted(params.items()) if k.startswith("choice.")}


def _read_json(path: Path | None) -> dict[str, Any] | None:
    if path is None or not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def _read_rows(path: Path | None) -> pd.DataFrame:
    """results.jsonl as written (dtype=False keeps ids like "007" text); a journal without torn or
    superseded lines (a call retried on resume keeps its last line)."""
    if path is None or path.stat().st_size == 0:
        return pd.DataFrame()
    if path.name != store.JOURNAL_NAME:
        return pd.read_json(path, lines=True, dtype=False)
    frame = pd.DataFrame(store.read_journal(path))
    key = [column for column in JOURNAL_KEY if column in frame.columns]
    return frame.drop_duplicates(subset=key, keep="last", ignore_index=True) if key else frame


def _items(run: _Run) -> pd.DataFrame:
    """One row per item, as the run's mode lays them out (runner.modes.base.RunMode.items); pairwise items get
    the gold label from the judgments."""
    mode = run_mode(run.params)
    if run.summary is None or mode is None:
        return pd.DataFrame()
    frame = pd.DataFrame(mode.items(run.summary))
    if mode.items_take_gold and "gold" in run.judgments.columns and not frame.empty:
        gold = run.judgments.groupby("item_id", sort=False)["gold"].first()
        frame["gold"] = frame["item_id"].map(gold)
    return frame


def _tag(frame: pd.DataFrame, run: _Run) -> pd.DataFrame:
    """Prepend ``run_id`` and the choices (``choice.<group>`` where the frame has a column of that name)."""
    front = {"run_id": run.info["run_id"]}
    front.update({(k if k not in frame.columns else f"choice.{k}"): v for k, v in run.choices.items()})
    return frame.assign(**front)[[*front, *frame.columns]]


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    full = [frame for frame in frames if not frame.empty]
    if not full:
        return frames[0] if frames else pd.DataFrame({"run_id": []})
    return pd.concat(full, ignore_index=True)


def _assemble(runs: list[_Run]) -> Results:
    """Put the runs side by side: one frame per kind of row."""
    rows = [{**{k: r.info[k] for k in INFO_FIRST}, **r.choices,
             **{k: r.params.get(k) for k in RUN_PARAMS}, **{k: r.info[k] for k in INFO_LAST}} for r in runs]
    frame = pd.DataFrame(rows)
    for name in RUN_PARAMS:
        frame[name] = _typed(frame[name])
    metrics = pd.DataFrame([{"run_id": r.info["run_id"], **r.choices, **dict(sorted(r.metrics.items()))}
                            for r in runs])
    return Results(runs=frame, metrics=metrics, judgments=_concat([_tag(r.judgments, r) for r in runs]),
                   items=_concat([_tag(_items(r), r) for r in runs]))


def _typed(values: pd.Series) -> pd.Series:
    """MLflow params are text: numbers where every value parses, None for unset."""
    values = values.replace("", None)
    try:
        return pd.to_numeric(values)
    except (ValueError, TypeError):
        return values
