"""How large the sweep report's item view (runner/outputs/sweep_items.py) gets, and how long headless chromium takes
to open it, at ITEMS x JOBS: the sweep report of JOBS configurations over ITEMS LLMBar-like item ids (every 7th
cell wrong, every 11th job disagreeing on it, every 50th unscored), drawn by the code the sweep uses.

    python -m benchmarks.sweep_items_size [ITEMS JOBS ...]   # pairs; default 10000 20

``make bench`` runs it as the ``sweep_items`` scenario (10,000 x 20; 1,000 x 5 quick). The open time is chromium's
whole process, launch included, to the page loaded with its first rows drawn (``--dump-dom``), median of 3, beside
the same for an empty page (the launch alone). Nothing here asserts a time.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from runner.outputs import sweep_items, sweep_page

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--hide-scrollbars", "--window-size=1280,900"]
REPS = 3


def synthetic(items: int, jobs: int) -> tuple[list[dict[str, Any]], sweep_items.ItemView]:
    """A sweep table of ``jobs`` rows and its item view over ``items`` items."""
    ids = tuple(f"natural-{k:06d}" for k in range(items))
    rows, columns = [], []
    for j in range(jobs):
        rows.append({"job": j, "judge": f"judge_{j % 4}", "prompt": f"prompt_{j // 4}", "status": "ok",
                     "agreement": 0.8, "agr low": 0.75, "agr high": 0.85})
        cells = {}
        for k, item in enumerate(ids):
            if k % 50 == 0:
                cells[item] = ("no valid vote", "no valid vote", sweep_items.UNSCORED)
                continue
            wrong = (k + j) % 7 == 0
            verdict = "output_2" if wrong or (k % 11 == 0 and j % 2) else "output_1"
            cells[item] = (f"{verdict} (unanimous)", verdict, sweep_items.WRONG if wrong else sweep_items.CORRECT)
        columns.append(sweep_items.Column(j, f"judge=judge_{j % 4} prompt=prompt_{j // 4}", "agreement 0.8 [0.75, "
                                          "0.85]", cells))
    groups = {item: (f"category_{k % 5}",) for k, item in enumerate(ids)}
    return rows, sweep_items.ItemView(ids, groups, tuple(columns))


def open_s(chromium: str, page: Path, tmp: Path) -> float:
    """Median wall of ``chromium --dump-dom page`` over REPS runs (a fresh profile each)."""
    walls = []
    for rep in range(REPS):
        started = time.perf_counter()
        subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp / f'profile-{rep}'}", "--dump-dom",
                        page.as_uri()], capture_output=True, check=True, timeout=300)
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def measure(items: int, jobs: int, browser: bool = True) -> dict[str, Any]:
    """File size, build time and (``browser``, when chromium is installed) chromium open time of the sweep report
    at ``items`` x ``jobs``."""
    rows, view = synthetic(items, jobs)
    started = time.perf_counter()
    page = sweep_page.sweep_report(rows, None, f"{items} x {jobs}", items=view,
                                    links={j: f"{j}/report.html" for j in range(jobs)})
    built = time.perf_counter() - started
    out: dict[str, Any] = {"items": items, "jobs": jobs, "bytes": len(page.encode()), "build_s": round(built, 3)}
    chromium = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None) if browser else None
    if chromium is None:
        out["open_s"] = None  # no browser: the size is still measured
        return out
    with tempfile.TemporaryDirectory(prefix="judgesweep-sweep-items-") as tmp:
        path, empty = Path(tmp) / "report.html", Path(tmp) / "empty.html"
        path.write_text(page, encoding="utf-8")
        empty.write_text("<!doctype html><title>empty</title>", encoding="utf-8")
        out["open_s"] = round(open_s(chromium, path, Path(tmp)), 3)
        out["empty_open_s"] = round(open_s(chromium, empty, Path(tmp)), 3)
    return out


def scenario_sweep_items(cfg: dict, data: Path, work: Path) -> dict[str, Any]:
    """``make bench``'s scenario: :func:`measure` at ``cfg["sweep_items"]`` (items, jobs)."""
    del data, work
    items, jobs = cfg.get("sweep_items", (10_000, 20))
    return measure(items, jobs)


def main(args: list[str]) -> None:
    """Print one line per (items, jobs) pair."""
    pairs = list(zip(map(int, args[::2]), map(int, args[1::2]), strict=True)) or [(10_000, 20)]
    for items, jobs in pairs:
        m = measure(items, jobs)
        opened = "no chromium" if m["open_s"] is None else (f"chromium opens it in {m['open_s']:.2f} s (an empty "
                                                              f"page: {m['empty_open_s']:.2f} s)")
        print(f"{items:>7} items x {jobs:>2} jobs: report.html {m['bytes'] / 1e6:6.2f} MB, built in "
              f"{m['build_s']:.2f} s, {opened}")


if __name__ == "__main__":
    main(sys.argv[1:])
