"""Names a person can read: a job's MLflow run name and a sweep's label.

A run name is made of what this job changed on the command line, values only ("gpt4 · vanilla_norules"), so
the runs of a sweep differ at the start of their names, where MLflow's runs list shows them. A sweep's label
says when it started and what it sweeps ("sweep 2026-11-26 01:23 · judge×prompt").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from urllib.parse import urlsplit

from hydra.core.override_parser.overrides_parser import OverridesParser

SEPARATOR = " · "
DEFAULT_NAME = "default"
# a part longer than this is cut: the name is for reading, the params hold it all (a URL is shown as its host and a
# path as its end first, so neither is cut mid-way)
MAX_PART = 32
# Source prefixes of option names ("replay_gpt4", "llmbar_vanilla"): dropped where the rest names no other option.
TRIMMED_PREFIXES = ("replay_", "llmbar_")
# The order parts appear in: what is judged by whom with what first.
GROUP_ORDER = ("generator", "judge", "prompt", "rubric", "aggregation", "dataset")
# Choices that do not say what the run is (where it is tracked, how it is launched).
UNNAMED_GROUPS = ("tracking", "experiment")


def _short(value: str) -> str:
    return value if len(value) <= MAX_PART else value[:MAX_PART - 1] + "…"


def _readable(value: str, room: int) -> str:
    """An override's value as a name shows it in ``room`` characters: a URL as its host (and port; never a user or
    password in it), a path too long for the room as its end (``…users/pairs.jsonl``), anything else as it is."""
    parts = urlsplit(value) if "://" in value else None
    if parts is not None and parts.hostname:
        try:
            port = parts.port
        except ValueError:  # not a number: the URL is malformed, its host alone is shown
            port = None
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        return host if port is None else f"{host}:{port}"
    if "/" in value and len(value) > room > 1:
        tail = value[-(room - 1):]
        return "…" + (tail.partition("/")[2] or tail)  # from a path separator on, where one is in the room
    return value


def _trimmed(value: str, options: Iterable[str]) -> str:
    """``value`` without a source prefix, unless the rest is the name of another option of its group."""
    taken = set(options)
    for prefix in TRIMMED_PREFIXES:
        rest = value.removeprefix(prefix)
        if rest != value and rest and rest not in taken:
            return rest
    return value


def _ranked(key: str) -> tuple[int, str]:
    return (GROUP_ORDER.index(key) if key in GROUP_ORDER else len(GROUP_ORDER), key)


def run_name(overrides: Sequence[str], choices: Mapping[str, str], experiment: str | None,
             unnamed: Callable[[str], bool], options: Callable[[str], Iterable[str]]) -> str:
    """The run name from the job's command-line overrides: the chosen options and changed values that say
    what the run is, values only, joined by `` · ``; the experiment preset's name first when one is chosen;
    ``default`` when nothing was changed.

    Args:
        overrides: The job's overrides (``hydra.overrides.task``: ``judge=replay_gpt4``, ``max_items=10``).
        choices: The groups of the composed config and the options chosen for them.
        experiment: The experiment preset chosen, if any.
        unnamed: Whether an overridden key changes nothing a reader needs in the name (a tracking URI, a
            retry setting, a resume directory).
        options: The options of a config group (to trim a prefix only where it stays unambiguous).
    """
    parsed = OverridesParser.create().parse_overrides([o for o in overrides if not o.startswith("hydra.")])
    parts: list[tuple[tuple[int, str], str]] = []
    for override in parsed:
        key = override.get_key_element().lstrip("+~")
        if override.is_delete() or key in UNNAMED_GROUPS or unnamed(key):
            continue
        if key in choices:
            parts.append((_ranked(key), _short(_trimmed(str(choices[key]), options(key)))))
        else:  # a value: its last key names it ("temperature=0.7"), the whole key would not fit
            last = key.rsplit(".", 1)[-1]
            shown = _readable(str(override.value()), MAX_PART - len(last) - 1)
            parts.append((_ranked(key), _short(f"{last}={shown}")))
    named = [experiment] if experiment else []
    named += [part for _, part in sorted(parts, key=lambda p: p[0])]
    return SEPARATOR.join(named) or DEFAULT_NAME


def config_key(choices: Mapping[str, str]) -> str:
    """What identified a run's configuration before run names were made readable (``judge=x,prompt=y,...``):
    the key a gate's ``latest on <branch>`` baseline is looked up by."""
    return ",".join(f"{k}={choices[k]}" for k in ("generator", "judge", "prompt", "rubric", "dataset") if k in choices)


def sweep_label(started: datetime, overrides: Sequence[str]) -> str:
    """A sweep's label: when it started and the keys it sweeps (``sweep 2026-11-26 01:23 · judge×prompt``)."""
    parsed = OverridesParser.create().parse_overrides([o for o in overrides if not o.startswith("hydra.")])
    swept = [re.sub(r"^[+~]+", "", o.get_key_element()) for o in parsed if o.is_sweep_override()]
    label = f"sweep {started:%Y-%m-%d %H:%M}"
    return f"{label}{SEPARATOR}{'×'.join(swept)}" if swept else label
