"""The live bar on a terminal: log records go through its console (printed above it, the bar redrawn once) rather
than into the terminal beside it, and the logging setup is given back when the bar ends."""

from __future__ import annotations

import io
import logging

from rich.console import Console

from runner.judging.progress import ProgressBar, ProgressOptions
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
        assert bar.record().startswith("judging 1/3 (33%)") and bar.record().endswith("$0.5000  errors 1  429s 2")
    finally:
        root.removeHandler(handler)


def test_a_long_retry_after_wait_shows_its_end_on_the_bar_and_in_the_records(caplog):
    waits = LongWaits("gpt-4o-mini")
    screen = io.StringIO()
    with caplog.at_level(logging.WARNING, logger="runner.llm.retry"):
        waits.note(5.0)  # short: neither logged nor shown
        assert waits.until() is None and not caplog.records
        waits.note(45.0)
        waits.note(45.0)  # the same wait, seen by a second call: one line
    [record] = caplog.records
    end = clock(waits.until() or 0.0)
    assert record.getMessage() == f"gpt-4o-mini: waiting 45 s for Retry-After (until {end})"
    with ProgressBar(3, ProgressOptions(), console=Console(file=screen, force_terminal=True, width=160)) as bar:
        bar.watch(waits)
        assert bar.record().endswith(f"429s 0  waiting until {end}")
        bar.append_row({"cost_usd": 0.0, "status": "ok"}, "gen")  # redraws the bar
    assert f"waiting until {end}" in screen.getvalue()
