"""Run names and sweep labels from real Hydra override strings (runner.run.naming)."""

from __future__ import annotations

from datetime import datetime

from runner.run import naming
from runner.run.job_context import _operational

CHOICES = {"judge": "replay_gpt4", "prompt": "llmbar_vanilla_norules", "rubric": "llmbar", "tracking": "sqlite",
           "dataset": "llmbar_natural"}
OPTIONS = {"judge": ["replay_gpt4", "replay_chatgpt", "gpt4o_mini"], "prompt": ["llmbar_vanilla_norules", "json_pair"]}


def name(*overrides: str, choices=CHOICES, experiment=None, options=OPTIONS) -> str:
    return naming.run_name(list(overrides), choices, experiment, _operational, lambda g: options.get(g, []))


def test_a_run_is_named_by_the_values_it_changed_with_source_prefixes_trimmed():
    assert name("prompt=llmbar_vanilla_norules", "judge=replay_gpt4") == "gpt4 · vanilla_norules"


def test_a_prefix_stays_where_the_trimmed_value_names_another_option():
    options = {**OPTIONS, "judge": [*OPTIONS["judge"], "gpt4"]}
    assert name("judge=replay_gpt4", options=options) == "replay_gpt4"


def test_operational_and_hydra_overrides_are_left_out_and_values_keep_their_last_key():
    assert name("judge=replay_gpt4", "tracking.uri=sqlite:///x.db", "cache.mode=off", "concurrency=4",
                "hydra.run.dir=/tmp/x", "judge.temperature=0.7") == "gpt4 · temperature=0.7"


def test_nothing_changed_is_default_and_a_preset_names_the_run():
    assert name() == "default"
    assert name("tracking=off") == "default"
    assert name("experiment=llmbar_chatgpt_swap", experiment="llmbar_chatgpt_swap") == "llmbar_chatgpt_swap"
    assert name("experiment=x", "max_items=5", experiment="x") == "x · max_items=5"


def test_a_long_value_is_cut():
    long = name("judge.temperature_schedule_with_a_long_name=abcdefghijklmnopqrstuvwxyz")
    assert long.startswith("temperature_schedule_with_a_lon") and long.endswith("…")
    assert len(long) == naming.MAX_PART


def test_a_url_is_shown_as_its_host_and_a_long_path_as_its_end():
    # issue 30: a URL was cut mid-way ("api_base=http://127.0.0.1:8000/…")
    assert name("judge.api_base=http://127.0.0.1:8000/a/very/long/path/v1") == "api_base=127.0.0.1:8000"
    assert name("judge.api_base=https://user:secret@llm.example.com/v1") == "api_base=llm.example.com"  # no user
    assert name("judge.api_base='http://[::1]:9000/v1'") == "api_base=[::1]:9000"
    path = name("dataset.path=/work/projects/judging/tests/fixtures/users/pairs.jsonl")
    assert path == "path=…users/pairs.jsonl" and len(path) <= naming.MAX_PART
    assert name("dataset.path=data/pairs.jsonl") == "path=data/pairs.jsonl"  # short: as it is


def test_a_sweep_label_says_when_and_what_it_sweeps():
    started = datetime(2026, 11, 26, 1, 23, 45)
    label = naming.sweep_label(started, ["judge=replay_gpt4,replay_chatgpt", "max_items=10",
                                         "prompt=llmbar_vanilla,llmbar_swap", "hydra.sweep.dir=/x"])
    assert label == "sweep 2026-11-26 01:23 · judge×prompt"
    assert naming.sweep_label(started, ["max_items=10"]) == "sweep 2026-11-26 01:23"


def test_the_config_key_is_the_old_run_name():
    assert naming.config_key(CHOICES) == "judge=replay_gpt4,prompt=llmbar_vanilla_norules,rubric=llmbar," \
                                         "dataset=llmbar_natural"
