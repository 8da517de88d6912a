"""The records a run is handed and hands on: its context (from the CLI), its validated inputs (from
:func:`runner.run.pipeline.prepare`) and its outcome, with the two facts both the paid stages and the report need
(the items to judge, an ensemble's member directories)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.core.config import RunConfig
from runner.core.types import Item, Secret
from runner.inputs.datasets import ItemRef, LoadedDataset
from runner.judging.generation import Generation, with_outputs
from runner.judging.judge import JudgePlan
from runner.judging.progress import ProgressOptions
from runner.llm.pacing import RateLimiter
from runner.modes import panel, pointwise
from runner.modes.base import ModeSetup, RunMode
from runner.modes.sections import GoldAccuracy
from runner.outputs.idle_publisher import Idle
from runner.run import gates


@dataclass(frozen=True)
class RunContext:
    """What the CLI hands down: the typed config plus facts about this job."""

    cfg: RunConfig
    run_dir: Path
    project_root: Path  # the working directory: relative cache paths resolve here
    api_keys: Mapping[str, Secret]  # API-key variable name -> key, for every variable the config names
    run_name: str
    params: Mapping[str, Any] = field(default_factory=dict)  # flattened, secret-free, for MLflow
    tags: Mapping[str, str] = field(default_factory=dict)
    resolved_config_yaml: str = ""
    identity: Mapping[str, Any] = field(default_factory=dict)  # settings a resume must not change
    identity_sha256: str = ""
    limiter: RateLimiter | None = None  # the judge's, shared across the jobs of this process
    generator_limiter: RateLimiter | None = None
    member_limiters: Mapping[str, RateLimiter | None] = field(default_factory=dict)  # ensemble: member -> limiter
    # where relative template and dataset paths are looked up, in order (runner/core/locations.input_roots)
    input_roots: tuple[Path, ...] = ()
    # where the finished run is published to MLflow: a helper process started beside the calls (the CLI), or this
    # process once its files are written (runner.run_experiment: a notebook or test imports mlflow once, not a
    # process per run)
    publish_here: bool = False
    # where the helper process is kept between this process's jobs (the CLI's jobs that run in the process that runs
    # the multirun: Hydra's basic launcher); None: a helper per job (a launcher's workers, a single run)
    publishers: Idle | None = None

    @property
    def progress(self) -> ProgressOptions:
        """How the run shows its progress (``progress``, ``progress_interval_s``)."""
        return ProgressOptions(self.cfg.progress, self.cfg.progress_interval_s)


@dataclass(frozen=True)
class Prepared:
    """A validated run, ready to judge."""

    dataset: LoadedDataset
    plan: JudgePlan
    response_format: dict[str, Any] | None
    mode: RunMode  # chosen once, from prompt.mode
    setup: ModeSetup  # what the mode validated and loaded
    baseline: gates.Baseline | None = None  # gate.baseline_run, resolved before any call
    member_formats: Mapping[str, dict[str, Any] | None] | None = None  # ensemble: member -> response_format

    @property
    def point(self) -> pointwise.PointwiseSetup | None:
        """A pointwise run's scoring, checks and generator template (None for a pairwise run)."""
        return self.setup.point

    @property
    def refs(self) -> tuple[ItemRef, ...]:
        """Id, gold and location of every item, in dataset order."""
        return self.dataset.refs


@dataclass(frozen=True)
class RunOutcome:
    """What the run produced, for the CLI's exit code and for tests.

    ``summary`` is the run's summary.json, read from the file when first asked for. The run does not keep it: at
    100,000 judgments its per-item results are ~20 MB, alive beside the typed report at the run's peak memory
    (the HTML report's plotting) if held until the outcome is returned (issue 12).
    """

    summary_path: Path
    gold: GoldAccuracy | None  # pairwise with gold labels: accuracy per order (the report's ``gold``)
    judge: Mapping[str, Any]  # the calls' statistics (runner.modes.summary.judge_metrics: family/name keys)
    failed: bool
    reason: str = ""
    mlflow_run_id: str | None = None
    skipped: bool = False  # a sweep's job found finished on resume: not run again (its summary is on disk)
    tracking_error: str | None = None  # the run's files are complete but MLflow could not be written (one line)
    metrics: Mapping[str, float] = field(default_factory=dict)  # metrics.json's content: what the sweeper optimises

    @functools.cached_property
    def summary(self) -> dict[str, Any]:
        """The run's summary.json."""
        return json.loads(self.summary_path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def member_dirs(ctx: RunContext) -> dict[str, Path]:
    """Ensemble runs: member -> its directory (journal, results, summary); empty for a single judge."""
    return {name: ctx.run_dir / panel.MEMBERS_DIR / name for name in ctx.cfg.judge.members}


def candidates(ctx: RunContext, prepared: Prepared, generations: dict[str, Generation] | None) -> Iterable[Item]:
    """The items to judge, streamed: from the dataset, or with the generated outputs as candidates."""
    items = prepared.dataset.iter_items()
    if generations is None:
        return items
    assert ctx.cfg.generator is not None
    return with_outputs(items, generations, ctx.cfg.generator.name)
