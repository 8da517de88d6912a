"""A section of the HTML report as data (:class:`View`) and its table cells' text (:func:`cell`).

A leaf of runner.modes: the statistic registry (runner.modes.statistics) and every mode's views use it, and it
imports nothing of the package, so neither reaches back into the interface (runner.modes.base).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class View:
    """One section of the HTML report, as data.

    Attributes:
        title: The section's heading.
        plot: The kind of plot runner.outputs.html_report draws (``verdicts``, ``confusion``, ``histogram``,
            ``bars``), or None for a table or notes only.
        data: The plot's keyword arguments (plain JSON values).
        columns, rows: A table (cells already formatted as text, or numbers the report formats).
        notes: Sentences under the section.
    """

    title: str
    plot: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    notes: tuple[str, ...] = ()


def cell(value: Any) -> str:
    """A table cell: 4 significant digits for floats (whole numbers from 1000 up), ``-`` for missing values."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)
