"""The live bar on a terminal: log records go through its console (printed above it, the bar redrawn once) rather
than into the terminal beside it, and the logging setup is given back when the bar ends."""

from __future__ import annotations

import io
import logging
import re
from dataclasses import dataclass, field

from rich.console import Console

from runner.judging.progress import Phases, ProgressBar, ProgressOptions, eta
from runner.llm.retry import LongWaits, clock


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as Hydra's console handler's stdout does in a shell."""

    def isatty(self) -> bool:
        return True


def test_log_records_go_through_the_bar_console_while_it_is_live():
    root = logging.getLogger()
    terminal, log_file = Terminal(), io.StringIO()
    console_handler, file_handler = logging.StreamHandler(terminal), logging.StreamHandler(log_file)
    console_handler.setFormatter(logging.Formatter("[%(name)s][%(levelname)s] - %(message)s"))
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100)
    root.addHandler(console_handler)
    root.addHandler(file_handler)
    try:
        with ProgressBar(10, ProgressOptions(), console=console) as bar:
            assert bar.enabled
            logging.getLogger("runner.llm.retry").warning("429 from gpt-4o-mini: retry in 2.0 s")
            assert console_handler not in root.handlers and file_handler in root.handlers
        assert console_handler in root.handlers  # given back as it was
    finally:
        root.removeHandler(console_handler)
        root.removeHandler(file_handler)
    assert terminal.getvalue() == ""  # nothing written beside the bar
    assert screen.getvalue().count("[runner.llm.retry][WARNING] - 429 from gpt-4o-mini: retry in 2.0 s") == 1
    assert "429 from gpt-4o-mini" in log_file.getvalue()  # files keep every record as before


def test_without_a_terminal_there_is_no_bar_and_no_rerouting():
    root = logging.getLogger()
    handler = logging.StreamHandler(Terminal())
    root.addHandler(handler)
    try:
        with ProgressBar(3, ProgressOptions(interval_s=0), console=Console(file=io.StringIO())) as bar:
            assert not bar.enabled and handler in root.handlers
            bar.append_row({"cost_usd": 0.5, "status": "error", "rate_limited": 2}, "gen")
        assert bar.record().startswith("judging 1/3 (33%)")
        assert bar.record().endswith("$0.5000  errors 1  429s 2  retries 0")
    finally:
        root.removeHandler(handler)


@dataclass
class Client:
    """What the bar reads of a stage's client (runner.judging.progress.CallEvents), as the client counts it."""

    long_waits: LongWaits = field(default_factory=lambda: LongWaits("gpt-4o-mini"))
    rate_limited: int = 0
    resent: int = 0


PAUSE = re.compile(r"paused: Retry-After, (\d+) s left \(until (\d\d:\d\d:\d\d)\)$")


def test_a_retry_after_wait_pauses_the_bar_with_its_time_left_and_a_long_one_is_logged(caplog):
    client = Client()
    waits = client.long_waits
    screen = io.StringIO()
    with caplog.at_level(logging.WARNING, logger="runner.llm.retry"):
        waits.note(1.0)  # a blink: neither logged nor shown
        assert waits.until() is None and not caplog.records
        waits.note(5.0)  # shown, not logged
        assert waits.until() is not None and not caplog.records
        waits.note(45.0)
        waits.note(45.0)  # the same wait, seen by a second call: one line
    [record] = caplog.records
    end = clock(waits.until() or 0.0)
    assert record.getMessage() == f"gpt-4o-mini: waiting 45 s for Retry-After (until {end})"
    with ProgressBar(3, ProgressOptions(), console=Console(file=screen, force_terminal=True, width=200)) as bar:
        bar.watch(client)
        pause = PAUSE.search(bar.record())
        assert pause and 44 <= int(pause.group(1)) <= 45 and pause.group(2) == end, bar.record()
        assert "  eta -  " in bar.record()  # no ETA from a rate the pause stopped
        bar.append_row({"cost_usd": 0.0, "status": "ok"}, "gen")
    assert f"(until {end})" in screen.getvalue()


def test_429s_and_retries_show_as_the_client_counts_them_before_any_call_finishes():
    client = Client()
    bar = ProgressBar(4, ProgressOptions(interval_s=0), console=Console(file=io.StringIO()))
    bar.watch(client)
    assert bar.record().endswith("errors 0  429s 0  retries 0")
    client.rate_limited, client.resent = 2, 3  # what JudgeClient counts as each 429 and retry is decided
    assert bar.done == 0 and bar.record().endswith("errors 0  429s 2  retries 3")


def test_the_record_carries_an_eta_from_the_rate():
    bar = ProgressBar(10, ProgressOptions(interval_s=0), console=Console(file=io.StringIO()))
    assert "  eta -  " in bar.record()  # no call yet: no rate
    for _ in range(5):
        bar.append_row({"cost_usd": 0.0, "status": "ok"}, "gen")
    assert re.search(r"  eta \d+:\d\d:\d\d  ", bar.record()), bar.record()
    assert eta(5, 0.5) == "0:00:10" and eta(7200, 1.0) == "2:00:00" and eta(0, 0.0) == "0:00:00" and eta(3, 0.0) == "-"


def test_the_bar_leaves_one_line_with_the_final_counts_when_it_stops():
    screen = io.StringIO()
    with ProgressBar(2, ProgressOptions(), console=Console(file=screen, force_terminal=True, width=200)) as bar:
        bar.append_row({"cost_usd": 0.25, "status": "ok"}, "gen")
        bar.append_row({"cost_usd": 0.25, "status": "error"}, "gen")
    last = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue()).rstrip("\n").rsplit("\n", 1)[-1].split("\r")[-1]
    assert re.fullmatch(r"judging 2/2 \(100%\)  \d+ s  [\d.]+ calls/s  eta 0:00:00  \$0\.5000  errors 1  429s 0  "
                        r"retries 0", last), repr(last)


def test_the_steps_after_judging_are_logged_when_piped_and_named_by_a_spinner_on_a_terminal(caplog):
    with caplog.at_level(logging.INFO, logger="runner.judging.progress"):
        with Phases(ProgressOptions(), console=Console(file=io.StringIO())) as steps:
            steps.now("writing summary")
            steps.now("publishing to MLflow")
        Phases().now("writing summary")  # not entered, progress off: nothing
        with Phases(ProgressOptions(interval_s=0), console=Console(file=io.StringIO())) as steps:
            steps.now("writing report.html")  # progress_interval_s=0: no records
    assert [r.getMessage() for r in caplog.records] == ["writing summary", "publishing to MLflow"]
    screen = io.StringIO()
    with Phases(ProgressOptions(), console=Console(file=screen, force_terminal=True, width=100)) as steps:
        steps.now("writing report.html")
    assert "writing report.html" in screen.getvalue()


class Clock:
    """A simulated wall clock: the test moves it, nothing sleeps."""

    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def test_the_eta_after_a_retry_after_pause_uses_the_pace_of_the_calls_not_the_pause():
    now = Clock()
    client = Client(long_waits=LongWaits("gpt-4o-mini", now=now))
    bar = ProgressBar(100, ProgressOptions(interval_s=0), console=Console(file=io.StringIO()), now=now)
    bar.watch(client)
    for _ in range(10):  # 10 calls in the first second
        bar.append_row({"cost_usd": 0.0, "status": "ok"}, "gen")
    now.t += 1.0
    assert "10.0 calls/s  eta 0:00:09  " in bar.record()
    client.long_waits.note(30.0)  # a 429 with Retry-After: 30 s
    client.long_waits.note(20.0)  # a second call's shorter wait, within the first: one pause
    now.t += 15.0
    assert "  eta -  " in bar.record() and "paused: Retry-After, 15 s left" in bar.record()
    now.t += 16.0  # the pause ended a second ago; 10 more calls since
    for _ in range(10):
        bar.append_row({"cost_usd": 0.0, "status": "ok"}, "gen")
    assert bar.paused_s(now.t) == 30.0
    assert "10.0 calls/s  eta 0:00:08  " in bar.record(), bar.record()  # not 0:02:08 (20 calls in 32 s)
    assert bar.record().startswith("judging 20/100 (20%)  32 s  ")  # the time shown is the wall time


def test_what_is_printed_to_stdout_under_the_spinner_starts_on_a_clean_line(monkeypatch):
    from runner.outputs import console as run_console

    terminal = Terminal()  # stdout and stderr, one terminal, as in a shell
    monkeypatch.setattr("sys.stdout", terminal)
    with Phases(ProgressOptions(), console=Console(file=terminal, force_terminal=True, width=100)) as steps:
        steps.now("writing report.html")
        run_console.print_title("max_items=5")  # the run's summary, as runner.outputs.run_files prints it
        run_console.print_line("report: outputs/report.html")
        steps.now("publishing to MLflow")
    out = terminal.getvalue()
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)
    assert "max_items=5" in shown and "report: outputs/report.html" in shown
    assert not re.search(r"(writing report\.html|publishing to MLflow)[^\r\n\x1b]", out), repr(out)  # nothing glued
    assert re.search(r"(^|[\r\n])(\x1b\[[0-9;?]*[A-Za-z])*max_items=5", out), repr(out)  # at a line's start
    assert out.endswith("\x1b[2K") and "\x1b[1A" in out.rsplit("\n", 1)[-1]  # the last frame erased at the end
