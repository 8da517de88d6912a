"""Votes of several judges on the same items, as the ensemble and Dawid-Skene read them.

``votes`` maps judge name -> item key -> label (or score), ``None`` where that judge has no valid verdict.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

Votes = Mapping[str, Mapping[str, Any]]


def cast_votes(votes: Votes, key: str) -> dict[str, Hashable]:
    """Judge -> label for the judges that voted on item ``key``."""
    return {judge: by_item[key] for judge, by_item in votes.items() if by_item.get(key) is not None}


def item_keys(votes: Votes) -> list[str]:
    """Every item key in any judge's votes, in first-seen order."""
    return list(dict.fromkeys(key for by_item in votes.values() for key in by_item))


def sorted_labels(votes: Votes) -> list[Hashable]:
    """Every label voted, sorted by ``str`` so that labels of mixed types still sort."""
    return sorted({v for by_item in votes.values() for v in by_item.values() if v is not None}, key=str)
