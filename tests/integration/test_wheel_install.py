"""The wheel, installed non-editable into a fresh venv outside the repository, works from an empty directory: the
default run prints the LLMBar GPT-4 figures and `judgesweep init demo && cd demo && judgesweep` runs (README "Use
judgesweep in your own project"). Slow: it builds a wheel and runs judgesweep as processes.

The wheel is built as `make install` builds (pip, setuptools from the configured index). The fresh venv reaches
its dependencies through a .pth file naming this venv's site-packages: Python does not process .pth files inside a
directory added that way, so the repository's editable install does not leak in; the test checks that ``runner``
is imported from the fresh venv's own site-packages.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A fresh venv with judgesweep's wheel installed (non-editable), and an environment for it."""
    base = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(base / "dist"),
          str(REPO)], base, env)
    wheel = next((base / "dist").glob("judgesweep-*.whl"))
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], base, env)
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], base, env)
                .strip())
    (site / "judgesweep_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], base, env)
    where = _run([str(python), "-c", "import runner; print(runner.__file__)"], base, env).strip()
    assert Path(where).is_relative_to(site), where  # the wheel's copy, not the repository's
    return venv / "bin", env


def test_the_default_run_works_from_an_empty_directory(installed, tmp_path):
    bin_dir, env = installed
    (tmp_path / "empty").mkdir()
    out = _run([str(bin_dir / "judgesweep"), "tracking=off"], tmp_path / "empty", env)
    assert "accuracy AB 95.0% / BA 96.0% / mean 95.5% / both 93.0%" in out
    help_text = _run([str(bin_dir / "judgesweep"), "--help"], tmp_path / "empty", env)
    assert help_text.startswith("judgesweep: ") and "judge: " in help_text and "replay_gpt4" in help_text


def test_init_demo_then_judgesweep_in_it_runs(installed, tmp_path):
    bin_dir, env = installed
    _run([str(bin_dir / "judgesweep"), "init", "demo"], tmp_path, env)
    out = _run([str(bin_dir / "judgesweep")], tmp_path / "demo", env)  # tracking too: the project's sqlite store
    assert "items 8, successful 8, failed 0" in out
    assert (tmp_path / "demo" / "outputs" / "mlflow.db").is_file()
    # a packaged option from inside the project: its template comes from the package
    out = _run([str(bin_dir / "judgesweep"), "tracking=off", "prompt=llmbar_vanilla_norules", "dataset=llmbar_natural",
                "max_items=5", "judge=replay_gpt4"], tmp_path / "demo", env)
    assert "items 5, successful 5" in out
