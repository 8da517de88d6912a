"""runner.judging.aggregations: one registry for repeat aggregations and ensemble combines, labels and scores."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from runner.core.config import FunctionRef
from runner.core.errors import ConfigurationError, ParamsError
from runner.core.registry import UnknownNameError
from runner.core.types import ItemResult
from runner.judging.aggregation import AGGREGATIONS, aggregate_items
from runner.judging.aggregations import REGISTRY, AggregationRef, AggregationRegistry, Kind, Use, aggregation_ref
from runner.judging.scoring import SCORE_AGGREGATIONS
from runner.modes import ensemble_check, panel
from runner.modes.ensemble import LABEL_COMBINERS, SCORE_COMBINERS, combine_labels, combine_scores
from tests.builders import OURS, ensemble_cfg

CONF = Path(__file__).resolve().parents[2] / "conf" / "aggregation"


def test_each_aggregation_is_registered_once_per_meaning_with_its_kind_and_uses() -> None:
    table = {(s.name, s.kind.value): sorted(u.value for u in s.uses) for s in REGISTRY.specs()}
    assert table == {
        ("majority_vote", "label"): ["ensemble", "repeats"],
        ("weighted", "label"): ["ensemble"],
        ("mean", "label"): ["repeats"],  # a pairwise judge's votes as preferences: JudgeBench's rule (issue 31)
        ("mean", "score"): ["ensemble", "repeats"],
        ("median", "score"): ["ensemble", "repeats"],
        ("weighted", "score"): ["ensemble"],
        ("dawid_skene", "label"): ["ensemble"],
    }
    # the repeat aggregation and the ensemble combine are the same function
    assert REGISTRY.find("majority_vote", Use.repeats).fn is REGISTRY.find("majority_vote", Use.ensemble).fn
    assert REGISTRY.find("mean", Use.repeats, (Kind.score,)).fn is SCORE_COMBINERS.get("mean")
    assert REGISTRY.names(Use.ensemble) == ["majority_vote", "weighted", "mean", "median", "dawid_skene"]


@pytest.mark.parametrize("spec", REGISTRY.specs(), ids=lambda s: f"{s.name}-{s.kind.value}")
def test_every_aggregation_has_one_yaml_whose_params_bind(spec) -> None:
    raw = OmegaConf.to_container(OmegaConf.load(CONF / f"{spec.name}.yaml"))
    assert isinstance(raw, dict) and raw["name"] == spec.name
    params = dict(raw["params"]) | ({"weights": {}} if spec.weighted else {})
    spec.check_params(params, "aggregation")


@pytest.mark.parametrize(("view", "name", "message"), [
    (AGGREGATIONS, "majority_vot", r"unknown aggregation 'majority_vot'; known: majority_vote, mean$"),
    (AGGREGATIONS, "median", r"known: majority_vote, mean \(median combines scores, not labels\)"),
    (AGGREGATIONS, "weighted", r"weighted combines the members of an ensemble: choose it with judge.combine"),
    (SCORE_AGGREGATIONS, "majority_vote", r"known: mean, median \(majority_vote combines labels, not scores\)"),
    (SCORE_AGGREGATIONS, "dawid_skene", r"\(dawid_skene combines labels, not scores\)"),
    (LABEL_COMBINERS, "mean", r"known: dawid_skene, majority_vote, weighted \(mean combines scores"),
    (SCORE_COMBINERS, "dawid_skene", r"known: mean, median, weighted \(dawid_skene combines labels"),
])
def test_an_unknown_name_lists_the_known_ones_for_that_use_and_kind(view, name: str, message: str) -> None:
    with pytest.raises(UnknownNameError, match=message):
        view.get(name)


def test_params_that_do_not_bind_name_the_key() -> None:
    with pytest.raises(ParamsError, match=r"^aggregation.params.threshold: label aggregation 'majority_vote' takes "
                                          r"no parameter 'threshold' \(its parameters: none\)"):
        AGGREGATIONS.check_params("majority_vote", {"threshold": 0.5})
    with pytest.raises(ParamsError, match=r"^judge.combine.params.iterations: .*its parameters: labels, max_iter"):
        LABEL_COMBINERS.check_params("dawid_skene", {"iterations": 5})
    with pytest.raises(ParamsError, match=r"^judge.combine.params.weights: "):
        SCORE_COMBINERS.check_params("weighted", {})  # needs its weights
    LABEL_COMBINERS.check_params("dawid_skene", {"smoothing": 0.5, "max_iter": 10})
    with pytest.raises(ValueError, match="takes 2 positional"):
        AGGREGATIONS.check_params("majority_vote", {}, fixed=1)  # a caller that expects a score aggregation


def test_judge_combine_is_a_name_or_a_name_and_params_node() -> None:
    assert aggregation_ref("weighted", "judge.combine") == AggregationRef("weighted", {})
    node = {"name": "dawid_skene", "params": {"smoothing": 0.5}}
    assert aggregation_ref(node, "judge.combine") == AggregationRef("dawid_skene", {"smoothing": 0.5})
    assert aggregation_ref({"name": "mean"}, "k") == AggregationRef("mean", {})
    assert aggregation_ref(FunctionRef("median", {}), "aggregation") == AggregationRef("median", {})
    for bad, key in ((3, "judge.combine: "), ({"name": "x", "param": {}}, "judge.combine.param: "),
                     ({"params": {}}, "judge.combine.name: "),
                     ({"name": "x", "params": [1]}, "judge.combine.params: ")):
        with pytest.raises(ConfigurationError, match=f"^{key}"):
            aggregation_ref(bad, "judge.combine")


@pytest.mark.usefixtures("hydra_conf")
def test_a_node_combine_with_params_is_checked_and_used() -> None:
    cfg = ensemble_cfg("judge.combine={name: weighted, params: {weights: {replay_gpt4: 1, replay_chatgpt: 3}}}")
    ensemble_check.check(cfg)
    # over judge.weights (2, 1)
    assert ensemble_check.member_weights(cfg) == {"replay_gpt4": 1.0, "replay_chatgpt": 3.0}
    votes = {"replay_gpt4/ab": {"1": OURS}, "replay_chatgpt/ab": {"1": "base"}}
    (weighted,), _ = panel.combine("weighted", votes, cfg, ["1"])
    assert weighted.final_verdict == "base"
    for overrides, message in [
        (["judge.combine={name: majority_vote, params: {foo: 1}}"], "judge.combine.params.foo: label aggregation"),
        (["judge.combine={name: mean, params: {weights: {replay_gpt4: 1}}}"], "judge.combine.params.weights: "),
        (["judge.combine={name: weighted, params: {weights: {nobody: 1}}}"], "judge.combine.params.weights.nobody"),
        (["judge.combine={name: wieghted}"], "judge.combine='wieghted' is not one of ['majority_vote', 'weighted'"),
    ]:
        with pytest.raises(ConfigurationError) as err:
            ensemble_check.check(ensemble_cfg(*overrides))
        assert message in str(err.value)


@pytest.mark.usefixtures("hydra_conf")
def test_a_conf_aggregation_file_composes_as_the_combine() -> None:
    cfg = ensemble_cfg("+aggregation@judge.combine=dawid_skene", "judge.combine.params.smoothing=0.5")
    ensemble_check.check(cfg)
    assert ensemble_check.combine_of(cfg) == AggregationRef("dawid_skene", {
        "max_iter": 1000, "tol": 1e-6, "smoothing": 0.5, "annotators": "judge", "resamples": 100, "level": 0.95,
        "seed": 0})
    # the shipped file is the standard EM (no smoothing); a value out of range fails at start-up, naming its key
    assert ensemble_check.combine_of(ensemble_cfg("+aggregation@judge.combine=dawid_skene")).params["smoothing"] == 0
    for override, key in [("judge.combine.params.smoothing=-0.5", "smoothing"), ("judge.combine.params.tol=-1", "tol"),
                          ("judge.combine.params.annotators=orders", "annotators"),
                          ("judge.combine.params.max_iter=0", "max_iter")]:
        with pytest.raises(ConfigurationError, match=rf"^judge\.combine\.params\.{key}: .*{key} must be"):
            ensemble_check.check(ensemble_cfg("+aggregation@judge.combine=dawid_skene", override))
    with pytest.raises(ConfigurationError, match=r"^judge\.combine\.params\.smoothing: .* got -1"):
        ensemble_check.check(ensemble_cfg("judge.combine={name: dawid_skene, params: {smoothing: -1}}"))
    with pytest.raises(ConfigurationError, match="a pointwise ensemble combines scores"):
        ensemble_check.check(ensemble_cfg("prompt=agent_output", "rubric=agent_output", "dataset=agent_examples",
                                 "+aggregation@judge.combine=majority_vote"))


@pytest.fixture()
def registry_with_extras() -> Iterator[None]:
    """Two aggregations registered for one test: an ensemble-only vote and a score aggregation for both uses."""

    @REGISTRY.register("first_vote", Kind.label, {Use.ensemble})
    def first_vote(item_id: str, votes: Sequence[str], skip: int = 0) -> ItemResult:
        final = votes[skip] if len(votes) > skip else None
        return ItemResult(item_id, tuple(votes), {}, final, None if final is None else "majority", {})

    @REGISTRY.register("trimmed_max", Kind.score)
    def trimmed_max(values: Sequence[float], cap: float = 10.0) -> float:
        return min(max(values), cap)

    try:
        yield
    finally:
        REGISTRY.unregister("first_vote", Kind.label)
        REGISTRY.unregister("trimmed_max", Kind.score)


@pytest.mark.usefixtures("hydra_conf", "registry_with_extras")
def test_an_aggregation_registered_later_is_usable_where_its_uses_say() -> None:
    assert "first_vote" in LABEL_COMBINERS.names() and "first_vote" not in AGGREGATIONS.names()
    assert "trimmed_max" in SCORE_AGGREGATIONS.names() and "trimmed_max" in SCORE_COMBINERS.names()
    cfg = ensemble_cfg("judge.combine={name: first_vote, params: {skip: 1}}")
    ensemble_check.check(cfg)
    # the chosen one first, then every other in registration order (a pairwise ensemble: labels, and scores of
    # each member's preference); with two annotators Dawid-Skene is left out
    assert panel._methods(cfg, 4) == ["first_vote", "majority_vote", "weighted", "mean", "median", "dawid_skene",
                                      "trimmed_max"]
    assert "dawid_skene" not in panel._methods(cfg, 2)
    votes = {"a/ab": {"1": OURS}, "b/ab": {"1": "base"}, "c/ab": {"1": OURS}}
    (result,), _ = panel.combine("first_vote", votes, cfg, ["1"])
    assert result.final_verdict == "base"  # params from judge.combine reach the function
    assert combine_labels(votes, "first_vote").labels == {"1": OURS}
    assert combine_scores({"a": {"i": 12.0}, "b": {"i": 3.0}}, "trimmed_max", cap=11.0) == {"i": 11.0}
    with pytest.raises(ConfigurationError, match="judge.combine.params.skipp"):
        ensemble_check.check(ensemble_cfg("judge.combine={name: first_vote, params: {skipp: 1}}"))
    with pytest.raises(UnknownNameError, match="first_vote combines the members of an ensemble"):
        aggregate_items([], ["i"], "first_vote", {})


def test_registrations_that_could_never_be_called_fail_at_import() -> None:
    registry = AggregationRegistry()

    def per_vote(item_id: str, votes: Sequence[str], weights: Sequence[float]) -> ItemResult:
        raise NotImplementedError

    with pytest.raises(ValueError, match="combine an ensemble's members only"):
        registry.register("w", Kind.label, weighted=True)(per_vote)  # repeats have no weights
    with pytest.raises(ValueError, match="takes `weights`"):
        registry.register("w", Kind.score, {Use.ensemble}, weighted=True)(lambda values: 0.0)
    with pytest.raises(ValueError, match="only label aggregations"):
        registry.register("t", Kind.score, {Use.ensemble}, whole_table=True)(lambda votes: 0.0)
    with pytest.raises(ValueError, match="2 positional"):
        registry.register("one", Kind.label)(lambda votes: None)
    registry.register("w", Kind.label, {Use.ensemble}, weighted=True)(per_vote)
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("w", Kind.label, {Use.ensemble}, weighted=True)(per_vote)
    assert registry.names(Use.repeats) == [] and registry.names(Use.ensemble) == ["w"]
