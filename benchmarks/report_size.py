"""How large report.html's drill-down gets, and how long it takes to build and draw, at 1,000 / 10,000 / 100,000
items: LLMBar Natural's items (their real texts) and GPT-4's recorded answers repeated under new ids, 2 orders each,
every 10th item flipped so the filters have something to show.

    python -m benchmarks.report_size [SIZES ...]
"""

from __future__ import annotations

import json
import sys
import time
from importlib import resources

from runner.core.types import Candidate, Item, JudgeRequest, JudgeResponse, Judgment, Order, Status, Verdict
from runner.inputs.datasets import ItemRef
from runner.modes import drilldown
from runner.outputs import html_report


def synthetic(n: int) -> tuple[list[ItemRef], list[Judgment], list[Item]]:
    """n items made of Natural's 100 rows, with two answered orders each."""
    rows = [json.loads(line) for line in
            resources.files("runner").joinpath("data/llmbar/natural.jsonl").read_text().splitlines()]
    refs, judgments, items = [], [], []
    for k in range(n):
        row, item_id = rows[k % len(rows)], f"item-{k:06d}"
        refs.append(ItemRef(item_id, "output_1", f"natural.jsonl:{k}"))
        items.append(Item(item_id, {"instruction": row["input"]},
                          (Candidate("output_1", row["output_1"]), Candidate("output_2", row["output_2"]))))
        for order in (Order.AB, Order.BA):
            winner = "output_2" if k % 10 == 0 and order is Order.BA else "output_1"
            judgments.append(Judgment(JudgeRequest(item_id, 0, order, "judge", "h"), JudgeResponse("Output (a)"),
                                      Verdict("A"), winner, Status.SCORED))
    return refs, judgments, items


def main(sizes: list[int]) -> None:
    """Print one line per size: items drawn, the file's size, build and draw seconds."""
    for n in sizes:
        refs, judgments, items = synthetic(n)
        started = time.perf_counter()
        d = drilldown.build(refs, {}, judgments, lambda js=judgments: js, lambda its=items: its)
        built = time.perf_counter()
        html = html_report.run_report({}, {}, f"{n} items", "pairwise", d)
        drawn = time.perf_counter()
        print(f"{n:>7} items: {len(d.entries):>5} drawn, report.html {len(html.encode()) / 1e6:6.2f} MB, "
              f"build {built - started:5.2f} s, draw {drawn - built:5.2f} s")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [100, 1_000, 10_000])
