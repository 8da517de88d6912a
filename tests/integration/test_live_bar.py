"""The live bar on a real terminal (issue 33, point 3): judgesweep runs as a process on a pseudo-terminal against the
fake server, which answers the first call 429 with a Retry-After. While every call waits, the bar says it is paused,
with the time left counting down, the 429 and the retry already counted and no ETA; a spinner names the steps after
judging; the bar's final line stays in the terminal. Then, batched, the bar shows the batch while the run waits for it.
Both are the jobs of one multirun in one process (module fixture ``screens``). Nothing is timed: the tests read what
the terminal was sent."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
from collections.abc import Iterator

import pytest

from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.integration.conftest import REPO, cli_args, live_judge, offline_env, one_ca_file

pytestmark = pytest.mark.slow  # judgesweep as a process on a pseudo-terminal

COLUMNS = 220
CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # cursor moves, erasures and colours: how rich redraws the bar
# a frame of the bar while a call waits out its Retry-After (the other one may be done: a 429 holds back its own
# call only): no ETA, the 429 and its retry counted, the time left
PAUSED = re.compile(r"judging \S+ [01]/2 \d+:\d\d:\d\d [\d.]+ calls/s  eta -  \$[\d.]+  errors 0  429s 1  retries 1  "
                    r"paused: Retry-After, (\d+) s left \(until \d\d:\d\d:\d\d\)")
FINAL = re.compile(r"judging 2/2 \(100%\)  \d+ s  [\d.]+ calls/s  eta 0:00:00  \$[\d.]+  errors 0  429s 1  "
                   r"retries 1\r\n")


def run_on_a_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``args`` with stdin, stdout and stderr on a new pseudo-terminal ``COLUMNS`` wide; its exit code and every
    byte it wrote to the terminal."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, COLUMNS, 0, 0))
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdin=follower, stdout=follower, stderr=follower,
                            close_fds=True)
    os.close(follower)
    sent = bytearray()
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], 120)
            if not ready:
                proc.kill()
                break
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                break
            if not chunk:
                break
            sent += chunk
    finally:
        os.close(leader)
    return proc.wait(timeout=60), sent.decode("utf-8", "replace")


# a frame of the batch's bar while the provider has it: the batch id, rows done of its rows, the time waited, the
# provider's status and failed rows (what its last retrieve said)
WAITING = re.compile(r"batch (batch_\w+) \S* 0/2 \d+:\d\d:\d\d (validating|in_progress)  failed 0")
COLLECTED = re.compile(r"batch (batch_\w+) 2/2 \(100%\)  \d+ s  completed  failed 0\r\n")


@pytest.fixture(scope="module")
def screens(tmp_path_factory) -> Iterator[tuple[str, str, FakeOpenAIServer]]:
    """One judgesweep process on a pseudo-terminal for both tests: a multirun whose jobs run in order, judge.batch=off
    (job 0: the fake server answers its first call 429 with Retry-After: 3), then judge.batch=on (job 1: the batch
    stays validating and in_progress for a few polls each). What each job's part of the terminal showed (split at the
    launcher's "#1 : ..." line, escape sequences removed), and the fake server."""
    tmp = tmp_path_factory.mktemp("live_bar")
    with FakeOpenAIServer() as server:
        server.enqueue(Reply(status=429, headers={"Retry-After": "3"}, error_message="slow down"))
        server.reply = lambda body: Reply(content="[[A]]")
        server.batches.polls_per_step = 10  # a few redraws per status: validating, in_progress, completed
        overrides = (*live_judge(server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
                     "max_items=2", "order=fixed", "concurrency=1", "cache.mode=off", "tracking=off",
                     "batch.poll_s=0.1", "output.plots=false", "judge.batch=off,on")  # no test looks at a figure
        env = offline_env({"TERM": "xterm-256color", "COLUMNS": str(COLUMNS), "LINES": "50",
                           "SSL_CERT_FILE": one_ca_file(tmp)})
        env.pop("NO_COLOR", None)
        code, screen = run_on_a_terminal(cli_args(tmp, tmp / "multirun", overrides, multirun=True), env)
        assert code == 0, screen
        job_0, second, job_1 = CSI.sub("", screen).partition("#1 : ")
        assert second and "judge.batch=on" in job_1.splitlines()[0], screen
        yield job_0, job_1, server


def test_the_bar_shows_a_retry_after_pause_counting_down_and_keeps_its_final_line(screens):
    text, _, _ = screens
    # the bar is redrawn during the pause, not frozen on its last count: the time left goes down
    left = {int(n) for n in PAUSED.findall(text)}
    assert len(left) >= 2 and max(left) <= 4, text
    # the steps after judging have their own line on the terminal while they run
    for step in ("writing summary", "writing report.html"):  # and publishing to MLflow: test_progress_records
        assert step in text, step
    # the bar's last line is printed as a line of its own (not a frame the bar erases), before the summary's
    final = FINAL.search(text)
    assert final is not None, text
    assert "report: " in text[final.end():]


def test_the_bar_shows_a_batch_while_the_run_waits_for_it(screens):
    """Issue 34: waiting for a batch, the live bar shows the provider's counts, status and the time waited; its last
    line (the batch completed) stays in the terminal, then judging's bar counts the answers read from it."""
    _, text, fake_server = screens
    [batch_id] = fake_server.batches.batches
    assert {(found, status) for found, status in WAITING.findall(text)} == {(batch_id, "validating"),
                                                                            (batch_id, "in_progress")}, text
    collected = COLLECTED.search(text)
    assert collected is not None and collected[1] == batch_id, text
    assert re.search(r"judging 2/2 \(100%\)", text[collected.end():]), text
    assert len(fake_server.requests) == 3  # job 0's (2 calls, one of them twice: 429s 1); none from this job
