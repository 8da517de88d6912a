"""An ensemble judge's configuration (``judge=ensemble``): is the run's judge one, and is it sound, before any call.

``judge.combine`` is a registered aggregation (runner.judging.aggregations) usable for an ensemble's members:
a bare name (``judge.combine=weighted``) or ``{name, params}`` (a file of conf/aggregation/ composed there:
``+aggregation@judge.combine=dawid_skene``), normalised by :func:`combine_of`. ``judge.weights`` is the default
of a weighted combine's ``params.weights``.
"""

from __future__ import annotations

from collections.abc import Mapping

from runner.core.choices import OrderPolicy, PromptMode
from runner.core.config import RunConfig
from runner.core.errors import ConfigurationError
from runner.judging.aggregations import REGISTRY, AggregationRef, AggregationSpec, Kind, Use, aggregation_ref
from runner.modes import ensemble

ENSEMBLE_MODEL = "ensemble"
COUNTS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def is_ensemble(cfg: RunConfig) -> bool:
    """Whether the run's judge is an ensemble of member judges."""
    return cfg.judge.model == ENSEMBLE_MODEL or bool(cfg.judge.members)


def annotators_per_member(cfg: RunConfig) -> int:
    """How many votes each member casts per item: one per order judged and repeat."""
    return (2 if cfg.order is OrderPolicy.both else 1) * cfg.repeats


def check(cfg: RunConfig) -> None:
    """An ensemble names two or more plain judges, a combine the registry offers it with parameters that bind,
    weights that fit it, and enough annotators for it.

    Raises:
        ConfigurationError: naming the key that is wrong.
    """
    judge = cfg.judge
    if judge.model == ENSEMBLE_MODEL and len(judge.members) == 1:  # one of the shipped two removed (ensembles how-to)
        (left,) = judge.members
        raise ConfigurationError(f"judge {judge.name}: one member is left ({left}) and an ensemble needs two or more "
                                 f"judge.members: judge={left} runs it alone; '+judge@judge.members.<name>=<judge "
                                 f"file>' adds another")
    if judge.model != ENSEMBLE_MODEL or len(judge.members) < 2:
        raise ConfigurationError(f"judge {judge.name}: an ensemble has model: {ENSEMBLE_MODEL} and two or more "
                                 f"judge.members (got model={judge.model!r}, {len(judge.members)} member(s))")
    nested = [name for name, m in judge.members.items() if m.members or m.model == ENSEMBLE_MODEL]
    if nested:
        raise ConfigurationError(f"judge.members.{nested[0]}: a member cannot itself be an ensemble")
    chosen = combine_of(cfg)
    spec = _combine_spec(cfg, chosen.name)
    spec.check_params({**chosen.params, **({"weights": {}} if spec.weighted else {})}, "judge.combine")
    _check_weights(cfg, chosen)
    voters = len(judge.members) * (annotators_per_member(cfg) if cfg.prompt.mode is PromptMode.pairwise else 1)
    if voters < spec.min_voters:
        count = COUNTS[spec.min_voters] if spec.min_voters < len(COUNTS) else str(spec.min_voters)
        raise ConfigurationError(f"judge.combine={spec.name} needs {count} or more annotators (member x order x "
                                 f"repeat), got {voters}; add members, or judge both orders (order=both)")


def combine_of(cfg: RunConfig) -> AggregationRef:
    """``judge.combine`` normalised: its name and params, whether config gave a bare name or {name, params}."""
    return aggregation_ref(cfg.judge.combine, "judge.combine")


def combine_kinds(cfg: RunConfig) -> tuple[Kind, ...]:
    """A pairwise ensemble combines labels, or scores (each member's preference for ours); a pointwise one scores."""
    return (Kind.label, Kind.score) if cfg.prompt.mode is PromptMode.pairwise else (Kind.score,)


def _combine_spec(cfg: RunConfig, name: str) -> AggregationSpec:
    kinds = combine_kinds(cfg)
    usable = REGISTRY.names(Use.ensemble, kinds)
    if name in usable:
        return REGISTRY.find(name, Use.ensemble, kinds)
    if Kind.label not in kinds and name in REGISTRY.names(Use.ensemble, (Kind.label,)):
        raise ConfigurationError(f"judge.combine={name}: a pointwise ensemble combines scores with one of {usable} "
                                 f"({' and '.join(ensemble.vote_methods())} over the members' pass/fail "
                                 f"decisions are reported beside it)")
    why = REGISTRY.why_not(name, Use.ensemble, kinds)
    raise ConfigurationError(f"judge.combine={name!r} is not one of {usable}{why}")


def _check_weights(cfg: RunConfig, chosen: AggregationRef) -> None:
    """judge.weights and the combine's params.weights name members only; the weights are >= 0, not all 0."""
    key = "judge.combine.params.weights" if "weights" in chosen.params else "judge.weights"
    for where, weights in (("judge.weights", cfg.judge.weights), (key, chosen.params.get("weights", {}))):
        unknown = sorted(set(weights) - set(cfg.judge.members)) if isinstance(weights, Mapping) else None
        if unknown is None:
            raise ConfigurationError(f"{where}: member -> weight, got {weights!r}")
        if unknown:
            raise ConfigurationError(f"{where}.{unknown[0]}: not a member of the ensemble (members: "
                                     f"{sorted(cfg.judge.members)}); drop it with '~{where}.{unknown[0]}'")
    try:
        weights = member_weights(cfg)
    except (TypeError, ValueError):
        raise ConfigurationError(f"{key}: weights are numbers, got {chosen.params.get('weights', cfg.judge.weights)}") \
            from None
    if any(not w >= 0 for w in weights.values()) or not any(weights.values()):
        raise ConfigurationError(f"{key} must be >= 0 and not all 0, got {weights}")


def member_weights(cfg: RunConfig) -> dict[str, float]:
    """Member -> the weight of each of its votes under ``weighted``: the combine's params.weights, else judge.weights
    (1.0 for a member they leave out)."""
    return ensemble.member_weights(cfg.judge.members, cfg.judge.weights, combine_of(cfg))
