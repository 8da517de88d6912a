"""One registry for every aggregation: labels and scores, a judge's repeats and an ensemble's members.

An aggregation is one pure function, registered once with what it combines (:class:`Kind`) and where config
may choose it (:class:`Use`): ``aggregation`` combines one judge's repeats of an item, ``judge.combine`` the
members of an ensemble judge. Its leading positional parameters are fixed by its kind; the rest are its
parameters, which config gives as ``params`` (conf/aggregation/<name>.yaml is ``{name, params}``):

- a label aggregation, per item: ``fn(item_id, votes: Sequence[label], **params) -> ItemResult``;
- a label aggregation over every item at once (``whole_table``, e.g. Dawid-Skene's EM):
  ``fn(votes: judge -> item -> label | None, **params) -> EnsembleResult``;
- a score aggregation, per item: ``fn(values: Sequence[float], **params) -> float | None``.

One that weighs its voters (``weighted``) also takes ``weights``, one per vote in the votes' order; config
gives them as member -> weight (``judge.weights`` by default), so only an ensemble's named members have them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from runner.core.errors import ConfigurationError, ParamsError
from runner.core.registry import UnknownNameError

F = Callable[..., Any]


class Kind(str, Enum):
    """What an aggregation combines."""

    label = "label"  # verdicts: a system's name or "tie", pass or fail
    score = "score"  # numbers on a rubric's scale


class Use(str, Enum):
    """Where config may choose an aggregation."""

    repeats = "repeats"  # `aggregation`: one judge's repeats (and orders) of one item
    ensemble = "ensemble"  # `judge.combine`: the members of an ensemble judge


BOTH = frozenset(Use)
ENSEMBLE_ONLY = frozenset({Use.ensemble})
CONFIG_KEYS = {Use.repeats: "aggregation", Use.ensemble: "judge.combine"}
COMBINES = {Use.repeats: "the repeats of one judge", Use.ensemble: "the members of an ensemble"}
_FREE = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


@dataclass(frozen=True)
class AggregationRef:
    """An aggregation as config chooses it: a registered name and the keyword parameters config gives it."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)


def aggregation_ref(value: Any, key: str) -> AggregationRef:
    """Normalise a choice of aggregation: a bare name (``judge.combine=weighted``) or a ``{name, params}`` node
    (inline, or a file of conf/aggregation/ composed there: ``+aggregation@judge.combine=dawid_skene``).

    Raises:
        ConfigurationError: naming ``key`` (or the key under it) when the value is neither.
    """
    if isinstance(value, AggregationRef):
        return value
    if isinstance(value, str) and value:
        return AggregationRef(value, {})
    if not isinstance(value, Mapping) and hasattr(value, "name") and hasattr(value, "params"):
        value = {"name": value.name, "params": value.params}  # a FunctionRef (the `aggregation` group's schema)
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{key}: a registered aggregation's name or {{name, params}}, got {value!r}")
    extra = sorted(set(value) - {"name", "params"})
    if extra:
        raise ConfigurationError(f"{key}.{extra[0]}: {key} is a name or {{name, params}}; no other key")
    name, params = value.get("name"), value.get("params") or {}
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"{key}.name: the registered aggregation's name, got {name!r}")
    if not isinstance(params, Mapping):
        raise ConfigurationError(f"{key}.params: the aggregation's keyword parameters, got {params!r}")
    return AggregationRef(name, dict(params))


@dataclass(frozen=True)
class AggregationSpec:
    """One registered aggregation.

    Attributes:
        name: Its registered name: the stem of its conf/aggregation/ file and its MLflow param value.
        kind: What it combines.
        uses: Where config may choose it.
        fn: The pure function (its call is fixed by ``kind`` and ``whole_table``, see the module docstring).
        weighted: It takes ``weights``, one per vote: an ensemble fills them from member -> weight.
        min_voters: The fewest voters (an ensemble's annotators) it is offered for; Dawid-Skene needs three.
        whole_table: It sees every item's votes at once instead of one item's.
        check: Given config's parameters, what is wrong with their values (parameter -> why; empty: nothing), so a
            bad value fails at start-up naming its key instead of inside the run.
    """

    name: str
    kind: Kind
    uses: frozenset[Use]
    fn: F
    weighted: bool = False
    min_voters: int = 1
    whole_table: bool = False
    check: Callable[..., Mapping[str, str]] | None = None

    @property
    def title(self) -> str:
        """How messages name it, e.g. ``score aggregation 'mean'``."""
        return f"{self.kind.value} aggregation {self.name!r}"

    @property
    def fixed(self) -> int:
        """How many leading positional arguments the caller supplies: an item's id and votes, or the votes."""
        return 2 if self.kind is Kind.label and not self.whole_table else 1

    @property
    def parameters(self) -> tuple[str, ...]:
        """The keyword parameters config may set, in signature order."""
        params = list(inspect.signature(self.fn).parameters.values())[self.fixed:]
        return tuple(p.name for p in params if p.kind not in _FREE)

    def accepts(self, name: str) -> bool:
        """Whether config may set the parameter ``name``."""
        return name in self.parameters

    def check_params(self, params: Mapping[str, Any], key: str) -> None:
        """Check that ``params`` bind to the function's signature, before any call.

        Args:
            params: Keyword parameters from config (an ensemble's ``weights`` included for a weighted one).
            key: The config key that chose the aggregation (``aggregation``, ``judge.combine``).

        Raises:
            ParamsError: naming ``<key>.params.<name>``: a parameter it does not take, one it needs, or a value
                its ``check`` rejects.
        """
        sig = inspect.signature(self.fn)
        free = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
        unknown = [name for name in params if name not in self.parameters]
        if unknown and not free:
            raise ParamsError(f"{key}.params.{unknown[0]}: {self.title} takes no parameter {unknown[0]!r} "
                              f"(its parameters: {', '.join(self.parameters) or 'none'})")
        try:
            sig.bind(*[object()] * self.fixed, **params)
        except TypeError as exc:
            needed = [p.name for p in list(sig.parameters.values())[self.fixed:]
                      if p.default is p.empty and p.kind not in _FREE and p.name not in params]
            where = f"{key}.params.{needed[0]}" if needed else f"{key}.params"
            raise ParamsError(f"{where}: {self.title}: parameters {dict(params)!r} do not fit {sig}: {exc}") from None
        problems = self.check(**params) if self.check is not None else {}
        if problems:
            name, why = next(iter(problems.items()))
            raise ParamsError(f"{key}.params.{name}: {self.title}: {name} {why}")


def _check_spec(spec: AggregationSpec) -> None:
    """A registration that could never be called as its kind says fails at import, not in a run."""
    params = inspect.signature(spec.fn).parameters.values()
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    if len(positional) < spec.fixed and not any(p.kind is p.VAR_POSITIONAL for p in params):
        raise ValueError(f"{spec.title}: a {spec.kind.value} aggregation takes {spec.fixed} positional argument(s)")
    if (spec.weighted or spec.whole_table) and spec.uses != ENSEMBLE_ONLY:
        raise ValueError(f"{spec.title}: weighted and whole-table aggregations combine an ensemble's members only")
    if spec.whole_table and spec.kind is not Kind.label:
        raise ValueError(f"{spec.title}: only label aggregations see every item at once")
    if spec.weighted and not spec.accepts("weights"):
        raise ValueError(f"{spec.title}: a weighted aggregation takes `weights`")
    if not spec.uses or spec.min_voters < 1:
        raise ValueError(f"{spec.title}: needs a use and min_voters >= 1")


class AggregationRegistry:
    """Every aggregation, keyed by (name, kind): ``weighted`` is both a weighted vote and a weighted mean."""

    def __init__(self) -> None:
        self._specs: dict[tuple[str, Kind], AggregationSpec] = {}

    def register(self, name: str, kind: Kind, uses: Iterable[Use] = BOTH, *, weighted: bool = False,
                 min_voters: int = 1, whole_table: bool = False,
                 check: Callable[..., Mapping[str, str]] | None = None) -> Callable[[F], F]:
        """Decorator that registers a pure function as the aggregation ``name`` of ``kind`` (see AggregationSpec)."""

        def decorate(fn: F) -> F:
            spec = AggregationSpec(name, kind, frozenset(uses), fn, weighted, min_voters, whole_table, check)
            _check_spec(spec)
            if (name, kind) in self._specs:
                raise ValueError(f"{spec.title} is registered twice")
            self._specs[(name, kind)] = spec
            return fn

        return decorate

    def unregister(self, name: str, kind: Kind) -> None:
        """Remove a registration (for tests that register their own)."""
        del self._specs[(name, kind)]

    def specs(self, use: Use | None = None, kinds: Iterable[Kind] = tuple(Kind)) -> list[AggregationSpec]:
        """The aggregations of ``kinds`` usable for ``use`` (any use when None), in registration order."""
        wanted = tuple(kinds)
        return [s for s in self._specs.values() if s.kind in wanted and (use is None or use in s.uses)]

    def names(self, use: Use, kinds: Iterable[Kind] = tuple(Kind)) -> list[str]:
        """The names config may choose for ``use`` among ``kinds``, each once, in registration order."""
        return list(dict.fromkeys(s.name for s in self.specs(use, kinds)))

    def find(self, name: str, use: Use, kinds: Iterable[Kind] = tuple(Kind), title: str = "aggregation"
             ) -> AggregationSpec:
        """The aggregation ``name`` usable for ``use``, of the first of ``kinds`` that has one.

        Raises:
            UnknownNameError: listing the known names for that use and those kinds, and saying what ``name``
                combines when it is registered for another use or kind.
        """
        wanted = tuple(kinds)
        for kind in wanted:
            spec = self._specs.get((name, kind))
            if spec is not None and use in spec.uses:
                return spec
        known = ", ".join(sorted(self.names(use, wanted))) or "(none)"
        raise UnknownNameError(f"unknown {title} {name!r}; known: {known}{self.why_not(name, use, wanted)}")

    def why_not(self, name: str, use: Use, kinds: Iterable[Kind]) -> str:
        """Why a registered ``name`` does not fit ``use`` and ``kinds`` (empty when it is not registered at all)."""
        wanted = tuple(kinds)
        same_use = [s for s in self._specs.values() if s.name == name and s.kind not in wanted and use in s.uses]
        if same_use:  # e.g. ``mean``: a label aggregation for repeats, a score one for an ensemble
            return f" ({name} combines {same_use[0].kind.value}s, not {' or '.join(f'{k.value}s' for k in wanted)})"
        same_kind = [s for s in self._specs.values() if s.name == name and s.kind in wanted]
        if same_kind:
            other = min(same_kind[0].uses)
            return f" ({name} combines {COMBINES[other]}: choose it with {CONFIG_KEYS[other]})"
        other_kind = [s for s in self._specs.values() if s.name == name]
        if other_kind:
            return f" ({name} combines {other_kind[0].kind.value}s, not {' or '.join(f'{k.value}s' for k in wanted)})"
        return ""

    def view(self, kind: Kind, use: Use, title: str) -> AggregationView:
        """The aggregations of ``kind`` for ``use``, read like a :class:`runner.core.registry.Registry`."""
        return AggregationView(self, kind, use, title)


class AggregationView:
    """The aggregations of one kind that config may choose for one use: ``get``, ``names``, ``check_params``.

    A live view: an aggregation registered later is in it.
    """

    def __init__(self, registry: AggregationRegistry, kind: Kind, use: Use, title: str) -> None:
        self.registry, self.kind, self.use, self.title = registry, kind, use, title

    def spec(self, name: str) -> AggregationSpec:
        """The registration of ``name``; raises UnknownNameError listing the known names."""
        return self.registry.find(name, self.use, (self.kind,), self.title)

    def get(self, name: str) -> F:
        """The function registered as ``name``; raises UnknownNameError listing the known names."""
        return self.spec(name).fn

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self.registry.names(self.use, (self.kind,)))

    def check_params(self, name: str, params: Mapping[str, Any], fixed: int | None = None) -> None:
        """Check that ``params`` bind to the aggregation ``name`` (see :meth:`AggregationSpec.check_params`).

        Args:
            name: The registered name.
            params: Keyword parameters from config.
            fixed: The leading positional arguments the caller supplies; the registration knows them, and a
                caller that says otherwise has the wrong kind of aggregation.

        Raises:
            UnknownNameError: If ``name`` is not registered for this kind and use.
            ParamsError: naming ``aggregation.params.<name>`` or ``judge.combine.params.<name>``.
        """
        spec = self.spec(name)
        if fixed is not None and fixed != spec.fixed:
            raise ValueError(f"{spec.title} takes {spec.fixed} positional argument(s), not {fixed}")
        spec.check_params(params, CONFIG_KEYS[self.use])


REGISTRY = AggregationRegistry()
