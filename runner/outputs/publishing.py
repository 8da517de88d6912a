"""The MLflow view of a run directory: the one publishing path that a run, a resume, ``judgesweep aggregate`` and
``judgesweep sync`` all take.

The run directory is the record: journal(s), messages.sqlite, results.jsonl, summary.json, metrics.json,
report.html, run.json (the manifest) and view.json (what only the view needs: the run's name, params, tags,
prompts, dataset, judges; :func:`write_view`). :func:`publish` writes into a tracking store whatever of that view
the store lacks, and nothing twice, whenever it is called and however often:

- the MLflow run is found by its ``judgesweep.run_uid`` tag (the manifest's), else created with it (a sweep's job
  nested under the sweep's parent run, which is found or created too);
- params and tags not there yet; each metric of metrics.json once (a value that changed, after a resume, is one
  more point at the next step); each artifact missing or of another size;
- with ``tracking.traces``: the prompt versions (a new version only for a changed template), the dataset input
  (once), one trace per judgment from the journals (ids fixed by the MLflow run and the judgment: the ones the
  run has are skipped; its request the item's own fields, read again from the dataset: :mod:`trace_inputs`),
  and the traces' ``<feedback>/mean`` metrics (``correct/mean``, ``pass/mean``, ``<criterion>/mean``, as
  ``mlflow.genai.evaluate`` logs them; a key metrics.json has keeps metrics.json's value);
- report.html's link to the MLflow run (:mod:`runner.outputs.report_links`), before the page is logged;
- the run's status last (FINISHED, or FAILED with the reason), and ``mlflow.json`` in the run directory, which
  says which store holds the run.

An interrupted publish leaves a store that the next one completes. mlflow is imported by the tracking package
only: a run with tracking off never imports it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from runner.core.run_settings import TrackingConfig
from runner.outputs import report_links, tracking
from runner.outputs.trace_inputs import ItemInputs
from runner.storage import store
from runner.storage.journal import iter_journal
from runner.storage.messages import MESSAGES_NAME, MessageStore

log = logging.getLogger(__name__)

VIEW_NAME = "view.json"
PUBLISHED_NAME = "mlflow.json"  # store -> MLflow run id, written when a publish completes
LOCK_NAME = ".publish.lock"
UID_TAG, DIR_TAG = "judgesweep.run_uid", "judgesweep.run_dir"
POLL_S = 0.5  # how often follow() looks for new journal lines
TABLE_ROWS = 20_000  # judgments in the MLflow results table (results.jsonl, also logged, holds every one)


@dataclass(frozen=True)
class Published:
    """What one publish wrote."""

    run_id: str
    created: bool  # the MLflow run was made by this publish
    traces: int  # traces written (the ones there already are not counted)


def write_view(run_dir: Path, view: Mapping[str, Any]) -> None:
    """Write view.json: ``run_name``, ``params``, ``tags``, ``failed``, ``reason``, ``traces`` (bool), ``prompts``
    ([name, template, sha256]), ``dataset`` ([name, source] or None), ``judges`` ([{member, model, dir}]),
    ``config_yaml`` (the resolved config); params go through :func:`tracking.safe_params` first, so no secret
    reaches the file."""
    store.write_json(run_dir / VIEW_NAME, {**view, "params": tracking.safe_params(view.get("params", {}))})


def store_key(cfg: TrackingConfig) -> str:
    """How mlflow.json names a store: its URI (MLflow's default when unset) and experiment."""
    return f"{cfg.uri or 'default'}#{cfg.experiment}"


def is_published(run_dir: Path, cfg: TrackingConfig) -> bool:
    """Whether a publish of ``run_dir`` into ``cfg``'s store completed (mlflow.json says so; no store is opened)."""
    try:
        return store_key(cfg) in json.loads((run_dir / PUBLISHED_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


def publish(run_dir: Path, cfg: TrackingConfig, on_run: Callable[[str], None] | None = None) -> Published:
    """Write what ``cfg``'s store lacks of the run in ``run_dir`` (see the module docstring); ``on_run`` is told the
    MLflow run's id as soon as it is known.

    Raises:
        FileNotFoundError: ``run_dir`` holds no finished run (no view.json or run.json).
        Whatever the store raises: the run directory is untouched, and the next publish completes the store.
    """
    run_dir = run_dir.resolve()
    view_path = run_dir / VIEW_NAME
    if not view_path.is_file() or not (run_dir / store.METRICS_NAME).is_file():
        raise FileNotFoundError(f"{run_dir} holds no finished run to publish (no {VIEW_NAME} or "
                                f"{store.METRICS_NAME}); a run killed before its end continues with resume={run_dir}")
    view = json.loads(view_path.read_text(encoding="utf-8"))
    with FileLock(str(run_dir / LOCK_NAME)):  # two publishes of one directory at once would make two runs
        run_id, created = _ensure_run(run_dir, cfg, view)
        if on_run is not None:
            on_run(run_id)
        _link_report(run_dir / report_links.REPORT_NAME, cfg, run_id)
        written, means = 0, dict[str, float]()
        if view.get("traces"):
            written, means = _genai(cfg, run_id, run_dir, view)
        metrics = json.loads((run_dir / store.METRICS_NAME).read_text(encoding="utf-8"))
        tracking.log_new_metrics(cfg, run_id, {**means, **metrics})
        tracking.log_new_artifacts(cfg, run_id, run_dir, view.get("config_yaml", ""),
                                   lambda: _table_rows(run_dir))
        tracking.close_run(cfg, run_id, failed=bool(view.get("failed")), reason=view.get("reason") or "")
        _record(run_dir, cfg, run_id)
    return Published(run_id, created, written)


def _link_report(report: Path, cfg: TrackingConfig, run_id: str) -> None:
    """The report's link to its MLflow run (:mod:`runner.outputs.report_links`), put in before the page is logged; a
    report that cannot be rewritten keeps its slot empty, with a warning (the run is published all the same)."""
    if not report.is_file():
        return
    try:
        report_links.fill(report, report_links.content(cfg, tracking.experiment_of(cfg, run_id), run_id))
    except OSError as exc:
        log.warning("%s: its link to MLflow run %s not written: %s", report, run_id, exc)


def _uid(run_dir: Path, view: Mapping[str, Any]) -> str:
    """The run directory's uid: the manifest's (an aggregation's is in its view)."""
    manifest = store.read_manifest(run_dir)
    return (manifest.run_uid if manifest is not None else None) or view.get("run_uid") or str(run_dir)


def _ensure_run(run_dir: Path, cfg: TrackingConfig, view: Mapping[str, Any]) -> tuple[str, bool]:
    """The run directory's MLflow run, found by its uid or made."""
    uid = _uid(run_dir, view)
    tags = {**view["tags"], UID_TAG: uid, DIR_TAG: str(run_dir)}
    return tracking.ensure_run(cfg, uid, view["run_name"], tags, view["params"])


def made_run(run_dir: Path, cfg: TrackingConfig) -> str | None:
    """The MLflow run of ``run_dir`` in ``cfg``'s store, found by its uid (None: none yet, or no view.json): the one a
    follow or publish stopped in the middle of making may be there before either could say so (``on_run``)."""
    run_dir = run_dir.resolve()
    try:
        view = json.loads((run_dir / VIEW_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return tracking.find_run(cfg, _uid(run_dir, view))


def follow(run_dir: Path, cfg: TrackingConfig, stop: Callable[[], bool], on_run: Callable[[str], None] | None = None,
           poll_s: float = POLL_S, wait: Callable[[float], object] = time.sleep) -> int:
    """Write the run's traces while its calls go on, from view.json written at its start and its journals as they
    grow, until ``stop()`` (then one last pass); returns how many were written.

    An optimization of :func:`publish`, which follows it and writes whatever this did not (a failed call's trace
    among them: a resume's retry may replace it), so nothing here is needed for a complete view: the run's end no
    longer waits for the traces of the answers that came while it ran.
    """
    from runner.storage.journal import JournalTail

    run_dir = run_dir.resolve()
    view = json.loads((run_dir / VIEW_NAME).read_text(encoding="utf-8"))
    if not view.get("traces") or not view.get("judges"):
        return 0
    with FileLock(str(run_dir / LOCK_NAME)):
        run_id, _ = _ensure_run(run_dir, cfg, view)
    if on_run is not None:
        on_run(run_id)
    try:
        _inputs(cfg, run_id, view)
    except Exception as exc:  # noqa: BLE001 - the publish logs them, or says why
        log.debug("prompts and dataset not logged during the run: %s: %s", type(exc).__name__, exc)
    labels: dict[str, dict] = view.get("labels") or {}
    writer = tracking.TraceWriter(cfg, run_id, int(view.get("started_ns") or time.time_ns()))
    tails = [(judge, JournalTail(run_dir / judge["dir"] / store.JOURNAL_NAME)) for judge in view["judges"]]
    messages: MessageStore | None = None
    threshold = view.get("pass_threshold")
    try:
        with ItemInputs(run_dir, view.get("items"), labels.keys()) as inputs:
            while True:
                last = stop()  # read before the journals: a line written before stop was set is read below
                for judge, tail in tails:
                    for row in tail.read():
                        if row.get("error_type"):  # publish writes it at the end, unless a retry replaced it
                            continue
                        if messages is None and (run_dir / MESSAGES_NAME).is_file():
                            messages = MessageStore(run_dir / MESSAGES_NAME, read_only=True)
                        writer.write(_record_of(row, judge, labels, messages, inputs.get(row["item_id"]), threshold))
                writer.flush()
                if last:
                    return writer.written
                wait(poll_s)
    finally:
        if messages is not None:
            messages.close()


# What this process has logged already, as (store, MLflow run, what): the follow logs a run's prompts and dataset
# input as soon as it has made the run, so the publish that follows it in the same process skips them (each is a few
# store round trips: ~0.4 s of a small run's publish, otherwise paid after its printed result).
_LOGGED: set[tuple[str, str, str]] = set()


def _inputs(cfg: TrackingConfig, run_id: str, view: Mapping[str, Any]) -> None:
    """The run's prompt versions (registered and linked) and its dataset input, unless this process logged them."""
    for name, template, sha in view.get("prompts", []):
        done = (store_key(cfg), run_id, f"prompt {name} {sha}")
        if done not in _LOGGED:
            tracking.register_prompt(cfg, run_id, name, template, sha)
            _LOGGED.add(done)
    done = (store_key(cfg), run_id, "dataset")  # one run's view names one dataset, its labels fixed at its start
    if view.get("dataset") and done not in _LOGGED:
        name, source = view["dataset"]
        labels: dict[str, dict] = view.get("labels") or {}  # every item's gold and human score, as the run had them
        rows = [{"item_id": item, "gold": lab.get("gold"), "human_score": lab.get("human_score")}
                for item, lab in labels.items()]
        tracking.log_dataset(cfg, run_id, name, source, rows)
        _LOGGED.add(done)


def _genai(cfg: TrackingConfig, run_id: str, run_dir: Path, view: Mapping[str, Any]) -> tuple[int, dict[str, float]]:
    """Prompts, dataset input and traces; returns the traces written and their Feedback means."""
    _inputs(cfg, run_id, view)
    labels: dict[str, dict] = view.get("labels") or {}
    if not view.get("judges"):
        return 0, {}
    writer = tracking.TraceWriter(cfg, run_id, int(view.get("started_ns") or time.time_ns()))
    messages = MessageStore(run_dir / MESSAGES_NAME, read_only=True) if (run_dir / MESSAGES_NAME).is_file() else None
    threshold = view.get("pass_threshold")
    try:
        with ItemInputs(run_dir, view.get("items"), labels.keys()) as inputs:
            for judge in view["judges"]:
                for row in _final_rows(run_dir / judge["dir"] / store.JOURNAL_NAME):
                    writer.write(_record_of(row, judge, labels, messages, inputs.get(row["item_id"]), threshold))
        writer.flush()
    finally:
        if messages is not None:
            messages.close()
    return writer.written, writer.means.metrics()


def _final_rows(journal: Path) -> Iterator[dict[str, Any]]:
    """The journal's lines, one per judgment, streamed: a failed call's line is held to the end, where a later line
    for the same judgment (a resumed run's retry) replaces it."""
    held: dict[tuple, dict[str, Any]] = {}
    for row in iter_journal(journal):  # a line torn by a kill is skipped: its call was not counted
        key = (row["item_id"], row["repeat"], row["order"], row["stage"])
        if row.get("error_type"):
            held[key] = row
            continue
        held.pop(key, None)
        yield row
    yield from held.values()


def _record_of(row: dict[str, Any], judge: Mapping[str, Any], labels: Mapping[str, dict],
               messages: MessageStore | None, inputs: Mapping[str, Any] | None = None,
               pass_threshold: float | None = None) -> tracking.TraceRecord:
    sha = row.get("messages_sha256")
    return tracking.TraceRecord(
        item_id=row["item_id"], repeat=row["repeat"], order=row["order"], stage=row["stage"],
        messages=messages.get(sha) if sha and messages is not None else None, messages_sha256=sha,
        raw_response=row["raw_response"], status=row["status"], label=row["verdict_label"],
        winner=row["winner"], scores=row["scores"], score=row["score"], parse_error=row["parse_error"],
        latency_s=row.get("latency_s") or 0.0, attempts=row.get("attempts") or 1,
        prompt_tokens=row.get("prompt_tokens") or 0, completion_tokens=row.get("completion_tokens") or 0,
        error=row.get("error"), expectations=labels.get(row["item_id"], {}), member=judge.get("member"),
        judge_model=judge.get("model", ""), inputs=inputs, pass_threshold=pass_threshold)


def _table_rows(run_dir: Path) -> list[dict[str, Any]]:
    """The first TABLE_ROWS rows of results.jsonl: the run's MLflow results table."""
    rows: list[dict[str, Any]] = []
    path = run_dir / store.RESULTS_NAME
    if path.is_file():
        with path.open("rb") as fh:
            for line in fh:
                if len(rows) == TABLE_ROWS:
                    log.info("the MLflow results table holds the first %d judgments; results.jsonl holds them all",
                             TABLE_ROWS)
                    break
                rows.append(json.loads(line))
    return rows


def _record(run_dir: Path, cfg: TrackingConfig, run_id: str) -> None:
    """mlflow.json gets this store's run; the manifest names the run (results.load finds it there)."""
    path = run_dir / PUBLISHED_NAME
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    store.write_json(path, {**known, store_key(cfg): run_id})
    manifest = store.read_manifest(run_dir)
    if manifest is not None and manifest.mlflow_run_id != run_id:
        store.write_manifest(run_dir, store.Manifest(manifest.config_sha256, manifest.config, run_id,
                                                     manifest.run_uid))
