"""What the README promises of tracking beyond tests/integration/test_tracking_view.py: the MLflow run is RUNNING with
the traces so far while the calls go on; a sweep whose store cannot be written still writes every job's files and
exits 3, each job saying why in tracking_failure.json. (``tracking.timeout_s`` bounding how long a finished run waits
for a locked store: test_tracking_view's locked-store test.) Processes, a real sqlite store, the fake server or the
replay judge; no figures drawn (no test here looks at one)."""

from __future__ import annotations

import itertools
import json
import threading
import time

import pytest

from tests.fakes.openai_server import Reply
from tests.integration.conftest import REPO
from tests.integration.tracking_processes import (
    assert_published,
    finish,
    no_traceback,
    run,
    runs_of,
    slow_overrides,
    start,
    store,
    tails,
    traces_of,
    uri_of,
    workdir,
)
from tests.integration.tracking_processes import run_args as args_of

pytestmark = pytest.mark.slow

SLOW_ITEMS = 12


def test_the_mlflow_run_shows_the_traces_so_far_while_the_calls_go_on(tmp_path, empty_mlflow_store, fake_server):
    db, run_dir = store(tmp_path, empty_mlflow_store), tmp_path / "run"
    # 12 calls one at a time; after the first 3 the server holds its answers until the test has seen the run (at
    # most 60 s): however slow the machine is to start the publishing process, the calls are still going on then
    looked, calls = threading.Event(), itertools.count()

    def reply(_body):
        if next(calls) >= 3:
            looked.wait(60)
        return Reply(content="Verdict: [[A]]", delay_s=0.1)

    fake_server.reply = reply
    proc = start(args_of(tmp_path, run_dir, db, *slow_overrides(fake_server, tmp_path, 1)), workdir(tmp_path))
    seen: list[tuple[str, int]] = []  # (status, traces) while the run had not ended
    deadline = time.monotonic() + 120  # a bound on a hang, not a speed claim
    while proc.poll() is None and time.monotonic() < deadline:
        runs = runs_of(uri_of(db), run_dir)
        if runs and not (run_dir / "summary.json").exists():
            seen.append((runs[0].info.status, len(traces_of(uri_of(db), runs[0]))))
            if seen[-1][0] == "RUNNING" and seen[-1][1] > 0:
                looked.set()
        time.sleep(0.2)
    looked.set()
    done = finish(proc)
    assert done.returncode == 0, tails(done)
    assert any(status == "RUNNING" and 0 < traces < SLOW_ITEMS for status, traces in seen), seen
    assert_published(uri_of(db), run_dir, SLOW_ITEMS, where=tails(done))


def test_a_sweep_whose_store_is_broken_writes_every_job_and_exits_3(tmp_path):
    broken = tmp_path / "broken.db"
    broken.write_text("not an sqlite database\n")
    sweep_dir = tmp_path / "multirun"
    cmd = ["-m", f"hydra.sweep.dir={sweep_dir}", f"tracking.uri={uri_of(broken)}",
           f"cache.path={tmp_path / 'c.sqlite'}", f"prompts_dir={REPO / 'prompts'}", "judge=replay_gpt4", "max_items=2",
           "prompt=llmbar_vanilla,llmbar_vanilla_norules", "output.plots=false"]
    done = run([*args_of(tmp_path, sweep_dir, None)[:3], *cmd], workdir(tmp_path))
    assert done.returncode == 3, tails(done)
    no_traceback(done)
    for job in ("0", "1"):
        assert (sweep_dir / job / "summary.json").is_file() and (sweep_dir / job / "tracking_failure.json").is_file()
        assert "judgesweep sync" in json.loads((sweep_dir / job / "tracking_failure.json").read_text())["reason"]
    assert (sweep_dir / "sweep_table.csv").is_file()
