"""Static HTML reports of a run (here) and of a sweep (:mod:`runner.outputs.sweep_page`, drawn with this
module's page): one self-contained file each, opened without a server.

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

from jinja2 import Environment
from markupsafe import Markup

from runner.modes import catalog
from runner.modes.base import Document, View, cell
from runner.modes.drilldown import Drilldown
from runner.modes.sections import EndedReport, Gate
from runner.outputs import item_report, report_links, sweep, sweep_items
from runner.outputs.report_plots import bars_png, confusion_png, histogram_png, verdict_png, wilson

log = logging.getLogger(__name__)

REPORT_NAME = report_links.REPORT_NAME
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
{{ slot }}<p class="note framed" data-framed hidden></p>
{% for s in sections %}<section><h2>{{ s.heading }}</h2>
{% if s.image %}<img alt="{{ s.heading }}" src="data:image/png;base64,{{ s.image }}">{% elif s.plot_off %}
<p class="note">{{ plots_off }}</p>{% endif %}
{% if s.columns %}{% if s.collapsed %}<details><summary>{{ s.rows|length }} rows</summary>{% endif %}
<div class="scroll"><table><thead><tr>{% for c in s.columns %}<th>{{ c }}</th>{% endfor %}</tr></thead><tbody>
{% for row in s.rows %}<tr>{% for cell in row %}<td{% if cell is string and cell|length > 40 and " " not in cell
%} class="long"{% endif %}>{% if cell.href is defined %}<a href="{{ cell.href }}"{% if cell.back
%} data-back{% endif %}>{{ cell.text }}</a>{% else %}{{ cell }}{% endif %}</td>{% endfor %}</tr>
{% endfor %}</tbody></table></div>{% if s.collapsed %}</details>{% endif %}{% endif %}
{% if s.html %}{% for part in s.html() %}{{ part }}{% endfor %}{% endif %}
{% for note in s.notes %}<p class="note">{{ note }}</p>{% endfor %}
</section>
{% endfor %}<script>{{ links }}</script></body></html>
"""

CSS = item_report.CSS + sweep_items.CSS  # the blocks drawn by their own modules (a run's items, a sweep's items)
# what every page has besides its sections: the CSS, the note standing in for a figure not drawn, the slot of its
# MLflow run's link (filled once the run exists: runner.outputs.report_links) and its links' script
_PAGE = {"item_css": Markup(CSS), "plots_off": PLOTS_OFF, "slot": report_links.SLOT,
         "links": Markup(report_links.SCRIPT)}


@dataclass(frozen=True)
class Link:
    """A table cell that links to another file (relative to the report): its text and its address."""

    text: str
    href: str
    back: bool = False  # the way back to the sweep report: it keeps the view the sweep report was left in


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
    return Environment(autoescape=True).from_string(TEMPLATE).render(title=title, sections=sections, wide=wide,
                                                                     **_PAGE)


def write_page(path: Path, title: str, sections: Sequence[Section]) -> None:
    """Write :func:`render`'s page to ``path`` piece by piece, byte for byte the same.

    The page is never one string: with the drill-down it is megabytes (~4.4 MB at 1,000 items), twice that as a
    str once the run name holds a character beyond Latin-1, and ``write_text`` encodes it in one buffer of up to
    three bytes per character besides, all at the run's peak memory (22 MB of the 1,000-judgment run's peak).
    Written to a temporary file renamed at the end, so a failure leaves no half page.
    """
    pieces = Environment(autoescape=True).from_string(TEMPLATE).generate(title=title, sections=sections, **_PAGE)
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
           "run_report", "run_sections", "titled", "verdict_png", "wilson", "write_page",
           "write_run_report"]

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
