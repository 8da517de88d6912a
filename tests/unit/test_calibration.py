"""Unit tests for runner.app.calibration: the held-out run's command line and the report lines."""

from __future__ import annotations

from pathlib import Path

from runner.app.calibration import console_lines, heldout_overrides


def test_heldout_overrides_replace_the_swept_keys_and_the_split() -> None:
    task = ["experiment=calibrate_llmbar", "max_items=30", "+judge.seed=3", "dataset.split=dev", "repeats=1"]
    best = {"judge": "replay_gpt4", "repeats": 3, "judge.temperature": 0.0}
    assert heldout_overrides(task, best, Path("/s/heldout")) == [
        "experiment=calibrate_llmbar", "max_items=30", "+judge.seed=3",
        "judge=replay_gpt4", "repeats=3", "judge.temperature=0.0", "dataset.split=test", "hydra.run.dir=/s/heldout"]


def test_console_lines_name_both_splits_and_the_chosen_config() -> None:
    outcome = {"objective": "agreement/accuracy_all", "best_params": {"judge": "replay_gpt4"}, "trials": 4,
               "dev": {"value": 0.9623, "items": 53},
               "test": {"value": 0.9255, "ci_low": 0.8865, "ci_high": 0.9539, "items": 47}}
    assert console_lines(outcome) == [
        "calibration: best of 4 trials on dev (53 items): agreement/accuracy_all 0.9623 with judge=replay_gpt4",
        "calibration: held-out test (47 items, never tuned on): agreement/accuracy_all 0.9255 [0.8865, 0.9539]"]
