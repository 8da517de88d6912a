"""Each item's own fields as its traces show them (the request), read again from the dataset the run loaded.

``mlflow.genai.evaluate`` makes a row's ``inputs`` the trace's request, and the MLflow UI pairs two runs' traces
by their request: a judge's prompt there (the same system prompt in every preview) would pair only the first row.
So a trace's request is the item: its id, its template variables and its candidates under their system names,
each text cut to :data:`FIELD_CHARS` (the judge's full messages stay on the trace's ``call`` span).

The publisher runs in another process than the run, or much later (``judgesweep sync``): it reads view.json's
``items`` (:func:`runner.run.view.item_source`), streams the dataset file once, and keeps what it reads in a
temporary SQLite file, not in memory, so 100,000 items cost the same memory as 100. A generated candidate comes
from the run's generations journal. A dataset that is no longer there leaves each request the item id alone
(with a warning), never a failed publish.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import tempfile
from collections.abc import Collection, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from runner.core.choices import PromptMode
from runner.core.config import DatasetConfig, SystemConfig
from runner.core.types import Item
from runner.inputs.items import Shape, to_item
from runner.inputs.rows import RowError, read_rows
from runner.storage.journal import iter_journal

log = logging.getLogger(__name__)

FIELD_CHARS = 240  # per field: an id, an instruction and two outputs stay within the 1,000-character preview
ELLIPSIS = "…"
_SYSTEMS = ("ours", "baseline", "candidate")


def cut(text: str, limit: int = FIELD_CHARS) -> str:
    """``text`` cut to ``limit`` characters, the cut marked."""
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS


def inputs_of(item: Item, limit: int = FIELD_CHARS) -> dict[str, str]:
    """The item's own fields: ``item_id``, each non-empty template variable, each candidate under its system's
    name (as a dataset row reads: ``instruction``, ``output_1``, ``output_2``), every text cut to ``limit``."""
    out = {"item_id": item.id}
    out.update((name, cut(text, limit)) for name, text in item.variables.items() if text)
    out.update((c.system, cut(c.text, limit)) for c in item.candidates)
    return out


def dataset_config(fields: Mapping[str, Any]) -> DatasetConfig:
    """A DatasetConfig from its ``dataclasses.asdict`` form (view.json)."""
    systems = {k: SystemConfig(**fields[k]) for k in _SYSTEMS if fields.get(k)}
    return DatasetConfig(**{**fields, **systems})


class ItemInputs:
    """Item id -> its request (:func:`inputs_of`), indexed from the dataset into a temporary SQLite file.

    Args:
        run_dir: The run directory (its generations journal).
        source: view.json's ``items``, or None (a run directory written before it existed).
        wanted: The ids of the run's items: the dataset is read until each is found.
        limit: Characters kept of each text (the sweep report's item view keeps more than a trace's request).
    """

    def __init__(self, run_dir: Path, source: Mapping[str, Any] | None, wanted: Collection[str],
                 limit: int = FIELD_CHARS) -> None:
        self._limit = limit
        self._dir = tempfile.TemporaryDirectory(prefix="judgesweep-inputs-")
        self._db = sqlite3.connect(Path(self._dir.name) / "inputs.sqlite", isolation_level=None)
        self._db.execute("PRAGMA journal_mode=OFF")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute("CREATE TABLE inputs (item_id TEXT PRIMARY KEY, fields TEXT NOT NULL) WITHOUT ROWID")
        self._db.execute("CREATE TABLE generated (item_id TEXT PRIMARY KEY, text TEXT NOT NULL) WITHOUT ROWID")
        self._system: str | None = None
        if source is not None and wanted:
            self._db.execute("BEGIN")
            self._index(source, set(wanted))
            if source.get("generated"):
                self._system = source["generated"]["system"]
                self._index_generated(run_dir / source["generated"]["file"])
            self._db.execute("COMMIT")

    def _index(self, source: Mapping[str, Any], wanted: set[str]) -> None:
        """Stream the dataset (as the run read it: ordinals count every row) until every wanted id is indexed."""
        cfg, path = dataset_config(source["dataset"]), Path(source["path"])
        shape = Shape(mode=PromptMode(source["mode"]), with_candidate=bool(source["with_candidate"]))
        if not path.is_file():
            log.warning("the dataset %s is not there any more: each trace's request is its item id alone", path)
            return
        left = set(wanted)
        for ordinal, (where, row) in enumerate(read_rows(path), start=1):
            try:
                item = to_item(row, cfg, where, ordinal, shape)
            except RowError:  # a row the run skipped (on_bad_row=skip)
                continue
            if item.id in left:  # the first row of an id, as the run kept it
                left.discard(item.id)
                self._db.execute("INSERT INTO inputs VALUES (?, ?)",
                                 (item.id, json.dumps(inputs_of(item, self._limit), ensure_ascii=False)))
                if not left:
                    return

    def _index_generated(self, journal: Path) -> None:
        """Each item's generated output: its last successful generation (a resumed run's retry included)."""
        for row in iter_journal(journal):  # a line torn by a kill is skipped
            if row.get("status") == "ok":
                self._db.execute("INSERT OR REPLACE INTO generated VALUES (?, ?)",
                                 (row["item_id"], cut(row.get("raw_response") or "", self._limit)))

    def get(self, item_id: str) -> dict[str, str]:
        """The item's request: its own fields, or its id alone when the dataset did not have it."""
        row = self._db.execute("SELECT fields FROM inputs WHERE item_id = ?", (item_id,)).fetchone()
        fields: dict[str, str] = json.loads(row[0]) if row is not None else {"item_id": item_id}
        if self._system is not None:
            text = self._db.execute("SELECT text FROM generated WHERE item_id = ?", (item_id,)).fetchone()
            if text is not None:
                fields[self._system] = text[0]
        return fields

    def close(self) -> None:
        """Close and delete the temporary index."""
        self._db.close()
        self._dir.cleanup()

    def __enter__(self) -> ItemInputs:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
