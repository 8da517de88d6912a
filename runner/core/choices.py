"""The enumerated options of the config schemas (:mod:`runner.core.config`): modes, strategies and policies.

Each is a ``str`` Enum, so a YAML file or a command-line override names the value (``order=swap_random``) and
Hydra refuses any other.
"""

from __future__ import annotations

from enum import Enum


class PromptMode(str, Enum):
    """How candidates are presented to the judge."""

    pairwise = "pairwise"
    pointwise = "pointwise"


class Strategy(str, Enum):
    """How judge calls for one item and repeat are organised."""

    single = "single"  # one call per planned order
    swap_synthesize = "swap_synthesize"  # LLMBar: both orders; on conflict a synthesis round


class BatchMode(str, Enum):
    """Whether a judge's planned calls go through the provider's batch API (runner.judging.batching)."""

    off = "off"
    on = "on"
    auto = "auto"  # on when the planned calls exceed judge.batch_threshold and litellm has the provider's batch API


class BatchRetry(str, Enum):
    """Where a batch's rows the provider failed, expired or cancelled are sent again (runner.judging.batching)."""

    live = "live"  # as live calls, once the batch is collected
    batch = "batch"  # in a new batch (then live, once a batch answers none of them)


class OrderPolicy(str, Enum):
    """Which presentation orders a pairwise item is judged in."""

    both = "both"  # each order is its own judgment
    swap_random = "swap_random"  # one order per (item, repeat), chosen by a seeded coin
    fixed = "fixed"  # ours first, always


class CacheMode(str, Enum):
    """How the cross-run response cache is used."""

    read_write = "read_write"
    read_only = "read_only"
    off = "off"


class OnBadRow(str, Enum):
    """What a malformed dataset row does."""

    error = "error"  # stop before any call, naming file and line
    skip = "skip"  # leave it out; the run reports how many and which


class StructuredOutput(str, Enum):
    """Whether to ask the judge for JSON via response_format."""

    auto = "auto"  # when the rubric's parser reads JSON and litellm says the model supports it
    on = "on"
    off = "off"
    json_object = "json_object"  # OpenAI's JSON mode: any JSON object, no schema (servers without json_schema)


class ProportionInterval(str, Enum):
    """How a proportion's interval is computed (runner.stats.proportions)."""

    wilson = "wilson"  # Wilson's score interval: the default, close to nominal coverage at any n
    clopper_pearson = "clopper_pearson"  # exact (conservative)


class UnscoredAs(str, Enum):
    """How agreement metrics count a verdict that could not be read (it is never a vote either way)."""

    wrong = "wrong"  # a miss: the honest default
    tie = "tie"  # as a tie: PandaLM's compute_metrics convention, for reproducing its figures


class PairError(str, Enum):
    """What a pairwise (item, repeat) judged in both orders counts for when one order has no verdict."""

    keep = "keep"  # the other order's verdict counts; the failed one counts as a failure (judgesweep's default)
    drop = "drop"  # FastChat's MT-Bench agreement: the pair is left out of every statistic, counted as dropped


class GateUnscoredAs(str, Enum):
    """How the pass-rate gate counts an item that has no score (unscored, failed call, not generated)."""

    fail = "fail"  # not passed: the rate is over every item, the users' rule
    exclude = "exclude"  # left out: the rate is over the scored items only (said in the gate's line)


class SummaryKeys(str, Enum):
    """Whose key names a run's summary is also written in (runner.modes.users_summary, runner.modes.users_formats)."""

    judgesweep = "judgesweep"  # summary.json only, judgesweep's names
    users = "users"  # also users_summary.json: summary.json with the users' names (average_score, actual)
    # also users_summary.json in the users' own format of that workflow: their keys, names and units, nothing else
    robust_pairwise = "robust_pairwise"
    agent_rubric = "agent_rubric"
    reply_quality = "reply_quality"
