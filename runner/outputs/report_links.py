"""Where a report's links lead: its MLflow run (a slot at the top of report.html that publishing fills in once the
run exists), and, wherever the page is opened, the other files it links to (:data:`SCRIPT`).

A run's report is written before the run is published (it is one of the files MLflow gets), and a sweep's before its
table is logged, so neither knows its MLflow run's id when drawn. :func:`runner.outputs.publishing.publish` and
:func:`runner.outputs.tracking.log_sweep` fill the slot (:func:`fill`) as soon as they have the run, before they log
the page, so the page in the run directory and the one in MLflow both carry the link: the run page's address
(``<server>/#/experiments/<id>/runs/<id>``) when the store is served over http, else how to open it.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from markupsafe import Markup, escape

from runner.core.run_settings import TrackingConfig

REPORT_NAME = "report.html"  # runner.outputs.html_report's
START, END = "<!--mlflow-run-->", "<!--/mlflow-run-->"
SLOT = Markup(f'<p class="note" id="mlflow-run">{START}{END}</p>')  # drawn under the page's title, empty until filled
HEAD_BYTES = 1 << 16  # the slot is in the page's first bytes (its head and title): no more is read to find it
LOCAL_UI = "http://127.0.0.1:5000"  # where `mlflow ui` serves a local store by default

# The page's links wherever it is opened. In MLflow's artifact viewer the page is a blob: address in an iframe
# sandboxed to "allow-scripts" alone (mlflow/server/js: the HTML artifact view): a link to another file resolves to
# nothing ("about:blank#blocked"), and a new tab or the top window is refused. There a click on a link that leaves the
# page says where it leads instead of going nowhere; everywhere, an in-page link scrolls without navigating, and a
# job's report opened from a sweep report's cell (``?back=<the sweep view's state>``) links back to that state.
SCRIPT = """(function () {
  var framed = !/^(file|https?):$/.test(location.protocol), say = document.querySelector("[data-framed]");
  var back = /[?&]back=([^&#]*)/.exec(location.search);
  if (back) {
    Array.prototype.forEach.call(document.querySelectorAll("a[data-back]"), function (a) {
      a.setAttribute("href", a.getAttribute("href").split("#")[0] + "#" + decodeURIComponent(back[1])); });
  }
  if (framed && say) {
    say.textContent = "Shown inside MLflow's artifact viewer, which opens no other file, page or tab from here: "
      + "download this file (or open report.html in the run directory) to follow its links.";
    say.hidden = false;
  }
  document.addEventListener("click", function (e) {
    var a = e.target.closest ? e.target.closest("a[href]") : null;
    if (!a || e.defaultPrevented) { return; }
    var href = a.getAttribute("href");
    if (href.charAt(0) === "#") {
      var target = document.getElementById(decodeURIComponent(href.slice(1)));
      if (target) { e.preventDefault(); target.scrollIntoView(); }
    } else if (framed) {
      e.preventDefault();
      if (say) { say.textContent = "Not opened inside MLflow's artifact viewer: " + href + " (download this file, or "
        + "open report.html in the run directory, to follow it)."; say.hidden = false; say.scrollIntoView(); }
    }
  });
})();"""


def _without_secrets(uri: str) -> str:
    """``uri`` without any user or password."""
    parts = urlsplit(uri)
    if parts.password is None and parts.username is None:
        return uri
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def describe(cfg: TrackingConfig) -> str:
    """The store as a message names it: its URI without any user or password."""
    uri = _without_secrets(cfg.uri) if cfg.uri else "MLflow's default store"
    return f"{uri} (experiment {cfg.experiment!r})"


def page_url(uri: str | None, experiment_id: str, run_id: str) -> str | None:
    """The MLflow UI's page of the run when the store is served over http(s) (``uri`` without any user or password),
    else None."""
    parts = urlsplit(uri or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    host = parts.hostname + (f":{parts.port}" if parts.port else "")
    base = urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))
    return f"{base}/#/experiments/{experiment_id}/runs/{run_id}"


def content(cfg: TrackingConfig, experiment_id: str, run_id: str) -> Markup:
    """What the slot holds: a link to the run's page (opened in a new tab), or, for a store not served over http
    (a sqlite or file store), the command that serves it and the page's address there."""
    uri = _without_secrets(cfg.uri or "")
    url = page_url(uri, experiment_id, run_id)
    if url is not None:
        return Markup('MLflow run: <a href="{0}" target="_blank" rel="noopener" data-mlflow-run>{0}</a>').format(url)
    served, store = (f"mlflow ui --backend-store-uri {uri}", uri) if uri else ("mlflow ui", "MLflow's default store")
    return escape(f"MLflow run {run_id} in experiment {cfg.experiment!r} (id {experiment_id}) of {store}: the "
                  f"store is not served over http; `{served}` serves it, then the run is at "
                  f"{LOCAL_UI}/#/experiments/{experiment_id}/runs/{run_id}")


def fill(report: Path, html: str) -> bool:
    """Put ``html`` in ``report``'s slot (whatever it held), rewriting the file through a temporary one; False (the
    file untouched) when there is no such file or it has no slot (a page drawn before the slot existed)."""
    start, end = START.encode(), END.encode()
    try:
        with report.open("rb") as src:
            head = src.read(HEAD_BYTES)
            a, b = head.find(start), head.find(end)
            if a < 0 or b < a:
                return False
            filled = head[:a + len(start)] + html.encode("utf-8") + head[b:]
            if filled == head:
                return True
            unfinished = report.with_name(report.name + ".unfinished")
            try:
                with unfinished.open("wb") as out:
                    out.write(filled)
                    while chunk := src.read(1 << 20):
                        out.write(chunk)
                os.replace(unfinished, report)
            finally:
                unfinished.unlink(missing_ok=True)
    except FileNotFoundError:
        return False
    return True
