"""Bad input stops the run with a message naming the file, line or key, before any judge call."""

from __future__ import annotations

import json

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
