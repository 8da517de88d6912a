"""One judgment as a trace shows it (:class:`TraceRecord`): what runner.outputs.tracking.traces writes and
runner.outputs.tracking.feedback scores, in a module that imports neither."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TraceRecord:
    """One judgment as a trace shows it (built by the run from its results rows and message store)."""

    item_id: str
    repeat: int
    order: str | None
    stage: str
    messages: Sequence[Mapping[str, str]] | None  # None when the message store has no entry
    messages_sha256: str | None
    raw_response: str | None
    status: str
    label: str | None  # the parsed verdict label (pairwise)
    winner: str | None
    scores: Mapping[str, float] | None  # pointwise criteria
    score: float | None  # pointwise overall
    parse_error: str | None
    latency_s: float = 0.0
    attempts: int = 1
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    expectations: Mapping[str, Any] = field(default_factory=dict)  # gold, human_score
    judge_model: str = ""  # the litellm model string: the Feedback's source
    member: str | None = None  # an ensemble's member that answered
    inputs: Mapping[str, Any] | None = None  # the item's own fields (the request); None: its id alone
    pass_threshold: float | None = None  # pointwise: the overall score that passes (a ``pass`` Feedback)

    @property
    def key(self) -> str:
        """The judgment's identity within a run (as the journal keys it, and the member of an ensemble)."""
        return f"{self.member or ''}|{self.item_id}|{self.repeat}|{self.order or ''}|{self.stage}"
