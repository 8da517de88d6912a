"""The sweep table: one row per job of a multirun, written when the sweep ends.

Each row holds the job's Hydra overrides and its headline metrics (with their confidence intervals),
calls, tokens, cost and wall time, read from the job directory (``.hydra/overrides.yaml`` and
``metrics.json``), so the table needs neither MLflow nor a shared process: it works the same for jobs
run by any launcher. A job that failed before writing its metrics is a row with status ``failed``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from runner.core.metric_names import old_names
from runner.modes import statistics
from runner.modes.base import cell

TABLE_CSV = "sweep_table.csv"
TABLE_JSON = "sweep_table.json"
FAILURE_NAME = "failure.json"  # written into a job directory by the job that failed (runner/app/cli.py)
UNTRACKED_NAME = "tracking_failure.json"  # a job whose files are complete but whose MLflow tracking failed
# metric -> column; those no job has are left out
HEADLINE = {
    "accuracy/mean": "accuracy", "agreement/accuracy_all": "agreement", "agreement/accuracy_all_ci_low": "agr low",
    "agreement/accuracy_all_ci_high": "agr high", "agreement/cohen_kappa": "kappa", "agreement/macro_f1": "macro-F1",
    "bias/position_consistency": "consistency",
    # three numbers, three names (docs/methods.md): the users' ``ours_win_rate`` (strict wins over the items with a
    # verdict) and the ties-half rate (a tie half a win); the sweep's best is on the win score (per judgment)
    "verdict/ours_wins_share": "ours_win_rate", "verdict/win_rate": "ties-half rate",
    "verdict/win_rate_ci_low": "th low", "verdict/win_rate_ci_high": "th high", "score/mean": "mean score",
    "score/mean_ci_low": "score low", "score/mean_ci_high": "score high", "pass/rate": "pass rate",
    "judge/parse_failure_rate": "unscored", "judge/unscored": "unscored n", "judge/calls": "calls",
    "tokens/total": "tokens", "cost/usd_total": "cost $", "cost/usd_list": "list $", "run/wall_s": "wall s",
}
# Rates the run's own headline prints as a percentage: printed so here too (the CSV and JSON keep the fraction).
# ``unscored`` is ``<unscored calls> (<share of the answered calls>)``, as ``judge calls N: unscored K (x%)``.
PERCENT_COLUMNS = ("pass rate", "unscored")
COUNT_OF = {"unscored": "unscored n"}  # a percent column -> its count column (shown in it, not on its own)


def job_overrides(job_dir: Path) -> dict[str, str]:
    """The job's Hydra overrides (``.hydra/overrides.yaml``) as key -> value, a key without Hydra's ``+`` / ``++``
    (``rubric.category_weights.casual.tone``, given as ``++`` by runner.run.open_mappings); empty when it has none."""
    path = job_dir / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return {}
    return dict(item.lstrip("+").split("=", 1) for item in yaml.safe_load(path.read_text()) or [] if "=" in item)


def plots_on(sweep_dir: Path, rows: Sequence[dict[str, Any]]) -> bool:
    """Whether the sweep's report draws its figure: unless every job ran with ``output.plots=false`` (its
    ``.hydra/config.yaml``; a job without one counts as plots on)."""
    return not rows or any(_job_plots(sweep_dir / str(row.get("job"))) for row in rows)


def _job_plots(job_dir: Path) -> bool:
    path = job_dir / ".hydra" / "config.yaml"
    if not path.is_file():
        return True
    output = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("output") or {}
    return output.get("plots", True) is not False


def collect(sweep_dir: Path) -> list[dict[str, Any]]:
    """One row per job directory of ``sweep_dir`` (numbered subdirectories), in job order."""
    jobs = sorted((p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
    rows = []
    for job_dir in jobs:
        metrics_path = job_dir / "metrics.json"
        metrics = json.loads(metrics_path.read_text()) if metrics_path.is_file() else {}
        row: dict[str, Any] = {"job": int(job_dir.name), **job_overrides(job_dir),
                               "status": "ok" if metrics and not (job_dir / FAILURE_NAME).is_file() else "failed"}
        row.update({name: _logged(metrics, key) for key, name in HEADLINE.items()})
        row.update(_statistic_columns(metrics))
        rows.append(row)
    return _drop_empty_columns(rows)


def _logged(metrics: dict[str, Any], key: str) -> Any:
    """``metrics[key]``, or its value under an old name (a run written before the key was renamed), or None."""
    return next((metrics[name] for name in (key, *old_names(key)) if name in metrics), None)


def _statistic_columns(metrics: dict[str, Any]) -> dict[str, Any]:
    """The metrics of the registered statistics (runner.modes.statistics), under their own keys."""
    families = statistics.families()
    return {key: value for key, value in sorted(metrics.items()) if key.split("/", 1)[0] in families}


def is_statistic(name: str) -> bool:
    """Whether a sweep-table column is a registered statistic's (runner.modes.statistics), not an override."""
    return "/" in name and name.split("/", 1)[0] in statistics.families()


def write_failure(job_dir: Path, reason: str) -> None:
    """Mark a job directory as failed (with why), for the sweep table and the launching process's exit code."""
    (job_dir / FAILURE_NAME).write_text(json.dumps({"reason": reason}, ensure_ascii=False) + "\n", encoding="utf-8")


def _drop_empty_columns(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    empty = {name for name in HEADLINE.values() if all(row.get(name) is None for row in rows)}
    return [{k: v for k, v in row.items() if k not in empty} for row in rows]


def write(sweep_dir: Path, rows: Sequence[dict[str, Any]]) -> list[Path]:
    """Write the table as CSV and JSON into the sweep directory; returns the two paths."""
    import pandas as pd  # pandas only when a sweep ends (a single run never pays its import)

    frame = pd.DataFrame(list(rows))
    csv_path, json_path = sweep_dir / TABLE_CSV, sweep_dir / TABLE_JSON
    frame.to_csv(csv_path, index=False)
    json_path.write_text(json.dumps(list(rows), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return [csv_path, json_path]


CI_COLUMNS = {"agreement": ("agr low", "agr high"), "ties-half rate": ("th low", "th high"),
              "mean score": ("score low", "score high")}


def percent_cell(value: float | None, count: float | None = None) -> str:
    """A rate as the run's headline prints it: ``50.0%``, or with its count, ``1 (3.3%)``; ``-`` when missing."""
    if value is None:
        return cell(value)
    share = f"{value * 100:.1f}%"
    return share if count is None else f"{count:.0f} ({share})"


def _percent(row: dict[str, Any], name: str) -> str:
    return percent_cell(row.get(name), row.get(COUNT_OF.get(name, "")))


def shown_cell(row: dict[str, Any], name: str) -> str:
    """A cell, with its CI bounds appended where the table has them: ``0.955 [0.92, 0.975]``."""
    if name in PERCENT_COLUMNS:
        return _percent(row, name)
    low, high = CI_COLUMNS.get(name, (f"{name}_ci_low", f"{name}_ci_high") if is_statistic(name) else ("", ""))
    if not low or row.get(low) is None or row.get(name) is None:
        return cell(row.get(name))
    return f"{cell(row[name])} [{cell(row[low])}, {cell(row[high])}]"


WIDTH = 120  # the table's width where the console has none (a log file, a pipe): it fits an ordinary terminal
PAD = 3  # a column's borders and padding in a rich Table


def _shared_prefix(values: list[str]) -> str:
    """The ``_``-ended prefix every value of a column shares (``replay_`` of replay_gpt4 and replay_chatgpt)."""
    common = os.path.commonprefix(values)
    cut = common.rfind("_") + 1
    return common[:cut] if len(values) > 1 and all(len(v) > cut for v in values) else ""


def _cells(rows: Sequence[dict[str, Any]], name: str, is_key: bool) -> list[str]:
    """A column's cells: a CI on its own line under the value, a shared prefix of a chosen option dropped (the
    CSV and JSON keep every value whole)."""
    shown = [shown_cell(row, name) for row in rows]
    if is_key and "." not in name and not any("/" in cell for cell in shown):  # a group's options, not paths
        prefix = _shared_prefix(shown)
        return [cell.removeprefix(prefix) for cell in shown]
    return [cell.replace(" [", "\n[", 1) for cell in shown]


def _width(header: str, cells: list[str]) -> int:
    return max(len(line) for text in (header, *cells) for line in text.splitlines()) + PAD


def _chunks(widths: dict[str, int], keys: list[str], room: int) -> list[list[str]]:
    """Metric columns in groups that fit ``room`` beside the key columns (each group is printed as one table)."""
    free = room - 1 - sum(widths[k] for k in keys)
    chunks: list[list[str]] = [[]]
    for name, width in widths.items():
        if name in keys:
            continue
        if chunks[-1] and sum(widths[n] for n in chunks[-1]) + width > free:
            chunks.append([])
        chunks[-1].append(name)
    return chunks


def render(rows: Sequence[dict[str, Any]], console: Console | None = None) -> None:
    """Print the table, CIs under their metric (values as data, never rich markup), in the console's width: the
    metrics that do not fit beside the job's overrides go to a second table (and a third...), each again with
    the overrides, so no column is cut."""
    console = console or Console()
    if not console.is_terminal:
        console = Console(width=WIDTH, file=console.file)
    if not rows:
        return
    stats = {k for row in rows for k in row if is_statistic(k)}
    bounds = {b for pair in CI_COLUMNS.values() for b in pair} | set(COUNT_OF.values())
    bounds |= {k for k in stats if k.endswith(("_ci_low", "_ci_high"))}
    metrics = set(HEADLINE.values()) | {"job", "status"} | stats
    # overrides every job shares (a tracking URI, max_items) are in the files; the screen shows what varies
    same = {k for k in rows[0] if k not in metrics and all(row.get(k) == rows[0][k] for row in rows)}
    columns = [k for k in dict.fromkeys(k for row in rows for k in row) if k not in bounds | same]
    keys = [k for k in columns if k == "job" or k not in metrics]
    headers = {name: name.replace("/", "/\n") for name in columns}  # by_category/math/win_rate: three short lines
    cells = {name: _cells(rows, name, name in keys and name != "job") for name in columns}
    widths = {name: _width(headers[name], cells[name]) for name in columns}
    # the overrides take at most half the width (a long value, a path, is folded): the metrics need the rest
    cap = max(12, console.width // 2 // len(keys))
    widths.update({k: min(widths[k], cap) for k in keys})
    chunks = _chunks(widths, keys, console.width)
    for n, chunk in enumerate(chunks):
        title = f"sweep: {len(rows)} jobs" + (f" ({n + 1}/{len(chunks)})" if len(chunks) > 1 else "")
        table = Table(title=title, title_justify="left")
        for name in [*keys, *chunk]:
            table.add_column(headers[name], overflow="fold", max_width=widths[name] - PAD if name in keys else None)
        for r in range(len(rows)):
            table.add_row(*(Text(cells[name][r]) for name in [*keys, *chunk]))
        console.print(table)


def summary_metrics(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Counts for the sweep's MLflow run: jobs, failed jobs, total cost."""
    return {"sweep/jobs": float(len(rows)), "sweep/failed": float(sum(r["status"] == "failed" for r in rows)),
            "sweep/cost_usd": float(sum(r.get("cost $") or 0.0 for r in rows))}
