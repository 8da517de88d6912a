"""A sweep's static HTML report (report.html in the sweep dir): its answer, the sweep table, the cost-quality
frontier (table and plot; frontier.csv and frontier.png beside it) and the item x configuration view. The page is
drawn by :mod:`runner.outputs.html_report` (one self-contained file, the same template as a run's report).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from runner.modes.base import cell
from runner.outputs import frontier, sweep, sweep_best, sweep_items
from runner.outputs.html_report import REPORT_NAME, Link, Section, render

log = logging.getLogger(__name__)

__all__ = ["sweep_report", "write_sweep_report"]


def _table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None,
           links: Mapping[int, str] | None = None) -> tuple[tuple, tuple]:
    """Columns and formatted cells; a column's CI bounds (runner.outputs.sweep.CI_COLUMNS, a statistic's
    ``_ci_low``/``_ci_high``) go beside its value, and the ``job`` cell links to the job's report when it has one."""
    columns = list(columns or dict.fromkeys(k for row in rows for k in row))
    beside = {name: pair for name in columns if (pair := sweep.CI_COLUMNS.get(name, (f"{name}_ci_low",
                                                                                     f"{name}_ci_high")))
              and all(b in columns for b in pair)}
    bounds = {b for pair in beside.values() for b in pair}
    shown = [c for c in columns if c not in bounds]

    def draw(row: Mapping[str, Any], column: str) -> str | Link:
        if column == "job" and links and row.get("job") in links:
            return Link(cell(row["job"]), links[row["job"]])
        low, high = (row.get(b) for b in beside.get(column, ("", "")))
        if row.get(column) is None or low is None or high is None:
            return cell(row.get(column))
        return f"{cell(row[column])} [{cell(low)}, {cell(high)}]"

    return tuple(f"{c} [95% CI]" if c in beside else c for c in shown), tuple(
        tuple(draw(row, c) for c in shown) for row in rows)


def _frontier_section(frontier_rows: Sequence[Mapping[str, Any]], quality_key: str, png: bytes | None,
                      links: Mapping[int, str] | None = None, plots: bool = True) -> Section:
    ci = [k for k in sweep.CI_COLUMNS.get(quality_key, ()) if k]
    columns, rows = _table(frontier.ordered([dict(r) for r in frontier_rows]), ["job", frontier.LABEL, quality_key, *ci,
                                                                   frontier.COST_PER_1K, frontier.PARETO], links)
    notes = ["Cost: the list price of each config's judge calls (cached and replayed ones included, replays at "
             "their judge's price_as) per 1,000 items, not what the sweep paid.",
             "Pareto-optimal: no other config has lower-or-equal cost per 1,000 items and higher-or-equal "
             f"{quality_key}, one of them strictly; equal configs are all kept, and configs that cost nothing "
             "compete on quality alone."]
    unpriced = [r for r in frontier_rows if (r.get(frontier.UNPRICED) or 0) > 0]
    if unpriced:
        notes.append(f"{len(unpriced)} of {len(frontier_rows)} configs made calls litellm could not price "
                     "(local judges without price_as): their cost is a lower bound.")
    if png is None and plots:
        png = frontier.frontier_png([dict(r) for r in frontier_rows], quality_key)
    return Section("Cost-quality frontier", png or b"", columns, rows, tuple(notes), plot_off=not png)


def _shared_overrides(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The overrides (text columns) every job of a sweep of two or more has with the same value: said once under
    the table rather than repeated on each row (paths, mostly, that would make it wider than the window)."""
    if len(rows) < 2:
        return {}
    columns = dict.fromkeys(k for row in rows for k in row if k not in ("job", "status"))
    return {c: rows[0][c] for c in columns if all(isinstance(row.get(c), str) and row.get(c) == rows[0].get(c)
                                                   for row in rows)}


def _best_section(answer: Mapping[str, Any]) -> Section:
    """The sweep's answer (runner.outputs.sweep_best): its lines, then one row per configuration."""
    rows = tuple((str(c["config"]), "best" if i == 0 else "yes" if c["tied_with_best"] else "no", cell(c["value"]),
                  cell(c["difference"]), cell(c["against"]), cell(c["p_value"]), cell(c["p_holm"]),
                  cell(c["cost_usd_list"]), cell(c["cost_usd"])) for i, c in enumerate(answer["configurations"]))
    return Section("Best configuration", columns=("config", "tied with best", str(answer["metric"]), "difference",
                                                  "better one", "p (one-sided)", "p (adjusted)", "list $",
                                                  "cost $"),
                   rows=rows, notes=tuple(line.strip() for line in sweep_best.lines(answer)))


def sweep_report(rows: Sequence[Mapping[str, Any]], frontier_rows: Sequence[Mapping[str, Any]] | None,
                 title: str, quality_key: str = "agreement", frontier_png: bytes | None = None,
                 links: Mapping[int, str] | None = None, answer: Mapping[str, Any] | None = None,
                 items: sweep_items.ItemView | None = None, plots: bool = True) -> str:
    """The HTML report of a sweep: its answer (the best configuration and those tied with it) when there is one,
    the sweep table, the frontier (table and plot) when there is one, then the item view (one row per item, one
    column per job) when ``items`` is given.

    Args:
        rows: The sweep table (:func:`runner.outputs.sweep.collect`).
        frontier_rows: The output of :func:`runner.outputs.frontier.frontier`, or None/empty when no job has
            ``quality_key``.
        title: The page title.
        quality_key: The quality column of the frontier.
        frontier_png: The frontier plot when already drawn (else it is drawn here).
        links: Job number -> the address of its report.html relative to this report; its ``job`` cells link there.
        answer: The output of :func:`runner.outputs.sweep_best.answer`, or None.
        items: The sweep's items as each job judged them (:func:`runner.outputs.sweep_items.collect`).
        plots: Draw the frontier when ``frontier_png`` is None (false: its table, html_report.PLOTS_OFF in its
            plot's place).
    """
    shared = _shared_overrides(rows)
    columns, cells = _table(rows, [c for c in dict.fromkeys(k for row in rows for k in row) if c not in shared],
                            links)
    notes: tuple[str, ...] = ("job: opens that job's report.html; value [95% confidence interval]",) if links else ()
    if shared:
        notes += ("The same in every job: " + ", ".join(f"{k}={v}" for k, v in shared.items()),)
    sections = [_best_section(answer)] if answer else []
    sections.append(Section(f"Jobs ({len(rows)})", columns=columns, rows=cells, notes=notes))
    if frontier_rows:
        sections.append(_frontier_section(frontier_rows, quality_key, frontier_png, links, plots))
    else:
        sections.append(Section("Cost-quality frontier", notes=(f"No job has {quality_key!r}: no frontier.",)))
    if items is not None:
        sections.append(_items_section(items, links or {}))
    return render(title, sections, wide=True)


def _items_section(items: sweep_items.ItemView, links: Mapping[int, str]) -> Section:
    """The sweep's item x configuration view (its own module draws it)."""
    return Section(f"Items x configurations ({len(items.items)} items, {len(items.columns)} jobs)",
                   html=partial(sweep_items.pieces, items, links),
                   notes=("Each cell: the job's final verdict or score, with correct/wrong against gold or "
                          "pass/fail against the threshold; it opens the item in that job's report.html. Column "
                          "heads: the job's headline metric [95% CI].",))


def _sweep_items(sweep_dir: Path, rows: Sequence[Mapping[str, Any]]) -> sweep_items.ItemView | None:
    """The sweep's item view, or None (with a warning) when a job's files cannot be read: the rest of the report
    is still written."""
    try:
        return sweep_items.collect(sweep_dir, rows)
    except Exception as exc:  # noqa: BLE001 - a view of files already written
        log.warning("the sweep report's item view not drawn: %s: %s", type(exc).__name__, exc)
        return None


def write_sweep_report(sweep_dir: Path, rows: Sequence[dict[str, Any]], quality_key: str = "agreement",
                       answer: Mapping[str, Any] | None = None) -> list[Path]:
    """Write frontier.csv and frontier.png (when a job has ``quality_key``) and report.html (with the sweep's
    ``answer``, runner.outputs.sweep_best, when given) into the sweep dir. No frontier.png (and no figure in
    report.html) when every job ran with ``output.plots=false`` (:func:`runner.outputs.sweep.plots_on`).

    Returns:
        The files written, report.html last; empty (with a warning) when the report could not be made.
    """
    try:
        front = frontier.frontier(frontier.with_job_counts(sweep_dir, rows), quality_key=quality_key)
        files, png, plots = [], None, sweep.plots_on(sweep_dir, rows)
        compared = any(r.get(quality_key) is not None for r in front)
        if compared:
            files.append(frontier.write_csv(sweep_dir / frontier.FRONTIER_CSV, front, quality_key))
        if compared and plots:
            png = frontier.frontier_png(front, quality_key)  # drawn once: the PNG file and the report share it
            (sweep_dir / frontier.FRONTIER_PNG).write_bytes(png)
            files.append(sweep_dir / frontier.FRONTIER_PNG)
        path = sweep_dir / REPORT_NAME
        links = {row["job"]: f"{row['job']}/{REPORT_NAME}" for row in rows
                 if (sweep_dir / str(row.get("job")) / REPORT_NAME).is_file()}
        path.write_text(sweep_report(rows, front if compared else None, f"sweep {sweep_dir}", quality_key, png, links,
                                     answer, _sweep_items(sweep_dir, rows), plots), encoding="utf-8")
    except Exception as exc:  # noqa: BLE001 - the sweep table is written; the report is a view of it
        log.warning("sweep report not written: %s: %s", type(exc).__name__, exc)
        return []
    return [*files, path]
