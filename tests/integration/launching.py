"""What the sweep and launcher tests share (test_launchers, test_ray_launcher, test_run_dir_owner, test_ensemble): a
reply policy that opens only when requests of several jobs are in flight at once, the PIDs that ran a job, a small
dataset for the fake server's judge, and a 2-job sweep whose launching process is killed with kill -9."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

from tests.fakes.openai_server import Reply
from tests.integration.conftest import REPO, cli_args, live_judge, offline_env

ITEMS = 12
# Every job log line carries the PID of the process that ran the job.
PID_LOG = "hydra.job_logging.formatters.simple.format='pid=%(process)d %(name)s %(message)s'"
RENDEZVOUS_TIMEOUT_S = 30.0


class Rendezvous:
    """Reply policy that holds every request until requests of all ``seeds`` have arrived.

    Each job of the sweep has its own ``judge.seed``, sent with each of its requests: the barrier opens
    only if the jobs are in flight at the same time, which jobs run one after another never are.
    """

    def __init__(self, seeds: set[int]) -> None:
        self.seeds, self.seen = seeds, set()
        self.lock, self.met = threading.Lock(), threading.Event()

    def __call__(self, body: dict) -> Reply:
        with self.lock:
            self.seen.add(body.get("seed"))
            if self.seen >= self.seeds:
                self.met.set()
        self.met.wait(RENDEZVOUS_TIMEOUT_S)
        return Reply(content="Assistant A follows the instruction. [[A]]")


def job_pids(job_dir: Path) -> set[int]:
    """The PIDs that wrote a job's judgesweep.log (with PID_LOG)."""
    return {int(pid) for pid in re.findall(r"^pid=(\d+) ", (job_dir / "judgesweep.log").read_text(), re.M)}


def write_dataset(path, items: int = ITEMS) -> None:
    path.write_text("".join(json.dumps({"id": f"q{n}", "prompt": f"question {n}", "chat": f"chat {n}",
                                        "simple_chat": f"simple {n}"}) + "\n" for n in range(items)))


def overrides(server, dataset, *extra: str) -> tuple[str, ...]:
    return (*live_judge(server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
            f"dataset.path={dataset}", "order=fixed", "concurrency=2", "cache.mode=off", "tracking=off", *extra)


def group_members(pgid: int) -> list[int]:
    """The live processes (zombies excluded) of process group ``pgid``, read from /proc."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text()
        except OSError:  # ended meanwhile
            continue
        state, _ppid, group = fields[fields.rindex(")") + 2:].split()[:3]
        if int(group) == pgid and state != "Z":
            members.append(int(stat.parent.name))
    return members


def outliving(pgid: int, within_s: float) -> list[int]:
    """The processes of group ``pgid`` still alive ``within_s`` seconds from now (sooner once none is)."""
    deadline = time.monotonic() + within_s
    while (left := group_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def killed_sweep_goes_quiet(fake_server, tmp_path, *launcher: str, survivors: list[int] | None = None) -> int:
    """Start a 2-job sweep (``judge.seed=1,2``, 400 items at 0.2 s a call) with the ``launcher`` overrides in its own
    process group, kill -9 the launching process alone once both jobs send, and wait until the server has seen no
    request for 3 s running (the workers stopped; their answers in flight still arrive). Returns the requests the
    server saw; ``survivors`` (when given) gets the processes of the sweep still alive 10 s later (its workers and
    their helpers, which must all be gone by then); every process of the group is killed on the way out. The sweep's
    output is in tmp_path/sweep.log."""
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset, 400)  # minutes of calls at this pace: the sweep is far from its end when killed
    fake_server.reply = lambda _body: Reply(content="Verdict: [[A]]", delay_s=0.2)
    args = cli_args(tmp_path, tmp_path / "multirun", (*overrides(fake_server, dataset), *launcher, "judge.seed=1,2"),
                    multirun=True)
    log = (tmp_path / "sweep.log").open("w")  # not a pipe: the workers would hold it open after the kill
    sweep = subprocess.Popen(args, cwd=REPO, env=offline_env(), stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while {r.get("seed") for r in fake_server.requests} != {1, 2} and time.monotonic() < deadline:
            time.sleep(0.1)
        assert {r.get("seed") for r in fake_server.requests} == {1, 2}, "both workers never sent"
        sweep.kill()  # kill -9 of the launching process alone; its workers are not signalled
        sweep.wait(timeout=60)
        quiet_since, last = time.monotonic(), fake_server.stats()["requests"]
        deadline = time.monotonic() + 30
        while time.monotonic() - quiet_since < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
            now = fake_server.stats()["requests"]
            if now != last:
                quiet_since, last = time.monotonic(), now
        assert time.monotonic() - quiet_since >= 3, f"the workers kept sending: {last} requests"
        if survivors is not None:
            survivors.extend(outliving(sweep.pid, within_s=10))
        return last
    finally:
        log.close()
        try:
            os.killpg(sweep.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
