"""Bad input stops the run with a message naming the file, line or key, before any judge call."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.integration.conftest import live_judge


def test_unknown_config_key_fails_at_compose_time(run_cli):
    result = run_cli("judge.temprature=0.5", "tracking=off")
    assert result.proc.returncode != 0
    assert "Key 'temprature' not in 'JudgeConfig'" in result.output
    assert not (result.run_dir / "journal.jsonl").exists()


def test_wrong_type_fails_at_compose_time(run_cli):
    result = run_cli("concurrency=lots", "tracking=off")
    assert result.proc.returncode != 0
    assert "concurrency" in result.output and "lots" in result.output


def test_missing_api_key_names_the_variable_and_calls_nothing(run_cli, fake_server):
    result = run_cli("judge=gpt4o_mini", f"judge.api_base={fake_server.base_url}", "tracking=off")
    assert result.proc.returncode == 1
    assert "OPENAI_API_KEY is not set" in result.output
    assert fake_server.requests == []


def test_missing_template_variable_names_template_and_variable(run_cli, fake_server, tmp_path):
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "needs_context.j2").write_text(
        "{% block user %}{{ instruction }} {{ context }} A: {{ output_a }} B: {{ output_b }}{% endblock %}")
    result = run_cli(*live_judge(fake_server), f"prompts_dir={prompts}", "prompt.template=needs_context",
                     "tracking=off")
    assert result.proc.returncode == 1
    assert "needs_context.j2" in result.output and "['context']" in result.output
    assert fake_server.requests == []


def test_malformed_dataset_line_names_file_and_line(run_cli, fake_server, tmp_path):
    data = tmp_path / "pairs.jsonl"
    good = {"id": "1", "prompt": "q", "chat": "a", "simple_chat": "b"}
    data.write_text(json.dumps(good) + "\n" + json.dumps({**good, "id": "2"}) + "\n{\"id\": \"3\", \"prompt\": \n")
    result = run_cli(*live_judge(fake_server), "prompt=mtbench_pair", "rubric=mtbench_verdict",
                     "dataset=chat_vs_simple", f"dataset.path={data}", "tracking=off")
    assert result.proc.returncode == 1
    assert f"{data}:3: not valid JSON" in result.output
    assert fake_server.requests == []


def test_missing_dataset_field_names_the_field_and_line(run_cli, fake_server, tmp_path):
    data = tmp_path / "pairs.jsonl"
    data.write_text(json.dumps({"id": "1", "prompt": "q", "chat": "a"}) + "\n")
    result = run_cli(*live_judge(fake_server), "prompt=mtbench_pair", "rubric=mtbench_verdict",
                     "dataset=chat_vs_simple", f"dataset.path={data}", "tracking=off")
    assert result.proc.returncode == 1
    assert f"{data}:1: missing field 'simple_chat'" in result.output
    assert fake_server.requests == []


def test_unknown_parser_lists_the_known_ones(run_cli):
    result = run_cli("rubric.parser.name=regexx", "tracking=off")
    assert result.proc.returncode == 1
    assert "unknown parser 'regexx'; known: json_winner, llmbar_output, mtbench_brackets" in result.output


def test_replay_judge_fails_loudly_on_a_request_it_does_not_hold(run_cli):
    result = run_cli("prompt=mtbench_pair", "rubric=mtbench_verdict", "max_items=2", "tracking=off")
    assert result.proc.returncode == 1
    assert "the recording holds no answer for this request" in result.output
    assert all(row["status"] == "error" for row in result.journal())


def test_a_parser_parameter_the_parser_refuses_fails_before_any_call(run_cli, fake_server):
    # an invalid regex (and a string where a list of them belongs) used to fail on the first paid answer, after
    # the call and before its journal line; now the parser is tried on an empty answer at start-up
    bad_regex = run_cli(*live_judge(fake_server), "++rubric.parser.params.patterns=['Output (a']", "tracking=off")
    assert bad_regex.proc.returncode == 1
    assert "ParamsError: rubric llmbar: rubric.parser.params: parser 'llmbar_output'" in bad_regex.output
    assert "unterminated subpattern" in bad_regex.output and "Traceback" not in bad_regex.output
    one_string = run_cli(*live_judge(fake_server), "++rubric.parser.params.patterns='Output (a)'", "tracking=off")
    assert one_string.proc.returncode == 1
    assert "patterns must be a list of regexes, not one string" in one_string.output
    assert fake_server.requests == []
    assert not (bad_regex.run_dir / "journal.jsonl").exists() and not (one_string.run_dir / "journal.jsonl").exists()


# --- issue 29, point 6: what used to be a traceback or a paid retry loop is one line before any call ---------------

def _one_line_before_any_call(result, fake_server, *names: str) -> None:
    """The run failed with one line naming each of ``names``, no traceback, and no request reached the judge."""
    assert result.proc.returncode == 1, result.output
    assert "Traceback" not in result.output, result.output
    lines = [line for line in result.output.splitlines() if "judgesweep:" in line]
    assert any(all(name in line for name in names) for line in lines), result.output
    assert fake_server.requests == []


def _unwritable_dir(tmp_path: Path) -> Path:
    """A directory this process cannot write in: mode 0555, or for root (who ignores modes) a directory of the
    read-only sysfs."""
    if os.geteuid() == 0:
        return Path("/sys/kernel")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    return locked


@pytest.mark.parametrize("below", [False, True], ids=["existing", "to_create"])
def test_a_run_directory_that_cannot_be_written_is_one_line(run_process, fake_server, tmp_path, below):
    run_dir = _unwritable_dir(tmp_path) / ("run" if below else "")
    result = run_process(*live_judge(fake_server), "tracking=off", "cache.mode=off", run_dir=run_dir)
    _one_line_before_any_call(result, fake_server, str(run_dir).rstrip("/"))


def test_a_sweep_directory_that_cannot_be_written_is_one_line(run_process, fake_server, tmp_path):
    sweep_dir = _unwritable_dir(tmp_path) / "sweep"
    result = run_process(*live_judge(fake_server), "tracking=off", "cache.mode=off", "max_items=1,2", multirun=True,
                         run_dir=sweep_dir)
    _one_line_before_any_call(result, fake_server, str(sweep_dir), "hydra.sweep.dir")


def test_a_cache_file_that_is_not_sqlite_is_one_line(run_cli, fake_server, tmp_path):
    cache = tmp_path / "notes.txt"
    cache.write_text("these are my notes, not a cache\n" * 100)
    result = run_cli(*live_judge(fake_server), "tracking=off", f"cache.path={cache}")
    _one_line_before_any_call(result, fake_server, str(cache))
    assert cache.read_text() == "these are my notes, not a cache\n" * 100


def test_a_sqlite_cache_of_another_schema_is_one_line(run_cli, fake_server, tmp_path):
    cache = tmp_path / "other.sqlite"
    with contextlib.closing(sqlite3.connect(cache)) as db:
        db.execute("CREATE TABLE responses (id INTEGER PRIMARY KEY, body BLOB)")
        db.commit()
    result = run_cli(*live_judge(fake_server), "tracking=off", f"cache.path={cache}")
    _one_line_before_any_call(result, fake_server, str(cache))


@pytest.mark.parametrize("api_base", ["notaurl", "ftp://127.0.0.1/v1", "http://", "http:///v1"])
def test_an_api_base_that_is_not_an_http_url_is_one_line(run_cli, fake_server, api_base):
    result = run_cli(*live_judge(fake_server), f"judge.api_base={api_base}", "tracking=off")
    _one_line_before_any_call(result, fake_server, "judge.api_base", repr(api_base))


def test_a_rubric_whose_output_format_does_not_fit_the_prompt_is_one_line(run_cli, fake_server):
    result = run_cli(*live_judge(fake_server), "prompt=mtbench_pair", "rubric=agent_output", "tracking=off")
    _one_line_before_any_call(result, fake_server, "agent_output", "mtbench_pair", "pairwise")
    assert "unknown parser" not in result.output
    pointwise = run_cli(*live_judge(fake_server), "prompt=single_score", "rubric=llmbar", "tracking=off")
    _one_line_before_any_call(pointwise, fake_server, "llmbar", "single_score", "pointwise")
    assert "unknown score parser" not in pointwise.output
