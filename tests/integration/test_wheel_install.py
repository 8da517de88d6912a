"""The wheel, installed non-editable into a fresh venv outside the repository, works from an empty directory: the
default run prints the LLMBar GPT-4 figures, every packaged option of every config group dry-runs, and
`judgesweep init demo && cd demo && judgesweep` runs, every packaged experiment preset too (README "Use judgesweep
in your own project"). Slow: it builds a wheel and runs judgesweep as processes.

The wheel is built by pip and setuptools from a copy of the sources. The fresh venv (made without pip of its own)
reaches its dependencies, pip among them, through a .pth file naming this venv's site-packages: Python does not
process .pth files inside a directory added that way, so the repository's editable install does not leak in; the
test checks that ``runner`` is imported from the fresh venv's own site-packages. Nothing is downloaded when this
venv's setuptools can build the wheel (the dev extras install one); else pip fetches the build backend.

The installed console script runs `init`, `--help`, a tracked run in a project and `aggregate`; the many runs that
need no process of their own (every option's dry run, every preset's from a project, the default run from an empty
directory, a packaged option's run from a project) share one process of the fresh venv's python
(tests/integration/dry_run_every_option.py, through ``runner.run_experiment``): a process start imports litellm.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.docs_blocks import commands
from tests.integration.conftest import CLOSED_PROXIES

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SETUPTOOLS_MAJOR = 77  # pyproject.toml's [build-system] requires (an SPDX license string)


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def _offline_build() -> list[str]:
    """pip's flag to build with this venv's setuptools (the dev extras hold one new enough), else none: pip then
    fetches the build backend pyproject.toml names from the configured index."""
    try:
        major = int(importlib.metadata.version("setuptools").split(".")[0])
    except importlib.metadata.PackageNotFoundError:
        return []
    return ["--no-build-isolation"] if major >= SETUPTOOLS_MAJOR else []


class Installed(NamedTuple):
    """The fresh venv's bin/, the environment to run it in, the wheel and what building it printed."""

    bin: Path
    env: dict[str, str]
    wheel: Path
    build_output: str


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    """A fresh venv with judgesweep's wheel installed (non-editable), and an environment for it."""
    base = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env.pop("HF_HUB_OFFLINE", None)  # judgesweep says it (runner.run.experiment.prepare_process): checked below
    # from a copy of what the wheel is built from: setuptools reuses a source tree's build/ (a previous build's files)
    source = base / "source"
    for name in ("runner", "conf", "prompts"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    build_output = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", *_offline_build(), "-w",
                         str(base / "dist"), str(source)], base, env)
    wheel = next((base / "dist").glob("judgesweep-*.whl"))
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], base, env)  # pip: this venv's, by the .pth
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], base, env)
                .strip())
    (site / "judgesweep_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], base, env)
    where = _run([str(python), "-c", "import runner; print(runner.__file__)"], base, env).strip()
    assert Path(where).is_relative_to(site), where  # the wheel's copy, not the repository's
    return Installed(venv / "bin", env, wheel, build_output)


def _checkout_files() -> set[str]:
    """Every file of runner/, conf/ and prompts/, by the path the wheel gives it (conf/ -> runner/conf/)."""
    files = set()
    for top, inside in (("runner", "runner"), ("conf", "runner/conf"), ("prompts", "runner/prompts")):
        for path in (REPO / top).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                files.add(f"{inside}/{path.relative_to(REPO / top).as_posix()}")
    return files


def test_the_wheel_carries_every_file_of_the_checkout_and_builds_without_warnings(installed):
    shipped = {name for name in zipfile.ZipFile(installed.wheel).namelist() if not name.startswith("judgesweep-")}
    checkout = _checkout_files()
    assert "runner/prompts/single_score.txt" in checkout
    assert sorted(checkout - shipped) == []  # prompts/single_score.txt was left out (issue 30)
    assert sorted(shipped - checkout) == []
    # setuptools' ~40-line warnings (a data directory not listed in `packages`, a deprecated license table) were
    # ~1,100 lines of `make run` on a fresh machine; pip prints them even with --quiet
    assert "Warning" not in installed.build_output, installed.build_output[:3000]


def _options(conf: Path) -> set[str]:
    return {f"{path.parent.relative_to(conf).as_posix()}={path.stem}" for path in conf.rglob("*.yaml")
            if path.parent != conf}


# The no-key tutorials' recorded-answer runs, as their pages write them (issue 44 point 7: their data was not shipped)
TUTORIAL_RUNS = [(page, args) for page, args in commands(sorted((REPO / "docs" / "tutorials").glob("*.md")))
                 if "judge=recorded" in args]
PACKAGED_OPTION = ("tracking=off", "prompt=llmbar_vanilla_norules", "dataset=llmbar_natural", "max_items=5",
                   "judge=replay_gpt4")


@pytest.fixture(scope="module")
def in_the_venv(installed, tmp_path_factory) -> dict[str, dict]:
    """One process of the fresh venv's python (tests/integration/dry_run_every_option.py) started in an empty
    directory: it dry-runs every packaged option there and every preset from a `judgesweep init` project, then runs
    the default run in the empty directory and PACKAGED_OPTION in the project. Its OUT.json (``dry_runs``, ``runs``)."""
    base = tmp_path_factory.mktemp("in_the_venv")
    _run([str(installed.bin / "judgesweep"), "init", "demo"], base, installed.env)
    (base / "empty").mkdir()
    runs = {"default": {"cwd": str(base / "empty"), "overrides": ["tracking=off"]},
            "packaged option in the project": {"cwd": str(base / "demo"), "overrides": list(PACKAGED_OPTION)},
            **{f"tutorial {page.name}": {"cwd": str(base / "empty"), "overrides": [*args, "tracking=off"]}
               for page, args in TUTORIAL_RUNS}}
    (base / "runs.json").write_text(json.dumps(runs))
    out = base / "out.json"
    # any request that is not to 127.0.0.1 goes to a closed port: refused, and said on stderr by whoever made it
    printed = _run([str(installed.bin / "python"), str(Path(__file__).with_name("dry_run_every_option.py")), str(out),
                    "--project", str(base / "demo"), "--runs", str(base / "runs.json")], base / "empty",
                   {**installed.env, **CLOSED_PROXIES})
    return {**json.loads(out.read_text()), "printed": printed}


def test_every_packaged_option_dry_runs_installed_from_an_empty_directory_and_every_preset_from_a_project(
        in_the_venv):
    results = in_the_venv["dry_runs"]
    packaged = _options(REPO / "conf")
    assert {"prompt=single_score", "experiment=agent_rubric_generate", "hydra/launcher=ray_local"} <= packaged
    presets = {f"project: {o}" for o in packaged if o.startswith("experiment=")}
    assert set(results) == packaged | presets  # enumerated from the installed conf/: the checkout's options, all
    failed = {option: outcome["errors"] for option, outcome in results.items() if not outcome["ok"]}
    # each failed option with the distinct errors of the ways it was tried (the default run, then each preset)
    assert failed == {}, "\n".join(f"{option}: " + " | ".join(dict.fromkeys(e[:300] for _, e in errors))
                                   for option, errors in failed.items())


def test_no_packaged_option_reaches_out_for_a_tokenizer(in_the_venv):
    # judge=cerebras_llama70b's dry run counts its tokens with litellm, which asks the Hugging Face Hub for a Llama
    # tokenizer unless HF_HUB_OFFLINE is set (in_the_venv sends every request to a closed port: refused, retried ~23 s)
    assert in_the_venv["dry_runs"]["judge=cerebras_llama70b"]["ok"]
    assert "huggingface.co" not in in_the_venv["printed"]
    assert in_the_venv["printed"] == ""  # nor any other warning or attempt: each run's own output is in out.json


def test_the_default_run_works_from_an_empty_directory(installed, in_the_venv, tmp_path):
    default = in_the_venv["runs"]["default"]  # `judgesweep tracking=off` in an empty directory, in the venv's python
    assert default["ok"], default
    assert "accuracy AB 95.0% / BA 96.0% / mean 95.5% / both 93.0%" in default["output"]
    (tmp_path / "empty").mkdir()
    help_text = _run([str(installed.bin / "judgesweep"), "--help"], tmp_path / "empty", installed.env)
    assert help_text.startswith("judgesweep: ") and "judge: " in help_text and "replay_gpt4" in help_text


def test_the_no_key_tutorials_run_installed_from_an_empty_directory(in_the_venv):
    runs = in_the_venv["runs"]
    assert len(TUTORIAL_RUNS) == 2
    agent, reply = runs["tutorial agent-rubric.md"], runs["tutorial reply-quality.md"]
    assert "passed 10, failed 1, not scored 1 of 12 items: pass rate 83.3%" in agent["output"], agent
    assert "FAIL gate.min_mean_score: mean score 4.812 < 6" in reply["output"], reply  # the page's gate, as it says


def test_init_demo_then_judgesweep_in_it_runs(installed, in_the_venv, tmp_path):
    judgesweep, env = str(installed.bin / "judgesweep"), installed.env
    _run([judgesweep, "init", "demo"], tmp_path, env)
    out = _run([judgesweep], tmp_path / "demo", env)  # tracking too: the project's sqlite store
    assert "items 8, successful 8, failed 0" in out
    assert (tmp_path / "demo" / "outputs" / "mlflow.db").is_file()
    # a packaged option from inside a project: its template comes from the package (PACKAGED_OPTION)
    packaged = in_the_venv["runs"]["packaged option in the project"]
    assert packaged["ok"] and "items 5, successful 5" in packaged["output"], packaged
    # a packaged preset that picks a generator, dry-run from inside a project: the project's defaults list names the
    # group (issue 30)
    preset = in_the_venv["dry_runs"]["project: experiment=agent_rubric_generate"]
    assert preset["ok"] and "dry run, no call made: generator gpt4o_mini" in preset["output"], preset


def test_installed_aggregate_of_the_users_results_files_gives_the_checkouts_verdicts(installed, tmp_path):
    # the checkout's aggregate of these files equals a live run of their votes
    # (tests/integration/test_aggregate.py::test_users_results_files_give_the_verdicts_of_a_live_run_of_those_votes);
    # installed from the wheel, in an empty directory, it must give the same
    from runner.app import aggregate_cli

    users = REPO / "tests" / "fixtures" / "users" / "aggregate"
    (tmp_path / "empty").mkdir()
    files = [Path(shutil.copy2(users / f"results{n}.json", tmp_path / "empty")) for n in (1, 2, 3)]
    args = ["experiment=robust_pairwise", "tracking=off"]
    _run([str(installed.bin / "judgesweep"), "aggregate", *map(str, files), *args, "output_dir=agg"],
         tmp_path / "empty", installed.env)
    assert aggregate_cli.main([*map(str, files), *args, f"output_dir={tmp_path / 'checkout'}"]) == 0
    installed_doc, checkout_doc = (json.loads((d / "summary.json").read_text())
                                   for d in (tmp_path / "empty" / "agg", tmp_path / "checkout"))
    assert installed_doc["aggregated_results"] == checkout_doc["aggregated_results"]
    assert set(installed_doc["aggregated_results"]) == set(json.loads(files[0].read_text())["results"])
