"""The run report's drill-down (runner.modes.drilldown drawn as HTML): one collapsed row per item with its final
verdict or score, gold and flags; opened, the item's inputs and every call's parsed verdict and raw answer.

Each item is an anchor, ``report.html#item-<id>`` (opened when the page is opened there). Filters (a flag, a tag or
category) and a text search run in a small script embedded in the page: no network, no
library, and without the script every item is simply shown. Texts are data: the template autoescapes them, and a
long one is folded in a ``<details>`` under its first line.
"""

from __future__ import annotations

from collections.abc import Iterator

from jinja2 import Environment
from markupsafe import Markup

from runner.modes.drilldown import Drilldown

FOLD = 400  # characters from which a text is folded (its start shown as the summary)
PREVIEW = 140
PIECE_CHARS = 1 << 16  # characters of HTML handed to the page at a time (a few dozen items)

TEMPLATE = """<div id="items">{% if d.entries|length < d.total %}<p class="note">The report draws
{{ d.entries|length }} of the run's {{ d.total }} items, the flagged ones first; results.jsonl holds every
judgment.</p>{% endif %}
<div class="filters" role="search">
{% for key, label in flags.items() %}<label><input type="checkbox" data-flag="{{ key }}"> {{ label }}
({{ d.counts[key] }})</label>
{% endfor %}{% if groups %}<label>tag/category <select data-group><option value="">all</option>
{% for g in groups %}<option>{{ g }}</option>{% endfor %}</select></label>{% endif %}
<label>search <input type="search" data-search placeholder="id, input or answer text"></label>
<span class="shown" data-shown>{{ d.entries|length }} items shown</span></div>
<div class="item-list">
{% for e in entries %}<details class="item" id="item-{{ e.id }}"
 data-id="{{ e.id }}" data-flags="{{ e.flags|join(' ') }}"
 data-groups="{{ e.groups|join('\t') }}"><summary><span class="id">{{ e.id }}</span>
<span>final: <b>{{ e.final }}</b></span><span>gold: {{ e.gold }}</span>
{% for f in e.flags %}<span class="flag flag-{{ f }}">{{ flags[f] }}</span>{% endfor %}
{% for g in e.groups %}<span class="tag">{{ g }}</span>{% endfor %}</summary>
{% for r in e.reasons %}<p class="note">{{ r }}</p>{% endfor %}
<h3>Input</h3>{% for name, text in e.inputs %}<div class="field"><div class="name">{{ name }}</div>
{{ fold(text) }}</div>
{% endfor %}<h3>Judge calls</h3><table class="answers"><thead><tr><th>call</th><th>status</th><th>parsed</th>
<th>raw answer</th></tr></thead><tbody>
{% for a in e.answers %}<tr><td>{{ a.call }}</td><td>{{ a.status }}</td><td>{{ a.parsed }}</td>
<td>{{ fold(a.raw) }}{% if a.prompt %}<details class="prompt"><summary>prompt sent</summary><pre>{{ a.prompt
}}</pre></details>{% endif %}</td></tr>
{% endfor %}</tbody></table></details>
{% endfor %}</div></div>
<script>
(function () {
  var box = document.getElementById("items");
  var items = Array.prototype.slice.call(box.querySelectorAll("details.item"));
  var text = null;  // each item's text, lower-cased once, on the first search
  function apply() {
    var flags = Array.prototype.filter.call(box.querySelectorAll("input[data-flag]"), function (c) {
      return c.checked; }).map(function (c) { return c.getAttribute("data-flag"); });
    var select = box.querySelector("select[data-group]");
    var group = select ? select.value : "";
    var query = box.querySelector("input[data-search]").value.trim().toLowerCase();
    if (query && text === null) { text = items.map(function (i) { return i.textContent.toLowerCase(); }); }
    var shown = 0;
    items.forEach(function (item, n) {
      var own = item.getAttribute("data-flags").split(" ");
      var ok = flags.every(function (f) { return own.indexOf(f) >= 0; })
        && (!group || item.getAttribute("data-groups").split("\\t").indexOf(group) >= 0)
        && (!query || text[n].indexOf(query) >= 0);
      item.hidden = !ok;
      if (ok) { shown += 1; }
    });
    box.querySelector("[data-shown]").textContent = shown + " of " + items.length + " items shown";
  }
  box.querySelector(".filters").addEventListener("input", apply);
  box.querySelector(".filters").addEventListener("change", apply);
  function reveal() {  // report.html#item-<id> (the sweep report's cells link there): that item, opened
    var target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (target && target.classList.contains("item")) { target.hidden = false; target.open = true;
      // below the sticky filter bar, however many lines it wraps to (the CSS's scroll-margin-top: var(--bar))
      box.style.setProperty("--bar", (box.querySelector(".filters").offsetHeight + 8) + "px");
      target.scrollIntoView(); }
  }
  window.addEventListener("hashchange", reveal);
  reveal();
})();
</script>
"""

CSS = """.filters{display:flex;flex-wrap:wrap;gap:.4em 1.2em;align-items:center;padding:.5em;background:#f6f8fa;
border:1px solid #ddd;position:sticky;top:0;z-index:1}.filters .shown{margin-left:auto;color:#555}
details.item{border:1px solid #ddd;border-top:none;padding:2px 8px;
scroll-margin-top:var(--bar,6em)}details.item:first-child{border-top:1px solid #ddd}
details.item>summary{cursor:pointer;display:flex;flex-wrap:wrap;gap:.3em 1em;align-items:baseline}
details.item[open]>summary{border-bottom:1px solid #eee;margin-bottom:.4em}.item .id{font-family:monospace;
min-width:6em}.item h3{font-size:13px;margin:.6em 0 .2em}.field{margin:.3em 0}.field .name{font-weight:600;
font-size:12px;color:#555}.flag{font-size:12px;padding:0 6px;border-radius:8px;background:#ffe0b2}
.flag-wrong{background:#ffcdd2}.flag-unscored{background:#e0e0e0}.flag-failed{background:#f8bbd0}
.tag{font-size:12px;padding:0 6px;border-radius:8px;background:#e3f2fd}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:.2em 0;font:12px/1.4 ui-monospace,monospace;
background:#fafafa;padding:4px}table.answers td:nth-child(4){width:55%}"""


def fold(text: str) -> Markup:
    """A text as preformatted data (escaped by Markup.format); from :data:`FOLD` characters up, folded under its
    start."""
    if len(text) < FOLD:
        return Markup("<pre>{}</pre>").format(text)
    preview = " ".join(text[:PREVIEW].split()) + " ..."
    return Markup("<details><summary>{} ({} characters)</summary><pre>{}</pre></details>").format(
        preview, len(text), text)


def heading(drilldown: Drilldown) -> str:
    """The section's heading: how many items it draws (of how many)."""
    shown, total = len(drilldown.entries), drilldown.total
    return f"Items ({shown})" if shown == total else f"Items ({shown} of {total})"


def render(drilldown: Drilldown) -> Markup:
    """The drill-down section with its filters and script, ready to place in a page."""
    return Markup("".join(pieces(drilldown)))


def pieces(drilldown: Drilldown) -> Iterator[Markup]:
    """:func:`render`'s HTML in pieces of about :data:`PIECE_CHARS` characters: a page written piece by piece never
    holds the whole section (megabytes: ~4.4 KB an item), nor the copies an autoescaping page makes of one Markup;
    and the page's template handles tens of pieces, not the ~47 a drawn item is yielded in by this one."""
    chunk: list[str] = []
    size = 0
    for piece in Environment(autoescape=True).from_string(TEMPLATE).generate(
            d=drilldown, entries=drilldown.filled(), flags=drilldown.labels, groups=drilldown.groups, fold=fold):
        chunk.append(piece)
        size += len(piece)
        if size >= PIECE_CHARS:
            yield Markup("".join(chunk))
            chunk, size = [], 0
    if chunk:
        yield Markup("".join(chunk))
