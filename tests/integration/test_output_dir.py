"""``output_dir=DIR`` chooses a run's directory, as it does for ``judgesweep aggregate`` (issue 30, point 6): a run
writes there, its run name leaves it out, and a directory that cannot be written is one line naming ``output_dir``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner import run_experiment
from tests.integration.conftest import live_judge, offline_env


def test_output_dir_is_the_run_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default run directory would be ./outputs/runs/...
    mine = tmp_path / "my-eval"
    outcome = run_experiment([f"output_dir={mine}", "max_items=2", "tracking=off", "cache.mode=off"])
    assert outcome is not None and not outcome.failed
    assert json.loads((mine / "summary.json").read_text())["summary"]["total_subsets"] == 2
    assert (mine / "results.jsonl").is_file() and (mine / ".hydra" / "config.yaml").is_file()
    assert not (tmp_path / "outputs" / "runs").exists()


def _unwritable(tmp_path: Path) -> Path:
    """A place this process cannot create a directory in (root ignores modes: the read-only sysfs)."""
    if os.geteuid() == 0:
        return Path("/sys/kernel/judgesweep-run")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    return locked / "run"


@pytest.mark.slow
def test_an_unwritable_output_dir_is_one_line_naming_output_dir(fake_server, tmp_path):
    target = _unwritable(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "runner", f"output_dir={target}", *live_judge(fake_server),
                           "tracking=off", "cache.mode=off"], cwd=tmp_path, env=offline_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"the output directory {target} cannot be written" in proc.stderr
    assert "choose a writable one with output_dir=<dir>" in proc.stderr and "Traceback" not in proc.stderr
    assert fake_server.requests == []  # before any call
