"""Issue 44, point 14: hostile config and data files in a ``judgesweep init`` project end in one line naming the file
and line, before any call and within seconds, under the caps of runner.core.input_limits (docs/bring-your-own-data.md):
aliases that expand past MAX_ALIAS_NODES (a YAML "billion laughs"), nesting past MAX_DEPTH (YAML lists, a JSON row,
a JSON-array file), an integer past Python's int_max_str_digits, a ``!!python/`` tag, a duplicate key, a JSONL line
past MAX_LINE_BYTES. A file under conf/ is checked whether or not the run uses it (Hydra scans the groups). The runs
are in this process (run_experiment, as test_user_project runs a project), the live judge pointed at the fake server,
which must see no request; one process test has the CLI's line and exit status."""

from __future__ import annotations

import contextlib
import importlib
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner import run_experiment
from runner.app import init_project
from runner.core.errors import DatasetError
from runner.core.input_limits import MAX_ALIAS_NODES, MAX_DEPTH, MAX_LINE_BYTES, UnsafeFile
from tests.integration.conftest import live_judge, offline_env

HANG_GUARD_S = 10  # each case ends in well under a second here; a loader that hangs (the bomb) is stopped at this


@contextlib.contextmanager
def hang_guard(seconds: float = HANG_GUARD_S) -> Iterator[None]:
    """Raise TimeoutError in this thread if the block is still running after ``seconds``."""
    def stop(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module", autouse=True)
def _imported() -> None:
    """What a run imports once per process (litellm: seconds on a busy machine), imported before any hang guard."""
    importlib.import_module("runner.run.pipeline")


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    where = tmp_path / "demo"
    init_project.write_project(where)
    monkeypatch.chdir(where)
    return where


def _run(project: Path, server, *overrides: str) -> None:
    with hang_guard():
        run_experiment([*live_judge(server), "tracking=off", "progress=false",
                        f"hydra.run.dir={project / 'outputs' / 'run'}", *overrides], config_dir=project / "conf")


def _one_line(exc: pytest.ExceptionInfo, where: str, *words: str) -> None:
    text = str(exc.value)
    assert "\n" not in text and text.startswith(where), text
    assert all(word in text for word in words), text


def _billion_laughs() -> str:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    return "name: bomb\n" + "\n".join(lines) + "\n"


CONF_FILES = {  # name: (the text of conf/dataset/unused.yaml, its line named, words of the line)
    "billion_laughs": (_billion_laughs(), 6, ("aliases expand", f"cap: {MAX_ALIAS_NODES}")),
    "nested_lists": ("name: deep\nx: " + "[" * 20_000 + "]" * 20_000 + "\n", 2, (f"cap: {MAX_DEPTH}",)),
    "python_tag": ('name: x\nf: !!python/object/apply:os.system ["echo hi"]\n', 2, ("!!python/object/apply",)),
    "duplicate_key": ("name: x\npath: a.jsonl\npath: b.jsonl\n", 3, ("duplicate key 'path'",)),
    "long_integer": ("name: x\nn: " + "9" * 100_000 + "\n", 2, ("100000 digits", "cap: 4300")),
}


@pytest.mark.parametrize("case", CONF_FILES)
def test_a_hostile_yaml_file_under_conf_is_one_line_naming_it(project, fake_server, case):
    text, line, words = CONF_FILES[case]
    bad = project / "conf" / "dataset" / "unused.yaml"  # not the dataset the run uses
    bad.write_text(text)
    with pytest.raises(UnsafeFile) as exc:
        _run(project, fake_server, "max_items=1")
    _one_line(exc, f"{bad}:{line}: ", *words)
    assert fake_server.requests == []


GOOD_ROW = {"id": "a", "input": "q", "output_1": "x", "output_2": "y", "label": 1}


def _deep_row() -> str:
    return '{"id": "b", "input": ' + "[" * 100_000 + "]" * 100_000 + ', "output_1": "x", "output_2": "y"}'


DATASETS = {  # name: (file name, its text after a good first line (None: the whole file), the place named, words)
    "deep_row": ("pairs.jsonl", _deep_row(), ":2: ", (f"cap: {MAX_DEPTH}",)),
    "deep_json_file": ("pairs.json", None, ":1: ", (f"cap: {MAX_DEPTH}",)),
    "long_id": ("pairs.jsonl", '{"id": ' + "7" * 100_000 + ', "input": "q", "output_1": "x", "output_2": "y"}',
                ":2: ", ("cap: 4300 digits",)),
}


@pytest.mark.parametrize("case", DATASETS)
def test_a_hostile_dataset_is_one_line_naming_file_and_line_before_any_call(project, fake_server, case):
    name, second, place, words = DATASETS[case]
    data = project / "data" / name
    data.write_text("[" * 100_000 + "]" * 100_000 if second is None else f"{json.dumps(GOOD_ROW)}\n{second}\n")
    with pytest.raises(DatasetError) as exc:
        _run(project, fake_server, f"dataset.path={data}")
    _one_line(exc, f"{data}{place}", *words)
    assert fake_server.requests == []


def test_a_line_over_the_cap_is_refused_before_it_is_read_whole(project, fake_server):
    """A 1.1 GB second line, as a sparse file (nothing of it is written but its ends): refused at MAX_LINE_BYTES
    (64 MiB), before line 1's calls."""
    data = project / "data" / "huge.jsonl"
    with data.open("wb") as fh:
        fh.write(json.dumps(GOOD_ROW).encode() + b'\n{"id": "b", "input": "')
        fh.seek(1_100_000_000)
        fh.write(b'"}\n')
    with pytest.raises(DatasetError) as exc:
        _run(project, fake_server, f"dataset.path={data}")
    _one_line(exc, f"{data}:2: ", f"longer than {MAX_LINE_BYTES} bytes")
    assert fake_server.requests == []


@pytest.mark.slow  # the console script as a process: its line and exit status
def test_the_cli_says_a_hostile_conf_file_in_one_line_and_exits_1(project):
    bad = project / "conf" / "dataset" / "unused.yaml"
    bad.write_text(_billion_laughs())
    done = subprocess.run([str(Path(sys.executable).with_name("judgesweep")), "tracking=off"], cwd=project,
                          env=offline_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [f"judgesweep: {bad}:6: aliases expand to more than {MAX_ALIAS_NODES} nodes "
                                        f"(a \"billion laughs\"?) (cap: {MAX_ALIAS_NODES})"], done.stderr
