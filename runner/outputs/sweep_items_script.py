"""The script and style of the sweep report's item view (:mod:`runner.outputs.sweep_items` writes the view's blob and
its frame): the script draws the visible page of rows from the blob (each item's id and texts, each job's cell linking
to the item in that job's report), runs the filters and the search, and keeps the view's state (filter, tag, search,
page, scroll position) in the page's address, ``#sweep-items&f=..&g=..&q=..&p=..&y=..``, which a cell hands to the
job's report as ``?back=...`` for its link back (:data:`runner.outputs.report_links.SCRIPT`) and from which the
view is drawn again when the page is opened at it.
"""

from __future__ import annotations

__all__ = ["CSS", "SCRIPT"]

SCRIPT = """(function () {
  var box = document.getElementById("sweep-items");
  var d = JSON.parse(box.querySelector("script[type='application/json']").textContent);
  var body = box.querySelector("tbody"), shown = box.querySelector("[data-shown]"), pager = box.querySelector(".pager");
  var chip = {c: "correct", w: "wrong", p: "pass", f: "fail", u: "unscored", x: "job failed", "-": "absent", n: ""};
  var search = box.querySelector("input[data-search]"), group = box.querySelector("select[data-group]");
  var text = null, page = 0, rows = [];
  function test(i, filter) {
    var states = d.jobs.map(function (j) { return j.st[i]; });
    if (filter === "wrong") { return states.some(function (s) { return s === "w" || s === "f"; }); }
    if (filter === "unscored") { return states.some(function (s) { return s === "u" || s === "x"; }); }
    if (filter === "disagree") {
      var seen = {};
      d.jobs.forEach(function (j) { if ("cwpfn".indexOf(j.st[i]) >= 0) { seen[j.v[i]] = 1; } });
      return Object.keys(seen).length > 1;
    }
    return true;
  }
  function words(i) {  // what the search looks in: the id, the item's texts, every job's verdict
    return [d.items[i]].concat(d.x[i].map(function (f) { return f[1]; }), d.jobs.map(function (j) {
      return d.s[j.t[i]]; })).join(" ").toLowerCase();
  }
  function filter() { return box.querySelector("input[name=sweep-filter]:checked").value; }
  function state() {  // the view as the address keeps it: #sweep-items&f=..&g=..&q=..&p=..&y=..
    return "sweep-items&f=" + filter() + "&g=" + (group ? group.value : "") + "&q=" + encodeURIComponent(search.value)
      + "&p=" + page + "&y=" + Math.round(window.scrollY || 0);
  }
  function keep() {  // the page's own address holds its state: the browser's back button returns to it too
    try { history.replaceState(null, "", "#" + state()); } catch (e) { /* a sandboxed frame: no address to keep */ }
  }
  function apply() {
    var g = group ? group.value : "", q = search.value.trim().toLowerCase(), f = filter();
    if (q && text === null) { text = d.items.map(function (id, i) { return words(i); }); }
    rows = [];
    d.items.forEach(function (id, i) {
      if (test(i, f) && (!g || d.ig[i].indexOf(+g) >= 0) && (!q || text[i].indexOf(q) >= 0)) { rows.push(i); }
    });
    page = 0; draw();
  }
  function item(i) {  // the item's cell: its id, then its texts folded under the first one's start
    var td = document.createElement("td"), id = document.createElement("div"), x = d.x[i];
    td.className = "item"; id.className = "id"; id.textContent = d.items[i]; td.appendChild(id);
    if (!x.length) { return td; }
    var det = document.createElement("details"), sum = document.createElement("summary"), first = x[0][1];
    sum.textContent = first.length > d.preview || x.length > 1 ? first.slice(0, d.preview) + " ..." : first;
    det.appendChild(sum);
    x.forEach(function (f) {
      var name = document.createElement("div"), pre = document.createElement("pre");
      name.className = "name"; name.textContent = d.s[f[0]]; pre.textContent = f[1];
      det.appendChild(name); det.appendChild(pre);
    });
    td.appendChild(det);
    return td;
  }
  function draw() {
    var pages = Math.max(1, Math.ceil(rows.length / d.page));
    page = Math.min(page, pages - 1);
    body.textContent = "";
    rows.slice(page * d.page, (page + 1) * d.page).forEach(function (i) {
      var tr = document.createElement("tr"); tr.setAttribute("data-id", d.items[i]);
      tr.appendChild(item(i));
      d.jobs.forEach(function (j) {
        var td = document.createElement("td"), s = j.st[i], node = td;
        td.className = "st-" + (s === "-" ? "a" : s);
        if (j.href && s !== "x" && s !== "-") {
          node = document.createElement("a"); node.href = j.href + "#item-" + encodeURIComponent(d.items[i]);
          node.setAttribute("data-item", d.items[i]); td.appendChild(node);
        }
        node.appendChild(document.createTextNode(d.s[j.t[i]]));
        if (chip[s]) { var c = document.createElement("span"); c.className = "chip"; c.textContent = chip[s];
          td.appendChild(c); }
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    shown.textContent = rows.length + " of " + d.items.length + " items";
    pager.querySelector("[data-page]").textContent = "page " + (page + 1) + " of " + pages;
    keep();
  }
  function restore() {  // an address with a state (the job report's link back, the browser's back): that view
    var parts = location.hash.slice(1).split("&"), got = {};
    if (parts[0] !== "sweep-items") { apply(); return; }
    parts.slice(1).forEach(function (p) {
      var k = p.split("="); got[k[0]] = decodeURIComponent(k.slice(1).join("=")); });
    var radio = box.querySelector("input[name=sweep-filter][value='" + (got.f || "all") + "']");
    if (radio) { radio.checked = true; }
    if (group && got.g !== undefined) { group.value = got.g; }
    search.value = got.q || "";
    apply();
    page = +got.p || 0; draw();
    var y = +got.y || 0;
    window.scrollTo(0, y);
    window.addEventListener("load", function () { window.scrollTo(0, y); });  // once the figures above have a height
  }
  box.querySelector(".filters").addEventListener("input", apply);
  box.querySelector(".filters").addEventListener("change", apply);
  body.addEventListener("click", function (e) {  // a cell's link carries the view, for the job report's way back
    var a = e.target.closest ? e.target.closest("a[data-item]") : null;
    if (!a) { return; }
    keep();
    a.setAttribute("href", a.getAttribute("href").split("#")[0].split("?")[0] + "?back="
      + encodeURIComponent(state()) + "#item-" + encodeURIComponent(a.getAttribute("data-item")));
  });
  pager.querySelector("[data-prev]").addEventListener("click", function () { page = Math.max(0, page - 1); draw(); });
  pager.querySelector("[data-next]").addEventListener("click", function () { page += 1; draw(); });
  box.querySelector(".noscript").hidden = true;
  restore();
})();"""

CSS = """#sweep-items table{width:100%;table-layout:fixed}#sweep-items td{overflow-wrap:anywhere}
#sweep-items th.item{width:22em}#sweep-items .id{font-family:monospace}#sweep-items td.item pre{
white-space:pre-wrap;max-height:20em;overflow:auto}#sweep-items td.item .name{font-weight:600;font-size:12px;color:#555}
#sweep-items td.item summary{cursor:pointer;color:#333}#sweep-items .chip{display:inline-block;margin-left:.4em;
font-size:11px;padding:0 5px;border-radius:8px;background:#eee}#sweep-items .st-c .chip,#sweep-items .st-p .chip{
background:#c8e6c9}#sweep-items .st-w .chip,#sweep-items .st-f .chip{background:#ffcdd2}#sweep-items .st-u .chip{
background:#e0e0e0}#sweep-items .st-x .chip{background:#f8bbd0}#sweep-items th .head{font-weight:400;font-size:12px}
#sweep-items .pager{margin:.4em 0}"""
