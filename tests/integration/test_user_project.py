"""A user's own project overlays the packaged configs, in this process through ``runner.run_experiment``: its files
win, the packaged options stay selectable, and its templates and relative dataset paths resolve against the
project, not the working directory (README "Use judgesweep in your own project")."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from runner import run_experiment
from runner.app import init_project
from runner.core import locations
from runner.inputs.prompts import TemplateError


def _run(tmp_path: Path, name: str, overrides: list[str], config_dir: Path | None = None) -> dict:
    run_dir = tmp_path / "runs" / name
    outcome = run_experiment(["tracking=off", "progress=false", f"hydra.run.dir={run_dir}", *overrides],
                             config_dir=config_dir)
    assert outcome is not None and not outcome.failed, outcome
    return {"summary": json.loads((run_dir / "summary.json").read_text()),
            "run": json.loads((run_dir / "run.json").read_text())["config"]}


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A working directory that is not the project's (and holds no conf/, prompts/ or data/)."""
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def test_an_init_project_runs_from_its_config_dir_with_its_own_config(tmp_path, elsewhere):
    project = tmp_path / "demo"
    init_project.write_project(project)
    result = _run(tmp_path, "demo", [], config_dir=project / "conf")
    assert result["run"]["judge.name"] == "my_judge"  # the project's config.yaml replaced the packaged one
    assert result["run"]["dataset.path"] == "data/my_pairs.jsonl"  # relative: found in the project, not the cwd
    assert result["summary"]["gold"]["n_pairs"] == init_project.DEMO_PAIRS
    assert result["summary"]["gold"]["accuracy_mean"] == 1.0  # the copied template: the replay knows every request


def test_a_users_judge_and_prompt_sit_beside_the_packaged_options(tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "conf" / "judge").mkdir(parents=True)
    (project / "conf" / "prompt").mkdir()
    (project / "prompts").mkdir()
    # no config.yaml of its own: the packaged one (LLMBar Natural) composes the rest
    (project / "conf" / "judge" / "recorded.yaml").write_text("name: recorded\nmodel: replay/gpt-4\nmax_tokens: 300\n")
    (project / "conf" / "prompt" / "vanilla_copy.yaml").write_text(
        "name: vanilla_copy\ntemplate: vanilla_copy\nmode: pairwise\nstrategy: single\n")
    shutil.copy(locations.PACKAGED_PROMPTS / "llmbar_vanilla.j2", project / "prompts" / "vanilla_copy.j2")
    monkeypatch.chdir(project)  # ./conf is found without --config-dir

    mine = _run(tmp_path, "mine", ["judge=recorded", "prompt=vanilla_copy", "max_items=4"])
    assert (mine["run"]["judge.name"], mine["run"]["prompt.template"]) == ("recorded", "vanilla_copy")
    assert mine["summary"]["gold"]["n_pairs"] == 4
    packaged = _run(tmp_path, "packaged", ["judge=replay_gpt4", "prompt=llmbar_vanilla", "max_items=4"])
    assert packaged["run"]["judge.name"] == "replay_gpt4"  # the packaged options stay selectable
    assert packaged["summary"]["gold"] == mine["summary"]["gold"]  # same requests, same recorded answers


def test_a_users_file_wins_over_the_packaged_one_of_the_same_name(tmp_path, elsewhere):
    project = tmp_path / "project"
    (project / "conf" / "prompt").mkdir(parents=True)
    (project / "prompts").mkdir()
    # the packaged option's name, pointing at a template that exists only in this project, which has a system block
    # and no user block (a file without any block is one user message since issue 15)
    (project / "conf" / "prompt" / "llmbar_vanilla.yaml").write_text(
        "name: llmbar_vanilla\ntemplate: only_mine\nmode: pairwise\nstrategy: single\n")
    (project / "prompts" / "only_mine.j2").write_text("{% block system %}no user block here{% endblock %}\n")
    with pytest.raises(TemplateError, match=rf"{project / 'prompts' / 'only_mine.j2'} has no"):
        _run(tmp_path, "shadowed", ["max_items=2"], config_dir=project / "conf")


def _git(project: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(project), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                          check=True, capture_output=True, text=True).stdout


@pytest.mark.slow  # git as a process (a few ms each)
def test_a_run_in_a_fresh_git_project_is_tagged_clean(tmp_path, monkeypatch):
    # issue 44, point 6: `judgesweep init` writes a .gitignore, so a run's own outputs do not make the project dirty
    project = tmp_path / "demo"
    init_project.write_project(project)
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "init")
    monkeypatch.chdir(project)
    outcome = run_experiment(["progress=false", "tracking.traces=false", "output.plots=false", "max_items=2"])
    assert outcome is not None and not outcome.failed, outcome
    assert _git(project, "status", "--porcelain") == ""  # outputs/ (runs, the MLflow store, the cache) ignored
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{project / 'outputs' / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [r.data.tags["git.dirty"] for r in runs] == ["false"]
    assert runs[0].data.tags["git.commit"] == _git(project, "rev-parse", "HEAD").strip()


def test_init_appends_what_a_project_s_gitignore_lacks(tmp_path):
    project = tmp_path / "mine"
    project.mkdir()
    (project / ".gitignore").write_text("*.pyc\noutputs/")  # no newline at the end
    init_project.write_project(project)
    assert (project / ".gitignore").read_text() == "*.pyc\noutputs/\nmlruns/\n"  # kept, what it lacked appended
    init_project.write_gitignore(project)
    assert (project / ".gitignore").read_text() == "*.pyc\noutputs/\nmlruns/\n"  # nothing twice
