"""Static HTML reports of a run and of a sweep: one self-contained file each, opened without a server.

Plots are PNGs embedded as base64 data URIs, so ``report.html`` is the only file to keep, copy or log.
Titles, labels and override values are data: the template autoescapes them, and plot text goes
through :func:`runner.outputs.frontier.literal` so matplotlib does not read a ``$`` in a label as math.
"""

from __future__ import annotations

import base64
import logging
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from jinja2 import Environment
from markupsafe import Markup

from runner.modes import catalog
from runner.modes.base import Document, View, cell
from runner.modes.drilldown import Drilldown
from runner.modes.sections import EndedReport, Gate
from runner.outputs import frontier, item_report, sweep, sweep_best, sweep_items
from runner.outputs.report_plots import bars_png, confusion_png, histogram_png, verdict_png, wilson

log = logging.getLogger(__name__)

REPORT_NAME = "report.html"
PLOTS_OFF = "No figure: plots are off (output.plots=false)."  # where a section's figure would be

TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ title }}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222;
overflow-wrap:break-word}
.scroll{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;margin:.5em 0;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}td.long{overflow-wrap:anywhere;
min-width:12em}
th{background:#f3f3f3}
img{max-width:100%;border:1px solid #eee}.note{color:#555;font-size:13px}
{{ item_css }}{% if wide %}body{max-width:none}{% endif %}
</style></head><body>
<h1>{{ title }}</h1>
{% for s in sections %}<section><h2>{{ s.heading }}</h2>
{% if s.image %}<img alt="{{ s.heading }}" src="data:image/png;base64,{{ s.image }}">{% elif s.plot_off %}
<p class="note">{{ plots_off }}</p>{% endif %}
{% if s.columns %}{% if s.collapsed %}<details><summary>{{ s.rows|length }} rows</summary>{% endif %}
<div class="scroll"><table><thead><tr>{% for c in s.columns %}<th>{{ c }}</th>{% endfor %}</tr></thead><tbody>
{% for row in s.rows %}<tr>{% for cell in row %}<td{% if cell is string and cell|length > 40 and " " not in cell
%} class="long"{% endif %}>{% if cell.href is defined %}<a href="{{ cell.href }}">{{ cell.text
}}</a>{% else %}{{ cell }}{% endif %}</td>{% endfor %}</tr>
{% endfor %}</tbody></table></div>{% if s.collapsed %}</details>{% endif %}{% endif %}
{% if s.html %}{% for part in s.html() %}{{ part }}{% endfor %}{% endif %}
{% for note in s.notes %}<p class="note">{{ note }}</p>{% endfor %}
</section>
{% endfor %}</body></html>
"""


CSS = item_report.CSS + sweep_items.CSS  # the blocks drawn by their own modules (a run's items, a sweep's items)


@dataclass(frozen=True)
class Link:
    """A table cell that links to another file (relative to the report): its text and its address."""

    text: str
    href: str


@dataclass(frozen=True)
class Section:
    """One heading of a report: an optional plot (PNG bytes), an optional table, notes."""

    heading: str
    png: bytes = b""
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[str | Link, ...], ...] = ()
    notes: tuple[str, ...] = ()
    collapsed: bool = False
    # a block drawn by its own module (the drill-down), placed as it is: its pieces, drawn as the page is written
    html: Callable[[], Iterable[Markup]] | None = None
    plot_off: bool = False  # a figure not drawn (output.plots=false): PLOTS_OFF stands where it would be

    @property
    def image(self) -> str:
        """The plot as base64 text for a data URI."""
        return base64.b64encode(self.png).decode("ascii")


def render(title: str, sections: Sequence[Section], wide: bool = False) -> str:
    """The HTML page: the sections in order, every text autoescaped; ``wide``: as wide as the window (a sweep's
    tables have a column per override and metric, or per job)."""
    return Environment(autoescape=True).from_string(TEMPLATE).render(title=title, sections=sections,
                                                                     item_css=Markup(CSS), wide=wide,
                                                                     plots_off=PLOTS_OFF)


def write_page(path: Path, title: str, sections: Sequence[Section]) -> None:
    """Write :func:`render`'s page to ``path`` piece by piece, byte for byte the same.

    The page is never one string: with the drill-down it is megabytes (~4.4 MB at 1,000 items), twice that as a
    str once the run name holds a character beyond Latin-1, and ``write_text`` encodes it in one buffer of up to
    three bytes per character besides, all at the run's peak memory (22 MB of the 1,000-judgment run's peak).
    Written to a temporary file renamed at the end, so a failure leaves no half page.
    """
    pieces = Environment(autoescape=True).from_string(TEMPLATE).generate(title=title, sections=sections,
                                                                         item_css=Markup(CSS), plots_off=PLOTS_OFF)
    unfinished = path.with_name(path.name + ".unfinished")
    try:
        with unfinished.open("w", encoding="utf-8") as out:
            out.writelines(pieces)
        unfinished.replace(path)
    finally:
        unfinished.unlink(missing_ok=True)


def _bounds_of(key: str) -> tuple[str, str]:
    """A metric's interval bounds: ``<metric>_ci_low`` / ``<metric>_ci_high``, as every metric names them."""
    return f"{key}_ci_low", f"{key}_ci_high"


def with_ci(metrics: Mapping[str, float], key: str) -> str:
    """A metric's cell with its interval beside it when both bounds are there: ``0.955 [0.9167, 0.9761]``."""
    low, high = (metrics.get(b) for b in _bounds_of(key))
    text = cell(metrics[key])
    return text if low is None or high is None else f"{text} [{cell(low)}, {cell(high)}]"


def _shown_bounds(metrics: Mapping[str, float]) -> set[str]:
    """The CI bounds drawn beside their metric (so not on rows of their own)."""
    return {b for key in metrics for b in _bounds_of(key)
            if all(metrics.get(x) is not None for x in _bounds_of(key))}


def _headline_cell(metrics: Mapping[str, float], key: str, name: str, by_name: Mapping[str, str]) -> str:
    """A headline value as the sweep table and the console show it (a rate the console prints as a percentage)."""
    if name in sweep.PERCENT_COLUMNS:
        count = sweep.COUNT_OF.get(name)
        return sweep.percent_cell(metrics[key], metrics.get(by_name[count]) if count else None)
    return with_ci(metrics, key)


# the headline's labels where the sweep table's short column name is not enough on its own
LABELS = {"unscored": "unscored calls (share of calls)", "items/total": "items",
          "cost/unknown_calls": "calls litellm could not price",
          "cost/list_unpriced_calls": "calls without a list price"}
SAME_AS = {"accuracy/mean": "agreement/accuracy_all"}  # one row when both are the same number


def _headline(metrics: Mapping[str, float]) -> Section:
    bounds = _shown_bounds(metrics)
    counts = {key for key, name in sweep.HEADLINE.items() if name in sweep.COUNT_OF.values()}
    same = {k for k, other in SAME_AS.items() if metrics.get(k) is not None and metrics.get(k) == metrics.get(other)}
    by_name = {name: key for key, name in sweep.HEADLINE.items()}
    labels = {**LABELS, **{sweep.HEADLINE[other]: f"{sweep.HEADLINE[other]} (= {sweep.HEADLINE[k]})" for k in same
                           for other in (SAME_AS[k],)}}
    hidden = bounds | counts | same
    rows = [(labels.get(name, name), _headline_cell(metrics, key, name, by_name))
            for key, name in sweep.HEADLINE.items() if metrics.get(key) is not None and key not in hidden]
    if metrics.get("judge/parse_failure_rate") is None and metrics.get("judge/unscored") is not None:
        rows.append((LABELS["unscored"], cell(metrics["judge/unscored"])))
    for key in ("items/total", "cost/unknown_calls", "cost/list_unpriced_calls"):
        if metrics.get(key) is not None:
            rows.append((LABELS[key], cell(metrics[key])))
    return Section("Headline", columns=("metric", "value"), rows=tuple(rows),
                   notes=("value [95% confidence interval]",) if bounds else ())


@dataclass(frozen=True)
class RunHeader:
    """What a run's report says it is, above everything else: the choices, the date, and where it links to."""

    facts: tuple[tuple[str, str | Link], ...]  # (what, value): judge, prompt, rubric, dataset, date, MLflow, sweep
    in_title: tuple[str, ...] = ()  # the facts the title adds to the run's name (judge, prompt, rubric, ...)

    def title(self, name: str) -> str:
        """The run's name with what it is: ``gpt4 · vanilla (judge replay_gpt4, prompt ..., 2026-11-28 02:14 UTC)``."""
        shown = [f"{what} {value}" if what != "date" else str(value) for what, value in self.facts
                 if what in self.in_title]
        return f"{name} ({', '.join(shown)})" if shown else name

    def section(self, gates: Sequence[Gate]) -> Section:
        """The first section: the facts, then each gate's PASS/FAIL."""
        rows = (*self.facts, *((f"gate {g.name}", ("PASS " if g.passed else "FAIL ") + str(g.message)) for g in gates))
        return Section("This run", columns=("what", "value"), rows=rows)


def titled(title: str, gates: Sequence[Gate]) -> str:
    """The page title with the gates' verdict: ``... - gates PASS`` or ``... - gates FAIL``."""
    if not gates:
        return title
    return f"{title} - gates {'PASS' if all(g.passed for g in gates) else 'FAIL'}"


__all__ = ["LABELS", "Link", "RunHeader", "Section", "bars_png", "confusion_png", "histogram_png", "render",
           "run_report", "run_sections", "sweep_report", "titled", "verdict_png", "wilson", "write_page",
           "write_run_report", "write_sweep_report"]

PLOTS: dict[str, Callable[..., bytes]] = {"verdicts": verdict_png, "confusion": confusion_png,
                                          "histogram": histogram_png, "bars": bars_png}


def view_section(view: View, plots: bool = True) -> Section:
    """Draw a mode's view (runner.modes.base.View): its plot by kind (``plots`` false: none, PLOTS_OFF in its
    place), its table's cells formatted."""
    png = PLOTS[view.plot](**view.data) if view.plot is not None and plots else b""
    rows = tuple(tuple(cell(value) for value in row) for row in view.rows)
    return Section(view.title, png, view.columns, rows, view.notes, plot_off=view.plot is not None and not plots)


def run_report(summary: Document, metrics: Mapping[str, float], title: str, mode: str,
               drilldown: Drilldown | None = None, plots: bool = True) -> str:
    """The HTML report of one run titled ``title`` (the run name): :func:`run_sections` drawn by :func:`render`."""
    return render(title, run_sections(summary, metrics, mode, drilldown, plots=plots))


def run_sections(summary: Document, metrics: Mapping[str, float], mode: str, drilldown: Drilldown | None = None,
                 header: RunHeader | None = None, plots: bool = True) -> list[Section]:
    """The sections of one run's HTML report: what the run is with its gates (first, so a failed gate is seen
    first), headline, its mode's views (runner.modes.base.RunMode.views), all metrics and the items' drill-down.

    Args:
        summary: The run's typed report (a run draws the one it holds: its summary dict, a second copy of every
            item's result, is dropped before drawing, issue 12), or a summary.json document, read leniently.
        metrics: The run's flat metrics (metrics.json).
        mode: The run's mode (``prompt.mode``: pairwise or pointwise).
        drilldown: The items with their inputs, answers and flags (runner.modes.drilldown.build), or None.
        header: What the run is and where it links to (:class:`RunHeader`); without one, the gates have a section.
        plots: Draw the views' figures (``output.plots``); false: every table, no figure, no matplotlib.
    """
    run_mode = catalog.mode_named(mode)
    report = run_mode.read(summary, lenient=True)
    gates = _gates(report)
    sections = [header.section(gates)] if header is not None else []
    if gates and header is None:
        sections.append(Section("Gates", columns=("gate", "result", "message"), rows=tuple(
            (g.name, "PASS" if g.passed else "FAIL", str(g.message)) for g in gates)))
    sections += [_headline(metrics), *(view_section(view, plots) for view in run_mode.views(report))]
    bounds = _shown_bounds(metrics)
    sections.append(Section("All metrics", columns=("metric", "value [95% CI]"), collapsed=True,
                            rows=tuple((k, with_ci(metrics, k)) for k in sorted(metrics) if k not in bounds)))
    if drilldown is not None:  # last: the run's figures first, then its items (hundreds of rows)
        sections.append(Section(item_report.heading(drilldown), html=partial(item_report.pieces, drilldown)))
    return sections


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
                  cell(c["difference"]), cell(c["p_value"]), cell(c["p_holm"]), cell(c["cost_usd_list"]),
                  cell(c["cost_usd"])) for i, c in enumerate(answer["configurations"]))
    return Section("Best configuration", columns=("config", "tied with best", str(answer["metric"]), "difference",
                                                  "p", "p (Holm)", "list $", "cost $"),
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
        plots: Draw the frontier when ``frontier_png`` is None (false: its table, PLOTS_OFF in its plot's place).
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


def write_run_report(run_dir: Path, summary: Document, metrics: Mapping[str, float], title: str, mode: str,
                     drilldown: Callable[[], Drilldown] | None = None, header: RunHeader | None = None,
                     plots: bool = True) -> Path | None:
    """Write ``run_dir/report.html`` of the run's typed report (or a summary.json document, see
    :func:`run_sections`), titled with its gates' verdict; returns its path, or None (with a warning) when it could
    not be made.

    The run's results are already on disk when this is called: a failing plot must not fail the run. ``drilldown``
    builds the items' drill-down (it reads the answers and the dataset again), inside the same guard. ``plots``
    false (``output.plots``): no figure is drawn (:func:`run_sections`).
    """
    path = run_dir / REPORT_NAME
    try:
        report = catalog.mode_named(mode).read(summary, lenient=True)
        write_page(path, titled(header.title(title) if header else title, _gates(report)), run_sections(
            report, metrics, mode, drilldown() if drilldown is not None else None, header, plots))
    except Exception as exc:  # noqa: BLE001 - the report is a view of files already written
        log.warning("report.html not written: %s: %s", type(exc).__name__, exc)
        return None
    return path


def _gates(report: object) -> tuple[Gate, ...]:
    """A mode's typed report's gates (every mode's report is an EndedReport: runner.modes.base.register checks)."""
    return typing.cast(EndedReport, report).gates or ()


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
