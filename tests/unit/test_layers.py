"""The layers of runner/ (pyproject.toml's import-linter contract, docs/architecture.md) hold: no module
imports from a layer above its own, and every module of the package sits in a layer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


@pytest.mark.slow  # lint-imports as a process (`make test-fast` runs it itself)
def test_the_layers_contract_is_kept():
    proc = subprocess.run([str(LINT_IMPORTS)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "runner's layers KEPT" in proc.stdout
    assert "run modes independent KEPT" in proc.stdout


def test_every_module_sits_in_a_layer():
    contract = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    layers = {name.strip().removeprefix("runner.") for line in contract["layers"] for name in line.split("|")}
    loose = sorted(p.name for p in (REPO / "runner").glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    packages = {p.parent.name for p in (REPO / "runner").glob("*/__init__.py")}
    assert loose == [] and packages == layers


def test_the_public_names_import_from_the_package():
    import runner
    from runner import results
    from runner.outputs import results as outputs_results
    from runner.run.experiment import run_experiment

    assert results is outputs_results and runner.run_experiment is run_experiment
