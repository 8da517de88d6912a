"""The sweep report's item view: one row per item, one column per job (configuration), each cell the job's verdict or
score with a chip (correct / wrong against gold, pass / fail against the threshold, unscored, the job failed), each
column headed by the job's headline metric and its interval, each cell a link to the item in that job's report.html.
Each row shows the item's own text (its variables and candidates, each cut to :data:`TEXT_CHARS`, folded under its
start), read again from the dataset the first job that judged it loaded (:mod:`runner.outputs.trace_inputs`); the
search covers ids, texts and verdicts.

The view's state (filter, tag, search, page, scroll position) is kept in the page's address (``#sweep-items&f=...``)
and carried to the job's report a cell opens (``?back=...``), whose link back returns to it.

Read from each job's run directory: results.jsonl (the items, their gold, tags and category) and summary.json (each
item's outcome as the job's own report draws it, :meth:`runner.modes.base.RunMode.item_outcomes`). The page holds
the view as one compact JSON blob (a string table, one state character per cell) and a small inline script draws
the visible page of rows and runs the filters and the search, so 10,000 items x 20 configurations stay a few MB
that a browser opens at once (``benchmarks/sweep_items_size.py`` measures it); without the script the section says
so. Nothing is fetched: the file stays self-contained.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markupsafe import Markup

from runner.inputs.datasets import ItemRef
from runner.modes.drilldown import ItemOutcome
from runner.outputs import sweep
from runner.outputs.sweep_items_script import CSS as CSS  # the page's style takes it from here
from runner.outputs.sweep_items_script import SCRIPT
from runner.outputs.trace_inputs import ItemInputs
from runner.storage import store

# Cell states, one character each in the blob: correct vs gold, wrong vs gold, pass, fail (threshold or check),
# unscored, no chip (no gold nor threshold), the item absent from the job's results, the job failed.
CORRECT, WRONG, PASS, FAIL, UNSCORED, PLAIN, ABSENT, JOB_FAILED = "cwpfun-x"
# a column's headline: the first it has
HEADLINES = ("agreement", "accuracy", "pass rate", "mean score", "ties-half rate")
PAGE = 100  # rows drawn at once
TEXT_CHARS = 1000  # characters of each of an item's texts the view keeps (the job's report.html has them whole)
PREVIEW = 120  # characters of an item's first text shown before it is unfolded


@dataclass(frozen=True)
class Column:
    """One job of the view: its number, what distinguishes it, its headline, and each item's cell."""

    job: int
    label: str
    headline: str
    cells: Mapping[str, tuple[str, str, str]]  # item id -> (shown text, verdict compared across jobs, state)
    failed: bool = False


@dataclass(frozen=True)
class ItemView:
    """Every item any job judged (dataset order, the first job's first), their tags and categories, the columns."""

    items: tuple[str, ...]
    groups: Mapping[str, tuple[str, ...]]
    columns: tuple[Column, ...]
    texts: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)  # item -> its (field, text)s


def _refs(path: Path) -> list[ItemRef]:
    """The items of one results.jsonl in order, with the gold, human score, tags and category its rows carry."""
    refs: dict[str, ItemRef] = {}
    if not path.is_file():
        return []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if row["item_id"] not in refs:
                refs[row["item_id"]] = ItemRef(row["item_id"], row.get("gold"), "", tuple(row.get("tags") or ()),
                                                row.get("category"), row.get("human_score"))
    return list(refs.values())


def _state(outcome: ItemOutcome, ref: ItemRef) -> str:
    if "unscored" in outcome.flags:
        return UNSCORED
    if "wrong" in outcome.flags:
        return WRONG
    if "failed" in outcome.flags:
        return FAIL
    if outcome.verdict == "pass":
        return PASS
    return CORRECT if ref.gold is not None else PLAIN


def _view(job_dir: Path) -> Mapping[str, Any] | None:
    """The job's view.json (runner.outputs.publishing.write_view), None when it has none."""
    path = job_dir / "view.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _outcomes(job_dir: Path, refs: Sequence[ItemRef], view: Mapping[str, Any] | None
              ) -> dict[str, ItemOutcome] | None:
    """The job's outcome per item (its mode's), or None when it has no summary or no recorded mode."""
    summary_path = job_dir / store.SUMMARY_NAME
    if not summary_path.is_file():
        return None
    params: Mapping[str, Any] = {}
    if view is not None:
        params = view.get("params", {})
    elif (manifest := store.read_manifest(job_dir)) is not None:
        params = manifest.config
    from runner.outputs import results_read  # it imports pandas (~65 MB): a run's own report never needs it

    mode = results_read.run_mode({k: str(v) for k, v in params.items()})
    if mode is None:
        return None
    return mode.item_outcomes(mode.read(json.loads(summary_path.read_text(encoding="utf-8")), lenient=True), refs)


def _labels(rows: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """Each job's overrides (the keys before ``status`` in its sweep-table row) that not every job shares."""
    keys = {row["job"]: list(row)[1:list(row).index("status")] if "status" in row else [] for row in rows}
    varying = {k for ks in keys.values() for k in ks if len({str(r.get(k)) for r in rows}) > 1}
    return {row["job"]: " ".join(f"{k}={row[k]}" for k in keys[row["job"]] if k in varying) or f"job {row['job']}"
            for row in rows}


def _headline(row: Mapping[str, Any]) -> str:
    name = next((n for n in HEADLINES if row.get(n) is not None), None)
    return "" if name is None else f"{name} {sweep.shown_cell(dict(row), name)}"


def collect(sweep_dir: Path, rows: Sequence[Mapping[str, Any]]) -> ItemView:
    """The item view of the sweep in ``sweep_dir`` whose table is ``rows`` (:func:`runner.outputs.sweep.collect`)."""
    labels = _labels(rows)
    items: dict[str, tuple[str, ...]] = {}
    texts: dict[str, tuple[tuple[str, str], ...]] = {}
    columns = []
    for row in rows:
        job_dir = sweep_dir / str(row["job"])
        refs = _refs(job_dir / store.RESULTS_NAME)
        for ref in refs:
            items.setdefault(ref.id, (*ref.tags, *((ref.category,) if ref.category else ())))
        view = _view(job_dir)
        if view is not None and view.get("items"):
            texts.update(_texts(job_dir, view["items"], [r.id for r in refs if r.id not in texts]))
        outcomes = _outcomes(job_dir, refs, view)  # a job failed by a gate has its verdicts: only no summary fails
        cells = {ref.id: (o.final, o.key, _state(o, ref)) for ref in refs
                 if outcomes is not None and (o := outcomes.get(ref.id)) is not None}
        columns.append(Column(int(row["job"]), labels[row["job"]], _headline(row), cells, outcomes is None))
    return ItemView(tuple(items), items, tuple(columns), texts)


def _texts(job_dir: Path, source: Mapping[str, Any], wanted: Sequence[str]) -> dict[str, tuple[tuple[str, str], ...]]:
    """The items' own texts as the job's dataset has them (``source``: its view.json's ``items``), for the ``wanted``
    ids it has (a dataset no longer there: none, with trace_inputs' warning)."""
    if not wanted:
        return {}
    with ItemInputs(job_dir, source, wanted, limit=TEXT_CHARS) as inputs:
        fields = {item: tuple((k, v) for k, v in inputs.get(item).items() if k != "item_id") for item in wanted}
    return {item: shown for item, shown in fields.items() if shown}


def blob(view: ItemView, links: Mapping[int, str]) -> str:
    """The view as compact JSON: a string table ``s``; per job its label, headline, report address and, per item,
    a text and a verdict index into ``s`` and one state character; per item its texts ``x`` (field name's index
    into ``s``, text)."""
    strings: dict[str, int] = {}

    def code(text: str) -> int:
        return strings.setdefault(text, len(strings))

    jobs = []
    for col in view.columns:
        text, verdict, state = [], [], []
        for item in view.items:
            shown, key, st = col.cells.get(item, ("job failed" if col.failed else "-", "",
                                                  JOB_FAILED if col.failed else ABSENT))
            text.append(code(shown))
            verdict.append(code(key))
            state.append(st)
        jobs.append({"job": col.job, "label": col.label, "head": col.headline, "href": links.get(col.job, ""),
                     "t": text, "v": verdict, "st": "".join(state)})
    groups = sorted({g for gs in view.groups.values() for g in gs})
    gcode = {g: n for n, g in enumerate(groups)}
    texts = [[[code(name), text] for name, text in view.texts.get(i, ())] for i in view.items]
    data = {"items": list(view.items), "groups": groups,
            "ig": [[gcode[g] for g in view.groups[i]] for i in view.items], "jobs": jobs, "x": texts,
            "s": list(strings), "page": PAGE, "preview": PREVIEW}
    # inside <script type="application/json">: a "</script" or "<!--" in an id must not end or change the element
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


FILTERS = {"all": "all", "wrong": "wrong somewhere", "disagree": "configs disagree",
           "unscored": "unscored or failed"}

def pieces(view: ItemView, links: Mapping[int, str]) -> Iterator[Markup]:
    """The section's HTML: filters, search, the table's header (one column per job), the blob and the script."""
    yield Markup('<div id="sweep-items"><p class="noscript note">The item view needs JavaScript.</p>'
                 '<div class="filters" role="search">')
    for key, label in FILTERS.items():
        checked = " checked" if key == "all" else ""
        yield Markup('<label><input type="radio" name="sweep-filter" value="{}"{}> {}</label>').format(
            key, Markup(checked), label)
    groups = sorted({g for gs in view.groups.values() for g in gs})
    if groups:
        yield Markup('<label>tag/category <select data-group><option value="">all</option>')
        for n, g in enumerate(groups):
            yield Markup('<option value="{}">{}</option>').format(n, g)
        yield Markup("</select></label>")
    yield Markup('<label>search <input type="search" data-search placeholder="id, item text or verdict"></label>'
                 '<span class="shown" data-shown></span></div><div class="scroll"><table><thead><tr><th class="item">'
                 'item</th>')
    for col in view.columns:
        yield Markup('<th>{}<div class="head">{}</div></th>').format(col.label, col.headline or "-")
    yield Markup('</tr></thead><tbody></tbody></table></div><div class="pager"><button type="button" data-prev>'
                 'previous</button> <span data-page></span> <button type="button" data-next>next</button></div>'
                 '<script type="application/json">')
    yield Markup(blob(view, links))
    yield Markup("</script><script>") + Markup(SCRIPT) + Markup("</script></div>")
