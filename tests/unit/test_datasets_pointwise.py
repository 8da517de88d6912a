"""Unit tests for runner.inputs.datasets in pointwise mode: one candidate (or none), field shapes, labels,
shipped data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from runner.core.choices import OnBadRow, PromptMode
from runner.core.config import DatasetConfig, SystemConfig
from runner.core.errors import DatasetError
from runner.core.types import Candidate, Item
from runner.inputs.datasets import LoadedDataset, check_systems, load_items, resolve_path
from runner.inputs.items import Shape

PROJECT_ROOT = Path(__file__).resolve().parents[2]
POINTWISE = Shape(mode=PromptMode.pointwise)
GENERATED = Shape(mode=PromptMode.pointwise, with_candidate=False)


def pointwise_cfg(**overrides: Any) -> DatasetConfig:
    """A pointwise mapping like conf/dataset/agent_examples.yaml plus labels, with keyword overrides."""
    fields: dict[str, Any] = {
        "name": "tiny_pointwise",
        "path": "unused",
        "id_field": "id",
        "variables": {"input": "input"},
        "optional_variables": {"context": "context", "criteria": "success_criteria", "transcript": "conversation",
                               "tools": "mcp_calls_expected"},
        "candidate": SystemConfig(name="agent", field="output"),
        "tags_field": "tags",
        "category_field": "category",
        "human_score_field": "human",
    }
    fields.update(overrides)
    return DatasetConfig(**fields)


def row(i: int, **extra: Any) -> dict[str, Any]:
    return {"id": f"p{i}", "input": f"question {i}", "output": f"answer {i}", **extra}


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def load_one(tmp_path: Path, r: dict[str, Any], shape: Shape = POINTWISE, **overrides: Any) -> Item:
    [item] = load_items(pointwise_cfg(**overrides), write_jsonl(tmp_path / "d.jsonl", [r]), shape=shape).items
    return item


def bad_row(tmp_path: Path, r: dict[str, Any], shape: Shape = POINTWISE) -> str:
    """Load ``r`` as line 2 (after a good row) and return the DatasetError message."""
    path = write_jsonl(tmp_path / "d.jsonl", [row(1), r])
    with pytest.raises(DatasetError) as info:
        load_items(pointwise_cfg(), path, shape=shape)
    message = str(info.value)
    assert message.startswith(f"{path}:2: ")
    return message


def compose(stem: str) -> DatasetConfig:
    """A shipped dataset config, composed against its schema as Hydra would."""
    schema = OmegaConf.structured(DatasetConfig)
    yaml = OmegaConf.load(PROJECT_ROOT / "conf" / "dataset" / f"{stem}.yaml")
    cfg = OmegaConf.to_object(OmegaConf.merge(schema, yaml))
    assert isinstance(cfg, DatasetConfig)
    return cfg


def load_shipped(stem: str, shape: Shape = POINTWISE) -> LoadedDataset:
    cfg = compose(stem)
    return load_items(cfg, resolve_path(cfg.path, PROJECT_ROOT), shape=shape)


# --- candidates --------------------------------------------------------------------------------------


def test_pointwise_row_has_one_candidate(tmp_path: Path) -> None:
    item = load_one(tmp_path, row(1))
    assert item.candidates == (Candidate("agent", "answer 1"),)
    assert item.variables["input"] == "question 1"


def test_pointwise_candidate_is_required(tmp_path: Path) -> None:
    r = row(2)
    del r["output"]
    assert "missing field 'output'" in bad_row(tmp_path, r)


def test_generated_shape_needs_no_candidate_field(tmp_path: Path) -> None:
    r = row(1)
    del r["output"]
    item = load_one(tmp_path, r, shape=GENERATED)
    assert item.candidates == ()
    assert item.variables["input"] == "question 1"


def test_generated_shape_ignores_a_present_candidate(tmp_path: Path) -> None:
    assert load_one(tmp_path, row(1), shape=GENERATED).candidates == ()


# --- variable shapes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["absent", None, [], {}])
def test_optional_variable_missing_null_or_empty_is_empty_text(tmp_path: Path, value: Any) -> None:
    r = row(1) if value == "absent" else row(1, context=value)
    assert load_one(tmp_path, r).variables["context"] == ""


def test_every_optional_variable_is_present_even_when_absent(tmp_path: Path) -> None:
    item = load_one(tmp_path, row(1))
    assert dict(item.variables) == {"input": "question 1", "context": "", "criteria": "", "transcript": "",
                                    "tools": ""}


def test_required_variable_missing_names_file_and_line(tmp_path: Path) -> None:
    r = row(2)
    del r["input"]
    assert "missing field 'input'" in bad_row(tmp_path, r)


def test_list_of_strings_becomes_bullet_lines(tmp_path: Path) -> None:
    item = load_one(tmp_path, row(1, success_criteria=["Names the root cause", "At most five bullets"]))
    assert item.variables["criteria"] == "- Names the root cause\n- At most five bullets"


def test_chat_transcript_becomes_role_content_lines(tmp_path: Path) -> None:
    turns = [{"role": "user", "content": "ugh another rejection"}, {"role": "assistant", "content": "that's rough"}]
    item = load_one(tmp_path, row(1, conversation=turns))
    assert item.variables["transcript"] == "user: ugh another rejection\nassistant: that's rough"


def test_json_objects_become_indented_json(tmp_path: Path) -> None:
    calls = [{"tool": "billing.refund_charge", "arguments": {"charge_id": "ch_8812", "note": "déjà"}}]
    item = load_one(tmp_path, row(1, mcp_calls_expected=calls, context={"plan": "pro"}))
    assert item.variables["tools"] == json.dumps(calls, ensure_ascii=False, indent=2)
    assert '\n  {\n    "tool": "billing.refund_charge"' in item.variables["tools"]
    assert "déjà" in item.variables["tools"]
    assert item.variables["context"] == '{\n  "plan": "pro"\n}'


def test_mixed_list_is_json_not_bullets(tmp_path: Path) -> None:
    item = load_one(tmp_path, row(1, success_criteria=["one", 2]))
    assert item.variables["criteria"] == '[\n  "one",\n  2\n]'


def test_numbers_become_text(tmp_path: Path) -> None:
    assert load_one(tmp_path, row(1, context=42)).variables["context"] == "42"
    assert load_one(tmp_path, row(1, context=2.5)).variables["context"] == "2.5"


def test_bool_variable_is_rejected_with_file_and_line(tmp_path: Path) -> None:
    assert "field 'context' must be text, got bool" in bad_row(tmp_path, row(2, context=True))


# --- tags, category, human score ----------------------------------------------------------------------


@pytest.mark.parametrize(("tags", "expected"), [
    ("retrieval", ("retrieval",)),
    (["tool_use", "refusal", "tool_use"], ("tool_use", "refusal")),
    ([], ()),
    (None, ()),
])
def test_tags_as_string_or_list_deduplicated(tmp_path: Path, tags: Any, expected: tuple[str, ...]) -> None:
    assert load_one(tmp_path, row(1, tags=tags)).tags == expected


def test_tags_absent_or_unmapped_are_empty(tmp_path: Path) -> None:
    assert load_one(tmp_path, row(1)).tags == ()
    assert load_one(tmp_path, row(1, tags=["x"]), tags_field=None).tags == ()


@pytest.mark.parametrize("tags", [["ok", 3], {"a": 1}, 7])
def test_bad_tags_are_rejected(tmp_path: Path, tags: Any) -> None:
    assert "field 'tags' must be a non-empty string or a list of them" in bad_row(tmp_path, row(2, tags=tags))


def test_category_and_human_score_are_read(tmp_path: Path) -> None:
    item = load_one(tmp_path, row(1, category="emotion", human=7))
    assert item.category == "emotion"
    assert item.human_score == 7.0 and isinstance(item.human_score, float)
    assert load_one(tmp_path, row(1, human=9.5)).human_score == 9.5


@pytest.mark.parametrize(("value", "category"), [
    ("mmlu-pro-law", "knowledge"), ("livebench-math", "math"), ("livebench-reasoning", "reasoning"),
    ("livecodebench", "livecodebench")])
def test_category_map_names_a_values_category_by_the_first_matching_glob(tmp_path: Path, value: str,
                                                                         category: str) -> None:
    """Issue 44 point 4: JudgeBench's ``source`` gives its categories by config; the first pattern in the order
    written wins (``livebench-*`` after ``livebench-math``), a value no pattern matches is its own category."""
    category_map = {"mmlu-pro-*": "knowledge", "livebench-math": "math", "livebench-*": "reasoning"}
    assert load_one(tmp_path, row(1, category=value), category_map=category_map).category == category


def test_null_or_absent_category_and_human_score_are_none(tmp_path: Path) -> None:
    item = load_one(tmp_path, row(1, category=None, human=None))
    assert (item.category, item.human_score) == (None, None)
    assert load_one(tmp_path, row(1)).category is None


@pytest.mark.parametrize("category", ["", 3, ["emotion"]])
def test_category_must_be_a_non_empty_string(tmp_path: Path, category: Any) -> None:
    assert "field 'category' must be a non-empty string" in bad_row(tmp_path, row(2, category=category))


@pytest.mark.parametrize(("human", "shown"), [(True, "True"), ("7", "'7'"), ([7], "[7]")])
def test_human_score_must_be_a_number(tmp_path: Path, human: Any, shown: str) -> None:
    assert f"field 'human' must be a finite number, got {shown}" in bad_row(tmp_path, row(2, human=human))


def test_bad_pointwise_rows_are_skipped_and_listed(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1), row(2, human=False), row(3, category=""), row(4)])
    loaded = load_items(pointwise_cfg(), path, on_bad_row=OnBadRow.skip, shape=POINTWISE)
    assert [r.id for r in loaded.refs] == ["p1", "p4"]
    assert [s.where for s in loaded.skipped] == [f"{path}:2", f"{path}:3"]


def test_refs_carry_the_labels(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1, tags=["a", "b"], category="c", human=3)])
    [ref] = load_items(pointwise_cfg(), path, shape=POINTWISE).refs
    assert (ref.id, ref.tags, ref.category, ref.human_score, ref.gold) == ("p1", ("a", "b"), "c", 3.0, None)


# --- check_systems -----------------------------------------------------------------------------------


def test_pairwise_needs_ours_and_baseline() -> None:
    with pytest.raises(DatasetError, match=r"dataset tiny_pointwise: a pairwise prompt needs dataset\.ours and "
                                           r"dataset\.baseline"):
        check_systems(pointwise_cfg(), Shape(mode=PromptMode.pairwise))


def test_pointwise_without_candidate_needs_a_generator(tmp_path: Path) -> None:
    cfg = pointwise_cfg(candidate=None)
    with pytest.raises(DatasetError, match=r"dataset tiny_pointwise: a pointwise prompt needs dataset\.candidate"):
        check_systems(cfg, POINTWISE)
    check_systems(cfg, GENERATED)  # a generator writes it: fine
    with pytest.raises(DatasetError, match=r"needs dataset\.candidate"):  # checked before the file is read
        load_items(cfg, tmp_path / "does_not_exist.jsonl", shape=POINTWISE)


def test_pointwise_does_not_need_pairwise_systems() -> None:
    check_systems(pointwise_cfg(ours=None, baseline=None), POINTWISE)


# --- shipped data ------------------------------------------------------------------------------------


def test_agent_examples_json_and_jsonl_load_to_identical_items() -> None:
    from_json = load_shipped("agent_examples").items
    from_jsonl = load_shipped("agent_examples_jsonl").items
    assert len(from_json) == len(from_jsonl) == 12

    def content(item: Item) -> tuple[Any, ...]:
        return item.id, dict(item.variables), item.candidates, item.gold, item.tags, item.category, item.human_score

    assert [content(i) for i in from_json] == [content(i) for i in from_jsonl]
    assert from_json[0].source.endswith("agent_examples.json[row 0]")
    assert from_jsonl[0].source.endswith("agent_examples.jsonl:1")


def test_agent_examples_fields() -> None:
    items = {i.id: i for i in load_shipped("agent_examples").items}
    first = items["agent-001"]
    assert first.tags == ("summarization", "retrieval")
    assert first.candidates[0].system == "agent" and first.candidates[0].text
    assert first.variables["expected_tool_calls"] == ""  # no mcp_calls_expected: tool_usage does not apply
    assert first.variables["success_criteria"].startswith("- States the root cause")
    tools = json.loads(items["agent-002"].variables["expected_tool_calls"])
    assert tools[0]["tool"] == "billing.refund_charge"
    assert sum(bool(i.variables["expected_tool_calls"]) for i in items.values()) == 4


def test_agent_examples_load_without_outputs_for_a_generator() -> None:
    items = load_shipped("agent_examples", GENERATED).items
    assert len(items) == 12
    assert all(i.candidates == () for i in items)


def test_reply_quality_loads_with_categories_and_human_scores() -> None:
    loaded = load_shipped("reply_quality")
    refs = {r.id: r for r in loaded.refs}
    assert len(refs) == 16
    assert {r.category for r in refs.values()} == {"emotion", "casual", "question", "support"}
    assert all(isinstance(r.human_score, float) for r in refs.values())
    assert (refs["reply-001"].category, refs["reply-001"].human_score) == ("emotion", 2.0)
    assert refs["reply-002"].human_score == 9.5
    first = loaded.items[0]
    assert first.variables["conversation"] == "assistant: hey! how was your weekend?"
    assert first.candidates[0].system == "reply"
    assert first.candidates[0].text.startswith("I understand that you are going through")
    assert loaded.items[1].variables["notes"] == ""
    assert loaded.items[1].variables["conversation"].count("\n") == 3  # four turns, one per line


@pytest.mark.parametrize("literal", ["NaN", "Infinity"])
def test_non_finite_human_score_is_rejected(tmp_path: Path, literal: str) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(row(1)) + "\n" + f'{{"id": "p2", "input": "q", "output": "a", "human": {literal}}}\n',
                    encoding="utf-8")
    with pytest.raises(DatasetError, match=rf"^{path}:2: field 'human'"):
        load_items(pointwise_cfg(), path, shape=POINTWISE)


def test_annotator_fields_are_mapped_like_gold_and_kept_per_item(tmp_path: Path) -> None:
    rows = [{"id": "a", "q": "x", "o": "1", "b": "2", "g": "1", "h1": "1", "h2": "0", "h3": None},
            {"id": "b", "q": "y", "o": "1", "b": "2", "g": "2", "h1": "2", "h2": "7", "h3": "2"}]
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    cfg = DatasetConfig(name="d", path=str(path), id_field="id", variables={"instruction": "q"},
                        ours=SystemConfig(name="ours", field="o"), baseline=SystemConfig(name="base", field="b"),
                        gold_field="g", gold_map={"0": "tie", "1": "ours", "2": "base"},
                        annotator_fields=["h1", "h2", "h3"])
    with pytest.raises(DatasetError, match=r"d\.jsonl:2: gold value '7' is not in dataset.gold_map"):
        load_items(cfg, path)
    loaded = load_items(cfg, path, on_bad_row=OnBadRow.skip)
    assert [r.annotations for r in loaded.refs] == [("ours", "tie", None)]
