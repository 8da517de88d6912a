"""``judgesweep aggregate`` over an ensemble's members: when the files are members, not repeats of one judge, and
the ``judge=ensemble`` config their votes are built under (runner.modes.panel / score_panel, as a run's).

The files are members when ``members=`` says so (``true``: named by runner.inputs.evaluation_sets.members_of;
``a,b,c``: one name per file) or, without it, when the aggregation only combines an ensemble's members
(``weighted``, ``dawid_skene``); otherwise they are repeats of one judge, as before. The chosen aggregation becomes
``judge.combine`` with its params (``aggregation.params.weights``: member -> weight); each member's own repeats
are aggregated by the config's aggregation when it aggregates repeats, else by ``majority_vote`` (pairwise) or
``mean`` (pointwise).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from runner.core.choices import PromptMode
from runner.core.config import AggregationConfig, JudgeConfig, RunConfig
from runner.core.errors import ConfigurationError
from runner.inputs.evaluation_files import Vote
from runner.judging.aggregations import REGISTRY, Kind, Use
from runner.modes import ensemble_check

__all__ = ["FILE_MODEL", "MEMBERS_KEY", "ensemble_config", "member_names", "wants_members"]

MEMBERS_KEY = "members"  # the command's own key: true | false | name,name,...
FILE_MODEL = "file"  # a member's model: its votes were read from a file, no call is made
ENSEMBLE_NAME = "ensemble"
_YES, _NO = ("true", "yes", "1"), ("false", "no", "0")


def _repeat_kinds(cfg: RunConfig) -> tuple[Kind, ...]:
    return (Kind.score,) if cfg.prompt.mode is PromptMode.pointwise else (Kind.label,)


def _ensemble_only(cfg: RunConfig) -> bool:
    name = cfg.aggregation.name
    return (name not in REGISTRY.names(Use.repeats, _repeat_kinds(cfg))
            and name in REGISTRY.names(Use.ensemble, ensemble_check.combine_kinds(cfg)))


def wants_members(cfg: RunConfig, choice: str | None) -> bool:
    """Whether the files are an ensemble's members: ``members=`` as given, else when the aggregation only
    combines members.

    Raises:
        ConfigurationError: ``members=false`` with an aggregation that only combines members.
    """
    if choice is None:
        return _ensemble_only(cfg)
    if choice.lower() in _NO:
        if _ensemble_only(cfg):
            raise ConfigurationError(f"aggregation={cfg.aggregation.name} combines the members of an ensemble, not "
                                     f"the repeats of one judge: drop members={choice} (each file, or each judge "
                                     f"column value, is then a member) or choose a repeats aggregation")
        return False
    return True


def member_names(choice: str | None) -> list[str] | None:
    """The members named by ``members=a,b,c`` (one per file), or None (``true`` / not given: named by the files)."""
    if choice is None or choice.lower() in _YES:
        return None
    names = [n.strip() for n in choice.split(",")]
    if not all(names):
        raise ConfigurationError(f"members={choice}: give true, false or one non-empty name per file (a,b,c)")
    return names


def ensemble_config(cfg: RunConfig, members: Mapping[str, Sequence[Vote]]) -> RunConfig:
    """``cfg`` as a ``judge=ensemble`` run of ``members`` combined by ``cfg.aggregation``, checked as a run's.

    Raises:
        ConfigurationError: weights naming no member, parameters the aggregation does not take, too few annotators
            (member x order x repeat) for it: naming the ``aggregation`` key.
    """
    chosen = cfg.aggregation
    names = list(members)
    if len(names) < 2:
        raise ConfigurationError(f"aggregation={chosen.name} over members: the files hold one member ({names[0]}), an "
                                 f"ensemble needs two or more: give a file (or a judge column value) per member, or "
                                 f"members=false with a repeats aggregation")
    weights = chosen.params.get("weights", {})
    unknown = sorted(set(weights) - set(names)) if isinstance(weights, Mapping) else []
    if unknown:
        raise ConfigurationError(f"aggregation.params.weights.{unknown[0]}: not a member (members: {names}); "
                                 f"a member is a file (members=a,b,c names them) or a value of its judge column")
    judge = JudgeConfig(name=ENSEMBLE_NAME, model=ensemble_check.ENSEMBLE_MODEL,
                        members={n: JudgeConfig(name=n, model=FILE_MODEL) for n in names},
                        combine={"name": chosen.name, "params": dict(chosen.params)})
    repeats = max(len({v.repeat for v in votes}) for votes in members.values())
    out = dataclasses.replace(cfg, judge=judge, aggregation=_repeats_aggregation(cfg), repeats=repeats)
    _check_annotators(out, members)
    try:
        ensemble_check.check(out)
    except ConfigurationError as exc:  # the user chose the combine as `aggregation`: name that key, not the run's
        raise ConfigurationError(str(exc).replace("judge.combine", "aggregation")) from None
    return out


def _repeats_aggregation(cfg: RunConfig) -> AggregationConfig:
    if cfg.aggregation.name in REGISTRY.names(Use.repeats, _repeat_kinds(cfg)):
        return cfg.aggregation
    default = "mean" if cfg.prompt.mode is PromptMode.pointwise else "majority_vote"
    return AggregationConfig(name=default, params={})


def _check_annotators(cfg: RunConfig, members: Mapping[str, Sequence[Vote]]) -> None:
    """Enough annotators for the combine, counted from the votes (a run counts them from its order and repeats)."""
    combine = ensemble_check.combine_of(cfg)
    spec = REGISTRY.find(combine.name, Use.ensemble, ensemble_check.combine_kinds(cfg), "aggregation")
    pairwise = cfg.prompt.mode is PromptMode.pairwise
    annotators = {(m, v.order, v.repeat) if pairwise else m for m, votes in members.items() for v in votes}
    if len(annotators) < spec.min_voters:
        counts = ensemble_check.COUNTS
        need = counts[spec.min_voters] if spec.min_voters < len(counts) else str(spec.min_voters)
        raise ConfigurationError(f"aggregation={spec.name} needs {need} or more annotators (member x order x "
                                 f"repeat), got {len(annotators)} ({len(members)} member(s): {list(members)})")
