"""Rebuild the PandaLM test set and its replayed gpt-3.5-turbo verdicts from the shared PandaLM copy.

Writes, next to this file: ``testset.jsonl`` (the 999 human-annotated pairs, ids ``pandalm-000``..``pandalm-998``,
with the three annotator labels and their majority as ``gold``), ``replay/pandalm-gpt-3.5-turbo.jsonl`` (PandaLM's
recorded gpt-3.5-turbo verdict for every row, keyed by :func:`runner.core.types.hash_messages` of exactly the messages
judgesweep renders from ``prompts/pandalm_pair.j2`` for that row in order ``ab``) and ``published.json`` (the
figures PandaLM published). Then it checks itself: every key is unique, every stored answer read with the
project's ``json_winner`` parser (as ``conf/rubric/json_verdict.yaml`` configures it) gives the recorded verdict,
and PandaLM's accuracy and macro precision/recall/F1, recomputed with plain Python from the written files, equal
the published figures to their four decimals. Any mismatch aborts with a non-zero exit.

Run from the repository root: ``python -m runner.data.pandalm.build_replay [--shared PATH]``.
"""

from __future__ import annotations

import argparse
import json
import logging
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
RECORDING = "pandalm-gpt-3.5-turbo"
DATASET_CONF = "pandalm"
PROMPT_CONF = "pandalm_pair"
RUBRIC_CONF = "json_verdict"
LABELS = ("A", "B", "tie")
# PandaLM's gpt_result -> the positional label in order ab (response1 is shown as Response 1 = A). Any other
# recorded value ("garbage": PandaLM could not read GPT's answer) is stored as it is and stays unscored.
WINNERS = {"1": "A", "2": "B", "Tie": "tie"}
# A positional label (order ab) or an unscored verdict (None) -> PandaLM's class: 0 tie, 1 response1, 2 response2.
# PandaLM's compute_metrics.py counts "Tie", "tie" and "garbage" as class 0.
CLASSES = {"A": 1, "B": 2, "tie": 0, None: 0}
# data/compute_metrics.py (PandaLM commit 1f9f8ab), printed with four decimals.
PUBLISHED = {
    "source": "WeOpenML/PandaLM data/compute_metrics.py (commit 1f9f8ab), printed with 4 decimals",
    "gpt-3.5-turbo": {
        "accuracy": "0.7107", "macro_precision": "0.5879", "macro_recall": "0.5736", "macro_f1": "0.5755",
    },
}


class SelfCheckError(RuntimeError):
    """Raised when the rebuilt data disagrees with what PandaLM recorded or published."""


def majority(votes: Sequence[int]) -> int:
    """PandaLM's get_majority_vote: the most frequent label; among equally frequent ones the first seen."""
    counts: dict[int, int] = {}
    for vote in votes:
        counts[vote] = counts.get(vote, 0) + 1
    return max(counts, key=counts.__getitem__)


def task_text(item_id: str, instruction: str, input_text: str) -> str:
    """What the judge is shown as the task: the row id, then PandaLM's Instruction and (if any) Input sections.

    The id keeps apart the rows whose texts are byte-identical (different model pairs that answered alike), so
    each is its own request and keeps its own recorded verdict.
    """
    text = f"### Task ID:\n{item_id}\n\n### Instruction:\n{instruction}"
    return f"{text}\n\n### Input:\n{input_text}" if input_text else text


def response_text(value: str | bool) -> str:
    """A response as text. Six upstream responses (rows 157-159, 161, 162, 164) are the JSON boolean ``true``,
    a conversion artefact of the answer "True": they are stored as the text ``"True"``."""
    if isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise SelfCheckError(f"unexpected response value {value!r}")
    return value


def load_rows(shared: Path) -> tuple[list[dict], list[dict]]:
    """Our rows and PandaLM's gpt-3.5-turbo records, aligned by ``idx`` (checked)."""
    testset = json.loads((shared / "testset-v1.json").read_text(encoding="utf-8"))
    gpt = json.loads((shared / "gpt-3.5-turbo-testset-v1.json").read_text(encoding="utf-8"))
    if [r["idx"] for r in testset] != list(range(len(testset))) or [r["idx"] for r in gpt] != list(range(len(gpt))):
        raise SelfCheckError("testset-v1.json and gpt-3.5-turbo-testset-v1.json must list idx 0..n-1 in order")
    rows = []
    for r in testset:
        item_id = f"pandalm-{r['idx']:03d}"
        votes = [r["annotator1"], r["annotator2"], r["annotator3"]]
        rows.append({
            "id": item_id,
            "motivation_app": r["motivation_app"],
            "cmp_key": r["cmp_key"],
            "instruction": r["instruction"],
            "input": r["input"],
            "task": task_text(item_id, r["instruction"], r["input"]),
            "response1": response_text(r["response1"]),
            "response2": response_text(r["response2"]),
            "annotator1": votes[0],
            "annotator2": votes[1],
            "annotator3": votes[2],
            "gold": majority(votes),
        })
    return rows, gpt


def verdict_text(result: str, reason: str) -> str:
    """The stored answer: PandaLM's recorded reason and verdict in the JSON that ``json_winner`` reads."""
    return json.dumps({"reason": reason, "winner": WINNERS.get(result, result)}, ensure_ascii=False)


def _conf(group: str, name: str) -> dict:
    return yaml.safe_load((REPO_ROOT / "conf" / group / f"{name}.yaml").read_text(encoding="utf-8"))


def rendered_keys(dataset_path: Path) -> dict[str, str]:
    """Row id -> hash of the messages judgesweep renders for it (conf/dataset + conf/prompt, order ab)."""
    cfg = to_schema(DatasetConfig, _conf("dataset", DATASET_CONF))
    prompt = _conf("prompt", PROMPT_CONF)
    template = load_template(REPO_ROOT / "prompts", prompt["template"])
    neutralize = prompt.get("neutralize_delimiters", True)
    return {
        item.id: hash_messages(template.render(pair_variables(item, Order.AB), neutralize=neutralize))
        for item in load_items(cfg, dataset_path).iter_items()
    }


def replay_lines(rows: list[dict], gpt: list[dict], keys: dict[str, str]) -> list[dict]:
    """One replay line per row; checks that the project's parser reads the recorded verdict back."""
    parser = _conf("rubric", RUBRIC_CONF)["parser"]
    lines = []
    for row, rec in zip(rows, gpt, strict=True):
        text = verdict_text(rec["gpt_result"], rec["gpt_reason"])
        label = parse_verdict(parser["name"], text, LABELS, parser.get("params") or {}).label
        if label != WINNERS.get(rec["gpt_result"]):
            raise SelfCheckError(f"{row['id']}: {text!r} reads as {label!r}, recorded {rec['gpt_result']!r}")
        lines.append({
            "key": keys[row["id"]],
            "item": row["id"],
            "order": "ab",
            "stage": "judge",
            "text": text,
            "finish_reason": "stop",
            "gpt_result": rec["gpt_result"],
        })
    if len({line["key"] for line in lines}) != len(lines):
        raise SelfCheckError("two rows render the same request: the replay could not tell them apart")
    return lines


def pandalm_metrics(gold: Sequence[int], predicted: Sequence[int]) -> dict[str, float]:
    """PandaLM's compute_metrics: accuracy and macro precision/recall/F1 over the classes 0, 1, 2."""
    classes = (0, 1, 2)
    per_class = []
    for c in classes:
        tp = sum(g == c and p == c for g, p in zip(gold, predicted, strict=True))
        fp = sum(g != c and p == c for g, p in zip(gold, predicted, strict=True))
        fn = sum(g == c and p != c for g, p in zip(gold, predicted, strict=True))
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_class.append((precision, recall, f1))
    return {
        "accuracy": sum(g == p for g, p in zip(gold, predicted, strict=True)) / len(gold),
        "macro_precision": sum(p for p, _, _ in per_class) / len(classes),
        "macro_recall": sum(r for _, r, _ in per_class) / len(classes),
        "macro_f1": sum(f for _, _, f in per_class) / len(classes),
    }


def check_published(out: Path) -> dict[str, str]:
    """Recompute PandaLM's figures from the written files and compare them with the published ones."""
    rows = [json.loads(line) for line in (out / "testset.jsonl").read_text(encoding="utf-8").splitlines()]
    lines = [json.loads(line) for line in (out / "replay" / f"{RECORDING}.jsonl").read_text(encoding="utf-8")
             .splitlines()]
    parser = _conf("rubric", RUBRIC_CONF)["parser"]
    predicted = [CLASSES[parse_verdict(parser["name"], ln["text"], LABELS, parser.get("params") or {}).label]
                 for ln in lines]
    gold = [majority([r["annotator1"], r["annotator2"], r["annotator3"]]) for r in rows]
    if gold != [r["gold"] for r in rows]:
        raise SelfCheckError("the stored gold differs from the annotators' majority")
    ours = {k: f"{v:.4f}" for k, v in pandalm_metrics(gold, predicted).items()}
    if ours != PUBLISHED["gpt-3.5-turbo"]:
        raise SelfCheckError(f"recomputed {ours} != published {PUBLISHED['gpt-3.5-turbo']}")
    return ours


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """Write one compact JSON object per line, UTF-8, deterministic."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def build(shared: Path, out: Path) -> None:
    """Rebuild every generated file under ``out`` from the shared PandaLM copy, checking as it goes."""
    rows, gpt = load_rows(shared)
    write_jsonl(out / "testset.jsonl", rows)
    lines = replay_lines(rows, gpt, rendered_keys(out / "testset.jsonl"))
    write_jsonl(out / "replay" / f"{RECORDING}.jsonl", lines)
    (out / "published.json").write_text(json.dumps(PUBLISHED, indent=2) + "\n", encoding="utf-8")
    ours = check_published(out)
    logger.info("%d rows, %d replay lines (keys unique, every verdict read back); recomputed %s = published",
                len(rows), len(lines), ours)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO_ROOT.parent / "shared" / "data" / "pandalm")
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: next to this file)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    build(args.shared.resolve(), args.out.resolve())


if __name__ == "__main__":
    main()
