"""Rebuild the AlpacaEval 1 rows and the replayed GPT-4 preferences from the shared AlpacaEval copy.

Writes, next to this file: ``alpaca_eval.jsonl`` (the 805 instructions with the reference output of
text_davinci_003, the outputs of every model in :data:`MODELS` and their recorded preferences, ids
``alpaca_eval-000``..``alpaca_eval-804``), ``replay/alpaca_eval-gpt4.jsonl`` (the recorded preference of every
(model, row), keyed by :func:`runner.core.types.hash_messages` of exactly the messages judgesweep renders from
``prompts/alpaca_eval_pair.j2`` with ``conf/dataset/alpaca_eval_<model>.yaml`` in order ``ab``) and
``alpaca_eval_gpt4_leaderboard.csv`` (the upstream leaderboard's header and the rows of these models, verbatim).
Then it checks itself: no two requests share a key with different answers, every stored answer read with the
project's ``json_winner`` parser (as ``conf/rubric/json_verdict.yaml`` configures it) gives the recorded
preference, and the leaderboard's win rate, standard error and counts, recomputed with plain Python from the
written files, equal the published ones. Any mismatch aborts with a non-zero exit.

Run from the repository root: ``python -m runner.data.alpaca_eval.build_replay [--shared PATH]``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import math
import statistics
from collections.abc import Sequence
from pathlib import Path

import yaml

from runner.core.config import DatasetConfig
from runner.core.config_store import to_schema
from runner.core.types import Order, hash_messages
from runner.inputs.datasets import load_items
from runner.inputs.prompts import load_template
from runner.judging.judge import pair_variables
from runner.judging.parsers.labels import parse_verdict

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[2]
RECORDING = "alpaca_eval-gpt4"
ANNOTATOR = "alpaca_eval_gpt4"
BASELINE = "text_davinci_003"
# upstream generator name -> field suffix (also the conf/dataset/alpaca_eval_<suffix>.yaml stem)
MODELS = {"alpaca-7b": "alpaca_7b", "vicuna-13b": "vicuna_13b"}
PROMPT_CONF = "alpaca_eval_pair"
RUBRIC_CONF = "json_verdict"
LABELS = ("A", "B", "tie")
# AlpacaEval preference (1 baseline wins, 2 model wins, 0 identical outputs: a draw set without calling GPT-4)
# -> the positional label in order ab, where the model (ours) is shown first.
WINNERS = {2: "A", 1: "B", 0: "tie"}
# positional label -> the model's score in AlpacaEval's win rate (a draw counts half)
SCORES = {"A": 1.0, "B": 0.0, "tie": 0.5}
LEADERBOARD = "alpaca_eval_gpt4_leaderboard.csv"  # upstream src/alpaca_eval/leaderboards/data_AlpacaEval/
SHARED_LEADERBOARD = "alpaca_eval_1_gpt4_leaderboard.csv"  # its name in the shared copy
ROW_KEYS = ("instruction", "dataset", "output_1", "generator_1", "output_2", "generator_2", "annotator",
            "preference")


class SelfCheckError(RuntimeError):
    """Raised when the rebuilt data disagrees with what AlpacaEval recorded or published."""


def load_annotations(shared: Path) -> dict[str, list[dict]]:
    """Each model's annotations.json, checked: same instructions and reference outputs in the same order."""
    annotations = {}
    for model in MODELS:
        path = shared / "results" / model / ANNOTATOR / "annotations.json"
        rows = json.loads(path.read_text(encoding="utf-8"))
        for r in rows:
            if (r["generator_1"], r["generator_2"], r["annotator"]) != (BASELINE, model, ANNOTATOR):
                raise SelfCheckError(f"{path}: unexpected generators or annotator in {r['instruction'][:40]!r}")
            if r["preference"] not in WINNERS:
                raise SelfCheckError(f"{path}: unexpected preference {r['preference']!r}")
            if (r["preference"] == 0) != (r["output_1"] == r["output_2"]):
                raise SelfCheckError(f"{path}: a draw that is not a pair of identical outputs (or the reverse)")
        annotations[model] = rows
    first = next(iter(annotations.values()))
    for model, rows in annotations.items():
        if [(r["instruction"], r["dataset"], r["output_1"]) for r in rows] != [
            (r["instruction"], r["dataset"], r["output_1"]) for r in first
        ]:
            raise SelfCheckError(f"{model}: instructions or reference outputs differ from the first model's")
    return annotations


def merge_rows(annotations: dict[str, list[dict]]) -> list[dict]:
    """One row per instruction: the reference output, then each model's output and preference."""
    first = next(iter(annotations.values()))
    rows = []
    for i, base in enumerate(first):
        row = {"id": f"alpaca_eval-{i:03d}", "dataset": base["dataset"], "instruction": base["instruction"],
               f"output_{BASELINE}": base["output_1"]}
        for model, suffix in MODELS.items():
            row[f"output_{suffix}"] = annotations[model][i]["output_2"]
        for model, suffix in MODELS.items():
            row[f"preference_{suffix}"] = annotations[model][i]["preference"]
        rows.append(row)
    return rows


def verdict_text(preference: int) -> str:
    """The stored answer: the recorded preference as the JSON that ``json_winner`` reads (no reason was kept)."""
    return json.dumps({"winner": WINNERS[preference]})


def _conf(group: str, name: str) -> dict:
    return yaml.safe_load((REPO_ROOT / "conf" / group / f"{name}.yaml").read_text(encoding="utf-8"))


def rendered_keys(suffix: str, dataset_path: Path) -> dict[str, str]:
    """Row id -> hash of the messages judgesweep renders for it with alpaca_eval_<suffix> (order ab)."""
    dataset = _conf("dataset", f"alpaca_eval_{suffix}")
    cfg = to_schema(DatasetConfig, dataset)
    prompt = _conf("prompt", PROMPT_CONF)
    template = load_template(REPO_ROOT / "prompts", prompt["template"])
    neutralize = prompt.get("neutralize_delimiters", True)
    return {
        item.id: hash_messages(template.render(pair_variables(item, Order.AB), neutralize=neutralize))
        for item in load_items(cfg, dataset_path).iter_items()
    }


def replay_lines(rows: list[dict], dataset_path: Path) -> list[dict]:
    """One line per distinct request over all models; checks the parser reads each preference back."""
    parser = _conf("rubric", RUBRIC_CONF)["parser"]
    lines: list[dict] = []
    seen: dict[str, dict] = {}
    for model, suffix in MODELS.items():
        keys = rendered_keys(suffix, dataset_path)
        for row in rows:
            preference = row[f"preference_{suffix}"]
            text = verdict_text(preference)
            label = parse_verdict(parser["name"], text, LABELS, parser.get("params") or {}).label
            if label != WINNERS[preference]:
                raise SelfCheckError(f"{model} {row['id']}: {text!r} reads as {label!r}, recorded {preference}")
            line = {"key": keys[row["id"]], "model": model, "item": row["id"], "order": "ab", "stage": "judge",
                    "text": text, "finish_reason": "stop", "preference": preference,
                    "origin": "identical_outputs" if preference == 0 else "gpt-4"}
            prev = seen.setdefault(line["key"], line)
            if prev is not line:
                if prev["text"] != text:
                    raise SelfCheckError(f"{model} {row['id']}: same request as {prev['model']} {prev['item']}, "
                                         "different answer")
                logger.info("%s %s: same request and answer as %s %s (one line serves both)",
                            model, row["id"], prev["model"], prev["item"])
                continue
            lines.append(line)
    return lines


def win_rate(scores: Sequence[float]) -> tuple[float, float]:
    """AlpacaEval's win rate and standard error, in percent: 100 x mean, 100 x sample std / sqrt(n)."""
    return 100 * statistics.mean(scores), 100 * statistics.stdev(scores) / math.sqrt(len(scores))


def copy_leaderboard(shared: Path, out: Path) -> None:
    """Copy the leaderboard's header and the rows of :data:`MODELS`, byte for byte."""
    lines = (shared / SHARED_LEADERBOARD).read_bytes().splitlines(keepends=True)
    kept = [lines[0]] + [ln for ln in lines[1:] if ln.split(b",", 1)[0].decode("utf-8") in MODELS]
    if len(kept) != len(MODELS) + 1:
        raise SelfCheckError(f"{SHARED_LEADERBOARD}: expected one row per model in {sorted(MODELS)}")
    (out / LEADERBOARD).write_bytes(b"".join(kept))


def check_published(out: Path) -> dict[str, tuple[float, float]]:
    """Recompute each model's win rate, SE and counts from the written files; compare with the leaderboard."""
    rows = [json.loads(line) for line in (out / "alpaca_eval.jsonl").read_text(encoding="utf-8").splitlines()]
    answers = {line["key"]: line["text"] for line in map(json.loads, (out / "replay" / f"{RECORDING}.jsonl")
                                                           .read_text(encoding="utf-8").splitlines())}
    published = {r[""]: r for r in csv.DictReader(io.StringIO((out / LEADERBOARD).read_text(encoding="utf-8")))}
    parser = _conf("rubric", RUBRIC_CONF)["parser"]
    results = {}
    for model, suffix in MODELS.items():
        keys = rendered_keys(suffix, out / "alpaca_eval.jsonl")
        labels = [parse_verdict(parser["name"], answers[keys[r["id"]]], LABELS, parser.get("params") or {}).label
                  for r in rows]
        unread = [r["id"] for r, label in zip(rows, labels, strict=True) if label is None]
        if unread:
            raise SelfCheckError(f"{model}: the parser reads no verdict in {len(unread)} answers, first {unread[0]}")
        scored = [label for label in labels if label is not None]
        rate, se = win_rate([SCORES[label] for label in scored])
        pub = published[model]
        counts = (labels.count("A"), labels.count("B"), labels.count("tie"), len(labels))
        if counts != tuple(int(pub[k]) for k in ("n_wins", "n_wins_base", "n_draws", "n_total")):
            raise SelfCheckError(f"{model}: wins/losses/draws/total {counts} differ from the leaderboard")
        if not (math.isclose(rate, float(pub["win_rate"]), rel_tol=1e-12)
                and math.isclose(se, float(pub["standard_error"]), rel_tol=1e-12)):
            raise SelfCheckError(f"{model}: win rate {rate} (SE {se}) != published {pub['win_rate']} "
                                 f"(SE {pub['standard_error']})")
        results[model] = (rate, se)
    return results


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """Write one compact JSON object per line, UTF-8, deterministic."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def build(shared: Path, out: Path) -> None:
    """Rebuild every generated file under ``out`` from the shared AlpacaEval copy, checking as it goes."""
    rows = merge_rows(load_annotations(shared))
    write_jsonl(out / "alpaca_eval.jsonl", rows)
    lines = replay_lines(rows, out / "alpaca_eval.jsonl")
    write_jsonl(out / "replay" / f"{RECORDING}.jsonl", lines)
    copy_leaderboard(shared, out)
    for model, (rate, se) in check_published(out).items():
        logger.info("%s: win rate %.2f (SE %.2f) = published", model, rate, se)
    logger.info("%d rows, %d replay lines (every preference read back)", len(rows), len(lines))


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO_ROOT.parent / "shared" / "data" / "alpaca_eval")
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: next to this file)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    build(args.shared.resolve(), args.out.resolve())


if __name__ == "__main__":
    main()
