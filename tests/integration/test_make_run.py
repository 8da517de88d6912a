"""`make run` prints only what a user should read (issue 30, point 7 / Deliver 5): its install steps one line,
then the run its progress and summary, no warning and no traceback (README, the top).

The Makefile's own `run` target runs, in a copy of the sources, into a fresh venv, offline: pip is told through its
own environment variables to use no index, install no dependencies and build with this venv's setuptools
(``PIP_NO_INDEX``, ``PIP_NO_DEPS``, ``PIP_NO_BUILD_ISOLATION``), and the fresh venv (made without pip) reaches pip,
setuptools and judgesweep's dependencies through a .pth file naming this venv's site-packages, as
test_wheel_install's venv does. Everything else is the Makefile's: its pip commands at their quiet default, the
editable install, the stamp, then `judgesweep` with the default run (replayed GPT-4) on its first 10 pairs without
MLflow (``ARGS``, to keep the test short; test_default_run checks the whole default run's output, its new MLflow
store included). Slow: make, pip and judgesweep as processes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.integration.conftest import REPO, offline_env
from tests.integration.shared import LOG_RECORD, assert_only_what_a_user_reads

pytestmark = pytest.mark.slow

INSTALLING = "installing judgesweep and its dependencies into .venv (minutes on a fresh machine)"


def make(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``make ARGS`` in ``cwd``, offline, pip without an index, dependencies or build isolation."""
    # a user's shell: not a sub-make of `make test` (MAKELEVEL etc. would make it print "Entering directory")
    env = {k: v for k, v in offline_env().items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_", "MAKE", "MFLAGS"))}
    env.update(PIP_NO_INDEX="1", PIP_NO_DEPS="1", PIP_NO_BUILD_ISOLATION="0", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return subprocess.run(["make", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A copy of the sources `make run` installs, with a fresh venv (no pip of its own) in its ``.venv``."""
    root = tmp_path_factory.mktemp("make_run") / "judgesweep"
    for name in ("runner", "conf", "prompts"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "Makefile"):
        shutil.copy2(REPO / name, root / name)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True)
    python = root / ".venv" / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "judgesweep_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return root


def test_make_run_prints_one_install_line_then_the_run_without_warnings(project):
    proc = make(project, "run", "ARGS=max_items=10 tracking=off")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    python = str(project / ".venv" / "bin" / "python")
    installed = subprocess.run([python, "-c", "import runner; print(runner.__file__)"], capture_output=True, text=True,
                               check=True, env={"PATH": os.environ["PATH"]},
                               cwd=project.parent)  # not where a `runner` directory is
    assert Path(installed.stdout.strip()).is_relative_to(project)  # the Makefile's editable install of the copy
    lines = proc.stdout.splitlines()
    assert proc.stderr == ""
    assert lines[0] == INSTALLING and LOG_RECORD.match(lines[1]), proc.stdout[:3000]  # pip printed nothing
    assert any(line.startswith("accuracy AB ") for line in lines) and lines[-1].startswith("report: ")
    assert_only_what_a_user_reads(proc.stdout)


def test_the_install_is_what_keeps_pip_quiet(project):
    # the same install step with INSTALL_QUIET= prints pip's own lines: what the quiet default leaves out
    (project / ".venv" / ".installed-run").unlink(missing_ok=True)
    proc = make(project, ".venv/.installed-run", "INSTALL_QUIET=")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Successfully installed judgesweep" in proc.stdout + proc.stderr


def test_a_users_own_pip_quiet_stays_pips(project):
    # pip reads PIP_QUIET itself; when the Makefile's variable had that name, a user's PIP_QUIET=1 became the
    # Makefile's flags: `pip install 1 -e .` (-B: the install planned even where the stamp is fresh)
    env = {k: v for k, v in offline_env().items() if not k.startswith("PIP_")}
    planned = subprocess.run(["make", "-n", "-B", "run"], cwd=project, env={**env, "PIP_QUIET": "1"},
                             capture_output=True, text=True, timeout=60, check=True).stdout
    installs = [line for line in planned.splitlines() if " -m pip install " in line]
    assert len(installs) == 2 and all(" install --quiet --quiet " in line for line in installs), planned
