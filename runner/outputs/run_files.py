"""The files and console summary of a finished run, all from its typed report: the one path that a run, a resume and
``judgesweep aggregate`` take (MLflow is then written from these files: runner.outputs.publishing).

:func:`write` writes results.jsonl (each judgment with its item's labels and posterior), an ensemble's members'
files, summary.json (and users_summary.json), metrics.json, report.html and view.json, last, since a directory with
view.json and metrics.json is a finished run to publish; then it prints the console summary.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.core.choices import SummaryKeys
from runner.core.types import Judgment
from runner.inputs.datasets import ItemRef
from runner.judging.progress import Phases
from runner.modes import panel
from runner.modes.base import Report, RunMode
from runner.modes.drilldown import Drilldown
from runner.modes.users_formats import users_format
from runner.modes.users_summary import USERS_SUMMARY_NAME, users_keys
from runner.outputs import console, html_report, publishing
from runner.storage import store

__all__ = ["RunFiles", "Written", "item_labels", "write", "write_results", "write_summary"]


@dataclass(frozen=True)
class RunFiles:
    """What one finished run (or aggregation) writes; every number comes from ``report``, already ended (its gates,
    skipped rows and partial mark: runner.modes.sections.RunEnd)."""

    run_dir: Path
    title: str  # the run's name
    mode: RunMode
    report: Report
    metrics: Mapping[str, float]  # the report's, the calls', the costs', the gates'
    judge_stats: Mapping[str, Any]  # runner.modes.summary.judge_metrics (the console's call counts)
    judgments: Callable[[], Iterable[Judgment]]  # every judgment in results.jsonl's order, with its answer text
    refs: Sequence[ItemRef]
    summary_keys: SummaryKeys
    view: Mapping[str, Any]  # view.json (runner.outputs.publishing.write_view)
    judges: Sequence[str] | None = None  # an ensemble's: the member of each judgment
    # an ensemble's: member -> its judgments with their texts (its files go under members/<name>/)
    members: Mapping[str, Callable[[], Iterable[Judgment]]] = field(default_factory=dict)
    started: float | None = None  # time.monotonic() when the run started: metrics get run/wall_s
    drilldown: Callable[[], Drilldown] | None = None  # the report's items (a run's: its answers and inputs)
    header: html_report.RunHeader | None = None
    closing: Sequence[str] = ()  # console lines after the report's path
    plots: bool = True  # output.plots: report.html's figures drawn (false: its tables only, matplotlib not imported)


@dataclass(frozen=True)
class Written:
    """What :func:`write` wrote: the report's path (None: it could not be drawn) and the metrics of metrics.json."""

    report_path: Path | None
    metrics: Mapping[str, float]


def write(files: RunFiles, steps: Phases | None = None) -> Written:
    """Write the run directory from ``files.report`` (see the module docstring) and print its console summary;
    ``steps`` shows which file is being written."""
    steps = steps or Phases()
    run_dir, report, typed = files.run_dir, files.report, files.report.typed
    run_dir.mkdir(parents=True, exist_ok=True)
    steps.now("writing results.jsonl")
    labels = item_labels(files.refs)
    write_results(run_dir, files.judgments(), item_labels(files.refs, files.mode.posteriors(typed)), files.judges)
    for name, judgments in files.members.items():  # each member's own results, summary and metrics
        member_dir = run_dir / panel.MEMBERS_DIR / name
        member_dir.mkdir(parents=True, exist_ok=True)
        member = report.members[name]
        write_results(member_dir, judgments(), labels)
        store.write_json(member_dir / store.SUMMARY_NAME, member.to_json())
        store.write_json(member_dir / store.METRICS_NAME, dict(sorted(member.metrics.items())))
    steps.now("writing summary")
    write_summary(run_dir, report.to_json(), files.summary_keys)  # the dict is dropped before the HTML (issue 12)
    metrics = dict(files.metrics)
    if files.started is not None:
        metrics["run/wall_s"] = time.monotonic() - files.started
    store.write_json(run_dir / store.METRICS_NAME, dict(sorted(metrics.items())))
    steps.now("writing report.html")
    gates = report.gates
    report_path = html_report.write_run_report(run_dir, typed, metrics, files.title, files.mode.name, files.drilldown,
                                               files.header, files.plots)
    publishing.write_view(run_dir, files.view)
    partial = report.partial_reason
    lines = [*files.mode.console_lines(typed, files.judge_stats),
             *([f"PARTIAL: {partial}"] if partial is not None else []),
             *[("PASS " if g.passed else "FAIL ") + g.message for g in gates],
             *([f"report: {report_path}"] if report_path is not None else []), *files.closing]
    console.print_title(files.title)
    for line in lines:
        console.print_line(line)
    return Written(report_path, metrics)


def write_results(run_dir: Path, judgments: Iterable[Judgment], labels: Mapping[str, dict],
                  judges: Sequence[str] | None = None) -> None:
    """``run_dir``/results.jsonl: every judgment with its item's labels (runner.storage.store.write_results)."""
    store.write_results(run_dir / store.RESULTS_NAME, judgments, labels, judges)


def write_summary(run_dir: Path, summary: Mapping[str, Any], keys: SummaryKeys) -> None:
    """summary.json, and with ``keys`` users the same under the users' key names (users_summary.json), with a
    workflow's name (robust_pairwise, agent_rubric, reply_quality) the users' own format of it."""
    store.write_json(run_dir / store.SUMMARY_NAME, summary)
    if keys is SummaryKeys.users:
        store.write_json(run_dir / USERS_SUMMARY_NAME, users_keys(summary))
    elif keys is not SummaryKeys.judgesweep:
        store.write_json(run_dir / USERS_SUMMARY_NAME, users_format(summary, keys))


def item_labels(refs: Sequence[ItemRef], posterior_of: Mapping[str, Any] | None = None) -> dict[str, dict]:
    """Item id -> its gold label and human score, for the items that have either, its ``tags`` and ``category`` where
    it has them, and its ``posterior`` (label -> p, the ensemble's) for the items that have one: what results.jsonl
    adds to each judgment of the item."""
    labels: dict[str, dict] = {r.id: {"gold": r.gold, "human_score": r.human_score} for r in refs
                               if r.gold is not None or r.human_score is not None}
    for r in refs:  # the sweep report's tag/category filter reads them from results.jsonl
        if r.tags or r.category:
            labels.setdefault(r.id, {}).update(({"tags": list(r.tags)} if r.tags else {}) |
                                               ({"category": r.category} if r.category else {}))
    for item, posterior in (posterior_of or {}).items():
        labels.setdefault(item, {})["posterior"] = posterior
    return labels
