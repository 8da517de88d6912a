"""What a run writes to its directory: the append-only journal, the results table, summary files.

The journal gets one line per judge call the moment the call completes (flushed and fsynced), so an
answer that was paid for survives a crash of everything after it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from runner.types import Judgment

JOURNAL_NAME = "journal.jsonl"
RESULTS_NAME = "results.jsonl"
SUMMARY_NAME = "summary.json"


def judgment_record(j: Judgment) -> dict[str, Any]:
    """Flatten one judgment into a JSON-serialisable row (journal line and results row)."""
    req, resp, verdict = j.request, j.response, j.verdict
    return {
        "item_id": req.item_id,
        "repeat": req.repeat,
        "order": req.order.value,
        "stage": req.stage,
        "messages_sha256": req.messages_hash,
        "status": j.status.value,
        "winner": j.winner,
        "verdict_label": verdict.label,
        "parse_error": verdict.reason,
        "raw_response": resp.text,
        "finish_reason": resp.finish_reason,
        "prompt_tokens": resp.prompt_tokens,
        "completion_tokens": resp.completion_tokens,
        "cost_usd": resp.cost_usd,
        "latency_s": round(resp.latency_s, 6),
        "error_type": resp.error_type,
        "error": resp.error,
    }


class Journal:
    """Append-only JSONL journal of judge calls.

    Args:
        path: The journal file; created if missing, appended to otherwise.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = path.open("a", encoding="utf-8")

    def append(self, judgment: Judgment) -> None:
        """Write one line and push it to disk before returning."""
        self._fh.write(json.dumps(judgment_record(judgment), ensure_ascii=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        """Close the file."""
        self._fh.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as indented UTF-8 JSON, atomically (temp file + rename)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def write_results(path: Path, judgments: Iterable[Judgment]) -> None:
    """Write every judgment as one JSONL row, in the order given."""
    rows = [judgment_record(j) for j in judgments]
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)
