"""The shipped LLMBar data (runner/data/llmbar): rows, replay recordings, statistics and dataset configs."""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
import yaml

from runner.data.llmbar.build_replay import COT_PARSING, VERDICT_PARSING, parse_winner, statistics_name
from runner.judging.parsers.labels import parse_verdict

PROJECT_ROOT = Path(__file__).resolve().parents[2]
LLMBAR = PROJECT_ROOT / "runner" / "data" / "llmbar"
CONF = PROJECT_ROOT / "conf"
ROW_FIELDS = {"id", "input", "output_1", "output_2", "label"}
LINE_FIELDS = {"key", "strategy", "item", "order", "stage", "text", "finish_reason"}
STRATEGIES = ("vanilla", "vanilla_norules", "swap")
# subset -> rows, in the order the replay files hold them (Natural first)
SUBSETS = {"natural": 100, "neighbor": 134, "gptinst": 92, "gptout": 47, "manual": 46}
# model -> subset -> rows whose two Swap round-1 verdicts conflicted (each adds 2 synthesis lines)
SYNTHESIS_ROWS = {
    "gpt-4": {"natural": 7, "neighbor": 14, "gptinst": 12, "gptout": 5, "manual": 9},
    "chatgpt": {"natural": 38, "neighbor": 52, "gptinst": 37, "gptout": 27, "manual": 21},
}
REPLAY_LINES = {"gpt-4": 2608, "chatgpt": 2864}


@cache
def rows(subset: str) -> list[dict]:
    """The shipped rows of one subset."""
    return [json.loads(line) for line in (LLMBAR / f"{subset}.jsonl").read_text(encoding="utf-8").splitlines()]


@cache
def replay(model: str) -> list[dict]:
    """The shipped replay lines of one model, in file order."""
    text = (LLMBAR / "replay" / f"{model}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def subset_of(item_id: str) -> str:
    return item_id.rsplit("-", 1)[0]


def rubric_parsers(name: str) -> tuple[dict, dict]:
    """(parser, synthesis parser) of a rubric in conf/rubric/; the synthesis parser defaults to the parser."""
    rubric = yaml.safe_load((CONF / "rubric" / f"{name}.yaml").read_text(encoding="utf-8"))
    return rubric["parser"], rubric.get("synthesis_parser") or rubric["parser"]


def llmbar_label(line: dict) -> str | None:
    """The positional label LLMBar's own rule reads from a recorded text ("A", "B" or None)."""
    parsing = COT_PARSING if (line["strategy"], line["stage"]) == ("swap", "judge") else VERDICT_PARSING
    return {"1": "A", "2": "B", None: None}[parse_winner(line["text"], parsing, "ab")]


def misreads(model: str, rubric: str, strategies: tuple[str, ...]) -> list[tuple[str, str, str, str]]:
    """Recorded lines of ``strategies`` whose label under ``rubric`` differs from LLMBar's reading."""
    parser, synthesis = rubric_parsers(rubric)
    out = []
    for line in replay(model):
        if line["strategy"] in strategies:
            p = synthesis if line["stage"] == "synthesis" else parser
            ours = parse_verdict(p["name"], line["text"], ("A", "B"), p["params"]).label
            if ours != llmbar_label(line):
                out.append((line["item"], line["strategy"], line["stage"], line["order"]))
    return out


# --- rows ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("subset", SUBSETS)
def test_subset_rows_are_well_formed(subset: str) -> None:
    items = rows(subset)
    assert [r["id"] for r in items] == [f"{subset}-{i:03d}" for i in range(SUBSETS[subset])]
    for r in items:
        assert set(r) == ROW_FIELDS, r["id"]
        assert type(r["label"]) is int and r["label"] in (1, 2), r["id"]
        assert all(isinstance(r[k], str) and r[k].strip() for k in ("input", "output_1", "output_2")), r["id"]
    assert Counter(r["label"] for r in items).keys() == {1, 2}


def test_no_pair_is_shipped_twice() -> None:
    pairs = [(r["input"], r["output_1"], r["output_2"]) for s in SUBSETS for r in rows(s)]
    assert len(set(pairs)) == len(pairs) == sum(SUBSETS.values())


# --- replay recordings -----------------------------------------------------------------------------


@pytest.mark.parametrize("model", SYNTHESIS_ROWS)
def test_replay_lines_are_well_formed_and_keys_unique(model: str) -> None:
    lines = replay(model)
    ids = {r["id"] for s in SUBSETS for r in rows(s)}
    assert len(lines) == REPLAY_LINES[model]
    assert len({line["key"] for line in lines}) == len(lines)
    for line in lines:
        assert set(line) == LINE_FIELDS
        assert re.fullmatch(r"[0-9a-f]{64}", line["key"]) and line["item"] in ids
        assert line["strategy"] in STRATEGIES and line["order"] in ("ab", "ba")
        assert line["stage"] == "judge" or (line["stage"], line["strategy"]) == ("synthesis", "swap")
        assert line["text"] == line["text"].strip() and line["text"]
        assert line["finish_reason"] in ("stop", "length")


@pytest.mark.parametrize("model", SYNTHESIS_ROWS)
def test_replay_holds_every_recorded_call_once_per_subset_strategy_and_order(model: str) -> None:
    counts = Counter((subset_of(x["item"]), x["strategy"], x["stage"], x["order"]) for x in replay(model))
    expected = Counter()
    for subset, n in SUBSETS.items():
        for strategy in STRATEGIES:
            for order in ("ab", "ba"):
                expected[(subset, strategy, "judge", order)] = n
                if strategy == "swap":
                    expected[(subset, strategy, "synthesis", order)] = SYNTHESIS_ROWS[model][subset]
    assert counts == expected
    judged = {(x["item"], x["strategy"], x["order"]) for x in replay(model) if x["stage"] == "judge"}
    assert len(judged) == 6 * sum(SUBSETS.values())


@pytest.mark.parametrize("model", SYNTHESIS_ROWS)
def test_replay_files_keep_natural_first_then_the_subsets_in_order(model: str) -> None:
    order = [subset_of(x["item"]) for x in replay(model)]
    assert [s for i, s in enumerate(order) if i == 0 or order[i - 1] != s] == list(SUBSETS)


def test_only_one_recorded_answer_was_cut_off_at_max_tokens() -> None:
    cut = [(m, x["item"], x["strategy"], x["stage"], x["order"]) for m in SYNTHESIS_ROWS for x in replay(m)
           if x["finish_reason"] == "length"]
    assert cut == [("chatgpt", "gptinst-051", "swap", "judge", "ba")]


# --- statistics ------------------------------------------------------------------------------------


def test_statistics_are_shipped_for_every_model_strategy_and_subset() -> None:
    expected = {f"{statistics_name(m, st, s)}.json" for m in SYNTHESIS_ROWS for st in STRATEGIES for s in SUBSETS}
    assert {p.name for p in (LLMBAR / "statistics").glob("*.json")} == expected
    assert "gpt-4_vanilla.json" in expected  # Natural keeps its original names (tests and docs use them)


@pytest.mark.parametrize("subset", SUBSETS)
def test_statistics_count_over_the_shipped_rows(subset: str) -> None:
    for model in SYNTHESIS_ROWS:
        for strategy in STRATEGIES:
            raw = json.loads((LLMBAR / "statistics" / f"{statistics_name(model, strategy, subset)}.json").read_text())
            for key in ("correct_False", "correct_True", "correct_both", "equal"):
                count, total = re.match(r"(\d+) / (\d+) = ", raw[key]).groups()
                assert int(total) == SUBSETS[subset] and int(count) <= int(total), (model, strategy, key)


# --- dataset configs and the README ----------------------------------------------------------------


@pytest.mark.parametrize("subset", [s for s in SUBSETS if s != "natural"])
def test_dataset_config_mirrors_llmbar_natural(subset: str) -> None:
    natural = yaml.safe_load((CONF / "dataset" / "llmbar_natural.yaml").read_text())
    ours = yaml.safe_load((CONF / "dataset" / f"llmbar_{subset}.yaml").read_text())
    assert ours == natural | {"name": f"llmbar_{subset}", "path": f"pkg://runner/data/llmbar/{subset}.jsonl"}


def test_readme_documents_the_line_counts() -> None:
    readme = (LLMBAR / "README.md").read_text(encoding="utf-8")
    for subset, n in SUBSETS.items():
        assert f"| `{subset}.jsonl` | {n} |" in readme
    for model, n in REPLAY_LINES.items():
        assert f"| `replay/{model}.jsonl` | {n} |" in readme


# --- reading the recorded answers: LLMBar's rule vs our rubrics ------------------------------------


@pytest.mark.parametrize("model", SYNTHESIS_ROWS)
def test_default_rubric_reads_verdict_only_answers_as_llmbar_did(model: str) -> None:
    assert misreads(model, "llmbar", ("vanilla", "vanilla_norules")) == []


def test_default_rubric_misreads_one_chatgpt_cot_answer_that_llmbar_left_unscored() -> None:
    assert misreads("gpt-4", "llmbar", ("swap",)) == []
    assert misreads("chatgpt", "llmbar", ("swap",)) == [("gptinst-061", "swap", "judge", "ab")]
    line = next(x for x in replay("chatgpt") if (x["item"], x["strategy"], x["order"]) == ("gptinst-061", "swap", "ab"))
    # No "Output (x) is better", so LLMBar reads nothing; our fallback finds "Output (a)" at a line start.
    assert "is better" not in line["text"] and "\n\nOutput (a) acknowledges" in line["text"]


@pytest.mark.parametrize("model", SYNTHESIS_ROWS)
def test_upstream_rubric_reads_every_swap_answer_as_llmbar_did(model: str) -> None:
    assert misreads(model, "llmbar_upstream", ("swap",)) == []
