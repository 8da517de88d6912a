"""One owner per run directory (issue 29, point 1): a second process on a run directory in use (a second
``resume=<dir>``, a copy of the command) refuses in one line naming the owner before any call, exit 4; the owner's
lock dies with it, ``kill -9`` included, so a resume after it runs; a sweep's joblib workers stop paying within
seconds of the death of the process that launched them."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

from tests.fakes.openai_server import Reply
from tests.integration.conftest import REPO, cli_args, offline_env
from tests.integration.launching import ITEMS, killed_sweep_goes_quiet, overrides, write_dataset

RUN_DIR_BUSY = 4
QUIET = ("output.plots=false",)  # no figure is looked at


class Gate:
    """Reply policy: every answer waits until the test opens the gate (at most 120 s)."""

    def __init__(self) -> None:
        self.open = threading.Event()

    def __call__(self, _body: dict) -> Reply:
        self.open.wait(120)
        return Reply(content="Verdict: [[A]]")


def start(args: list[str], **kwargs) -> subprocess.Popen:
    return subprocess.Popen(args, cwd=REPO, env=offline_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, **kwargs)


def wait_for_requests(server, count: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while server.stats()["requests"] < count and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert server.stats()["requests"] >= count, proc.poll()


def refused(owner_pid: int, *commands: list[str]) -> None:
    """Run the ``commands`` at once to their end; each must refuse in one line naming ``owner_pid``."""
    procs = [start(args) for args in commands]
    try:
        # a process that does not refuse waits at the test's gate: the timeout fails the test
        outputs = [proc.communicate(timeout=90)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    for proc, output in zip(procs, outputs, strict=True):
        assert proc.returncode == RUN_DIR_BUSY, output
        assert "Traceback" not in output, output
        [line] = [ln for ln in output.splitlines() if "RunDirectoryBusy" in ln]
        assert f"in use by pid {owner_pid} " in line and "runner" in line, line


def test_a_second_process_on_a_run_directory_refuses_before_any_call(fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    gate = Gate()
    fake_server.reply = gate
    run_dir = tmp_path / "run"
    first = start(cli_args(tmp_path, run_dir, overrides(fake_server, dataset, *QUIET)))
    try:
        wait_for_requests(fake_server, 2, first)  # the first process is at the judge, its answers held
        resume = cli_args(tmp_path, run_dir, overrides(fake_server, dataset, *QUIET, f"resume={run_dir}"))
        copy = cli_args(tmp_path, run_dir, overrides(fake_server, dataset, *QUIET))  # a copy of the command
        refused(first.pid, resume, copy)
        assert fake_server.stats()["requests"] == 2  # neither sent anything
    finally:
        gate.open.set()
    out, _ = first.communicate(timeout=300)
    assert first.returncode == 0, out
    assert fake_server.stats()["requests"] == ITEMS  # each judgment paid once
    journal = [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]
    assert sorted(row["item_id"] for row in journal) == sorted(f"q{n}" for n in range(ITEMS))  # no line twice
    assert len((run_dir / "results.jsonl").read_text().splitlines()) == ITEMS


def test_the_lock_dies_with_its_owner_so_a_resume_after_kill_9_runs(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    gate = Gate()
    fake_server.reply = gate
    run_dir = tmp_path / "run"
    first = start(cli_args(tmp_path, run_dir, overrides(fake_server, dataset, *QUIET)))
    try:
        wait_for_requests(fake_server, 2, first)
        refused(first.pid, cli_args(tmp_path, run_dir, overrides(fake_server, dataset, *QUIET, f"resume={run_dir}")))
        first.kill()  # kill -9: no chance to release anything
        first.communicate(timeout=60)
    finally:
        gate.open.set()
    assert (run_dir / ".owner.lock").is_file()  # left behind, naming a dead process: it must not matter
    # the resume runs in this process (run_cli): the lock it must take is the dead owner's; the kill is the point
    resumed = run_cli(*overrides(fake_server, dataset, *QUIET, f"resume={run_dir}"), run_dir=run_dir)
    assert resumed.proc.returncode == 0, resumed.output
    assert len((run_dir / "results.jsonl").read_text().splitlines()) == ITEMS


def test_joblib_workers_stop_paying_and_end_once_the_sweeps_process_is_killed(fake_server, tmp_path):
    """Issue 44 point 9 was: the loky workers stopped paying but lived on with parent 1 (one 7 minutes later)."""
    survivors: list[int] = []
    sent = killed_sweep_goes_quiet(fake_server, tmp_path, "hydra/launcher=joblib", "hydra.launcher.n_jobs=3",
                                   survivors=survivors)
    assert sent < 2 * 400
    assert survivors == [], [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in survivors]
    assert "stops sending" in (tmp_path / "sweep.log").read_text() + "".join(
        p.read_text() for p in (tmp_path / "multirun").glob("*/judgesweep.log"))
