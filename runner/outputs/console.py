"""The run's console output: its summary lines, a dry run's estimate, one line of output as data."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from runner.modes.pairwise import views as pairwise_views


def render_console(
    summary: dict[str, Any],
    gold: dict[str, Any] | None,
    judge: dict[str, Any],
    title: str,
    console: Console | None = None,
) -> None:
    """Print a pairwise run's headline (runner.modes.pairwise.views.headline_lines) under its title with rich.

    Args:
        summary: The output of :func:`runner.modes.summary.build_summary`.
        gold: The output of :func:`runner.modes.summary.gold_metrics`, or None.
        judge: The output of :func:`runner.modes.summary.judge_metrics`.
        title: Heading, e.g. the run or experiment name.
        console: Where to print; a new ``Console()`` when None.
    """
    console = console or Console()
    print_title(title, console)
    for line in pairwise_views.headline_lines(summary, gold, judge):
        print_line(line, console)


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
        "cost: free (judge.free_tier)" if getattr(e, "free", False) else
        f"cost: prompts {usd(e.usd_prompt)}, at most {usd(e.usd_max)}",
    ]
    if getattr(e, "batch_usd_max", None) is not None:  # judge.batch: the same calls at the batch price
        lines.append(f"cost through the batch API: prompts {usd(e.batch_usd_prompt)}, at most {usd(e.batch_usd_max)}")
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def print_title(title: str, console: Console | None = None) -> None:
    """Print a run's title in bold (as data, never as rich markup)."""
    (console or Console()).print(Text(title, style="bold"), soft_wrap=True)


def print_line(line: str, console: Console | None = None) -> None:
    """Print one line of run output as data (never as rich markup)."""
    (console or Console()).print(line, markup=False, highlight=False, soft_wrap=True)
