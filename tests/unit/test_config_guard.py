"""Hydra instantiate keys refused in overrides and the user's YAML files, allowed under the launcher and sweeper."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runner.core import locations
from runner.run.config_guard import check_overrides, check_user_conf
from runner.run.job_context import ForbiddenKey


@pytest.mark.parametrize(("override", "key"), [
    ("+hydra.callbacks.evil._target_=os.makedirs", "hydra.callbacks.evil._target_"),
    ("+hydra.callbacks.evil={_target_:os.makedirs,name:/tmp/x}", "hydra.callbacks.evil._target_"),
    ("+judge._target_=os.getcwd", "judge._target_"),
    ("++judge.members.a._partial_=true", "judge.members.a._partial_"),
    ("hydra.job_logging.root._args_=[1]", "hydra.job_logging.root._args_"),
])
def test_an_instantiate_key_in_an_override_is_refused_naming_it(override: str, key: str) -> None:
    message = f"instantiate keys are not allowed in judgesweep configs: [{key!r}]"
    with pytest.raises(ForbiddenKey, match=f"^{re.escape(message)}"):
        check_overrides([override])


@pytest.mark.parametrize("override", ["hydra.launcher._target_=hydra_plugins.x.Launcher", "hydra/launcher=joblib",
                                      "hydra.sweeper.params.x=1,2", "judge.seed=1,2,3", "judge.name=_target_",
                                      "not an override ="])
def test_launcher_sweeper_and_ordinary_overrides_pass(override: str) -> None:
    check_overrides([override])


@pytest.mark.parametrize(("relative", "text", "key"), [
    ("experiment/sneaky.yaml", "# @package _global_\nhydra:\n  callbacks:\n    evil:\n      _target_: os.makedirs\n",
     "hydra.callbacks.evil._target_"),
    ("judge/mine.yaml", "name: x\nextra:\n  - _target_: os.getcwd\n", "judge.extra[0]._target_"),
    ("hydra/callbacks/evil.yaml", "_target_: os.makedirs\n", "hydra.callbacks._target_"),
    ("x.yaml", "# @package hydra.callbacks.evil\n_partial_: true\n", "hydra.callbacks.evil._partial_"),
])
def test_an_instantiate_key_in_a_user_yaml_names_file_and_key(tmp_path: Path, relative: str, text: str,
                                                              key: str) -> None:
    path = tmp_path / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    with pytest.raises(ForbiddenKey, match=re.escape(f"{path}: instantiate keys are not allowed in judgesweep configs: "
                                                     f"[{key!r}]")):
        check_user_conf(tmp_path)


def test_user_launcher_and_sweeper_configs_pass(tmp_path: Path) -> None:
    (tmp_path / "hydra" / "launcher").mkdir(parents=True)
    (tmp_path / "hydra" / "launcher" / "mine.yaml").write_text("_target_: hydra_plugins.x.Launcher\nn_jobs: 2\n")
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "search.yaml").write_text(
        "# @package _global_\nhydra:\n  sweeper:\n    _target_: hydra_plugins.y.Sweeper\n")
    check_user_conf(tmp_path)


def test_the_packaged_conf_passes_and_names_judgesweeps_own_callbacks_only() -> None:
    # what conf/ ships is the allowlist: its callbacks and launchers pass, and a user's copy of those files too
    check_user_conf(locations.PACKAGED_CONF)
    check_overrides(["+hydra.callbacks.mine._target_=runner.app.cli.SweepSummary"])
    with pytest.raises(ForbiddenKey):
        check_overrides(["hydra.callbacks.sweep_summary._target_=os.getcwd"])
