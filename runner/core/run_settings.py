"""The run's settings beside its config groups (typed like them, :mod:`runner.core.config`): how a run is gated,
measured, written, tracked, cached, batched and budgeted. Each is one field of :class:`runner.core.config.RunConfig`,
all of them operational (a resumed run may change them)."""

from __future__ import annotations

from runner.core.choices import (
    BatchRetry,
    CacheMode,
    GateUnscoredAs,
    ProportionInterval,
    SummaryKeys,
    UnscoredAs,
)
from runner.core.records import config_record


@config_record
class GateConfig:
    """CI gates: a run that crosses one fails the process (exit 1) with a line saying why.

    ``min_pass_rate`` applies only when the rubric has a pass threshold; ``unscored_as`` says whether an item
    without a score counts as not passed (``fail``: the rate is over every item) or is left out (``exclude``: over
    the scored items). ``baseline_run`` is an MLflow
    run id or ``latest on <branch>`` (the latest finished run with the same run name on that branch);
    ``metric`` may not fall by more than ``max_drop`` below it.
    """

    # a pass rate below this fails the run (rubrics with a pass threshold); null: off
    min_pass_rate: float | None = 0.8
    # an item without a score: fail (not passed; the rate is over every item) or exclude (over the scored items)
    unscored_as: GateUnscoredAs = GateUnscoredAs.fail
    min_mean_score: float | None = None  # a mean overall score below this fails the run; null: off
    # an MLflow run id, or `latest on <branch>` (the latest finished run of the same name on that branch), to compare
    # `metric` with; null: no comparison
    baseline_run: str | None = None
    max_drop: float | None = None  # `metric` more than this below the baseline run's fails the run
    metric: str = "score/mean"  # the metric compared with the baseline run (an MLflow metric key)


@config_record
class MetricsConfig:
    """How the trust metrics are computed: unscored verdicts in agreement, bootstrap CIs (seeded by ``seed``)."""

    # a verdict that could not be read counts in agreement as wrong (a miss) or as a tie (PandaLM's convention)
    unscored_as: UnscoredAs = UnscoredAs.wrong
    ci_level: float = 0.95  # the confidence level of every interval
    ci_resamples: int = 1000  # bootstrap resamples per bootstrap interval
    proportion_ci: ProportionInterval = ProportionInterval.wilson  # accuracy, agreement and pass rates


@config_record
class OutputConfig:
    """What a run writes beside its own record (summary.json, results.jsonl, ...), which stays as it is."""

    # also users_summary.json: users, summary.json under the users' key names; robust_pairwise | agent_rubric |
    # reply_quality, the users' own format of that workflow, their keys and units only (the users' presets set it)
    summary_keys: SummaryKeys = SummaryKeys.judgesweep
    # false: no PNG drawn (report.html's figures, a sweep's frontier.png), matplotlib not imported; tables unchanged
    plots: bool = True


@config_record
class TrackingConfig:
    """Where MLflow records runs."""

    enabled: bool = True  # false (tracking=off): nothing goes to MLflow; the run directory is the whole record
    # the MLflow tracking URI: sqlite:///<file> or http://host:port (tracking=sqlite, the default:
    # outputs/mlflow.db of the working directory; tracking=server: http://127.0.0.1:5000)
    uri: str | None = None
    experiment: str = "judgesweep"  # the MLflow experiment the runs go to (made when missing)
    artifact_location: str | None = None  # for a new experiment; None lets the store decide
    traces: bool = True  # one MLflow trace per judgment, prompts in the registry, the dataset as a run input
    timeout_s: float = 600.0  # how long a finished run waits for MLflow before it ends saying `judgesweep sync`


@config_record
class CacheConfig:
    """The response cache shared across runs and sweeps."""

    # read_write: answers are looked up and stored; read_only: looked up only; off: neither (every call is made)
    mode: CacheMode = CacheMode.read_write
    path: str = "outputs/cache/responses.sqlite"  # relative to the project root


@config_record
class BatchConfig:
    """How a batched run waits for and completes its batches (judge.batch)."""

    wait: bool = True  # false: submit, say how to collect (resume=<run dir>), exit 0
    poll_s: float = 30.0  # seconds between two status requests while waiting
    retry: BatchRetry = BatchRetry.live  # rows the provider failed, expired or cancelled: sent again live | in a batch


@config_record
class BudgetConfig:
    """A run's spending limit (runner.judging.budget); a resumed run may change it."""

    max_usd: float | None = None  # calls are sent only while paid + in-flight worst case stays within it; null: none
