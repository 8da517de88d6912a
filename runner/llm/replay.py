"""Recorded judge answers, looked up by the exact request that produced them.

A recording is a JSONL file of ``{"key": hash_messages(...), "text": ..., "finish_reason": ...}``
lines (plus provenance fields). The replay judge answers a request only when its rendered messages
hash to a recorded key, so a prompt that differs by one character from what was recorded fails
loudly instead of returning an answer to a different question.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path

from runner.core.types import Message, hash_messages

# Where recordings are shipped inside the package, searched in this order; a recording's file stem is its name
# (``replay/<name>`` as a model string), so stems must be unique across these folders.
RECORDINGS_PACKAGE_DIRS = ("data/llmbar/replay", "data/pandalm/replay", "data/alpaca_eval/replay")


class ReplayMiss(LookupError):
    """The recording holds no answer for this request."""


@dataclass(frozen=True)
class RecordedAnswer:
    """One recorded completion."""

    text: str
    finish_reason: str


@cache
def _recording_dirs() -> tuple[Path, ...]:
    """The package's recording folders, found once (a lookup per replayed call asks for them)."""
    return tuple(Path(str(resources.files("runner").joinpath(folder))) for folder in RECORDINGS_PACKAGE_DIRS)


def recorded_models() -> list[str]:
    """The names of every shipped recording (e.g. ``gpt-4``, ``pandalm-gpt-3.5-turbo``)."""
    return sorted(p.stem for folder in _recording_dirs() for p in folder.glob("*.jsonl"))


def recording_path(model: str) -> Path:
    """Where the recording ``model`` (e.g. ``gpt-4``, ``alpaca_eval-gpt4``) is shipped inside the package: the
    first folder of RECORDINGS_PACKAGE_DIRS holding ``<model>.jsonl`` (the first folder when none does)."""
    paths = [folder / f"{model}.jsonl" for folder in _recording_dirs()]
    return next((p for p in paths if p.is_file()), paths[0])


@lru_cache(maxsize=8)
def load_recording(path: Path) -> dict[str, RecordedAnswer]:
    """Read a recording file into a key -> answer map (cached per path)."""
    if not path.is_file():
        raise ReplayMiss(f"no replay recording {path.stem}; recorded models: {recorded_models()}")
    answers: dict[str, RecordedAnswer] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            answers[row["key"]] = RecordedAnswer(text=row["text"], finish_reason=row["finish_reason"] or "stop")
    return answers


def lookup(model: str, messages: list[Message]) -> RecordedAnswer:
    """Return the recorded answer to exactly these messages.

    Raises:
        ReplayMiss: Naming the model and the request hash when nothing was recorded for it.
    """
    answers = load_recording(recording_path(model))
    key = hash_messages(messages)
    try:
        return answers[key]
    except KeyError:
        raise ReplayMiss(
            f"replay/{model}: the recording holds no answer for this request (messages sha256 {key[:16]}...). "
            "Replay judges only answer the exact prompts that were recorded: the template, dataset and order "
            "named in the recording's README under runner/data/ (e.g. LLMBar's templates on the LLMBar data)."
        ) from None
