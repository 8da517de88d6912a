"""The shipped PandaLM and AlpacaEval 1 data (runner/data/pandalm, runner/data/alpaca_eval): rows, replay
recordings keyed on what judgesweep renders, stored answers read back with the project's parser, and the
published figures recomputed with plain Python from the shipped files."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from runner.core.config import DatasetConfig, JudgeConfig, PromptConfig
from runner.core.types import Order, hash_messages
from runner.inputs.datasets import load_items
from runner.inputs.prompts import load_template
from runner.judging.judge import pair_variables
from runner.judging.parsers.labels import parse_verdict

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DATA = PROJECT_ROOT / "runner" / "data"
CONF = PROJECT_ROOT / "conf"
PANDALM = DATA / "pandalm"
ALPACA = DATA / "alpaca_eval"
LABELS = ("A", "B", "tie")
KEY = re.compile(r"[0-9a-f]{64}")

PANDALM_ROW_FIELDS = {"id", "motivation_app", "cmp_key", "instruction", "input", "task", "response1", "response2",
                      "annotator1", "annotator2", "annotator3", "gold"}
PANDALM_LINE_FIELDS = {"key", "item", "order", "stage", "text", "finish_reason", "gpt_result"}
# PandaLM's gpt_result -> positional label in order ab; "garbage" (PandaLM could not read GPT's answer) -> unscored
PANDALM_LABELS = {"1": "A", "2": "B", "Tie": "tie", "garbage": None}
# positional label (None = unscored) -> PandaLM class; compute_metrics.py counts Tie and garbage as class 0
PANDALM_CLASS = {"A": 1, "B": 2, "tie": 0, None: 0}

ALPACA_MODELS = {"alpaca-7b": "alpaca_7b", "vicuna-13b": "vicuna_13b"}
ALPACA_ROW_FIELDS = {"id", "dataset", "instruction", "output_text_davinci_003", "output_alpaca_7b",
                     "output_vicuna_13b", "preference_alpaca_7b", "preference_vicuna_13b"}
ALPACA_LINE_FIELDS = {"key", "model", "item", "order", "stage", "text", "finish_reason", "preference", "origin"}
# AlpacaEval preference -> positional label in order ab (the model, ours, is shown first)
ALPACA_LABELS = {2: "A", 1: "B", 0: "tie"}
# the headline figures: win rate and standard error in percent, to two decimals
ALPACA_HEADLINE = {"alpaca-7b": ("26.46", "1.54"), "vicuna-13b": ("70.43", "1.61")}


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@cache
def conf(group: str, name: str) -> dict:
    return yaml.safe_load((CONF / group / f"{name}.yaml").read_text(encoding="utf-8"))


def read_label(text: str) -> str | None:
    """The positional label judgesweep reads from a stored answer with conf/rubric/json_verdict.yaml."""
    rubric = conf("rubric", "json_verdict")
    assert tuple(rubric["labels"]) == LABELS
    parser = rubric["parser"]
    return parse_verdict(parser["name"], text, LABELS, parser.get("params") or {}).label


@cache
def rendered_keys(dataset: str, prompt: str) -> dict[str, str]:
    """Item id -> hash of the messages judgesweep renders with these configs in order ab."""
    cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(DatasetConfig), conf("dataset", dataset)))
    prompt_cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(PromptConfig), conf("prompt", prompt)))
    template = load_template(PROJECT_ROOT / "prompts", prompt_cfg.template)
    path = DATA / cfg.path.removeprefix("pkg://runner/data/")
    return {
        item.id: hash_messages(template.render(pair_variables(item, Order.AB),
                                               neutralize=prompt_cfg.neutralize_delimiters))
        for item in load_items(cfg, path).iter_items()
    }


def majority(votes: list[int]) -> int:
    """PandaLM's rule: the most frequent label, the first seen among equally frequent ones."""
    counts = Counter(votes)  # first-seen order
    return max(counts, key=counts.__getitem__)


def macro_metrics(gold: list[int], predicted: list[int]) -> dict[str, float]:
    """Accuracy and macro precision/recall/F1 over the classes 0, 1, 2 (a 0/0 ratio counts 0)."""
    per_class = []
    for c in (0, 1, 2):
        tp = sum(g == c == p for g, p in zip(gold, predicted, strict=True))
        fp = sum(g != c and p == c for g, p in zip(gold, predicted, strict=True))
        fn = sum(g == c and p != c for g, p in zip(gold, predicted, strict=True))
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        per_class.append((prec, rec, 2 * prec * rec / (prec + rec) if prec + rec else 0.0))
    return {
        "accuracy": sum(g == p for g, p in zip(gold, predicted, strict=True)) / len(gold),
        "macro_precision": sum(x[0] for x in per_class) / 3,
        "macro_recall": sum(x[1] for x in per_class) / 3,
        "macro_f1": sum(x[2] for x in per_class) / 3,
    }


# --- PandaLM ---------------------------------------------------------------------------------------


@cache
def pandalm_rows() -> list[dict]:
    return read_jsonl(PANDALM / "testset.jsonl")


@cache
def pandalm_lines() -> list[dict]:
    return read_jsonl(PANDALM / "replay" / "pandalm-gpt-3.5-turbo.jsonl")


def test_pandalm_rows_are_well_formed() -> None:
    rows = pandalm_rows()
    assert [r["id"] for r in rows] == [f"pandalm-{i:03d}" for i in range(999)]
    for r in rows:
        assert set(r) == PANDALM_ROW_FIELDS
        assert all(isinstance(r[k], str) for k in ("instruction", "input", "task", "response1", "response2"))
        assert all(r[f"annotator{i}"] in (0, 1, 2) for i in (1, 2, 3))
        assert r["gold"] == majority([r["annotator1"], r["annotator2"], r["annotator3"]])
        expected = f"### Task ID:\n{r['id']}\n\n### Instruction:\n{r['instruction']}"
        assert r["task"] == (f"{expected}\n\n### Input:\n{r['input']}" if r["input"] else expected)
    # the label distribution PandaLM's README publishes for the test set
    assert Counter(r["gold"] for r in rows) == {0: 105, 1: 422, 2: 472}


def test_pandalm_duplicate_texts_are_told_apart_only_by_the_task_id() -> None:
    rows = pandalm_rows()
    texts = Counter((r["instruction"], r["input"], r["response1"], r["response2"]) for r in rows)
    assert len(texts) == 900  # 170 rows share their texts with another row (71 groups)
    assert len({(r["task"], r["response1"], r["response2"]) for r in rows}) == 999


def test_pandalm_replay_lines_are_well_formed_one_per_row_and_keys_unique() -> None:
    lines = pandalm_lines()
    assert [ln["item"] for ln in lines] == [r["id"] for r in pandalm_rows()]
    for ln in lines:
        assert set(ln) == PANDALM_LINE_FIELDS
        assert KEY.fullmatch(ln["key"])
        assert (ln["order"], ln["stage"], ln["finish_reason"]) == ("ab", "judge", "stop")
    assert len({ln["key"] for ln in lines}) == len(lines)
    assert Counter(ln["gpt_result"] for ln in lines) == {"2": 476, "1": 460, "Tie": 38, "garbage": 25}


def test_pandalm_keys_are_the_requests_judgesweep_renders() -> None:
    assert {ln["item"]: ln["key"] for ln in pandalm_lines()} == rendered_keys("pandalm", "pandalm_pair")


def test_every_pandalm_answer_reads_as_its_recorded_verdict() -> None:
    for ln in pandalm_lines():
        assert read_label(ln["text"]) == PANDALM_LABELS[ln["gpt_result"]], ln["item"]
        if ln["gpt_result"] == "garbage":  # kept as recorded: unscored, with the value in the reason
            rubric = conf("rubric", "json_verdict")["parser"]
            verdict = parse_verdict(rubric["name"], ln["text"], LABELS, rubric["params"])
            assert verdict.reason == "no_match: garbage"


def test_pandalm_published_figures_are_recomputed_from_the_shipped_files() -> None:
    gold = [r["gold"] for r in pandalm_rows()]
    predicted = [PANDALM_CLASS[read_label(ln["text"])] for ln in pandalm_lines()]
    ours = {k: f"{v:.4f}" for k, v in macro_metrics(gold, predicted).items()}
    published = json.loads((PANDALM / "published.json").read_text(encoding="utf-8"))["gpt-3.5-turbo"]
    assert ours == published == {"accuracy": "0.7107", "macro_precision": "0.5879", "macro_recall": "0.5736",
                                 "macro_f1": "0.5755"}


def test_pandalm_accuracy_needs_unscored_answers_counted_as_tie() -> None:
    gold = [r["gold"] for r in pandalm_rows()]
    labels = [read_label(ln["text"]) for ln in pandalm_lines()]
    pairs = list(zip(labels, gold, strict=True))
    correct_if_unscored_is_wrong = sum(lab is not None and PANDALM_CLASS[lab] == g for lab, g in pairs)
    assert f"{correct_if_unscored_is_wrong / len(gold):.4f}" == "0.6977"  # what accuracy/ab reports today
    assert sum(lab is None and g == 0 for lab, g in pairs) == 13  # the garbage rows whose gold is tie


# --- AlpacaEval 1 ----------------------------------------------------------------------------------


@cache
def alpaca_rows() -> list[dict]:
    return read_jsonl(ALPACA / "alpaca_eval.jsonl")


@cache
def alpaca_lines() -> list[dict]:
    return read_jsonl(ALPACA / "replay" / "alpaca_eval-gpt4.jsonl")


def test_alpaca_eval_rows_are_well_formed() -> None:
    rows = alpaca_rows()
    assert [r["id"] for r in rows] == [f"alpaca_eval-{i:03d}" for i in range(805)]
    for r in rows:
        assert set(r) == ALPACA_ROW_FIELDS
        for suffix in ALPACA_MODELS.values():
            assert r[f"preference_{suffix}"] in ALPACA_LABELS
            # a draw is AlpacaEval's rule for identical outputs, never a GPT-4 verdict
            assert (r[f"preference_{suffix}"] == 0) == (r[f"output_{suffix}"] == r["output_text_davinci_003"])
    assert Counter(r["dataset"] for r in rows) == {"selfinstruct": 252, "oasst": 188, "koala": 156,
                                                   "helpful_base": 129, "vicuna": 80}


def test_alpaca_eval_replay_lines_are_well_formed_and_keys_unique() -> None:
    lines = alpaca_lines()
    assert len(lines) == 2 * 805 - 1  # vicuna-13b's row 199 is the same request (and draw) as alpaca-7b's
    for ln in lines:
        assert set(ln) == ALPACA_LINE_FIELDS
        assert KEY.fullmatch(ln["key"])
        assert (ln["order"], ln["stage"], ln["finish_reason"]) == ("ab", "judge", "stop")
        assert ln["origin"] == ("identical_outputs" if ln["preference"] == 0 else "gpt-4")
    assert len({ln["key"] for ln in lines}) == len(lines)


@pytest.mark.parametrize("model", ALPACA_MODELS)
def test_every_alpaca_eval_request_has_its_recorded_preference(model: str) -> None:
    suffix = ALPACA_MODELS[model]
    answers = {ln["key"]: ln for ln in alpaca_lines()}
    keys = rendered_keys(f"alpaca_eval_{suffix}", "alpaca_eval_pair")
    for row in alpaca_rows():
        line = answers[keys[row["id"]]]
        assert line["item"] == row["id"] and line["preference"] == row[f"preference_{suffix}"]
        assert read_label(line["text"]) == ALPACA_LABELS[row[f"preference_{suffix}"]]


@pytest.mark.parametrize("model", ALPACA_MODELS)
def test_alpaca_eval_leaderboard_is_recomputed_from_the_shipped_files(model: str) -> None:
    answers = {ln["key"]: ln["text"] for ln in alpaca_lines()}
    keys = rendered_keys(f"alpaca_eval_{ALPACA_MODELS[model]}", "alpaca_eval_pair")
    labels = [read_label(answers[keys[r["id"]]]) for r in alpaca_rows()]
    scores = [{"A": 1.0, "B": 0.0, "tie": 0.5}[label] for label in labels]
    win_rate = 100 * statistics.mean(scores)
    standard_error = 100 * statistics.stdev(scores) / math.sqrt(len(scores))
    table = io.StringIO((ALPACA / "alpaca_eval_gpt4_leaderboard.csv").read_text(encoding="utf-8"))
    published = {row[""]: row for row in csv.DictReader(table)}[model]
    assert (labels.count("A"), labels.count("B"), labels.count("tie"), len(labels)) == tuple(
        int(published[k]) for k in ("n_wins", "n_wins_base", "n_draws", "n_total"))
    assert math.isclose(win_rate, float(published["win_rate"]), rel_tol=1e-12)
    assert math.isclose(standard_error, float(published["standard_error"]), rel_tol=1e-12)
    assert (f"{win_rate:.2f}", f"{standard_error:.2f}") == ALPACA_HEADLINE[model]


# --- configs and licenses --------------------------------------------------------------------------


@pytest.mark.parametrize("judge, recording", [("replay_pandalm_gpt35", PANDALM / "replay" / "pandalm-gpt-3.5-turbo"),
                                              ("replay_alpaca_eval_gpt4", ALPACA / "replay" / "alpaca_eval-gpt4")])
def test_replay_judge_configs_name_a_shipped_recording(judge: str, recording: Path) -> None:
    cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(JudgeConfig), conf("judge", judge)))
    assert cfg.name == judge
    assert cfg.model == f"replay/{recording.name}"
    assert (recording.parent / f"{recording.name}.jsonl").is_file()
    shipped = [p.stem for p in DATA.glob("*/replay/*.jsonl")]
    assert shipped.count(recording.name) == 1  # recording names are unique across the data folders


@pytest.mark.parametrize("folder", [PANDALM, ALPACA])
def test_data_folders_ship_license_notice_and_readme(folder: Path) -> None:
    assert "Apache License" in (folder / "LICENSE").read_text(encoding="utf-8")
    assert "Version 2.0" in (folder / "LICENSE").read_text(encoding="utf-8")
    notice = (folder / "NOTICE").read_text(encoding="utf-8")
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "changed" in notice.lower() or "modified" in notice.lower()
    assert re.search(r"[0-9a-f]{40}", readme)  # the upstream commit the data was taken from
