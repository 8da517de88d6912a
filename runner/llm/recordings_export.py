"""Write a recordings file (:mod:`runner.llm.recorded`) from a finished run's results.jsonl.

``python -m runner.llm.recordings_export <run dir> <out.jsonl>`` turns every first-round answer of a run (a
replay run such as ``make run``, or any live one) into the recordings format, so ``judge=recorded
judge.path=<out.jsonl>`` scores the same answers again: with another rubric, parser or aggregation, or to see
the format a recordings file takes. A failed call (no answer) is written as a failure (``error``, ``error_type``),
which replays as a failed call: the recorded run covers every call of the run it came from and ends as it did.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from runner.storage.store import RESULTS_NAME


def export_run(run_dir: Path, out: Path) -> int:
    """Write the first-round answers (and failures) of the run in ``run_dir`` to ``out``; returns how many lines
    were written.

    Raises:
        FileNotFoundError: ``run_dir`` holds no results.jsonl (the run did not finish).
    """
    written = 0
    with (run_dir / RESULTS_NAME).open(encoding="utf-8") as rows, out.open("w", encoding="utf-8") as fh:
        for line in rows:
            row = json.loads(line)
            if row["stage"] != "judge":
                continue
            record: dict[str, object] = {"id": row["item_id"], "order": row["order"], "repeat": row["repeat"]}
            if row["raw_response"] is not None:
                record.update(output=row["raw_response"], finish_reason=row["finish_reason"])
            elif row.get("error_type") or row.get("error"):  # a failed call: replayed as one
                record.update(error=row.get("error") or "", error_type=row.get("error_type"))
            else:  # neither an answer nor an error (a 200 without text): replayed as the empty answer it was
                record.update(output="", finish_reason=row["finish_reason"])
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            written += 1
    return written


def main(argv: list[str] | None = None) -> int:
    """The command line: ``<run dir> <out.jsonl>``; exit 0 after writing, 2 on bad usage or a run without results."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        sys.stderr.write("usage: python -m runner.llm.recordings_export <run dir> <out.jsonl>\n")
        return 2
    try:
        written = export_run(Path(args[0]), Path(args[1]))
    except FileNotFoundError as exc:
        sys.stderr.write(f"recordings_export: {exc.filename}: no such file (has the run finished?)\n")
        return 2
    sys.stdout.write(f"wrote {written} recordings to {args[1]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
