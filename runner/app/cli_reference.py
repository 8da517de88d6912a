"""The command-line reference page (docs/reference/cli.md), generated from the real argument parsers.

``judgesweep [run]`` is Hydra's parser (the one :func:`runner.app.cli._overlay` reads); each subcommand of
:data:`runner.app.cli.SUBCOMMANDS` is its module's ``build_parser()``. ``python -m runner.app.cli_reference`` rewrites
the page; ``--check`` exits 1 when the committed page differs (tests/unit/test_docs.py asserts the same), so a new
subcommand or option cannot be missing from it.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path

from hydra._internal.utils import get_args_parser

from runner.app import cli, config_reference
from runner.core import errors

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md"
USAGE_WIDTH = 100  # argparse would wrap the usage at the terminal's width; the page must not depend on it
HEADER = """# Command-line reference

Generated from the argument parsers themselves by `python -m runner.app.cli_reference`; do not edit by hand
(tests/unit/test_docs.py fails when the page and the parsers differ). Every command also answers `--help`. The
configuration keys a run takes as `key=value` overrides: [Configuration reference](config.md).
"""
# Hydra's own wording of an option, where judgesweep gives it another meaning or Hydra's text does not fit a table.
RUN_MEANINGS = {
    "--config-dir": "your conf/ (default: ./conf when it exists): its files overlay the packaged configs, which stay "
                    "selectable",
    "--shell-completion": "install or uninstall shell completion (`judgesweep -sc install=bash`)",
    "--config-path": "Hydra's: replaces the packaged config directory (use --config-dir for your own)",
}
RUN_INTRO = ("One run, or with `-m` a sweep (one job per combination of the comma-separated values), composed by "
             "Hydra from the packaged configs and yours: `group=option` picks a file of a config group, `key=value` "
             "sets a key, `+key=value` adds one. `run` may be left out. `judgesweep --help` lists the groups and "
             "their options, `judgesweep --cfg job` prints the composed config.")
EXIT_CODES = {"TRACKING_FAILED": "the files are complete but MLflow tracking failed: `judgesweep sync <dir>`",
              "RUN_DIR_BUSY": "another live process owns the run directory",
              "WRITE_FAILED": "the run directory could not be written (disk full, I/O error); `resume=<dir>` continues",
              "BUDGET_REACHED": "budget.max_usd stopped the run; its answers are kept, a resume with a higher limit "
                                "continues"}


def _cell(text: str) -> str:
    """Text for a table cell or paragraph: one line, no table separator, no HTML tag, no Sphinx role."""
    text = re.sub(r":\w+:`([^`]+)`", r"`\1`", " ".join(text.split()))
    return text.replace("|", "\\|").replace("<", "&lt;")


def _usage(parser: argparse.ArgumentParser, prog: str) -> str:
    formatter = argparse.HelpFormatter(prog, width=USAGE_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _name(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"{action.metavar or action.dest} ..." if action.nargs in ("*", "+") else str(action.metavar or
                                                                                              action.dest)
    takes = action.nargs != 0
    value = f" {action.metavar or action.dest.upper()}" if takes else ""
    return ", ".join(action.option_strings) + value


def _default(action: argparse.Action) -> str:
    if action.default in (None, False, argparse.SUPPRESS) or action.nargs == 0:
        return ""
    return f"`{action.default}`"


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's arguments, --help left out (every command has it)."""
    return [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]


def section(title: str, parser: argparse.ArgumentParser, intro: str, meanings: dict[str, str]) -> list[str]:
    """The Markdown of one command: what it does, its usage and a table of its arguments."""
    out = [f"## {title}", "", _cell(intro), "", "```text", _usage(parser, title), "```", "",
           "| argument | default | meaning |", "|---|---|---|"]
    for action in options(parser):
        meaning = meanings.get(action.option_strings[0] if action.option_strings else "", action.help or "")
        out.append(f"| `{_name(action)}` | {_default(action)} | {_cell(str(meaning).split(chr(10))[0])} |")
    if parser.epilog:
        out += ["", _cell(parser.epilog)]
    return [*out, ""]


def subcommand_parsers() -> dict[str, argparse.ArgumentParser]:
    """Each subcommand of ``judgesweep`` by name, with its module's parser."""
    return {name: importlib.import_module(module).build_parser() for name, module in cli.SUBCOMMANDS.items()}


def _exit_codes() -> list[str]:
    rows = ["| 0 | success |", "| 1 | a failed run or job, bad input (one line naming the file, line or key), a failed "
            "gate |", "| 2 | a command line argparse refuses; `judgesweep sync`: a directory that holds no run |"]
    rows += [f"| {getattr(errors, name)} | {meaning} |" for name, meaning in EXIT_CODES.items()]
    return ["## Exit status", "", "| code | meaning |", "|---|---|", *rows,
            "| 130, 143 | interrupted by SIGINT, SIGTERM (128 + the signal): every answer already paid for is kept, "
            "`resume=<dir>` continues |", ""]


def render() -> str:
    """The whole page."""
    out = [HEADER, *section("judgesweep [run]", get_args_parser(), RUN_INTRO, RUN_MEANINGS)]
    for name, parser in subcommand_parsers().items():
        out += section(f"judgesweep {name}", parser, parser.description or "", {})
    out += ["The console scripts `judgesweep-aggregate` and `judgesweep-compare` are `judgesweep aggregate` and "
            "`judgesweep compare`.", "", *_exit_codes()]
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the page, or with --check exit 1 when it is out of date."""
    return config_reference.write_page(PAGE, render, "runner.app.cli_reference", argv)


if __name__ == "__main__":
    sys.exit(main())
