"""The users' own summary files, one format per workflow (``output.summary_keys=robust_pairwise | agent_rubric |
reply_quality``, set by their presets): users_summary.json with exactly the keys, names and units their scripts
read, built from summary.json's content (which keeps judgesweep's names and every number).

- ``robust_pairwise``: ``summary`` with the users' 10 keys and ``aggregated_results`` (per item: verdicts,
  verdict_counts, final_verdict, confidence). An item without a valid vote is in ``aggregated_results`` with
  ``final_verdict`` null and counts in ``total_subsets`` but not ``successful_evaluations``.
- ``agent_rubric``: ``summary`` (total, passed, failed, pass_rate in percent, average_score, average_by_criterion,
  failed_examples), ``by_tag`` (the same counts per tag) and ``detailed_results`` (per example: scores with tool use
  as ``mcp_usage``, ``pass``, ``suggestions``, ``actual``). ``failed`` is ``total - passed``: an example without a
  score (unparsable answer, failed call, output not generated) is failed, listed in ``failed_examples`` with
  ``overall`` null and its reason as ``reasoning``.
- ``reply_quality``: ``summary`` and ``by_category`` (total, scored, unscored = total - scored, average_score,
  average_by_criterion, consistency over the k repeats with the sample std dev, human_correlation with Pearson's r
  and its p-value, checks) and ``detailed_results`` (per reply: scores,
  overall, repeat_scores, std, human_score, reasoning, suggestions, violations and the texts). An unscored reply
  has ``overall`` null and its reason as ``reasoning``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runner.core.choices import PromptMode, SummaryKeys
from runner.core.errors import ConfigurationError

__all__ = ["FORMATS", "check", "users_format"]

Json = dict[str, Any]

PAIRWISE_SUMMARY = ("evaluation_completed", "num_evaluation_runs", "total_subsets", "successful_evaluations",
                    "final_verdict_distribution", "confidence_distribution", "ours_win_rate", "baseline_win_rate",
                    "tie_rate", "unanimous_agreement_rate")
PAIRWISE_RESULT = ("verdicts", "verdict_counts", "final_verdict", "confidence")
CRITERIA = {"tool_usage": "mcp_usage"}  # judgesweep's criterion -> the users' name
CONSISTENCY = ("repeats", "std", "mean_std", "max_std", "threshold", "items_above_threshold")
CHECK = ("items_checked", "items_with_violations", "violation_rate", "max_rate")


def robust_pairwise(doc: Mapping[str, Any]) -> Json:
    """The robust-pairwise users' summary (see the module docstring)."""
    summary = doc["summary"]
    return {"summary": {key: summary[key] for key in PAIRWISE_SUMMARY},
            "aggregated_results": {item: {key: row[key] for key in PAIRWISE_RESULT}
                                   for item, row in doc["aggregated_results"].items()}}


def agent_rubric(doc: Mapping[str, Any]) -> Json:
    """The agent-rubric users' report (see the module docstring)."""
    rows = doc["detailed_results"]
    failed = {f["id"]: f for f in doc["summary"]["failed_examples"]}
    not_passed = [_failed_example(row, failed.get(row["id"])) for row in rows if row["passed"] is not True]
    return {"summary": {**_agent_section(doc["summary"]), "failed_examples": not_passed},
            "by_tag": {tag: _agent_section(section) for tag, section in doc.get("by_tag", {}).items()},
            "detailed_results": [_agent_row(row) for row in rows]}


def reply_quality(doc: Mapping[str, Any]) -> Json:
    """The reply-quality users' report (see the module docstring)."""
    return {"summary": _reply_section(doc["summary"]),
            "by_category": {name: _reply_section(section) for name, section in doc.get("by_category", {}).items()},
            "detailed_results": [_reply_row(row) for row in doc["detailed_results"]]}


FORMATS: dict[SummaryKeys, tuple[PromptMode, Callable[[Mapping[str, Any]], Json]]] = {
    SummaryKeys.robust_pairwise: (PromptMode.pairwise, robust_pairwise),
    SummaryKeys.agent_rubric: (PromptMode.pointwise, agent_rubric),
    SummaryKeys.reply_quality: (PromptMode.pointwise, reply_quality),
}


def users_format(doc: Mapping[str, Any], keys: SummaryKeys) -> Json:
    """``doc`` (summary.json's content) in the users' format ``keys`` names (one of :data:`FORMATS`)."""
    return FORMATS[keys][1](doc)


def check(keys: SummaryKeys, mode: PromptMode, pass_threshold: float | None) -> None:
    """Refuse, before any call, a users' format the run cannot write.

    Raises:
        ConfigurationError: One line naming ``output.summary_keys``.
    """
    if keys not in FORMATS:
        return
    needed = FORMATS[keys][0]
    if mode is not needed:
        raise ConfigurationError(f"output.summary_keys={keys.value} is the format of a {needed.value} run; this run "
                                 f"is {mode.value} (prompt.mode)")
    if keys is SummaryKeys.agent_rubric and pass_threshold is None:
        raise ConfigurationError("output.summary_keys=agent_rubric reports passed and failed examples: it needs "
                                 "rubric.pass_threshold")


def _percent(rate: float | None) -> float | None:
    return None if rate is None else rate * 100


def _criteria(scores: Mapping[str, Any]) -> Json:
    return {CRITERIA.get(name, name): value for name, value in scores.items()}


def _agent_section(section: Mapping[str, Any]) -> Json:
    passed, total = section["passed"] or 0, section["total"]
    return {"total": total, "passed": passed, "failed": total - passed, "pass_rate": _percent(section["pass_rate"]),
            "average_score": section["average_overall"],
            "average_by_criterion": _criteria(section["average_by_criterion"])}


def _unscored(row: Mapping[str, Any]) -> str:
    """An item without a score, as its reasoning: ``unscored: invalid_json`` (``error: ...``, ``not_generated``)."""
    reasons: Sequence[str] = row.get("unscored_reasons") or ()
    return f"{row['status']}: {', '.join(reasons)}" if reasons else str(row["status"])


def _reasoning(row: Mapping[str, Any]) -> Any:
    return row["reasoning"] if row["status"] == "scored" else _unscored(row)


def _texts(row: Mapping[str, Any]) -> Json:
    return {"input": row.get("input"), "expected_output": row.get("expected_output"), "actual": row.get("output")}


def _failed_example(row: Mapping[str, Any], failed: Mapping[str, Any] | None) -> Json:
    reasoning = failed["reasoning"] if failed is not None else _unscored(row)  # a scored one: its first line
    return {"id": row["id"], "overall": row["overall"], "reasoning": reasoning, **_texts(row)}


def _agent_row(row: Mapping[str, Any]) -> Json:
    return {"id": row["id"], "tags": row["tags"], "scores": _criteria(row["scores"]), "overall": row["overall"],
            "pass": row["passed"] is True, "reasoning": _reasoning(row), "suggestions": row["improvement_suggestions"],
            **_texts(row)}


def _reply_section(section: Mapping[str, Any]) -> Json:
    total, scored = section["total"], section["scored"]
    return {"total": total, "scored": scored, "unscored": total - scored, "average_score": section["average_overall"],
            "average_by_criterion": dict(section["average_by_criterion"]),
            "consistency": _consistency(section.get("consistency")),
            "human_correlation": _human(section.get("human_correlation")),
            "checks": {name: {key: c[key] for key in CHECK} for name, c in (section.get("checks") or {}).items()}}


def _consistency(section: Mapping[str, Any] | None) -> Json | None:
    """Over the k repeats: the std dev's kind (``sample (n-1)``), its mean and max, the items above the threshold."""
    return None if section is None else {key: section.get(key) for key in CONSISTENCY}


def _human(section: Mapping[str, Any] | None) -> Json | None:
    """Against the human ratings: n, Pearson's r and its p-value, Spearman's rho, the share within +-1 point."""
    if section is None:
        return None
    return {"n": section["n"], "pearson": section["pearson"]["r"], "pearson_p": section["pearson"]["p"],
            "spearman": section["spearman"]["rho"], "within_1_rate": section["within_1_rate"]}


def _reply_row(row: Mapping[str, Any]) -> Json:
    return {"id": row["id"], "category": row["category"], "scores": dict(row["scores"]), "overall": row["overall"],
            "repeat_scores": row["repeat_scores"], "std": row["std"], "human_score": row["human_score"],
            "reasoning": _reasoning(row), "suggestions": row["improvement_suggestions"],
            "violations": row["violations"], **_texts(row)}
