"""Replayed GPT-4 and ChatGPT on LLMBar's four Adversarial subsets reproduce the published statistics.json.

Two sweeps: the verdict-only prompts with the default rubric (16 jobs) and Swap with LLMBar's own parsing, rubric
llmbar_upstream (8 jobs), each job a run in this process (runner.run_experiment; the multirun itself is
test_replay_sweep's). Natural is covered by test_replay_sweep.py.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from pathlib import Path

import yaml

from tests.integration.conftest import REPO

LLMBAR = REPO / "runner" / "data" / "llmbar"
JUDGES = {"replay_gpt4": "gpt-4", "replay_chatgpt": "chatgpt"}
SUBSETS = {"llmbar_neighbor": 134, "llmbar_gptinst": 92, "llmbar_gptout": 47, "llmbar_manual": 46}
# our summary.json["gold"] key -> LLMBar's statistics.json key
KEYS = {"accuracy_ab": "correct_False", "accuracy_ba": "correct_True", "accuracy_mean": "correct_average",
        "correct_both": "correct_both", "positional_agreement": "equal"}
# (judge, dataset) -> the Swap answers LLMBar could not read either (unscored in both), and why ours are unscored
SWAP_UNSCORED = {
    ("replay_chatgpt", "llmbar_gptinst"): {("gptinst-061", "ab", "no_match")},
    ("replay_chatgpt", "llmbar_gptout"): {("gptout-031", "ba", "no_match")},
    ("replay_chatgpt", "llmbar_manual"): {("manual-039", "ba", "no_match")},
}
# gptinst-051 "ba" was cut off at max_tokens after "... Output (a) is better for several reasons". LLMBar
# read it (winner output_2, as in "ab": agreeing). judgesweep never scores a truncated answer unless the
# rubric says so: llmbar_upstream sets score_truncated, so every table matches (with rubric=llmbar the two
# orders would not agree here: 71 / 92 where LLMBar publishes 72 / 92).
SWAP_DIFFERENCES: dict = {}


def jobs(run_dirs: list[Path]) -> dict[tuple[str, str, str], Path]:
    """Run directories (with their summary) keyed by (judge, prompt, dataset)."""
    out = {}
    for summary in (run_dir / "summary.json" for run_dir in run_dirs if (run_dir / "summary.json").is_file()):
        overrides = dict(kv.split("=", 1) for kv in yaml.safe_load(
            (summary.parent / ".hydra" / "overrides.yaml").read_text()))
        out[(overrides["judge"], overrides["prompt"], overrides["dataset"])] = summary.parent
    return out


def differences(gold: dict, stats_name: str, n: int) -> dict[str, tuple]:
    """Keys where our gold metrics differ from LLMBar's statistics.json, as (ours, theirs).

    Counts ("c / n = ...") are compared as integers over the same n; correct_average (no count
    published) to float precision, far below one item (at least 0.37 points here).
    """
    raw = json.loads((LLMBAR / "statistics" / f"{stats_name}.json").read_text())
    out = {}
    for ours_key, their_key in KEYS.items():
        counted = re.fullmatch(r"(\d+) / (\d+) = .*%", raw[their_key])
        if counted:
            ours, theirs = round(gold[ours_key] * n), int(counted[1])
            assert int(counted[2]) == n and abs(gold[ours_key] * n - ours) < 1e-9, (stats_name, their_key)
        else:
            ours, theirs = gold[ours_key] * 100, float(raw[their_key].rstrip("%"))
            if abs(ours - theirs) < 1e-9:
                continue
        if ours != theirs:
            out[ours_key] = (ours, theirs)
    return out


def stats_name(judge: str, prompt: str, dataset: str) -> str:
    """statistics/<model>_<strategy>_<subset>.json for one job."""
    return f"{JUDGES[judge]}_{prompt.removeprefix('llmbar_')}_{dataset.removeprefix('llmbar_')}"


def recorded_synthesis_calls(model: str, subset: str) -> int:
    """How many synthesis calls LLMBar made for ``model`` on ``subset`` (read from the replay file)."""
    lines = (LLMBAR / "replay" / f"{model}.jsonl").read_text(encoding="utf-8").splitlines()
    return sum(x["stage"] == "synthesis" and x["item"].startswith(f"{subset}-") for x in map(json.loads, lines))


def journal(job_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (job_dir / "journal.jsonl").read_text().splitlines()]


def sweep(run_cli, *overrides: str) -> dict[tuple[str, str, str], Path]:
    """The jobs of a multirun over both judges and the four Adversarial subsets, no tracking: a run per combination
    of the comma-separated choices."""
    choices = [f"judge={','.join(JUDGES)}", f"dataset={','.join(SUBSETS)}", "tracking=off", *overrides]
    expanded = [[f"{key}={value}" for value in values.split(",")] for key, values in (c.split("=", 1) for c in choices)]
    results = [run_cli(*job) for job in itertools.product(*expanded)]
    for result in results:
        assert result.proc.returncode == 0, result.output
    return jobs([result.run_dir for result in results])


def test_verdict_only_prompts_reproduce_the_published_statistics_on_every_adversarial_subset(run_cli):
    done = sweep(run_cli, "prompt=llmbar_vanilla,llmbar_vanilla_norules")
    assert len(done) == 16
    for (judge, prompt, dataset), job_dir in done.items():
        gold = json.loads((job_dir / "summary.json").read_text())["gold"]
        assert differences(gold, stats_name(judge, prompt, dataset), SUBSETS[dataset]) == {}, (judge, prompt, dataset)
        calls = journal(job_dir)
        assert len(calls) == 2 * SUBSETS[dataset] and {c["status"] for c in calls} == {"scored"}


def test_swap_with_llmbar_parsing_reproduces_the_published_statistics_and_calls(run_cli):
    done = sweep(run_cli, "prompt=llmbar_swap", "rubric=llmbar_upstream")
    assert len(done) == 8
    for (judge, prompt, dataset), job_dir in done.items():
        job = (judge, dataset)
        gold = json.loads((job_dir / "summary.json").read_text())["gold"]
        assert differences(gold, stats_name(judge, prompt, dataset), SUBSETS[dataset]) == \
            SWAP_DIFFERENCES.get(job, {}), job
        calls = journal(job_dir)
        # Exactly the calls LLMBar made: both orders, plus both synthesis calls wherever round 1 conflicted.
        assert Counter(c["stage"] for c in calls) == {
            "judge": 2 * SUBSETS[dataset],
            "synthesis": recorded_synthesis_calls(JUDGES[judge], dataset.removeprefix("llmbar_"))}, job
        assert {(c["item_id"], c["order"], c["parse_error"]) for c in calls if c["status"] != "scored"} == \
            SWAP_UNSCORED.get(job, set()), job  # and no errors: no request missed the recording
