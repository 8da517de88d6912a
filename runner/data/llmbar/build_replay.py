"""Rebuild the LLMBar replay data (Natural and the four Adversarial subsets) from the shared LLMBar copy.

Writes, next to this file: ``<subset>.jsonl`` for each subset in :data:`SUBSETS` (the rows, ids
``<subset>-NNN``), ``replay/<model>.jsonl`` (every recorded GPT-4 / ChatGPT judge call of the Vanilla,
Vanilla_NoRules and Swap strategies on every subset, keyed by :func:`runner.core.types.hash_messages` of
exactly the messages LLMBar sent; Natural first, so its lines keep their place) and ``statistics/``
(the published statistics, verbatim, named by :func:`statistics_name`). Then it checks itself: every
recorded synthesis prompt is rebuilt from ``llmbar_prompts/Swap.txt`` and the round-1 explanations,
every recorded winner is re-read from its text with LLMBar's own parsing rule, and LLMBar's statistics
are recomputed from the written files. Any mismatch aborts with a non-zero exit.

Run from the repository root: ``python -m runner.data.llmbar.build_replay [--shared PATH]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
from pathlib import Path
from typing import Any

from runner.core.types import Message, hash_messages

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[2]
# subset name (id prefix, file stem) -> folder in the shared copy; Natural first (its lines lead the replay files)
SUBSETS = {
    "natural": Path("LLMBar/Natural"),
    "neighbor": Path("LLMBar/Adversarial/Neighbor"),
    "gptinst": Path("LLMBar/Adversarial/GPTInst"),
    "gptout": Path("LLMBar/Adversarial/GPTOut"),
    "manual": Path("LLMBar/Adversarial/Manual"),
}
MODELS = {"gpt-4": "GPT-4", "chatgpt": "ChatGPT"}
# strategy name -> (LLMBar evaluator folder, round-1 template)
STRATEGIES = {
    "vanilla": ("Vanilla", "Vanilla.txt"),
    "vanilla_norules": ("Vanilla_NoRules", "Vanilla_NoRules.txt"),
    "swap": ("Swap", "CoT.txt"),
}
SYNTHESIS_TEMPLATE = "Swap.txt"
ORDERS = {"ab": "swap = False", "ba": "swap = True"}
# LLMBar's config "parsing": the first label whose pattern is found anywhere wins.
VERDICT_PARSING = {"1": r"(?:^|\n) ?Output \(a\)", "2": r"(?:^|\n) ?Output \(b\)"}
COT_PARSING = {"1": r"Output \(a\) is better.", "2": r"Output \(b\) is better."}
_OUTPUT_AB = re.compile(r"(Output|output) \(([ab])\)")


class SelfCheckError(RuntimeError):
    """Raised when the rebuilt data disagrees with what LLMBar recorded."""


def prompt_to_chatml(prompt: str) -> tuple[Message, ...]:
    """Split a ChatML prompt into messages exactly as LLMBar's ``prompt_to_chatml`` does."""
    prompt = prompt.strip()
    if not (prompt.startswith("<|im_start|>") and prompt.endswith("<|im_end|>")):
        raise ValueError("not a ChatML prompt")
    messages = []
    for part in prompt.split("<|im_start|>")[1:]:
        head, body = part.split("\n", 1)
        role = head.strip()
        if role not in ("system", "user", "assistant"):
            raise ValueError(f"unsupported ChatML role line {head!r}")
        messages.append(Message(role=role, content=body.split("<|im_end|>", 1)[0].strip()))
    return tuple(messages)


def oriented(row: dict[str, Any], order: str) -> dict[str, str]:
    """Template variables for ``order``: ``ba`` shows the row's output_2 as Output (a)."""
    first, second = ("output_1", "output_2") if order == "ab" else ("output_2", "output_1")
    return {"input": row["input"], "output_1": row[first], "output_2": row[second]}


def reverse_output_ab(text: str) -> str:
    """Swap "Output (a)"<->"Output (b)" and "output (a)"<->"output (b)" (LLMBar's reverse_OutputAB)."""
    return _OUTPUT_AB.sub(lambda m: f"{m.group(1)} ({'b' if m.group(2) == 'a' else 'a'})", text)


def synthesis_prompt(template: str, row: dict[str, Any], order: str, round1: dict[str, Any]) -> str:
    """Rebuild LLMBar's round-2 (synthesis) prompt for ``order`` from the conflicting round 1.

    explanation_1 ("Assistant (a), who thinks Output (a) is better") is the round-1 explanation that
    chose the output shown as (a) in ``order``; explanation_2 the one that chose the output shown as
    (b). An explanation written in the other order has its (a)/(b) references swapped.
    """
    made_in = {round1[ORDERS[o]]["winner"]: o for o in ORDERS}  # original label -> order that chose it
    shown = ("1", "2") if order == "ab" else ("2", "1")  # original labels shown as (a), (b)
    explanations = []
    for label in shown:
        text = round1[ORDERS[made_in[label]]]["completion"][0]
        explanations.append(text if made_in[label] == order else reverse_output_ab(text))
    variables = oriented(row, order) | {"explanation_1": explanations[0], "explanation_2": explanations[1]}
    return template.format_map(variables)


def parse_winner(text: str, parsing: dict[str, str], order: str) -> str | None:
    """LLMBar's winner for ``text``, mapped back to the original numbering."""
    for label, pattern in parsing.items():
        if re.search(pattern, text):
            return label if order == "ab" else {"1": "2", "2": "1"}[label]
    return None


def record(
    key_messages: tuple[Message, ...], strategy: str, item: str, order: str, stage: str, entry: dict
) -> dict:
    """One replay line; checks LLMBar's parsing of the text gives the recorded winner."""
    text, finish_reason = entry["completion"]
    parsing = COT_PARSING if (strategy, stage) == ("swap", "judge") else VERDICT_PARSING
    if parse_winner(text, parsing, order) != entry["winner"]:
        raise SelfCheckError(f"{item} {strategy}/{stage}/{order}: text does not parse to the recorded winner")
    return {
        "key": hash_messages(key_messages),
        "strategy": strategy,
        "item": item,
        "order": order,
        "stage": stage,
        "text": text,
        "finish_reason": finish_reason,
    }


def row_records(strategy: str, item: str, row: dict, templates: dict[str, str]) -> list[dict]:
    """All recorded calls for one result row; rebuilds and checks the synthesis prompts."""
    template = templates[STRATEGIES[strategy][1]]
    round1 = row["results"][0]
    out = [
        record(prompt_to_chatml(template.format_map(oriented(row, o))), strategy, item, o, "judge", round1[s])
        for o, s in ORDERS.items()
    ]
    if len(row["results"]) == 1:
        return out
    if strategy != "swap" or len(row["results"]) != 2 or {e["winner"] for e in round1.values()} != {"1", "2"}:
        raise SelfCheckError(f"{item} {strategy}: unexpected second round")
    for order, side in ORDERS.items():
        entry = row["results"][1][side]
        rebuilt = synthesis_prompt(templates[SYNTHESIS_TEMPLATE], row, order, round1)
        if rebuilt != entry["prompt"]:
            raise SelfCheckError(f"{item} synthesis/{order}: rebuilt prompt differs from the recorded one")
        out.append(record(prompt_to_chatml(entry["prompt"]), strategy, item, order, "synthesis", entry))
    return out


def check_keys(records: list[dict], name: str) -> int:
    """Fail if two lines share a key with different text; return how many lines repeat a key."""
    seen: dict[str, dict] = {}
    repeats = 0
    for rec in records:
        prev = seen.setdefault(rec["key"], rec)
        if prev is not rec:
            repeats += 1
            if prev["text"] != rec["text"]:
                raise SelfCheckError(
                    f"{name}: key {rec['key']} has two texts ({prev['item']}, {rec['item']})"
                )
    return repeats


def llmbar_statistics(winners: list[tuple[str, str | None, str | None]]) -> dict[str, str]:
    """LLMBar's correct_False/True/average/both and equal from (label, winner_ab, winner_ba)."""
    n = len(winners)
    c_f = sum(w_f == lab for lab, w_f, _ in winners)
    c_t = sum(w_t == lab for lab, _, w_t in winners)
    both = sum(w_f == lab and w_t == lab for lab, w_f, w_t in winners)
    equal = sum(w_f == w_t for _, w_f, w_t in winners)
    return {
        "correct_False": f"{c_f} / {n} = {c_f / n * 100}%",
        "correct_True": f"{c_t} / {n} = {c_t / n * 100}%",
        "correct_average": f"{(c_f + c_t) / 2 / n * 100}%",
        "correct_both": f"{both} / {n} = {both / n * 100}%",
        "equal": f"{equal} / {n} = {equal / n * 100}%",
    }


def check_statistics(records: list[dict], items: list[dict], strategy: str, published: dict) -> None:
    """Recompute LLMBar's accuracy/agreement from the replay texts and compare with the published file."""
    final: dict[tuple[str, str], tuple[str, dict]] = {}
    for rec in records:
        if rec["strategy"] == strategy:
            prev = final.get((rec["item"], rec["order"]))
            if prev is None or rec["stage"] == "synthesis":
                final[(rec["item"], rec["order"])] = (rec["stage"], rec)
    winners = []
    for it in items:
        pair = []
        for order in ORDERS:
            stage, rec = final[(it["id"], order)]
            parsing = COT_PARSING if (strategy, stage) == ("swap", "judge") else VERDICT_PARSING
            pair.append(parse_winner(rec["text"], parsing, order))
        winners.append((str(it["label"]), pair[0], pair[1]))
    ours = llmbar_statistics(winners)
    theirs = {k: published[k] for k in ours}
    if ours != theirs:
        raise SelfCheckError(f"{strategy}: statistics {ours} != published {theirs}")


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """Write one compact JSON object per line, UTF-8, deterministic."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def statistics_name(model: str, strategy: str, subset: str) -> str:
    """File stem under ``statistics/``: Natural keeps its original ``<model>_<strategy>`` name."""
    return f"{model}_{strategy}" if subset == "natural" else f"{model}_{strategy}_{subset}"


def load_subset(shared: Path, subset: str) -> tuple[list[dict], list[dict]]:
    """The subset's upstream ``dataset.json`` rows and our items (``<subset>-NNN`` ids, int labels)."""
    dataset = json.loads((shared / SUBSETS[subset] / "dataset.json").read_text(encoding="utf-8"))
    items = [
        {
            "id": f"{subset}-{i:03d}",
            **{k: r[k] for k in ("input", "output_1", "output_2")},
            "label": int(r["label"]),
        }
        for i, r in enumerate(dataset)
    ]
    return dataset, items


def subset_records(
    shared: Path, out: Path, model: str, subset: str, templates: dict[str, str]
) -> tuple[list[dict], int]:
    """One model's replay lines for one subset (all strategies), checked; copies the statistics."""
    dataset, items = load_subset(shared, subset)
    records, two_stage = [], 0
    for strategy, (evaluator, _) in STRATEGIES.items():
        src = shared / SUBSETS[subset] / "evaluators" / MODELS[model] / evaluator
        rows = json.loads((src / "result.json").read_text(encoding="utf-8"))
        if [{k: r[k] for k in ("input", "output_1", "output_2", "label")} for r in rows] != dataset:
            raise SelfCheckError(f"{src}: rows differ from dataset.json")
        for it, row in zip(items, rows, strict=True):
            records.extend(row_records(strategy, it["id"], row, templates))
            two_stage += len(row["results"]) == 2
        stats_dst = out / "statistics" / f"{statistics_name(model, strategy, subset)}.json"
        stats_dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / "statistics.json", stats_dst)
        check_statistics(records, items, strategy, json.loads(stats_dst.read_text(encoding="utf-8")))
    return records, two_stage


def build(shared: Path, out: Path) -> None:
    """Rebuild every generated file under ``out`` from the shared LLMBar copy, checking as it goes."""
    templates = {
        p.name: p.read_text(encoding="utf-8") for p in sorted((HERE / "llmbar_prompts").glob("*.txt"))
    }
    for subset in SUBSETS:
        write_jsonl(out / f"{subset}.jsonl", load_subset(shared, subset)[1])
    for model in MODELS:
        records: list[dict] = []
        for subset in SUBSETS:
            lines, two_stage = subset_records(shared, out, model, subset, templates)
            records.extend(lines)
            logger.info("%s/%s: %d lines, %d two-stage Swap rows", model, subset, len(lines), two_stage)
        repeats = check_keys(records, model)
        write_jsonl(out / "replay" / f"{model}.jsonl", records)
        logger.info(
            "%s: %d lines (all synthesis prompts rebuilt exactly), %d lines repeat an earlier key with the "
            "same text; statistics match the published ones",
            model,
            len(records),
            repeats,
        )


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO_ROOT.parent / "shared" / "data" / "llmbar")
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: next to this file)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    build(args.shared.resolve(), args.out.resolve())


if __name__ == "__main__":
    main()
