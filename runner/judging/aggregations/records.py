"""What a label aggregation returns: the confidences of a vote, and an ensemble's verdict on every item."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

UNANIMOUS = "unanimous"
MAJORITY = "majority"
NO_CONSENSUS = "no_consensus"
CONFIDENCES = (UNANIMOUS, MAJORITY, NO_CONSENSUS)


@dataclass(frozen=True)
class EnsembleItem:
    """The ensemble's verdict on one item.

    Attributes:
        item: The item key.
        label: The ensemble label; ``"tie"`` without a strict majority, ``None`` when no judge voted.
        confidence: ``unanimous``, ``majority`` or ``no_consensus``; ``None`` when no judge voted.
        votes: Judge -> label, only the judges that voted.
        posterior: Label -> posterior probability (``dawid_skene`` only).
    """

    item: str
    label: Hashable | None
    confidence: str | None
    votes: Mapping[str, Hashable]
    posterior: Mapping[Hashable, float] | None = None


@dataclass(frozen=True)
class EnsembleResult:
    """The outcome of one label aggregation over every item.

    Attributes:
        method: The aggregation's registered name.
        items: Item key -> :class:`EnsembleItem`, items in first-seen order.
        weights: Judge -> weight used (1.0 each for ``majority_vote``); ``None`` for ``dawid_skene``, whose
            confusion matrices play that role.
        estimated_accuracy: Judge -> Dawid-Skene estimated accuracy (``dawid_skene`` only).
        fit: Everything :func:`runner.stats.dawid_skene.dawid_skene` returned (``dawid_skene`` only).
    """

    method: str
    items: Mapping[str, EnsembleItem]
    weights: Mapping[str, float] | None = None
    estimated_accuracy: Mapping[str, float | None] | None = None
    fit: Mapping[str, Any] = field(default_factory=dict)

    @property
    def labels(self) -> dict[str, Hashable | None]:
        """Item key -> ensemble label."""
        return {key: entry.label for key, entry in self.items.items()}
