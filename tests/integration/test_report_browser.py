"""report.html in a real headless browser (Debian's chromium): the LLMBar Natural run's report and the replay
sweep's report fit a 1280 px window (closed and with every item opened), the drill-down's filters hide the rows
they should and its search finds an item by its text; screenshots are kept (REPORT_SHOTS=<dir>, else the test's
tmp dir). Skipped, with the reason, where no chromium is installed. ``make report-check`` runs it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from tests.integration.conftest import replay_sweep

pytestmark = pytest.mark.slow
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)
WIDTH = 1280
DATASET = Path(__file__).resolve().parents[2] / "runner" / "data" / "llmbar" / "natural.jsonl"

# Run in the page once it has loaded (copied into a copy of the report): what a person's clicks do, measured.
PROBE = """<script>
window.addEventListener("load", function () {
  var out = {}, box = document.getElementById("items");
  function shown() { return Array.prototype.filter.call(document.querySelectorAll("details.item"),
    function (i) { return !i.hidden; }).map(function (i) { return i.getAttribute("data-id"); }); }
  function set(flag, on) { var c = box.querySelector('input[data-flag="' + flag + '"]'); c.checked = on;
    c.dispatchEvent(new Event("change", {bubbles: true})); }
  out.width = document.documentElement.scrollWidth;
  out.all = shown().length;
  set("flip", true); out.flip = shown(); set("flip", false);
  set("wrong", true); out.wrong = shown(); set("wrong", false);
  var search = box.querySelector("input[data-search]");
  search.value = QUERY; search.dispatchEvent(new Event("input", {bubbles: true})); out.search = shown();
  search.value = ""; search.dispatchEvent(new Event("input", {bubbles: true})); out.cleared = shown().length;
  document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  out.open_width = document.documentElement.scrollWidth;
  document.body.setAttribute("data-probe", JSON.stringify(out));
});
</script>"""


def chromium(*args: str, tmp: Path) -> str:
    """Run headless chromium (no network, no first-run work) and return its stdout."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--no-first-run", f"--user-data-dir={tmp / 'chromium'}",
             "--virtual-time-budget=10000", "--hide-scrollbars"]
    proc = subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def probe(report: Path, query: str, tmp: Path) -> dict:
    """The PROBE's measurements of ``report`` at WIDTH px."""
    page = tmp / f"probe-{report.parent.name}.html"
    script = PROBE.replace("QUERY", json.dumps(query))
    page.write_text(report.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8")
    dom = chromium("--dump-dom", f"--window-size={WIDTH},900", page.as_uri(), tmp=tmp)
    found = re.search(r'data-probe="([^"]*)"', dom)
    assert found, dom[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def screenshot(page: Path, name: str, tmp: Path, height: int = 1600, script: str = "") -> Path:
    """A WIDTH px wide PNG of ``page`` (after ``script`` ran on load), into REPORT_SHOTS or tmp."""
    shots = Path(os.environ.get("REPORT_SHOTS") or tmp)
    shots.mkdir(parents=True, exist_ok=True)
    if script:
        copy = tmp / f"shot-{name}.html"
        copy.write_text(page.read_text(encoding="utf-8").replace(
            "</body>", f"<script>window.addEventListener('load', function () {{{script}}});</script></body>"))
        page = copy
    out = shots / f"{name}.png"
    chromium(f"--screenshot={out}", f"--window-size={WIDTH},{height}", page.as_uri(), tmp=tmp)
    assert out.read_bytes().startswith(b"\x89PNG")
    return out


def expected(job: Path) -> tuple[set[str], set[str]]:
    """From the job's own files: the items whose verdict changes with the order, and those whose final verdict is
    not the gold label."""
    winners: dict[str, set[str]] = defaultdict(set)
    gold = {}
    for line in (job / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        winners[row["item_id"]].add(row["winner"])
        gold[row["item_id"]] = row["gold"]
    finals = json.loads((job / "summary.json").read_text())["aggregated_results"]
    return ({i for i, w in winners.items() if len(w) > 1},
            {i for i, r in finals.items() if r["final_verdict"] != gold[i]})


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install -y chromium)")
@pytest.mark.plots  # looks at the figures (drawn: a process keeps output.plots on)
def test_reports_fit_1280_px_and_filter_and_search_work_in_chromium(tmp_path_factory, tmp_path):
    result = replay_sweep(tmp_path_factory)  # job 0: replay_gpt4 on LLMBar Natural, 100 items x 2 orders
    assert result.proc.returncode == 0, result.output
    job = result.run_dir / "0"
    rows = [json.loads(line) for line in DATASET.read_text().splitlines()]
    query = rows[41]["input"][:40]
    matching = {r["id"] for r in rows if query.lower() in (r["input"] + r["output_1"] + r["output_2"]).lower()}
    flips, wrong = expected(job)
    assert flips and wrong  # GPT-4 flips on 5 Natural items and misses 7: the filters have something to hide

    # one file: nothing in it is fetched (plots are data: URIs); its links (mlflow.json, the sweep's report) exist
    page = (job / "report.html").read_text()
    assert not re.search(r'src="(?!data:)', page)
    targets = set(re.findall(r'href="([^"#]+)"', page))
    assert targets == {"mlflow.json", "../report.html"} and all((job / t).is_file() for t in targets)
    run = probe(job / "report.html", query, tmp_path)
    assert run["all"] == run["cleared"] == 100
    assert set(run["flip"]) == flips and set(run["wrong"]) == wrong
    assert set(run["search"]) == matching and rows[41]["id"] in matching
    assert run["width"] <= WIDTH and run["open_width"] <= WIDTH, run

    sweep = result.run_dir / "report.html"
    dom = chromium("--dump-dom", f"--window-size={WIDTH},900", sweep.as_uri(), tmp=tmp_path)
    links = re.findall(r'<a href="(\d+/report\.html)">', dom)
    assert set(links) == {f"{n}/report.html" for n in range(6)}  # in the jobs table and the frontier
    assert all((result.run_dir / link).is_file() for link in links)
    check_item_view(sweep, tmp_path)
    sweep_probe = tmp_path / "sweep-probe.html"
    sweep_probe.write_text(sweep.read_text().replace("</body>", "<script>window.addEventListener('load', function"
                                                     "(){document.body.setAttribute('data-width', document"
                                                     ".documentElement.scrollWidth)});</script></body>"))
    width = re.search(r'data-width="(\d+)"', chromium("--dump-dom", f"--window-size={WIDTH},900",
                                                      sweep_probe.as_uri(), tmp=tmp_path))
    assert width and int(width.group(1)) <= WIDTH
    # at 1,600 px the sweep table (the first table) shows its last column: nothing left to scroll to
    jobs_table = tmp_path / "sweep-1600.html"
    jobs_table.write_text(sweep.read_text().replace("</body>", "<script>window.addEventListener('load', function"
                                                    "(){var s = document.querySelector('.scroll'); document.body"
                                                    ".setAttribute('data-cut', s.scrollWidth - s.clientWidth)});"
                                                    "</script></body>"))
    cut = re.search(r'data-cut="(-?\d+)"', chromium("--dump-dom", "--window-size=1600,900", jobs_table.as_uri(),
                                                    tmp=tmp_path))
    assert cut and int(cut.group(1)) <= 0, cut

    screenshot(job / "report.html", "run_report", tmp_path)
    # a headless screenshot is of the page's top: the other sections are hidden to show the drill-down there
    only_items = ("document.querySelectorAll('section').forEach(function (s) {"
                  " s.hidden = !s.querySelector('#items'); });")
    first_wrong = sorted(wrong)[0]
    screenshot(job / "report.html", "run_report_item", tmp_path, 1400, only_items +
               "var s = document.querySelector('input[data-search]'); s.value = " + json.dumps(first_wrong) + ";"
               "s.dispatchEvent(new Event('input', {bubbles: true}));"
               f"var d = document.querySelector('details.item[data-id=\"{first_wrong}\"]'); d.open = true;"
               "d.querySelectorAll('details').forEach(function (x) { x.open = true; });")
    screenshot(job / "report.html", "run_report_filtered", tmp_path, 700, only_items +
               "var c = document.querySelector('input[data-flag=\"flip\"]'); c.checked = true;"
               "c.dispatchEvent(new Event('change', {bubbles: true}));")
    screenshot(sweep, "sweep_report", tmp_path, 1400)


GROUP_PROBE = """<script>
window.addEventListener("load", function () {
  var box = document.getElementById("items"), out = {};
  function shown() { return Array.prototype.filter.call(document.querySelectorAll("details.item"),
    function (i) { return !i.hidden; }).map(function (i) { return i.getAttribute("data-id"); }); }
  var select = box.querySelector("select[data-group]");
  select.value = "math"; select.dispatchEvent(new Event("change", {bubbles: true})); out.math = shown();
  var flag = box.querySelector('input[data-flag="unscored"]'); flag.checked = true;
  flag.dispatchEvent(new Event("change", {bubbles: true})); out.math_unscored = shown();
  out.counter = box.querySelector("[data-shown]").textContent;
  document.body.setAttribute("data-probe", JSON.stringify(out));
});
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install -y chromium)")
def test_the_tag_or_category_filter_combines_with_a_flag_in_chromium(tmp_path):
    from runner.core.types import Candidate, Item, JudgeRequest, JudgeResponse, Judgment, Order, Status, Verdict
    from runner.inputs.datasets import ItemRef
    from runner.modes import drilldown
    from runner.outputs import html_report

    refs = [ItemRef("a", None, "", category="math"), ItemRef("b", None, "", tags=("math", "long")),
            ItemRef("c", None, "", category="code")]
    judgments = [Judgment(JudgeRequest(r.id, 0, Order.AB, "judge", "h"), JudgeResponse("?"), Verdict(None, "no label"),
                          None, Status.UNSCORED if r.id != "a" else Status.SCORED) for r in refs]
    items = [Item(r.id, {"instruction": "q"}, (Candidate("x", "1"), Candidate("y", "2"))) for r in refs]
    d = drilldown.build(refs, {}, judgments, lambda: judgments, lambda: items)
    page = tmp_path / "groups.html"
    page.write_text(html_report.run_report({}, {}, "groups", "pairwise", d).replace(
        "</body>", GROUP_PROBE + "</body>"))
    dom = chromium("--dump-dom", f"--window-size={WIDTH},900", page.as_uri(), tmp=tmp_path)
    found = re.search(r'data-probe="([^"]*)"', dom)
    assert found, dom[-2000:]
    out = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert out == {"math": ["a", "b"], "math_unscored": ["b"], "counter": "1 of 3 items shown"}


ITEMS_PROBE = """<script>
window.addEventListener("load", function () {
  var box = document.getElementById("sweep-items"), out = {};
  function shown() { return Array.prototype.map.call(box.querySelectorAll("tbody tr"),
    function (r) { return r.getAttribute("data-id"); }); }
  function pick(value) { var r = box.querySelector('input[name=sweep-filter][value="' + value + '"]');
    r.checked = true; r.dispatchEvent(new Event("change", {bubbles: true})); return shown(); }
  out.width = document.documentElement.scrollWidth;
  out.all = shown(); out.counter = box.querySelector("[data-shown]").textContent;
  out.wrong = pick("wrong"); out.disagree = pick("disagree"); out.unscored = pick("unscored"); pick("all");
  var search = box.querySelector("input[data-search]"); search.value = QUERY;
  search.dispatchEvent(new Event("input", {bubbles: true})); out.search = shown();
  out.links = Array.prototype.map.call(box.querySelectorAll("tbody a"), function (a) {
    return a.getAttribute("href"); });
  out.heads = Array.prototype.map.call(box.querySelectorAll("thead th .head"), function (h) { return h.textContent; });
  document.body.setAttribute("data-probe", JSON.stringify(out));
});
</script>"""


def check_item_view(sweep: Path, tmp: Path) -> None:
    """Issue 33.1 and 33.4: the sweep report's item view in chromium: its filters show the rows its data says, the
    search finds an item, every cell's link opens an item anchor that exists, and it fits WIDTH px."""
    from tests.integration.shared import sweep_items_blob

    data = sweep_items_blob(sweep.read_text(encoding="utf-8"))
    states = [[job["st"][n] for job in data["jobs"]] for n in range(len(data["items"]))]
    verdicts = [{data["s"][job["v"][n]] for job in data["jobs"] if job["st"][n] in "cwpfn"}
                for n in range(len(data["items"]))]
    wrong = [i for i, st in zip(data["items"], states, strict=True) if {"w", "f"} & set(st)]
    disagree = [i for i, v in zip(data["items"], verdicts, strict=True) if len(v) > 1]
    assert wrong and disagree and len(disagree) < len(data["items"])  # the filters have something to show and hide
    query = data["items"][42]
    page = tmp / "items-probe.html"
    page.write_text(sweep.read_text(encoding="utf-8").replace("</body>", ITEMS_PROBE.replace(
        "QUERY", json.dumps(query)) + "</body>"), encoding="utf-8")
    dom = chromium("--dump-dom", f"--window-size={WIDTH},900", page.as_uri(), tmp=tmp)
    found = re.search(r'data-probe="([^"]*)"', dom)
    assert found, dom[-2000:]
    out = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert out["all"] == data["items"][:data["page"]] and out["counter"] == f"100 of {len(data['items'])} items"
    assert out["wrong"] == wrong[:data["page"]] and out["disagree"] == disagree[:data["page"]]
    assert out["unscored"] == [] and out["search"] == [query]
    assert len(out["links"]) == len(data["jobs"]) and all(h.startswith("agreement ") for h in out["heads"])
    for link in out["links"]:  # <job>/report.html#item-<id>: the file, and the anchor in it
        target, anchor = link.split("#")
        assert f'id="{anchor}"' in (sweep.parent / target).read_text(encoding="utf-8"), link
    assert out["width"] <= WIDTH, out["width"]
    screenshot(sweep, "sweep_items", tmp, 1000, "document.querySelectorAll('section').forEach(function (s) {"
               " s.hidden = !s.querySelector('#sweep-items'); });"
               "var r = document.querySelector('input[value=disagree]'); r.checked = true;"
               "r.dispatchEvent(new Event('change', {bubbles: true}));")


ITEM_GROUP_PROBE = """<script>
window.addEventListener("load", function () {
  var box = document.getElementById("sweep-items"), out = {};
  function shown() { return Array.prototype.map.call(box.querySelectorAll("tbody tr"),
    function (r) { return r.getAttribute("data-id"); }); }
  var select = box.querySelector("select[data-group]");
  select.value = select.querySelector("option:nth-child(4)").value;  // "math" (after all, code, long)
  select.dispatchEvent(new Event("change", {bubbles: true})); out.math = shown();
  var r = box.querySelector('input[value="unscored"]'); r.checked = true;
  r.dispatchEvent(new Event("change", {bubbles: true})); out.math_unscored = shown();
  out.chips = Array.prototype.map.call(box.querySelectorAll("tbody .chip"), function (c) { return c.textContent; });
  box.querySelector("[data-next]").click(); out.page = box.querySelector("[data-page]").textContent;
  document.body.setAttribute("data-probe", JSON.stringify(out));
});
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install -y chromium)")
def test_the_sweep_item_views_tag_filter_and_a_cells_anchor_open_the_item_in_chromium(tmp_path):
    """Issue 33.1/33.4: the item view's tag/category filter combines with a state filter; a job's report opened at
    ``#item-<id>`` (where a cell links) shows that item opened."""
    from runner.modes import drilldown
    from runner.outputs import html_report, sweep_items, sweep_page

    view = sweep_items.ItemView(("a", "b", "c"), {"a": ("math",), "b": ("math", "long"), "c": ("code",)}, (
        sweep_items.Column(0, "judge=x", "agreement 1", {"a": ("ours", "ours", "c"), "b": ("no valid vote", "", "u"),
                                                        "c": ("tie", "tie", "w")}),
        sweep_items.Column(1, "judge=y", "", {}, failed=True)))
    page = tmp_path / "sweep.html"
    page.write_text(sweep_page.sweep_report([{"job": 0, "status": "ok"}, {"job": 1, "status": "failed"}], None,
                                             "s", items=view).replace("</body>", ITEM_GROUP_PROBE + "</body>"))
    found = re.search(r'data-probe="([^"]*)"', chromium("--dump-dom", f"--window-size={WIDTH},900", page.as_uri(),
                                                        tmp=tmp_path))
    assert found
    out = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert out == {"math": ["a", "b"], "math_unscored": ["a", "b"], "chips": ["correct", "job failed", "unscored",
                                                                             "job failed"], "page": "page 1 of 1"}

    # a run report of two items, opened at the second's anchor
    from runner.core.types import Candidate, Item, JudgeRequest, JudgeResponse, Judgment, Order, Status, Verdict
    from runner.inputs.datasets import ItemRef

    refs = [ItemRef("x1", None, ""), ItemRef("x2", None, "")]
    judgments = [Judgment(JudgeRequest(r.id, 0, Order.AB, "judge", "h"), JudgeResponse("A"), Verdict("A"), "x",
                          Status.SCORED) for r in refs]
    items = [Item(r.id, {"q": "?"}, (Candidate("x", "1"), Candidate("y", "2"))) for r in refs]
    d = drilldown.build(refs, {}, judgments, lambda: judgments, lambda: items)
    report = tmp_path / "report.html"
    report.write_text(html_report.run_report({}, {}, "r", "pairwise", d))
    dom = chromium("--dump-dom", f"--window-size={WIDTH},900", report.as_uri() + "#item-x2", tmp=tmp_path)
    opened = re.findall(r'<details class="item" id="(item-x\d)"[^>]*?( open="")?>', dom)
    assert opened == [("item-x1", ""), ("item-x2", ' open=""')], opened


# ---------------------------------------------------------------- issue 44.8: links in MLflow's viewer, the way back

def mlflow_sandbox() -> str:
    """The sandbox MLflow's artifact view gives an HTML file's iframe, read from the installed mlflow's UI bundle
    (3.x: ``sandbox:"allow-scripts"`` beside ``className:"mlflow-html-iframe"``)."""
    import mlflow

    for js in (Path(mlflow.__file__).parent / "server" / "js" / "build" / "static" / "js").glob("*.js"):
        found = re.search(r'mlflow-html-iframe"[^}]{0,200}?sandbox:"([^"]*)"', js.read_text(encoding="utf-8",
                                                                                          errors="replace"))
        if found:
            return found.group(1)
    pytest.fail("MLflow's HTML artifact view (its iframe's sandbox) not found in the installed UI bundle")


# Run in the report inside the sandboxed frame as its last script (the page's own have run): click the first link of
# `SELECTOR`, then tell the host page whether the click was kept from navigating and what the page says. Not on a
# timer nor at the frame's load: its message must reach the host before the host's own load, when chromium dumps it.
FRAMED_PROBE = """<script>(function () {
  var a = document.querySelector(SELECTOR), prevented = null;
  document.addEventListener("click", function (e) { prevented = e.defaultPrevented; });
  a.click();
  var say = document.querySelector("[data-framed]");
  parent.postMessage({href: a.getAttribute("href"), prevented: prevented, at: location.protocol,
                      note: say && !say.hidden ? say.textContent : ""}, "*");
})();</script>"""

HOST = """<!doctype html><html><body><script>
var loads = 0, html = HTML, frame = document.createElement("iframe");
frame.setAttribute("sandbox", SANDBOX);
frame.addEventListener("load", function () { loads += 1; });
window.addEventListener("message", function (e) {
  document.body.setAttribute("data-probe", JSON.stringify(Object.assign({loads: loads}, e.data))); });
frame.src = URL.createObjectURL(new Blob([html], {type: "text/html"}));
document.body.appendChild(frame);
</script></body></html>"""


def framed(html: str, selector: str, tmp: Path) -> dict:
    """Open ``html`` as MLflow's artifact view does (a blob: URL in an iframe with MLflow's sandbox), click the first
    ``selector`` link in it, and return what FRAMED_PROBE saw."""
    page = html.replace("</body>", FRAMED_PROBE.replace("SELECTOR", json.dumps(selector)) + "</body>")
    host = tmp / "mlflow-artifact-view.html"
    host.write_text(HOST.replace("SANDBOX", json.dumps(mlflow_sandbox())).replace(
        "HTML", json.dumps(page).replace("</", "<\\/")), encoding="utf-8")
    found = re.search(r'data-probe="([^"]*)"', chromium("--dump-dom", host.as_uri(), tmp=tmp))
    assert found, "the framed report never answered"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def sweep_with_texts() -> str:
    """A sweep report of two jobs over three items with their texts, each cell linking to its job's report."""
    from runner.outputs import sweep_items, sweep_page

    cells = {"a": ("ours", "ours", "c"), "b": ("tie", "tie", "w"), "c": ("ours", "ours", "c")}
    view = sweep_items.ItemView(("a", "b", "c"), {"a": (), "b": (), "c": ()}, (
        sweep_items.Column(0, "judge=x", "agreement 1", cells),
        sweep_items.Column(1, "judge=y", "agreement 1", {**cells, "b": ("ours", "ours", "c")})),
        {"a": (("instruction", "Name a prime number."), ("output_1", "7")),
         "b": (("instruction", "Translate 'zebra crossing' into French."), ("output_1", "passage piéton")),
         "c": (("instruction", "x" * 300),)})
    return sweep_page.sweep_report([{"job": 0, "status": "ok"}, {"job": 1, "status": "ok"}], None, "s",
                                   links={0: "0/report.html", 1: "1/report.html"}, items=view)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install -y chromium)")
def test_links_inside_mlflows_sandboxed_artifact_view_say_where_they_lead_instead_of_leaving(tmp_path):
    """Issue 44.8: in MLflow's artifact viewer a clicked cell went to about:blank#blocked. Now a click on a link to
    another file is kept from navigating the frame, and the page says where it leads and how to follow it."""
    cell = framed(sweep_with_texts(), "#sweep-items tbody a", tmp_path)
    # the probe answers before the frame's own load event may have fired (0 or 1 loads then, never 2: not navigated)
    assert cell["at"] == "blob:" and cell["prevented"] is True and cell["loads"] <= 1, cell
    assert cell["href"].startswith("0/report.html?back=") and cell["href"].endswith("#item-a")
    assert cell["note"].startswith("Not opened inside MLflow's artifact viewer: 0/report.html?back="), cell

    from runner.outputs import html_report

    run = html_report.render("run", [html_report.Section("This run", columns=("what", "value"), rows=(
        ("sweep", html_report.Link("the sweep's report.html", "../report.html", back=True)),))])
    back = framed(run, "a[data-back]", tmp_path)
    assert back["prevented"] is True and "../report.html" in back["note"], back


STATE_PROBE = """<script>window.addEventListener("load", function () {
  var box = document.getElementById("sweep-items"), out = {};
  out.filter = box.querySelector("input[name=sweep-filter]:checked").value;
  out.search = box.querySelector("input[data-search]").value;
  out.rows = Array.prototype.map.call(box.querySelectorAll("tbody tr"), function (r) {
    return r.getAttribute("data-id"); });
  out.texts = Array.prototype.map.call(box.querySelectorAll("tbody td.item summary"), function (s) {
    return s.textContent; });
  var q = box.querySelector("input[data-search]"); q.value = "piéton";
  q.dispatchEvent(new Event("input", {bubbles: true}));
  out.found = Array.prototype.map.call(box.querySelectorAll("tbody tr"), function (r) {
    return r.getAttribute("data-id"); });
  out.hash = location.hash;
  out.scrolled = window.scrollY;
  document.body.setAttribute("data-probe", JSON.stringify(out));
});</script>"""

ANCHOR_PROBE = """<script>window.addEventListener("load", function () {
  var bar = document.querySelector("#items .filters"), item = document.getElementById("item-x50");
  document.body.setAttribute("data-probe", JSON.stringify({
    back: document.querySelector("a[data-back]").getAttribute("href"), open: item.open,
    item_top: item.getBoundingClientRect().top, bar_bottom: bar.getBoundingClientRect().bottom,
    scrolled: window.scrollY}));
});</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install -y chromium)")
def test_the_way_back_keeps_the_sweep_view_and_an_opened_item_clears_the_filter_bar(tmp_path):
    """Issue 44.8: the sweep view opened at the state a job's link back carries shows that filter and search; its
    rows show each item's text and the search finds an item by it; a job's report opened from a cell links back to
    that state and shows the item below the sticky filter bar, not under it."""
    sweep = tmp_path / "report.html"
    sweep.write_text(sweep_with_texts().replace("</body>", STATE_PROBE + "</body>"), encoding="utf-8")
    state = "sweep-items&f=disagree&g=&q=" + "translate" + "&p=0&y=120"
    dom = chromium("--dump-dom", f"--window-size={WIDTH},300", sweep.as_uri() + "#" + state, tmp=tmp_path)
    out = json.loads(re.search(r'data-probe="([^"]*)"', dom).group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert out["filter"] == "disagree" and out["search"] == "translate" and out["rows"] == ["b"], out
    assert out["scrolled"] == 120, out  # where the page was left
    assert out["texts"] == ["Translate 'zebra crossing' into French. ..."], out  # folded: two texts
    assert out["found"] == ["b"] and out["hash"].startswith("#sweep-items&f=disagree&g=&q=pi%C3%A9ton"), out

    from runner.core.types import Candidate, Item, JudgeRequest, JudgeResponse, Judgment, Order, Status, Verdict
    from runner.inputs.datasets import ItemRef
    from runner.modes import drilldown
    from runner.outputs import html_report

    refs = [ItemRef(f"x{n}", None, "", ("a-rather-long-tag-name",)) for n in range(80)]
    judgments = [Judgment(JudgeRequest(r.id, 0, Order.AB, "judge", "h"), JudgeResponse("A"), Verdict("A"), "x",
                          Status.SCORED) for r in refs]
    items = [Item(r.id, {"q": "?"}, (Candidate("x", "1"), Candidate("y", "2"))) for r in refs]
    sections = html_report.run_sections({}, {}, "pairwise", drilldown.build(refs, {}, judgments, lambda: judgments,
                                                                            lambda: items), html_report.RunHeader((
        ("sweep", html_report.Link("the sweep's report.html", "../report.html", back=True)),)))
    job = tmp_path / "0" / "report.html"
    job.parent.mkdir()
    job.write_text(html_report.render("job", sections).replace("</body>", ANCHOR_PROBE + "</body>"), encoding="utf-8")
    back = "sweep-items%26f%3Ddisagree%26g%3D%26q%3Dtranslate%26p%3D0%26y%3D120"
    dom = chromium("--dump-dom", f"--window-size={WIDTH},600", job.as_uri() + "?back=" + back + "#item-x50",
                   tmp=tmp_path)
    got = json.loads(re.search(r'data-probe="([^"]*)"', dom).group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert got["back"] == "../report.html#sweep-items&f=disagree&g=&q=translate&p=0&y=120", got
    assert got["open"] and got["scrolled"] > 0, got
    assert got["item_top"] >= got["bar_bottom"] - 1, got  # below the sticky bar, not under it
