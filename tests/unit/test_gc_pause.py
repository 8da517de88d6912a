"""The cyclic collector paused through a judgesweep process's start-up (runner.core.gc_pause): the entry point pauses
it, the run turns it on again once its modules are imported (prepare_run), and a process that had it off (or never
paused it) is left as it was."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from runner.core import gc_pause


@pytest.fixture
def collector_restored():
    was = gc.isenabled()
    yield
    gc_pause.resume()
    (gc.enable if was else gc.disable)()


def test_pause_then_resume_turns_the_collector_off_then_on(collector_restored):
    gc.enable()
    gc_pause.pause()
    assert not gc.isenabled()
    gc_pause.resume()
    assert gc.isenabled()
    gc_pause.resume()  # idempotent
    assert gc.isenabled()


def test_a_collector_someone_else_turned_off_stays_off(collector_restored):
    gc.disable()
    gc_pause.pause()
    gc_pause.resume()
    assert not gc.isenabled()


def test_resume_without_pause_leaves_the_collector_alone(collector_restored):
    gc.disable()
    gc_pause.resume()
    assert not gc.isenabled()


@pytest.mark.slow
def test_the_entry_point_pauses_and_the_run_s_preparation_resumes():
    # what runner.app.entry.main does before the CLI, then what run_job does before its first call
    code = ("import gc\nfrom runner.core import gc_pause\ngc_pause.pause()\nprint(gc.isenabled())\n"
            "from runner.run.experiment import prepare_run\nprepare_run()\nprint(gc.isenabled())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["False", "True"]
