"""Where configs, templates and relative data paths are found (runner/core/locations.py), the package's file list
(pyproject.toml), and `judgesweep init`'s project (runner/app/init_project.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib
import yaml

from runner.app import init_project
from runner.core import locations
from runner.inputs.datasets import resolve_path
from runner.inputs.prompts import TemplateError, load_template

REPO = Path(__file__).resolve().parents[2]


def test_packaged_conf_and_prompts_are_found_beside_the_package_in_a_checkout():
    assert locations.PACKAGED_CONF == REPO / "conf"
    assert (locations.PACKAGED_CONF / "config.yaml").is_file()
    assert (locations.PACKAGED_PROMPTS / "llmbar_vanilla.j2").is_file()


def test_a_users_conf_dir_is_config_dir_else_cwd_conf_and_never_the_packaged_one(tmp_path):
    assert locations.user_conf_dir(tmp_path) is None  # no ./conf: the packaged defaults alone
    (tmp_path / "conf").mkdir()
    assert locations.user_conf_dir(tmp_path) == tmp_path / "conf"
    (tmp_path / "other").mkdir()
    assert locations.user_conf_dir(tmp_path, "other") == tmp_path / "other"
    assert locations.user_conf_dir(REPO) is None  # the checkout's own conf/ overlays nothing
    with pytest.raises(FileNotFoundError, match="missing"):
        locations.user_conf_dir(tmp_path, "missing")


def test_inputs_resolve_against_the_project_then_the_cwd_then_the_package(tmp_path):
    project, cwd = tmp_path / "project", tmp_path / "cwd"
    roots = locations.input_roots(cwd, project / "conf")
    assert roots == (project, cwd, locations.PACKAGED_ROOT)
    assert locations.input_roots(REPO, None) == (REPO,)  # the checkout is the package's root: listed once
    for where in (cwd / "data", project / "data"):
        where.mkdir(parents=True)
        (where / "x.jsonl").write_text("{}\n")
    assert resolve_path("data/x.jsonl", roots) == project / "data" / "x.jsonl"  # the project's wins
    assert resolve_path("data/absent.jsonl", roots) == project / "data" / "absent.jsonl"  # named where looked for
    assert resolve_path("prompts/llmbar_vanilla.j2", roots) == locations.PACKAGED_PROMPTS / "llmbar_vanilla.j2"


def test_a_template_comes_from_the_first_prompts_dir_that_holds_it(tmp_path):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "mine.j2").write_text("{% block user %}{{ q }}{% endblock %}")
    (tmp_path / "prompts" / "llmbar_vanilla.j2").write_text("{% block user %}mine too{% endblock %}")
    dirs = locations.directories("prompts", locations.input_roots(tmp_path, tmp_path / "conf"))
    assert dirs == [tmp_path / "prompts", locations.PACKAGED_PROMPTS]
    assert load_template(dirs, "mine").path == tmp_path / "prompts" / "mine.j2"
    assert load_template(dirs, "llmbar_vanilla").path == tmp_path / "prompts" / "llmbar_vanilla.j2"  # user's wins
    assert load_template(dirs, "llmbar_swap_synthesize").path.parent == locations.PACKAGED_PROMPTS
    with pytest.raises(TemplateError, match=r"absent\.j2 not found.*'llmbar_cot'.*'mine'"):
        load_template(dirs, "absent")


def _shipped_directories() -> set[str]:
    """Every directory holding a file the wheel carries, as a package name: runner/'s own, conf/ and prompts/ as
    runner.conf and runner.prompts (pyproject.toml's package-dir)."""
    found = set()
    for top, package in (("runner", "runner"), ("conf", "runner.conf"), ("prompts", "runner.prompts")):
        for path in (REPO / top).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                found.add(".".join((package, *path.parent.relative_to(REPO / top).parts)))
    return found


def test_every_directory_with_a_shipped_file_is_a_listed_package():
    # a data directory left out still ships through its parent's glob, but setuptools prints ~40 lines of warning for
    # it on every install (issue 30: ~1,100 lines on `make run`) and means to stop shipping it
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = _shipped_directories()
    assert found <= listed, f"add to pyproject.toml [tool.setuptools] packages: {sorted(found - listed)}"
    assert listed <= found, f"listed but holding no file: {sorted(listed - found)}"
    assert {"runner.conf", "runner.prompts", "runner.conf.judge", "runner.data.llmbar.replay"} <= listed


def test_every_file_under_conf_and_prompts_is_package_data_whatever_its_extension():
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert data["runner.conf"] == data["runner.prompts"] == ["**/*"]  # prompts/single_score.txt was left out


def test_init_writes_a_project_and_refuses_to_overwrite_naming_the_files(tmp_path, capsys):
    assert init_project.main([str(tmp_path / "demo")]) == 0
    demo = tmp_path / "demo"
    for rel in ("conf/config.yaml", "conf/judge/my_judge.yaml", "conf/prompt/my_prompt.yaml",
                "conf/rubric/my_rubric.yaml", "conf/dataset/my_pairs.yaml", "conf/experiment/quick.yaml",
                "prompts/my_prompt.j2", "data/my_pairs.jsonl", "README.md"):
        assert (demo / rel).is_file(), rel
    vanilla = (locations.PACKAGED_PROMPTS / "llmbar_vanilla.j2").read_bytes()
    assert (demo / "prompts/my_prompt.j2").read_bytes() == vanilla  # the replay answers only LLMBar's own requests
    assert len((demo / "data/my_pairs.jsonl").read_text().splitlines()) == init_project.DEMO_PAIRS
    (demo / "README.md").write_text("mine")
    with pytest.raises(SystemExit) as stopped:
        init_project.main([str(demo)])
    assert stopped.value.code == 1
    assert "not overwriting existing files" in capsys.readouterr().err
    assert (demo / "README.md").read_text() == "mine"


def _default_groups(config: Path) -> set[str]:
    return {next(iter(entry)) for entry in yaml.safe_load(config.read_text())["defaults"] if isinstance(entry, dict)}


def test_an_init_projects_defaults_list_names_every_packaged_group():
    # a preset can override only a group the defaults list names: without `generator: null` the project's
    # `experiment=agent_rubric_generate` failed with "Could not override 'generator'" (issue 30)
    packaged = _default_groups(locations.PACKAGED_CONF / "config.yaml")
    project = _default_groups(init_project.TEMPLATE_DIR / "conf" / "config.yaml")
    assert packaged <= project, f"add to project_template/conf/config.yaml's defaults: {sorted(packaged - project)}"
    assert "generator" in packaged
