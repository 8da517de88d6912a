"""The ``batch`` scenario of ``make bench`` (issue 34 point 6): the same judgments live and through the fake
server's OpenAI Files and Batches API (``judge.batch=on``), priced at gpt-4o-mini's cost-map prices
(``judge.price_as``): requests made, wall time, dollars."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.harness import FakeServer, journal_summary, judgesweep_cmd
from benchmarks.scenarios import server_run

PRICE_AS = "gpt-4o-mini"
MAX_SHARE = 0.55  # a batched run's dollars / the live run's: the cost map's batch prices are half the live ones


def _dollars(run_dir: Path) -> float | None:
    metrics = run_dir / "metrics.json"
    return json.loads(metrics.read_text()).get("cost/usd_total") if metrics.is_file() else None


def scenario_batch(cfg: dict, data: Path, work: Path) -> dict[str, Any]:
    """``batch_n`` judgments (one order), live then batched, against one fake server with no latency."""
    n = cfg["batch_n"]
    runs: dict[str, dict[str, Any]] = {}
    with FakeServer(latency_ms=0) as srv:
        for name, extra in (("live", ()), ("batch", ("judge.batch=on", "batch.poll_s=0.2"))):
            run_dir = work / f"batch_{name}"
            before = srv.stats()  # the Files/Batches counters are not reset between runs
            m, stats = server_run(srv, judgesweep_cmd(srv.base_url, data, n, run_dir, work / f"batch_{name}.sqlite",
                                                      extra=(f"judge.price_as={PRICE_AS}", *extra)), work,
                                  f"batch_{name}")
            journal = journal_summary(run_dir)
            runs[name] = {"rc": m.rc, "wall_s": round(m.wall_s, 2), "chat_requests": stats["requests"],
                          "batch_api_requests": stats["batch_api_requests"] - before["batch_api_requests"],
                          "batches_created": stats["batches_created"] - before["batches_created"],
                          "usd": _dollars(run_dir), "scored": journal["status"].get("scored", 0),
                          "results_rows": journal["results_rows"]}
            if m.rc != 0:
                runs[name]["error_tail"] = m.tail()
    live, batch = runs["live"], runs["batch"]
    complete = all(r["rc"] == 0 and r["scored"] == n and r["results_rows"] == n for r in runs.values())
    share = batch["usd"] / live["usd"] if live["usd"] and batch["usd"] is not None else None
    ok = (complete and batch["chat_requests"] == 0 and batch["batches_created"] == 1 and share is not None
          and share <= MAX_SHARE)
    return {"judgments": n, "price_as": PRICE_AS, "runs": runs, "usd_share": round(share, 3) if share else None,
            "target": f"every judgment scored both ways; batched: 1 batch, 0 live calls, dollars <= {MAX_SHARE:.0%} "
                      "of live", "pass": ok}
