"""The sweep's answer: the best configuration on the chosen metric and those not shown worse than another, with costs.

- A configuration is a set of the sweep's jobs with the same overrides apart from the dataset (``dataset=...`` and
  ``dataset.*``): a sweep over several datasets compares each configuration over the union of its items, paired
  across configurations by (dataset, item id). When that grouping is ambiguous (two jobs of one configuration on
  the same dataset) each job is its own configuration.
- The metric follows from the runs (as ``judgesweep compare`` reduces them, runner.outputs.compare_outcomes):
  accuracy against gold where the items have gold labels (per item, the share of its judgments whose winner is the
  gold label), else the win score of ``ours`` (pairwise) or the mean score (pointwise).
- Only the items every compared configuration judged count; a configuration with a failed job is not compared.
- Tied with the best: not shown worse than another configuration, runner.stats.best (exact paired tests of every
  pair; Bonferroni within a configuration, Holm across them: P(a configuration as good as the best is called
  worse) <= alpha, the choice of the best on the same items included).
- Cost: the list price of the configuration's judge calls (``cost/usd_list``, summed over its jobs) and what the
  sweep paid (``cost/usd_total``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from runner.outputs import compare_outcomes, frontier, sweep
from runner.stats import best

log = logging.getLogger(__name__)

BEST_JSON = "sweep_best.json"
MAX_TAG_CHARS = 5000  # MLflow keeps tag values up to 8,000 characters; the whole list is in sweep_best.json
ALPHA = 0.05
METRICS = {compare_outcomes.CORRECT: "accuracy", compare_outcomes.WIN_SCORE: "win score",
           compare_outcomes.SCORE: "mean score"}
BY_CONFIG, BY_JOB = "overrides_except_dataset", "job"


def _is_dataset(key: str) -> bool:
    return key == "dataset" or key.startswith("dataset.")


def _groups(sweep_dir: Path, rows: Sequence[Mapping[str, Any]]) -> tuple[str, dict[str, list[Mapping[str, Any]]]]:
    """Jobs grouped into configurations (label -> rows) and the grouping rule used."""
    overrides = {row["job"]: sweep.job_overrides(sweep_dir / str(row["job"])) for row in rows}
    config = {job: tuple(sorted((k, v) for k, v in o.items() if not _is_dataset(k))) for job, o in overrides.items()}
    data = {job: tuple(sorted((k, v) for k, v in o.items() if _is_dataset(k))) for job, o in overrides.items()}
    seen: set[tuple] = set()
    grouping = BY_CONFIG
    for row in rows:
        if (config[row["job"]], data[row["job"]]) in seen:
            grouping = BY_JOB
        seen.add((config[row["job"]], data[row["job"]]))
    keys = {job: (job,) if grouping == BY_JOB else config[job] for job in overrides}
    unique = list(dict.fromkeys(keys[row["job"]] for row in rows))
    labels = dict(zip(unique, frontier.config_labels([dict(k) if grouping == BY_CONFIG else {"job": k[0]}
                                                      for k in unique]), strict=True))
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(labels[keys[row["job"]]], []).append(row)
    return grouping, groups


def _job_outcomes(job_dir: Path, data: tuple) -> compare_outcomes.Outcomes | None:
    results = job_dir / "results.jsonl"
    if not results.is_file():
        return None
    config_path = job_dir / ".hydra" / "config.yaml"
    config = yaml.safe_load(config_path.read_text()) if config_path.is_file() else {}
    ours = ((config or {}).get("dataset") or {}).get("ours") or {}
    run = compare_outcomes.RunResults(run_id=job_dir.name, choices=dict(data),
                                      rows=compare_outcomes.read_rows(results), ours=ours.get("name"))
    try:
        return compare_outcomes.outcomes(run)
    except compare_outcomes.ComparisonError:
        return None


def _cost(group: Sequence[Mapping[str, Any]], column: str) -> float | None:
    values = [row.get(column) for row in group]
    return None if all(v is None for v in values) else float(sum(v or 0.0 for v in values))


def _outcomes(sweep_dir: Path, groups: Mapping[str, Sequence[Mapping[str, Any]]]
              ) -> tuple[dict[str, dict[tuple, float]], str | None, list[str]]:
    """Per configuration, its outcome per (dataset, item id); the kind of outcome most configurations have; the
    configurations left out (a failed job, no results, jobs or a configuration with another kind of outcome)."""
    outcomes: dict[str, dict[tuple, float]] = {}
    kinds: dict[str, str] = {}
    not_compared = []
    for label, group in groups.items():
        values: dict[tuple, float] = {}
        found_kinds: set[str | None] = set()
        for row in group:
            job_dir = sweep_dir / str(row["job"])
            data = tuple(sorted((k, v) for k, v in sweep.job_overrides(job_dir).items() if _is_dataset(k)))
            found = _job_outcomes(job_dir, data) if row.get("status") == "ok" else None
            if found is None:
                found_kinds.add(None)
                break
            found_kinds.add(found.kind)
            values.update({(data, *key): value for key, value in found.values.items()})
        if len(found_kinds) != 1 or None in found_kinds:
            not_compared.append(label)
            continue
        outcomes[label], kinds[label] = values, str(found_kinds.pop())
    if not outcomes:
        return {}, None, not_compared
    kind = max(sorted(set(kinds.values())), key=lambda k: sum(v == k for v in kinds.values()))
    not_compared += [label for label in outcomes if kinds[label] != kind]
    return {label: v for label, v in outcomes.items() if kinds[label] == kind}, kind, not_compared


def answer(sweep_dir: Path, rows: Sequence[Mapping[str, Any]], alpha: float = ALPHA) -> dict[str, Any] | None:
    """The sweep's answer (see the module docstring), JSON-ready; None when no configuration has per-item outcomes
    or the configurations share no item.

    Returns:
        ``{"metric", "method", "alpha", "grouping", "items", "items_left_out", "best", "tied_with_best",
        "configurations": [...], "not_compared": [...]}``; each configuration: ``config``, ``jobs``, ``value``,
        ``difference``, ``against`` (the configuration whose paired test is the strongest evidence that it is
        worse; None when none has a higher value), ``p_value`` (that test's one-sided p), ``p_holm`` (the adjusted
        p-value the decision is made on), ``test``, ``tied_with_best``, ``cost_usd_list``, ``cost_usd``.
    """
    grouping, groups = _groups(sweep_dir, rows)
    outcomes, kind, not_compared = _outcomes(sweep_dir, groups)
    items = sorted(set.intersection(*(set(v) for v in outcomes.values())), key=repr) if outcomes else []
    if kind is None or not items:
        return None
    costs = {label: _cost(groups[label], frontier.LIST_COST) for label in outcomes}
    ranked = best.best_set({label: [values[i] for i in items] for label, values in outcomes.items()}, alpha,
                           {label: cost or 0.0 for label, cost in costs.items()})
    configurations = [{"config": c.name, "jobs": [row["job"] for row in groups[c.name]], "value": c.mean,
                       "difference": c.difference, "against": c.against, "p_value": c.p_value,
                       "p_holm": c.p_holm, "test": c.test,
                       "tied_with_best": c.tied_with_best, "cost_usd_list": costs[c.name],
                       "cost_usd": _cost(groups[c.name], "cost $")} for c in ranked]
    union = set().union(*(set(v) for v in outcomes.values()))
    return {"metric": METRICS[kind], "method": best.METHOD, "alpha": alpha, "grouping": grouping,
            "items": len(items), "items_left_out": len(union) - len(items), "best": ranked[0].name,
            "tied_with_best": [c.name for c in ranked[1:] if c.tied_with_best],
            "configurations": configurations, "not_compared": not_compared}


def _money(value: float | None) -> str:
    return "list $ unknown" if value is None else f"list ${value:.2f}"


def _entry(config: Mapping[str, Any], metric: str) -> str:
    return f"{config['config']} ({metric} {config['value']:.3f}, {_money(config['cost_usd_list'])})"


def lines(result: Mapping[str, Any]) -> list[str]:
    """The answer in a few lines: ``best: <config> (accuracy 0.955, list $1.23); tied with best: ...``."""
    metric, configs = result["metric"], result["configurations"]
    tied = [_entry(c, metric) for c in configs[1:] if c["tied_with_best"]]
    out = [f"best: {_entry(configs[0], metric)}; tied with best: {'; '.join(tied) or 'none'}",
           f"  ({len(configs)} configurations on the {result['items']} items all of them judged; tied = no other "
           f"configuration shown better by exact paired sign-flip tests of every pair, Bonferroni-Holm over the "
           f"configurations: one as good as the best is called worse in at most {result['alpha']:g} of sweeps)"]
    if result["not_compared"]:
        out.append(f"  not compared (a failed job or another kind of outcome): {', '.join(result['not_compared'])}")
    return out


def write(sweep_dir: Path, result: Mapping[str, Any]) -> Path:
    """Write the answer as ``sweep_best.json`` into the sweep directory; returns its path."""
    path = sweep_dir / BEST_JSON
    path.write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return path


def tracking_values(result: Mapping[str, Any] | None) -> tuple[dict[str, float], dict[str, str]]:
    """Metrics and tags for the sweep's MLflow run: ``sweep/best_value``, ``sweep/tied_with_best`` (how many) and
    the tags ``sweep/best_config``, ``sweep/tied_with_best`` (the names joined by `` | ``), ``sweep/best_metric``,
    ``sweep/best_method``."""
    if result is None:
        return {}, {}
    metrics = {"sweep/best_value": float(result["configurations"][0]["value"]),
               "sweep/tied_with_best": float(len(result["tied_with_best"])), "sweep/best_items": float(result["items"])}
    tied = " | ".join(result["tied_with_best"])
    tied = tied if len(tied) <= MAX_TAG_CHARS else tied[:MAX_TAG_CHARS] + f" ... (all in {BEST_JSON})"
    tags = {"sweep/best_config": result["best"][:MAX_TAG_CHARS], "sweep/tied_with_best": tied,
            "sweep/best_metric": result["metric"], "sweep/best_method": result["method"]}
    return metrics, tags


def settle(sweep_dir: Path, rows: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any] | None, list[Path]]:
    """The sweep's answer and the file it is written to (``sweep_best.json``); (None, []) when the sweep has no
    answer or it could not be made (with a warning: the sweep's table and report do not depend on it)."""
    try:
        result = answer(sweep_dir, rows)
        return (result, [write(sweep_dir, result)]) if result is not None else (None, [])
    except Exception as exc:  # noqa: BLE001 - the jobs' results are on disk; the answer is a view of them
        log.warning("the sweep's best configuration not computed: %s: %s", type(exc).__name__, exc)
        return None, []
