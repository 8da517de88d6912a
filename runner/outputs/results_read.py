"""Reading runs for the results API (:mod:`runner.outputs.results`): from a run directory, from the MLflow store
(a run id, a sweep's tag), or from a sweep's job directories when the store has none.

Each run is read into a :class:`LoadedRun`; :func:`runner.outputs.results.load` puts them side by side. A run that
did not finish is read from its journal (or an ensemble's member journals) instead of results.jsonl.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pandas as pd

from runner.core.run_settings import TrackingConfig
from runner.modes import catalog, panel
from runner.modes.base import RunMode
from runner.modes.sections import EndedReport
from runner.outputs import tracking
from runner.storage import journal, store
from runner.storage.messages import MESSAGES_NAME, MessageStore

log = logging.getLogger("runner.outputs.results")

RUN_ID = re.compile(r"[0-9a-f]{32}")
RUN_FILES = (store.MANIFEST_NAME, store.SUMMARY_NAME, store.RESULTS_NAME, store.JOURNAL_NAME)
JOURNAL_KEY = ["item_id", "repeat", "order", "stage", "messages_sha256"]  # as store.JournalAnswers
NAME_GROUPS = ("generator", "judge", "prompt", "rubric", "dataset")  # the CLI's run name


@dataclass(frozen=True, eq=False)
class LoadedRun:
    """One run as read, before the runs are put side by side."""

    info: dict[str, Any]
    choices: dict[str, str]
    params: dict[str, str]
    metrics: Mapping[str, float]
    summary: dict[str, Any] | None
    judgments: pd.DataFrame
    feedback: pd.DataFrame | None = None  # human feedback added to the run's MLflow traces


def read_runs(ref: str | Path, tracking_uri: str | None) -> list[LoadedRun]:
    """The runs ``ref`` names (see :func:`runner.outputs.results.load` for what it may be).

    Raises:
        LookupError: ``ref`` names no run directory, sweep or run, or the store does not exist.
    """
    path = Path(ref).expanduser()
    if is_run_dir(path):
        return [read_run_dir(path)]
    if path.is_dir():
        return _load_sweep(path, tracking_uri)
    return _load_ref(str(ref), tracking_uri)


def store_config(tracking_uri: str | None) -> TrackingConfig:
    """The MLflow store to read (default: the sqlite store under ./outputs).

    Raises:
        LookupError: The sqlite file does not exist (MLflow would silently create an empty store).
    """
    uri = tracking_uri or f"sqlite:///{Path.cwd() / 'outputs' / 'mlflow.db'}"
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        raise LookupError(f"no MLflow store at {uri} (pass tracking_uri=...)")
    return TrackingConfig(uri=uri)


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` holds one run's files (and is not a sweep directory)."""
    return not (path / "multirun.yaml").is_file() and any((path / name).is_file() for name in RUN_FILES)


def _load_sweep(path: Path, tracking_uri: str | None) -> list[LoadedRun]:
    try:
        cfg = store_config(tracking_uri)
        return _load_tracked(cfg, tracking.find_sweep_runs(cfg, path))
    except LookupError as exc:
        jobs = sorted((d for d in path.iterdir() if d.is_dir() and is_run_dir(d)), key=_job_order)
        if not jobs:
            raise LookupError(f"{path} is neither a run directory nor a sweep: no job directories on disk, "
                              f"and {exc}") from None
        log.info("%s; reading the %d job directories of %s instead", exc, len(jobs), path)
        return [read_run_dir(job) for job in jobs]


def _job_order(path: Path) -> tuple[bool, int, str]:
    return not path.name.isdigit(), int(path.name) if path.name.isdigit() else 0, path.name


def _load_ref(ref: str, tracking_uri: str | None) -> list[LoadedRun]:
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


def _load_tracked(cfg: TrackingConfig, found: Sequence[tracking.TrackedRun]) -> list[LoadedRun]:
    metrics = tracking.get_run_metrics(cfg, [run.run_id for run in found])
    with tempfile.TemporaryDirectory(prefix="judgesweep-results-") as tmp:
        return [_read_tracked(cfg, run, metrics[run.run_id], Path(tmp) / run.run_id) for run in found]


def _read_tracked(cfg: TrackingConfig, run: tracking.TrackedRun, metrics: Mapping[str, float],
                  tmp: Path) -> LoadedRun:
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
    feedback = pd.DataFrame(tracking.human_feedback(cfg, run.run_id),
                            columns=["item_id", "repeat", "order", "stage", "judge", "name", "value",
                                     "rationale", "source_id", "trace_id"])
    return LoadedRun(info=info, choices=_choices(run.params), params=dict(run.params), metrics=metrics,
                     summary=_read_json(summary_path), judgments=with_messages(judgments, local), feedback=feedback)


def read_run_dir(path: Path) -> LoadedRun:
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
    return LoadedRun(info=info, choices=choices, params=params,
                     metrics=summary_metrics(summary, mode) if summary and mode else {}, summary=summary,
                     judgments=with_messages(judgments, path))


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


def with_messages(judgments: pd.DataFrame, run_dir: Path | None) -> pd.DataFrame:
    """The judgments with a ``messages`` column: what each judge was shown (``[{"role", "content"}, ...]``, from
    the run's message store; None where the store is gone or predates it)."""
    if judgments.empty or "messages_sha256" not in judgments.columns:
        return judgments
    path = run_dir / MESSAGES_NAME if run_dir is not None else None
    found: dict[str, Any] = {}
    if path is not None and path.is_file():
        with MessageStore(path, read_only=True) as messages:
            found = messages.get_many(judgments["messages_sha256"].dropna())
    return judgments.assign(messages=judgments["messages_sha256"].map(found))


def run_mode(params: Mapping[str, str]) -> RunMode | None:
    """The run's mode from its recorded ``prompt.mode`` (MLflow params or run.json), or None when not recorded."""
    name = params.get("prompt.mode")
    return catalog.mode_named(name) if name else None


def summary_metrics(summary: Mapping[str, Any], mode: RunMode) -> dict[str, float]:
    """The MLflow metrics a run's summary.json determines, named as the run logged them.

    What the calls themselves determine is only in MLflow and left out: the families ``judge/``, ``calls/``,
    ``tokens/``, ``cost/``, ``latency/``, ``generation/`` and ``run/wall_s``.
    """
    report = mode.read(summary)
    ended = cast(EndedReport, report)  # every mode's report is one (runner.modes.base.register checks)
    out = mode.summary_metrics(report)
    out["items/skipped_rows"] = float(len(ended.summary.skipped_rows or ()))
    if ended.gates:
        out["gate/passed"] = float(all(gate.passed for gate in ended.gates))
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
    frame = pd.DataFrame(journal.read_journal(path))
    key = [column for column in JOURNAL_KEY if column in frame.columns]
    return frame.drop_duplicates(subset=key, keep="last", ignore_index=True) if key else frame
