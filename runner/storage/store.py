"""What a run writes to its directory: the file names, the manifest, the results table, summary files.

The journal, written as each judge call completes and read back on resume, is :mod:`runner.storage.journal`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.core.errors import WriteFailed
from runner.core.types import Judgment
from runner.storage.journal import judgment_record

JOURNAL_NAME = "journal.jsonl"
RESULTS_NAME = "results.jsonl"
SUMMARY_NAME = "summary.json"
METRICS_NAME = "metrics.json"  # every flat metric of the run (what MLflow gets), for sweep tables without MLflow
MANIFEST_NAME = "run.json"


@dataclass(frozen=True)
class Manifest:
    """What a run directory needs to be resumed: the config that decides its answers, and its MLflow run.

    Attributes:
        config_sha256: Hash of ``config``.
        config: The flattened settings that decide what is asked and how it is read (operational knobs
            such as concurrency, rate limits or tracking are left out, so they may change on resume).
        mlflow_run_id: The MLflow run that shows the run (the last store it was published to), if any.
        run_uid: The run's own id, made when the directory is first written: its MLflow run in any store carries it
            (``judgesweep.run_uid``), which is how publishing the directory again finds that run.
    """

    config_sha256: str
    config: dict[str, Any]
    mlflow_run_id: str | None = None
    run_uid: str | None = None


def read_manifest(run_dir: Path) -> Manifest | None:
    """The run directory's manifest, or None when there is none."""
    path = run_dir / MANIFEST_NAME
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return Manifest(config_sha256=data["config_sha256"], config=data.get("config", {}),
                    mlflow_run_id=data.get("mlflow_run_id"), run_uid=data.get("run_uid"))


def write_manifest(run_dir: Path, manifest: Manifest) -> None:
    """Write (replace) the run directory's manifest."""
    write_json(run_dir / MANIFEST_NAME, {"config_sha256": manifest.config_sha256, "config": manifest.config,
                                         "mlflow_run_id": manifest.mlflow_run_id, "run_uid": manifest.run_uid})


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as indented UTF-8 JSON, atomically (temp file + rename); WriteFailed when it cannot be written.

    Streamed to the file piece by piece: a 100,000-judgment summary is ~12 MB of JSON, and json.dumps
    would hold it (and ~4x that in pieces) in memory at the run's peak.
    """
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            json.dump(obj, fh, ensure_ascii=False, indent=2)
            fh.write("\n")
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise WriteFailed(path, exc) from None


def write_results(path: Path, judgments: Iterable[Judgment], labels: Mapping[str, dict[str, Any]] | None = None,
                  judges: Sequence[str] | None = None) -> None:
    """Write every judgment as one JSONL row (without operational fields), in the order given.

    ``labels`` (item id -> e.g. ``{"gold": ..., "human_score": ...}``) are added to the item's rows, so a
    results file alone is enough to compare runs (runner.outputs.compare). ``judges`` (an ensemble run: the member
    of each judgment, aligned with ``judgments``) adds a ``judge`` column.
    """
    labels = labels or {}
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            for n, j in enumerate(judgments):
                row = {**judgment_record(j, operational=False), **labels.get(j.item_id, {})}
                if judges is not None:
                    row = {"judge": judges[n], **row}
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise WriteFailed(path, exc) from None
