"""Unit tests for the sweep report's item view (runner.outputs.sweep_items): what it reads from the job directories
and how compactly it holds it (issue 33.1). Files only, no sockets."""

from __future__ import annotations

import json
import re
from pathlib import Path

from runner.outputs import sweep_items, sweep_page


def job(root: Path, n: int, finals: dict[str, str | None], failed: bool = False, summary: bool = True) -> None:
    """A pairwise job directory: results.jsonl (gold "ours", a tag on i1), summary.json, view.json."""
    d = root / str(n)
    d.mkdir()
    (d / "results.jsonl").write_text("".join(json.dumps({"item_id": i, "gold": "ours", "winner": w,
                                                         **({"tags": ["math"]} if i == "i1" else {})}) + "\n"
                                             for i, w in finals.items()))
    (d / "view.json").write_text(json.dumps({"params": {"prompt.mode": "pairwise"}}))
    if summary:
        (d / "summary.json").write_text(json.dumps({"summary": {}, "trust": {}, "aggregated_results": {
            i: {"verdicts": [w] if w else [], "verdict_counts": {w: 1} if w else {}, "final_verdict": w,
                "confidence": "unanimous" if w else None} for i, w in finals.items()}}))
    if failed:
        (d / "failure.json").write_text('{"reason": "gate.min_agreement"}')


def test_each_jobs_verdicts_with_chips_and_a_job_without_a_summary_is_failed_throughout(tmp_path):
    job(tmp_path, 0, {"i1": "ours", "i2": "baseline", "i3": None}, failed=True)  # failed by its gate: still drawn
    job(tmp_path, 1, {"i1": "ours", "i2": "ours"}, summary=False)
    rows = [{"job": 0, "judge": "a", "max_items": "3", "status": "failed", "agreement": 0.5, "agr low": 0.1,
             "agr high": 0.9},
            {"job": 1, "judge": "b", "max_items": "3", "status": "failed"}]
    view = sweep_items.collect(tmp_path, rows)
    assert view.items == ("i1", "i2", "i3") and view.groups["i1"] == ("math",)
    first, second = view.columns
    assert first.label == "judge=a" and first.headline == "agreement 0.5 [0.1, 0.9]" and not first.failed
    assert first.cells == {"i1": ("ours (unanimous)", "ours", "c"), "i2": ("baseline (unanimous)", "baseline", "w"),
                           "i3": ("no valid vote", "no valid vote", "u")}
    assert second.failed and second.cells == {}

    data = json.loads(sweep_items.blob(view, {0: "0/report.html"}))
    assert [j["st"] for j in data["jobs"]] == ["cwu", "xxx"]
    assert [data["s"][t] for t in data["jobs"][0]["t"]] == ["ours (unanimous)", "baseline (unanimous)",
                                                            "no valid vote"]
    assert data["jobs"][1]["href"] == "" and data["groups"] == ["math"] and data["ig"] == [[0], [], []]


def test_the_blob_cannot_end_its_script_element_and_the_page_fetches_nothing(tmp_path):
    hostile = "</script><script>alert(1)</script><!--"
    job(tmp_path, 0, {hostile: "ours"})
    view = sweep_items.collect(tmp_path, [{"job": 0, "status": "ok"}])
    page = sweep_page.sweep_report([{"job": 0, "status": "ok"}], None, "s", items=view)
    blob = re.search(r'<script type="application/json">(.*?)</script>', page, re.S).group(1)
    assert "<" not in blob and json.loads(blob)["items"] == [hostile]
    assert not re.search(r'(src|href)="(?!data:)', page)  # nothing fetched; cell links are made by the script
