"""Where a large run's memory goes: RSS after each stage, in one fresh process, without a server.

Stages, in the order ``runner.run.pipeline`` goes through them: interpreter; ``import runner.app.cli``;
``load_items`` (what the run keeps of the dataset); a ``Judgment`` per item shaped like a real answer
(kept in a list, as ``runner.judging.judge.Executor.run`` keeps them); the results file
(``store.write_results``); the aggregation and the summary; the summary file (``store.write_json``).
Last, for comparison, every ``Item`` held in memory at once (``LoadedDataset.items``). RSS is read
from /proc/self/statm after ``gc.collect()``, the peak so far from ``ru_maxrss`` after each stage.

Standalone: ``python -m benchmarks.memory_probe DATASET.jsonl N``.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    """Current resident set size in MB."""
    gc.collect()
    return int(Path("/proc/self/statm").read_text().split()[1]) * PAGE / 2**20


def peak_mb() -> float:
    """Peak resident set size of this process so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    """Command-line entry point; prints one JSON object."""
    dataset, n = Path(sys.argv[1]), int(sys.argv[2])
    stages: list[tuple[str, float, float]] = [("interpreter", rss_mb(), peak_mb())]
    started = time.perf_counter()
    import runner.app.cli  # noqa: F401

    stages.append((f"import runner.app.cli (mlflow imported: {'mlflow' in sys.modules})", rss_mb(), peak_mb()))
    import_s = time.perf_counter() - started

    from runner.core.choices import OnBadRow
    from runner.core.config import DatasetConfig, SystemConfig
    from runner.core.types import JudgeRequest, JudgeResponse, Judgment, Order, Status, Verdict
    from runner.inputs.datasets import load_items
    from runner.judging import aggregation
    from runner.modes import summary as report
    from runner.storage import store

    cfg = DatasetConfig(name="chat_vs_simple", path=str(dataset), id_field="id", variables={"instruction": "prompt"},
                        ours=SystemConfig(name="chat", field="chat"),
                        baseline=SystemConfig(name="simple-chat", field="simple_chat"))
    loaded = load_items(cfg, dataset, n, on_bad_row=OnBadRow.error)
    refs = getattr(loaded, "refs", None) or loaded.items  # older runner/: the items themselves
    stages.append((f"load_items: what a run keeps of {len(refs):,} rows", rss_mb(), peak_mb()))
    judgments = []
    for i, item in enumerate(refs):
        request = JudgeRequest(item.id, 0, Order.AB, "judge", f"{i:064x}")
        response = JudgeResponse(text="[[A]]", finish_reason="stop", prompt_tokens=1090 + i % 7, completion_tokens=2,
                                 latency_s=0.01 + i * 1e-9)
        judgments.append(Judgment(request, response, Verdict(label="A"), "chat", Status.SCORED))
    stages.append((f"{len(judgments):,} judgments held (one per item)", rss_mb(), peak_mb()))
    with tempfile.TemporaryDirectory() as tmp:
        store.write_results(Path(tmp) / "results.jsonl", judgments)
        stages.append(("write_results", rss_mb(), peak_mb()))
        results = aggregation.aggregate_items(judgments, [i.id for i in refs], "majority_vote", {})
        summary = report.build_summary(results, judgments, "chat", "simple-chat", 1)
        stages.append(("aggregate_items + build_summary", rss_mb(), peak_mb()))
        store.write_json(Path(tmp) / "summary.json", summary)
        stages.append(("store.write_json(summary.json)", rss_mb(), peak_mb()))
        del summary, results
    items = loaded.items
    stages.append((f"for comparison: all {len(items):,} Items held at once", rss_mb(), peak_mb()))
    del items
    out = {"n": len(refs), "import_s": round(import_s, 2), "peak_rss_mb": resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss / 1024, "stages": []}
    previous = 0.0
    for label, value, peak in stages:
        out["stages"].append({"stage": label, "rss_mb": round(value, 1), "delta_mb": round(value - previous, 1),
                              "peak_so_far_mb": round(peak, 1)})
        previous = value
    print(json.dumps(out))


if __name__ == "__main__":
    main()
