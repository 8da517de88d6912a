"""The run's console output: its summary lines, a dry run's estimate, one line of output as data."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text


def _pct(value: float | None) -> str:
    """Format a fraction as a percentage with one decimal, or ``n/a``."""
    return "n/a" if value is None else f"{value * 100:.1f}%"


def _gold_line(gold: dict[str, Any]) -> str:
    """One console line with the gold accuracies."""
    if gold["accuracy_mean"] is None:  # a single order was judged
        return f"accuracy {_pct(gold['accuracy_overall'])} ({gold['n_pairs']} pairs, one order)"
    return (
        f"accuracy AB {_pct(gold['accuracy_ab'])} / BA {_pct(gold['accuracy_ba'])} / "
        f"mean {_pct(gold['accuracy_mean'])} / both {_pct(gold['correct_both'])} / "
        f"positional agreement {_pct(gold['positional_agreement'])}"
    )


def render_console(
    summary: dict[str, Any],
    gold: dict[str, Any] | None,
    judge: dict[str, Any],
    title: str,
    console: Console | None = None,
) -> None:
    """Print a compact run summary (at most a dozen lines) with rich.

    Args:
        summary: The output of :func:`build_summary`.
        gold: The output of :func:`gold_metrics`, or None.
        judge: The output of :func:`judge_metrics`.
        title: Heading, e.g. the run or experiment name.
        console: Where to print; a new ``Console()`` when None.
    """
    console = console or Console()
    s = summary["summary"]
    dist = ", ".join(f"{label} {n}" for label, n in s["final_verdict_distribution"].items())
    conf = ", ".join(f"{name} {n}" for name, n in s["confidence_distribution"].items())
    prefix = "parse_failures/"
    failures = ", ".join(f"{k[len(prefix) :]} {v}" for k, v in judge.items() if k.startswith(prefix))
    lines = [
        f"items {s['total_subsets']}, successful {s['successful_evaluations']}, "
        f"failed {len(s['failed_items'])}",
        f"verdicts: {dist}",
        f"confidence: {conf}",
        f"win rate ours {_pct(s['ours_win_rate'])} / baseline {_pct(s['baseline_win_rate'])} / "
        f"tie {_pct(s['tie_rate'])}; unanimous {_pct(s['unanimous_agreement_rate'])}",
    ]
    if gold is not None:
        lines.append(_gold_line(gold))
    lines += [
        f"judge calls {judge['judge/calls']}: unscored {judge['judge/unscored']} "
        f"({_pct(judge['judge/parse_failure_rate'])}), errors {judge['judge/errors']}"
        + (f"; parse failures: {failures}" if failures else ""),
        f"tokens {judge['tokens/prompt']} + {judge['tokens/completion']} = {judge['tokens/total']}, "
        f"cost ${judge['cost/usd_total']:.4f} ({judge['cost/unknown_calls']} calls unpriced)",
        f"calls made {judge['calls/made']}, cache hits {judge['calls/cache_hits']} "
        f"(saved ${judge['cost/usd_saved']:.4f}), resumed {judge['calls/resumed']}, "
        f"retries {judge['calls/retries']}, 429s {judge['calls/rate_limited']}",
    ]
    console.print(Text(title, style="bold"), soft_wrap=True)
    for line in lines:  # labels and reasons are data: never read them as rich markup
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def render_estimate(estimate: Any, console: Console | None = None) -> None:
    """Print a dry run's estimate: calls, tokens and dollars for the judge (nothing was called).

    Args:
        estimate: A :class:`runner.judging.estimate.Estimate`.
        console: Where to print; a new ``Console()`` when None.
    """
    console = console or Console()
    e = estimate

    def usd(value: float | None) -> str:
        return "unpriced (not in litellm's cost map)" if value is None else f"${value:.4f}"

    lines = [
        f"dry run, no call made: {e.role} {e.judge} ({e.model})",
        f"calls {e.calls}" + (f" (+ up to {e.conditional_calls} synthesis calls)" if e.conditional_calls else ""),
        f"prompt tokens {e.prompt_tokens}, completion tokens at most {e.max_completion_tokens}",
        f"cost: prompts {usd(e.usd_prompt)}, at most {usd(e.usd_max)}",
    ]
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def print_line(line: str, console: Console | None = None) -> None:
    """Print one line of run output as data (never as rich markup)."""
    (console or Console()).print(line, markup=False, highlight=False, soft_wrap=True)
