"""The MLflow-free part of tracking: the tags, limits and records the tracking modules share.

Nothing here imports mlflow, so the results API and the CLI can name a tag or build a record without it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_PARAM_CHARS = 6000  # MLflow's limit on one param value
BATCH = 100  # MLflow's limit on params per log_batch call
# Names that hold credentials. A bare "key" is not one (rubric.parser.params.key names a JSON field).
# MLflow's param names (mlflow.utils.validation, POSIX): word characters, dashes, periods, spaces, colons, slashes
_UNSAFE_PARAM = re.compile(r"[^\w\-. :/]")
SECRET_KEY = re.compile(r"(^|[._])(api_key|apikey|private_key|token|access_token|secret|password)$", re.IGNORECASE)
ARTIFACTS = ("summary.json", "metrics.json", "results.jsonl", "journal.jsonl", "generations.jsonl", "run.json",
             "report.html")

SWEEP_TAG = "judgesweep.sweep"
# a job's group choices (judge=x,prompt=y,...): what a gate's "latest on <branch>" baseline must share
CONFIG_TAG = "judgesweep.config"
KIND_TAG = "judgesweep.kind"
COMPARISON_KIND = "comparison"
SWEEP_KIND = "sweep"


@dataclass(frozen=True)
class RunRecord:
    """What is logged when a run ends."""

    metrics: Mapping[str, float]
    run_dir: Path
    resolved_config_yaml: str
    rows: list[dict[str, Any]] = field(default_factory=list)  # per-judgment results with raw responses
    failed: bool = False


@dataclass(frozen=True)
class TrackedRun:
    """An MLflow run as ``judgesweep compare`` sees it."""

    run_id: str
    run_name: str
    status: str
    start_time: int
    params: Mapping[str, str]
    tags: Mapping[str, str]


def safe_params(params: Mapping[str, Any]) -> dict[str, str]:
    """Drop anything named like a credential, clip values to MLflow's limit and spell each key in the characters
    MLflow takes (:func:`param_key`)."""
    out = {}
    for key, value in params.items():
        if SECRET_KEY.search(key):
            continue
        text = "" if value is None else str(value)
        out[param_key(key)] = text[:MAX_PARAM_CHARS]
    return out


def param_key(key: str) -> str:
    """``key`` with every character MLflow refuses in a param name written as ``_<hex code>_``, so keys that differ
    stay different: a rubric's verdict tokens ``A>>B`` and ``A=B`` (``rubric.parser.params.tokens.A_3e__3e_B.label``),
    a gold map's ``"A>B"``."""
    return _UNSAFE_PARAM.sub(lambda match: f"_{ord(match.group()):x}_", key)
