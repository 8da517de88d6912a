"""Unit tests for runner.modes.base and runner.modes.statistics: the mode is chosen once by name, and a statistic
registered once reaches summary.json's section, the metrics, the console lines and the report's views."""

from __future__ import annotations

import dataclasses

import pytest

from runner.core.config import RunConfig
from runner.core.types import TIE, ItemResult, Order, Status
from runner.inputs.datasets import ItemRef
from runner.modes import statistics
from runner.modes.base import expand
from runner.modes.catalog import mode_for, mode_named
from runner.modes.statistics import Estimate, StatInputs
from tests.builders import judgment, to_run_config

OURS, BASE = "ours", "base"


def pairwise_cfg() -> RunConfig:
    cfg = to_run_config([])
    assert cfg.dataset.ours is not None and cfg.dataset.baseline is not None
    dataset = dataclasses.replace(cfg.dataset, ours=dataclasses.replace(cfg.dataset.ours, name=OURS),
                                  baseline=dataclasses.replace(cfg.dataset.baseline, name=BASE))
    return dataclasses.replace(cfg, dataset=dataset)


@pytest.mark.usefixtures("hydra_conf")
def test_the_mode_is_chosen_from_prompt_mode() -> None:
    assert mode_for(to_run_config([])).name == "pairwise"
    assert mode_for(to_run_config(["experiment=agent_rubric"])).name == "pointwise"


def test_an_unknown_mode_names_the_known_ones() -> None:
    with pytest.raises(LookupError, match=r"'listwise' is not one of \['pairwise', 'pointwise'\]"):
        mode_named("listwise")


def test_every_mode_s_report_has_what_the_run_s_end_sets() -> None:
    from runner.modes import catalog
    from runner.modes.base import MODES, RunMode, register
    from runner.modes.sections import Record, run_end_missing

    catalog.mode_named("pairwise")  # every mode registered
    assert MODES and {name: run_end_missing(m.report_type) for name, m in MODES.items()} == dict.fromkeys(MODES, [])

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class NoGates(Record):
        summary: int

    class Broken(MODES["pairwise"].__class__):
        name = "broken"
        report_type = NoGates

    with pytest.raises(TypeError, match=r"sets: \['gates', 'partial', 'partial_reason', 'summary.skipped_rows'"):
        register(Broken())
    assert "broken" not in MODES and isinstance(MODES["pairwise"], RunMode)


def test_expand_fills_missing_keys_only_when_asked() -> None:
    rows = [{"id": "a", "n": {"x": 1}}, {"id": "b", "n": {"y": 2}}]
    assert expand(rows, "n", fill=0) == [{"id": "a", "n.x": 1, "n.y": 0}, {"id": "b", "n.x": 0, "n.y": 2}]
    assert expand(rows, "n") == [{"id": "a", "n.x": 1}, {"id": "b", "n.y": 2}]


@pytest.fixture
def registered():
    """A statistic registered for the test only."""

    @statistic_for_test
    def _shares(inputs: StatInputs):
        return {"all": {"share": Estimate(0.25, 8, 0.1, 0.5)}, "empty": {"share": Estimate(None, 0)}}

    yield "test_share"
    del statistics.STATISTICS["test_share"]


def statistic_for_test(fn):
    return statistics.statistic("test_share", "test share", modes=["pairwise"])(fn)


@pytest.mark.usefixtures("hydra_conf")
def test_a_registered_statistic_reaches_every_output(registered: str) -> None:
    section = statistics.compute("pairwise", StatInputs(pairwise_cfg(), (), (), ()))
    assert section == {registered: {"all": {"share": {"value": 0.25, "n": 8, "ci_low": 0.1, "ci_high": 0.5}},
                                    "empty": {"share": {"value": None, "n": 0, "ci_low": None, "ci_high": None}}}}
    assert statistics.compute("pointwise", StatInputs(pairwise_cfg(), (), (), ())) == {}
    metrics = statistics.metrics(section)
    assert metrics["test_share/all/share"] == 0.25 and metrics["test_share/all/share_ci_low"] == 0.1
    assert metrics["test_share/all/n"] == 8.0 and "test_share/empty/share" not in metrics
    assert "test share all (n=8): share 25.0% [10.0, 50.0]" in statistics.console_lines(section)
    [view] = statistics.views(section)
    assert view.title == "test share" and view.columns == ("group", "n", "share")
    assert view.rows[0] == ("all", "8", "25.0% [10.0, 50.0]") and view.rows[1][2] == "n/a"
    assert "test_share" in statistics.families()


@pytest.fixture
def headline():
    """A headline coefficient (one group, the whole run; not a share) registered for the test only."""
    statistics.statistic("test_coefficient", "test coefficient", modes=["pairwise"], headline=True, percent=False)(
        lambda inputs: {"all": {"kappa": Estimate(0.42, 8, -0.1, 0.5)}})
    yield "test_coefficient"
    del statistics.STATISTICS["test_coefficient"]


@pytest.mark.usefixtures("hydra_conf")
def test_a_headline_statistic_has_no_group_in_its_keys_and_a_coefficient_is_no_percentage(headline: str) -> None:
    section = statistics.compute("pairwise", StatInputs(pairwise_cfg(), (), (), ()))
    assert section[headline] == {"all": {"kappa": {"value": 0.42, "n": 8, "ci_low": -0.1, "ci_high": 0.5}}}
    assert {k: v for k, v in statistics.metrics(section).items() if k.startswith(headline)} == {
        "test_coefficient/kappa": 0.42, "test_coefficient/kappa_ci_low": -0.1, "test_coefficient/kappa_ci_high": 0.5,
        "test_coefficient/n": 8.0}
    assert "test coefficient (n=8): kappa 0.420 [-0.100, 0.500]" in statistics.console_lines(section)
    [view] = [v for v in statistics.views(section) if v.title == "test coefficient"]
    assert view.rows == (("all", "8", "0.420 [-0.100, 0.500]"),)


def test_a_statistic_name_is_snake_case_and_registered_once(registered: str) -> None:
    with pytest.raises(ValueError, match="registered twice"):
        statistic_for_test(lambda inputs: {})
    with pytest.raises(ValueError, match="snake_case"):
        statistics.statistic("Bad-Name", "x", modes=["pairwise"])


def result(item_id: str, final: str | None) -> ItemResult:
    return ItemResult(item_id, (), {}, final, None)


@pytest.mark.usefixtures("hydra_conf")
def test_per_category_win_rate_and_agreement_count_a_failed_item_as_wrong() -> None:
    import runner.modes.pairwise  # noqa: F401 - registers by_category / by_tag

    refs = [ItemRef("1", OURS, "t:1", tags=("x", "y"), category="math"),
            ItemRef("2", BASE, "t:2", tags=("x",), category="math"),
            ItemRef("3", OURS, "t:3", category="code"), ItemRef("4", OURS, "t:4", category="code")]
    results = [result("1", OURS), result("2", TIE), result("3", BASE), result("4", None)]
    # the judgments agreement counts (as the headline's agreement/accuracy_all does): item 4's call failed
    judgments = [judgment("1", Order.AB, "A"), judgment("2", Order.AB, TIE), judgment("3", Order.AB, "B"),
                 judgment("4", Order.AB, None, status=Status.ERROR)]
    section = statistics.compute("pairwise", StatInputs(pairwise_cfg(), refs, judgments, results))
    math, code = section["by_category"]["math"], section["by_category"]["code"]
    assert math["win_rate"]["value"] == 0.75 and math["win_rate"]["n"] == 2
    assert math["agreement"]["value"] == 0.5 and math["agreement"]["n"] == 2
    assert code["win_rate"] == {"value": 0.0, "n": 1, "ci_low": None, "ci_high": None}
    assert code["agreement"]["value"] == 0.0 and code["agreement"]["n"] == 2  # item 4 failed: wrong, not dropped
    assert set(section["by_tag"]) == {"x", "y"} and section["by_tag"]["x"]["win_rate"]["n"] == 2
    assert math["win_rate"]["ci_low"] is not None and math["win_rate"]["ci_low"] <= 0.75 <= math["win_rate"]["ci_high"]
