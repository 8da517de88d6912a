"""Numeric knobs out of range and Hydra instantiate keys stop the run before any call, naming the key."""

from __future__ import annotations

import pytest

from tests.integration.conftest import live_judge

# (override, the key and range the message names): each failed late or silently on db5e2c4
OUT_OF_RANGE = [
    ("max_error_rate=-1", "max_error_rate=-1.0: must be in [0, 1]"),
    ("max_unscored_rate=1.5", "max_unscored_rate=1.5: must be in [0, 1]"),
    ("judge.rpm=0", "judge.rpm=0: must be > 0 or null"),
    ("judge.rpm=-5", "judge.rpm=-5: must be > 0 or null"),
    ("judge.tpm=0", "judge.tpm=0: must be > 0 or null"),
    ("judge.timeout_s=0", "judge.timeout_s=0.0: must be > 0"),
    ("judge.max_retries=-1", "judge.max_retries=-1: must be >= 0"),
    ("judge.retry_base_s=-1", "judge.retry_base_s=-1.0: must be >= 0"),
    ("concurrency=0", "concurrency=0: must be >= 1"),
    ("repeats=0", "repeats=0: must be >= 1"),
    ("metrics.ci_level=1", "metrics.ci_level=1.0: must be in (0, 1)"),
    ("metrics.ci_resamples=0", "metrics.ci_resamples=0: must be >= 1"),
    ("progress_interval_s=-1", "progress_interval_s=-1.0: must be >= 0"),
    ("shutdown_grace_s=-1", "shutdown_grace_s=-1.0: must be >= 0"),
    ("dataset.split_test_fraction=1.5", "dataset.split_test_fraction=1.5: must be in [0, 1]"),
    ("judge.max_tokens=0", "judge.max_tokens=0: must be >= 1"),
    ("judge.retry_max_s=-1", "judge.retry_max_s=-1.0: must be >= 0"),
    ("max_items=0", "max_items=0: must be >= 1"),
    ("gate.min_pass_rate=2", "gate.min_pass_rate=2.0: must be in [0, 1]"),
    ("metrics.ci_level=nan", "metrics.ci_level=nan: must be in (0, 1)"),
    ("gate.max_drop=-0.1", "gate.max_drop=-0.1: must be >= 0"),
    ("judge.retry_rate_limited_s=-1", "judge.retry_rate_limited_s=-1.0: must be >= 0"),
    ("batch.poll_s=0", "batch.poll_s=0.0: must be > 0"),
    ("judge.batch_threshold=-1", "judge.batch_threshold=-1: must be >= 0"),
]


@pytest.mark.parametrize(("override", "message"), OUT_OF_RANGE, ids=[o for o, _ in OUT_OF_RANGE])
def test_out_of_range_value_names_key_and_range_before_any_call(run_cli, fake_server, override, message):
    fake_server.reply = lambda body: "[[A]]"
    result = run_cli(*live_judge(fake_server), "prompt=mtbench_pair", "rubric=mtbench_verdict",
                     "dataset=chat_vs_simple", "max_items=3", "tracking=off", override)
    assert result.proc.returncode == 1, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert fake_server.requests == []


def test_every_out_of_range_value_of_an_ensemble_is_named_at_once(run_cli):
    result = run_cli("judge=ensemble", "judge.weights.replay_gpt4=-0.5", "judge.members.replay_chatgpt.rpm=0",
                     "judge.combine={name: weighted, params: {weights: {replay_gpt4: -1}}}", "tracking=off")
    assert result.proc.returncode == 1
    for message in ("judge.weights.replay_gpt4=-0.5: must be >= 0",
                    "judge.members.replay_chatgpt.rpm=0: must be > 0 or null",
                    "judge.combine.params.weights.replay_gpt4=-1: must be >= 0"):
        assert message in result.output
    assert not (result.run_dir / "journal.jsonl").exists()


@pytest.mark.parametrize("override", ["+hydra.callbacks.evil._target_=os.makedirs",
                                      "+judge._target_=os.getcwd", "hydra.job_logging.root._target_=os.getcwd"])
def test_instantiate_key_in_an_override_is_refused_naming_it(run_cli, override):
    result = run_cli(override, "tracking=off")
    assert result.proc.returncode == 1
    key = override.lstrip("+").split("=", 1)[0]
    assert f"instantiate keys are not allowed in judgesweep configs: [{key!r}]" in result.output


@pytest.mark.slow
@pytest.mark.parametrize("planted_in", ["override", "yaml"])
def test_a_planted_callback_never_runs(run_process, tmp_path, planted_in):
    # the process is the point: Hydra instantiates callbacks before the job function starts (on db5e2c4 this exited
    # 0 and the directory was created)
    target = tmp_path / "planted"
    if planted_in == "override":
        args = ["+hydra.callbacks.evil._target_=os.makedirs", f"+hydra.callbacks.evil.name={target}"]
    else:
        conf = tmp_path / "conf"
        (conf / "experiment").mkdir(parents=True)
        (conf / "experiment" / "sneaky.yaml").write_text(
            f"# @package _global_\nhydra:\n  callbacks:\n    evil:\n      _target_: os.makedirs\n"
            f"      name: {target}\n")
        args = ["+experiment=sneaky"]
    options = ["--config-dir", str(tmp_path / "conf")] if planted_in == "yaml" else []
    result = run_process(*args, "tracking=off", "dry_run=true", *options)
    assert result.proc.returncode != 0
    assert "instantiate keys are not allowed in judgesweep configs: ['hydra.callbacks.evil._target_']" in result.output
    assert not target.exists()
