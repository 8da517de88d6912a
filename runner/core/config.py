"""Typed schemas for every config group, registered in Hydra's ConfigStore (:mod:`runner.core.config_store`).

The composed config is validated against these dataclasses when Hydra composes it, so a misspelt key
or a wrong type in any YAML file or command-line override fails before anything runs. ``cli.py``
turns the composed config into these (frozen) objects once; nothing below it sees a DictConfig. The
enumerated options are :mod:`runner.core.choices`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any

from omegaconf import MISSING

from runner.core.choices import (
    BatchMode,
    OnBadRow,
    OrderPolicy,
    PairError,
    PromptMode,
    Strategy,
    StructuredOutput,
)
from runner.core.records import OPERATIONAL, config_record
from runner.core.run_settings import (
    BatchConfig,
    BudgetConfig,
    CacheConfig,
    GateConfig,
    MetricsConfig,
    OutputConfig,
    TrackingConfig,
)


@config_record
class ReplicaConfig:
    """One server of a replicated judge (e.g. one of several vLLM servers holding the same model).

    The replicas of a judge share its load through a litellm Router; each has its own address, key
    variable and rate limits.
    """

    api_base: str = MISSING  # up to and including /v1
    api_key_env: str | None = None  # NAME of the variable holding this replica's key; default: the judge's
    rpm: int | None = None  # requests per minute this replica is paced to; null: the judge's rpm
    tpm: int | None = None  # tokens per minute this replica is paced to; null: the judge's tpm


@config_record
class JudgeConfig:
    """One judge deployment: a litellm model string and its decoding and transport settings.

    An ensemble judge (``model: ensemble``) lists its ``members``, each a judge of its own; every member
    judges every item and ``combine`` turns their verdicts into the ensemble's.
    """

    name: str = MISSING  # its name in reports, MLflow params and journals (the YAML file's stem)
    model: str = MISSING  # litellm model string, e.g. openai/gpt-4o-mini, replay/gpt-4
    api_base: str | None = None  # for OpenAI-compatible servers: up to and including /v1
    api_key_env: str | None = None  # NAME of the environment variable holding the key
    temperature: float = 0.0  # sampling temperature sent with every call
    seed: int | None = None  # sent with each call (repeat r: seed + r) to providers that take one; null: none
    max_tokens: int = 512  # the most tokens an answer may have; an answer cut off there is unscored (truncated)
    timeout_s: float = field(default=60.0, metadata=OPERATIONAL)  # seconds one attempt may wait (then retried)
    # requests per minute: client-side pacing, shared by every job of this judge (or generator) in the process
    rpm: int | None = field(default=None, metadata=OPERATIONAL)
    # tokens per minute the calls are paced to (their prompt plus max_tokens), shared like rpm; null: none
    tpm: int | None = field(default=None, metadata=OPERATIONAL)
    # for timeout, connection and 5xx errors (and 429s when no limiter paces the judge)
    max_retries: int = field(default=4, metadata=OPERATIONAL)
    # first backoff; doubles per attempt, with full jitter, capped at retry_max_s
    retry_base_s: float = field(default=1.0, metadata=OPERATIONAL)
    retry_max_s: float = field(default=60.0, metadata=OPERATIONAL)  # the longest backoff between two attempts
    # a 429 is sent again (paced by the judge's limiter, never counted against max_retries) as long as the judge's
    # 429s since its last success began less than this many seconds ago; past that the provider is not letting
    # anything through. A 429 whose Retry-After is longer fails its call at once (a resume sends it again)
    retry_rate_limited_s: float = field(default=300.0, metadata=OPERATIONAL)
    # a 200 without a usable answer (no choices) is paid for: kept unscored with reason empty_choices, or, when true,
    # sent again within max_retries (each answer paid for is counted in calls/paid)
    retry_malformed: bool = field(default=False, metadata=OPERATIONAL)
    # a Retry-After longer than this is cut to it: 60 s covers real rate windows (per-minute limits), and a bogus
    # Retry-After: 86400 cannot stall a run for a day. A wait over 10 s is logged with its end and shown in the bar.
    max_retry_after_s: float = field(default=60.0, metadata=OPERATIONAL)
    # ask for JSON through response_format: auto (when the rubric's parser reads JSON and litellm says the model
    # takes a schema), on, off, or json_object (any JSON object, no schema: servers without json_schema)
    structured_output: StructuredOutput = StructuredOutput.auto
    version: str = ""  # free text recorded with every run (e.g. a dated model snapshot)
    family: str | None = None  # the judge's model family (e.g. gpt-4): self-preference when a system shares it
    # price this judge's calls at this litellm model's list price (e.g. gpt-4) where litellm cannot price them: a
    # self-hosted copy of a listed model (its cost in the bar, cost/usd_total and budget.max_usd) or a replay of a
    # recorded one (its cost/usd_list on the sweep's cost-quality frontier; a replay still pays nothing)
    price_as: str | None = field(default=None, metadata=OPERATIONAL)
    # the provider does not charge this deployment (a free tier): each call costs $0, the dry run says free and
    # budget.max_usd never stops it (a rate-limited free tier: set rpm/tpm)
    free_tier: bool = field(default=False, metadata=OPERATIONAL)
    # the planned calls through the provider's batch API, at its batch price (docs/how-to/batch.md): off | on | auto
    batch: BatchMode = field(default=BatchMode.off, metadata=OPERATIONAL)
    # batch=auto: batched when more calls than this are left to pay for
    batch_threshold: int = field(default=1000, metadata=OPERATIONAL)
    # model recorded/<name>: the JSONL file of recorded judge outputs (runner/llm/recorded.py), found like a dataset
    path: str | None = None
    # several servers of this judge (litellm Router)
    replicas: list[ReplicaConfig] = field(default_factory=list, metadata=OPERATIONAL)
    members: dict[str, JudgeConfig] = field(default_factory=dict)  # model: ensemble: name -> member judge
    # ensemble: a registered aggregation (runner.judging.aggregations) as a bare name (majority_vote | weighted | mean
    # | median | dawid_skene) or {name, params}; Any because OmegaConf has no str-or-node union. Normalised once by
    # runner.judging.aggregations.aggregation_ref (runner.modes.ensemble_check.combine_of).
    combine: Any = "majority_vote"
    weights: dict[str, float] = field(default_factory=dict)  # ensemble: member -> weight (default of params.weights)


@config_record
class PromptConfig:
    """One prompt: which template in prompts/ and how it is used."""

    name: str = MISSING  # the prompt's name in reports and MLflow params (the YAML file's stem)
    template: str = MISSING  # file stem in prompts/
    mode: PromptMode = PromptMode.pairwise  # pairwise: two outputs compared; pointwise: one output scored
    # single: one call per planned order; swap_synthesize (LLMBar's Swap): both orders, and on a conflict a
    # synthesis round (synthesis_template)
    strategy: Strategy = Strategy.single
    synthesis_template: str | None = None  # required by strategy swap_synthesize
    neutralize_delimiters: bool = True  # defang the template's own block delimiters inside inserted text


@config_record
class FunctionRef:
    """A registered function chosen by name, with the keyword parameters config binds to it."""

    name: str = MISSING  # the registered name (an unknown one fails at start-up with the list of known names)
    params: dict[str, Any] = field(default_factory=dict)  # keyword parameters, checked against the function's


@config_record
class ParserConfig(FunctionRef):
    """Which registered parser reads the judge output (runner.judging.parsers.labels.PARSERS), and its parameters."""


@config_record
class CriterionConfig:
    """One scored criterion of a pointwise rubric.

    ``when`` names a template variable; the criterion applies only to items where that variable is
    non-empty (e.g. tool_usage only for examples that list expected tool calls). ``aliases`` are other keys the
    judge's JSON may use for it (the users' ``mcp_usage_correct`` for ``tool_usage``); the score is recorded
    under ``name``.
    """

    name: str = MISSING  # the key the judge's JSON scores it under, and its name in every report
    description: str = ""  # what it means: told to the judge, with its scale, in a structured-output schema
    min: float = 1.0  # the scale's lowest score; a score outside [min, max] makes the judgment unscored
    max: float = 5.0  # the scale's highest score
    weight: float = 1.0  # its weight in the overall score (a weighted mean; rubric.category_weights per category)
    when: str | None = None  # a template variable: the criterion applies only where it is non-empty; null: always
    aliases: list[str] = field(default_factory=list)  # other keys the judge may use for it (mcp_usage_correct)


@config_record
class CheckConfig(FunctionRef):
    """A deterministic check run on each candidate output beside the judge (runner.judging.checks.CHECKS).

    ``max_rate`` is the target share of items with a violation; ``enforce`` makes missing it fail the run.
    """

    max_rate: float | None = None  # the target share of items with a violation (0.05: 5%); null: only reported
    enforce: bool = False  # true: a violation rate above max_rate fails the run (exit 1), as a gate does


@config_record
class RubricConfig:
    """What the judge may answer and how it is read.

    Pairwise rubrics offer positional ``labels``; pointwise rubrics list ``criteria`` to be scored,
    optional per-category weights, a pass threshold on the overall score, and deterministic checks.
    """

    name: str = MISSING  # the rubric's name in reports and MLflow params (the YAML file's stem)
    labels: list[str] = field(default_factory=lambda: ["A", "B", "tie"])  # pairwise: positional labels offered
    parser: ParserConfig = field(default_factory=ParserConfig)  # the registered parser that reads the judge's answer
    synthesis_parser: ParserConfig | None = None  # for the synthesis round; default: parser
    # Read answers cut off at max_tokens instead of counting them unscored. Off: a truncated verdict is not
    # the judge's verdict. Only for reproducing papers whose code read them (LLMBar: rubric llmbar_upstream).
    score_truncated: bool = False
    criteria: list[CriterionConfig] = field(default_factory=list)  # pointwise: scored criteria
    category_weights: dict[str, dict[str, float]] = field(default_factory=dict)  # category -> criterion -> weight
    pass_threshold: float | None = None  # pointwise: an item passes when its overall score >= this
    checks: list[CheckConfig] = field(default_factory=list)  # deterministic checks of each candidate output
    consistency_threshold: float = 0.5  # pointwise, repeats > 1: an item whose score std dev exceeds this is flagged
    # pairwise, order=both: a pair with no verdict in one order is kept (the other order counts) or dropped from
    # every statistic, as FastChat's MT-Bench agreement does (runner.judging.pair_policy)
    pair_error: PairError = PairError.keep


@config_record
class AggregationConfig(FunctionRef):
    """An aggregation of one judge's repeats, registered in runner.judging.aggregations, and its parameters."""


@config_record
class SystemConfig:
    """One compared system: its display name and the dataset field holding its output (or one of its aliases)."""

    name: str = MISSING  # the system's name in verdicts and reports (ours/baseline stand for it); not "tie"
    field: str = MISSING  # the dataset field holding this system's output
    # other fields holding the output in rows without ``field`` (the users' ``actual_output``), tried in order
    aliases: list[str] = dataclasses.field(default_factory=list)  # (``field`` is this class's own key above)
    family: str | None = None  # the model family that wrote this system's outputs (self-preference bias)


@config_record
class DatasetConfig:
    """Where items come from and how their fields map onto template variables.

    Pairwise datasets name ``ours`` and ``baseline``; pointwise datasets name the judged ``candidate``
    (or leave it out when a generator makes the outputs).
    """

    name: str = MISSING  # the dataset's name in reports and MLflow params (the YAML file's stem)
    path: str = MISSING  # relative to the project root, or pkg://runner/data/... for shipped data
    id_field: str | None = None  # None: the 1-based line/row number
    variables: dict[str, str] = field(default_factory=dict)  # template variable -> dataset field (required)
    optional_variables: dict[str, str] = field(default_factory=dict)  # missing or null field -> ""
    ours: SystemConfig | None = None  # pairwise: the system under test
    baseline: SystemConfig | None = None  # pairwise: the system it is compared with
    candidate: SystemConfig | None = None  # pointwise: the output to judge
    gold_field: str | None = None  # the field holding the gold label (mapped by gold_map); null: no gold
    gold_map: dict[str, str] = field(default_factory=dict)  # raw gold value -> system name or "tie"
    annotator_fields: list[str] = field(default_factory=list)  # one field per human label (mapped by gold_map)
    # True when each annotator field is the same person on every row: only then is pairwise Cohen's kappa reported
    annotators_identified: bool = False
    tags_field: str | None = None  # a list of strings (or one string) per row: pass rate per tag
    category_field: str | None = None  # one string per row: every metric per category, category weights
    # the category field's value -> the category it counts in: a glob pattern (``mmlu-pro-*``) per entry, the first
    # that matches in the order written; a value no pattern matches is its own category
    category_map: dict[str, str] = field(default_factory=dict)
    human_score_field: str | None = None  # a number per row on the rubric's scale: correlation with humans
    # Pointwise: the variables shown as each example's input and expected output in detailed_results and the
    # failed examples (None or an unmapped variable: not shown); the judged output is always shown.
    input_variable: str | None = "input"
    expected_variable: str | None = "expected_output"  # the variable shown as the expected output
    # A seeded split by item id (calibration): dev = tune on it, test = held out; None = every item.
    split: str | None = None  # dev | test
    split_test_fraction: float = 0.5  # share of items in test
    split_seed: int = 0  # the seed of the split's hash: another seed, another split


@config_record
class GeneratorConfig(JudgeConfig):
    """A model that writes the candidate outputs before they are judged (pointwise runs).

    It is called through litellm like a judge, with its own template (from the item's variables),
    concurrency, rate limits, journal, cost and metrics.
    """

    template: str = MISSING  # file stem in prompts/
    concurrency: int = field(default=8, metadata=OPERATIONAL)  # generation calls in flight at once
    # (Unlike a judge's, the next four are part of a generator run's identity: resume refused their change before
    # they were marked on the schema, and a run directory made then still resumes: runner/core/identity.py.)

    # price the generation calls at this litellm model's list price where litellm cannot price them (a self-hosted
    # copy of a listed model): their cost in the bar, cost/generation_usd and budget.max_usd
    price_as: str | None = None
    # the generation calls through the provider's batch API, at its batch price (docs/how-to/batch.md): off | on | auto
    batch: BatchMode = BatchMode.off
    batch_threshold: int = 1000  # batch=auto: batched when more generation calls than this are left to pay for
    replicas: list[ReplicaConfig] = field(default_factory=list)  # several servers of this model (litellm Router)
    temperature: float = 0.0  # sampling temperature sent with every generation call
    max_tokens: int = 1024  # the most tokens a generated output may have


# The JudgeConfig keys a generator inherits but never reads (an ensemble's, a recorded judge's, the judge's answer
# format and model family): the config reference leaves them out of the generator's table.
GENERATOR_UNUSED = ("structured_output", "family", "path", "members", "combine", "weights")


@config_record
class RunConfig:
    """The whole composed config: the groups plus the run knobs."""

    judge: JudgeConfig = MISSING  # who judges: a file of conf/judge/ (judge=<stem>)
    prompt: PromptConfig = MISSING  # what the judge is asked: a file of conf/prompt/ (prompt=<stem>)
    rubric: RubricConfig = MISSING  # what it may answer and how that is read: conf/rubric/ (rubric=<stem>)
    aggregation: AggregationConfig = MISSING  # how one item's repeats become its result: conf/aggregation/
    dataset: DatasetConfig = MISSING  # the items judged: a file of conf/dataset/ (dataset=<stem>)
    tracking: TrackingConfig = field(default=MISSING, metadata=OPERATIONAL)  # MLflow: tracking=sqlite|server|off
    generator: GeneratorConfig | None = None  # pointwise: make the candidate outputs first
    gate: GateConfig = field(default_factory=GateConfig, metadata=OPERATIONAL)  # when the run fails the process
    metrics: MetricsConfig = field(default_factory=MetricsConfig, metadata=OPERATIONAL)  # how metrics are computed
    output: OutputConfig = field(default_factory=OutputConfig, metadata=OPERATIONAL)  # what else a run writes
    seed: int = 0  # seeds the run's randomness: swap_random's orders, bootstrap intervals, retry jitter
    concurrency: int = field(default=16, metadata=OPERATIONAL)  # judge calls in flight at once
    repeats: int = 1  # how many times each item (and order) is judged; the aggregation combines the repeats
    # which independent repetition of the experiment this run is: sample s judges the repeats s*repeats ..
    # s*repeats+repeats-1 (their own judge seeds, swap_random coins and cache keys), so three runs sample=0,1,2 are
    # the three repeats of one repeats=3 run, not one run's cached copies
    sample: int = 0
    # pairwise: both (each item in both orders, each its own judgment), swap_random (one order per item and repeat,
    # by a seeded coin) or fixed (ours first, always)
    order: OrderPolicy = OrderPolicy.both
    max_items: int | None = None  # judge only the dataset's first this many items; null: every item
    # more failed calls than this: abort (after 20 calls) and exit non-zero
    max_error_rate: float = field(default=0.05, metadata=OPERATIONAL)
    max_unscored_rate: float = 0.2  # pairwise: more items than this without a valid final verdict: exit non-zero
    # SIGINT/SIGTERM: no new call is sent; the answers in flight get this many seconds to arrive and be journaled
    shutdown_grace_s: float = field(default=10.0, metadata=OPERATIONAL)
    prompts_dir: str = "prompts"  # where the templates are (the project's, then the package's)
    # a malformed dataset row: error (stop before any call, naming the file and line) or skip (left out, counted)
    on_bad_row: OnBadRow = field(default=OnBadRow.error, metadata=OPERATIONAL)
    cache: CacheConfig = field(default_factory=CacheConfig, metadata=OPERATIONAL)  # the cross-run response cache
    batch: BatchConfig = field(default_factory=BatchConfig, metadata=OPERATIONAL)  # how batches are waited for
    budget: BudgetConfig = field(default_factory=BudgetConfig, metadata=OPERATIONAL)  # the run's spending limit
    # a run (or sweep) directory to continue; see docs/how-to/resume.md
    resume: str | None = field(default=None, metadata=OPERATIONAL)
    # the run's directory (hydra.run.dir; with -m the sweep's, hydra.sweep.dir); None: a new one under outputs/
    output_dir: str | None = field(default=None, metadata=OPERATIONAL)
    # render every request, count tokens, price them; make no call
    dry_run: bool = field(default=False, metadata=OPERATIONAL)
    # a live progress bar on a terminal; without one, a progress record in the log
    progress: bool = field(default=True, metadata=OPERATIONAL)
    # without a terminal: seconds between two progress records (0: none)
    progress_interval_s: float = field(default=10.0, metadata=OPERATIONAL)
    objective: str = "agreement/accuracy_all"  # the metric a multirun's sweeper maximises (the job's return value)

