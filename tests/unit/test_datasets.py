"""Unit tests for runner.inputs.datasets: real JSONL/JSON files in tmp_path, every error names file and line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from runner.core.choices import OnBadRow
from runner.core.config import DatasetConfig, SystemConfig
from runner.core.errors import DatasetError
from runner.core.types import TIE
from runner.inputs.datasets import load_items, resolve_path
from runner.inputs.splits import check_split, split_of

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def dataset_cfg(**overrides: object) -> DatasetConfig:
    """A pairwise mapping like conf/dataset/llmbar_natural.yaml, with keyword overrides."""
    fields: dict[str, object] = {
        "name": "tiny",
        "path": "unused",
        "id_field": "id",
        "variables": {"instruction": "input"},
        "ours": SystemConfig(name="model_x", field="out_x"),
        "baseline": SystemConfig(name="model_y", field="out_y"),
        "gold_field": None,
        "gold_map": {},
    }
    fields.update(overrides)
    return DatasetConfig(**fields)  # type: ignore[arg-type]


def row(i: int, **extra: object) -> dict[str, object]:
    return {"id": f"r{i}", "input": f"question {i}", "out_x": f"x answer {i}", "out_y": f"y answer {i}", **extra}


def write_jsonl(path: Path, lines: list[object]) -> Path:
    """Write each entry as one line: dicts as JSON, strings verbatim (to plant malformed lines)."""
    text = "".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines)
    path.write_text(text, encoding="utf-8")
    return path


# --- good rows -------------------------------------------------------------------------------------


def test_jsonl_rows_become_items(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1), row(2), row(3)])
    items = load_items(dataset_cfg(), path).items
    assert [it.id for it in items] == ["r1", "r2", "r3"]
    first = items[0]
    assert dict(first.variables) == {"instruction": "question 1"}
    assert [(c.system, c.text) for c in first.candidates] == [("model_x", "x answer 1"), ("model_y", "y answer 1")]
    assert first.gold is None
    assert first.source == f"{path}:1"


def test_blank_lines_are_skipped_and_sources_keep_real_line_numbers(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1), "", "   ", row(2)])
    items = load_items(dataset_cfg(), path).items
    assert [it.source for it in items] == [f"{path}:1", f"{path}:4"]


def test_text_is_kept_verbatim_including_surrounding_whitespace(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1, input="  padded\n", out_x="\tx\n\n")])
    item = load_items(dataset_cfg(), path).items[0]
    assert item.variables["instruction"] == "  padded\n"
    assert item.candidates[0].text == "\tx\n\n"


def test_without_id_field_the_id_is_the_row_number(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1), row(2)])
    items = load_items(dataset_cfg(id_field=None), path).items
    assert [it.id for it in items] == ["1", "2"]


def test_numeric_id_and_numeric_variable_become_strings(tmp_path: Path) -> None:
    # issue 17: a number as the judged text is an error (test_a_number_as_the_judged_text...); a variable may be one
    path = write_jsonl(tmp_path / "d.jsonl", [row(1, id=7, input=1.5)])
    item = load_items(dataset_cfg(), path).items[0]
    assert item.id == "7"
    assert item.variables["instruction"] == "1.5"


@pytest.mark.parametrize("value", [{"a": 1, "b": ["x", "é"]}, [1, "two", None]])
def test_dict_and_list_fields_become_json_text(tmp_path: Path, value: object) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1, out_x=value)])
    text = load_items(dataset_cfg(), path).items[0].candidates[0].text
    assert isinstance(text, str)
    assert json.loads(text) == value
    assert "\\u00e9" not in text  # non-ASCII stays readable for the judge


def test_json_list_file(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text(json.dumps([row(1), row(2)]), encoding="utf-8")
    items = load_items(dataset_cfg(), path).items
    assert [it.id for it in items] == ["r1", "r2"]
    assert items[1].source == f"{path}[row 1]"


def test_json_examples_object(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"meta": {"v": 1}, "examples": [row(1), row(2), row(3)]}), encoding="utf-8")
    items = load_items(dataset_cfg(), path).items
    assert [it.id for it in items] == ["r1", "r2", "r3"]


def test_json_object_without_examples_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"rows": [row(1)]}), encoding="utf-8")
    with pytest.raises(DatasetError, match="examples") as info:
        load_items(dataset_cfg(), path)
    assert str(path) in str(info.value)


def test_max_items_keeps_the_first_n(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(i) for i in range(1, 6)])
    items = load_items(dataset_cfg(), path, max_items=2).items
    assert [it.id for it in items] == ["r1", "r2"]


def test_max_items_stops_before_reading_later_bad_rows(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1), row(2), "{not json"])
    assert len(load_items(dataset_cfg(), path, max_items=2).items) == 2


@pytest.mark.parametrize("bad", [0, -1])
def test_max_items_below_one_is_an_error(tmp_path: Path, bad: int) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1), row(2)])
    with pytest.raises(DatasetError, match="max_items"):
        load_items(dataset_cfg(), path, max_items=bad)


# --- malformed input: the message names file, line and field ---------------------------------------


def test_malformed_jsonl_line_names_path_and_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1), "", '{"id": "r3", "input": ', row(4)])
    with pytest.raises(DatasetError) as info:
        load_items(dataset_cfg(), path)
    assert f"{path}:3" in str(info.value)


def test_malformed_json_file_names_path(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text('[\n{"id": "r1"},\n{oops}\n]', encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        load_items(dataset_cfg(), path)
    assert f"{path}:3" in str(info.value)


@pytest.mark.parametrize("missing", ["id", "input", "out_x", "out_y"])
def test_missing_field_names_field_and_line(tmp_path: Path, missing: str) -> None:
    bad = row(2)
    del bad[missing]
    path = write_jsonl(tmp_path / "d.jsonl", [row(1), bad])
    with pytest.raises(DatasetError) as info:
        load_items(dataset_cfg(), path)
    message = str(info.value)
    assert f"{path}:2" in message
    assert repr(missing) in message


@pytest.mark.parametrize("value", [True, False, None])
@pytest.mark.parametrize("fld", ["input", "out_y"])
def test_non_text_value_names_field(tmp_path: Path, fld: str, value: object) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1), row(2), row(3, **{fld: value})])
    with pytest.raises(DatasetError) as info:
        load_items(dataset_cfg(), path)
    message = str(info.value)
    assert f"{path}:3" in message
    assert repr(fld) in message


def test_row_that_is_not_an_object_is_rejected(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1), ["r2", "q", "x", "y"]])
    with pytest.raises(DatasetError, match="expected a JSON object") as info:
        load_items(dataset_cfg(), path)
    assert f"{path}:2" in str(info.value)


def test_duplicate_ids_name_both_lines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1), row(2), row(1)])
    with pytest.raises(DatasetError, match="duplicate id 'r1'") as info:
        load_items(dataset_cfg(), path)
    assert f"{path}:3" in str(info.value)
    assert f"{path}:1" in str(info.value)


def test_missing_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "nope.jsonl"
    with pytest.raises(DatasetError, match="not found") as info:
        load_items(dataset_cfg(), path)
    assert str(path) in str(info.value)


def test_empty_file_is_rejected(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", ["", "  "])
    with pytest.raises(DatasetError, match="no rows"):
        load_items(dataset_cfg(), path)


@pytest.mark.parametrize(
    ("ours", "baseline"), [("same", "same"), (TIE, "model_y"), ("model_x", TIE)]
)
def test_system_names_must_differ_and_not_be_tie(tmp_path: Path, ours: str, baseline: str) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1)])
    cfg = dataset_cfg(ours=SystemConfig(name=ours, field="out_x"), baseline=SystemConfig(name=baseline, field="out_y"))
    with pytest.raises(DatasetError, match="system names"):
        load_items(cfg, path)


# --- gold labels -----------------------------------------------------------------------------------

GOLD_MAP = {"1": "model_x", "2": "model_y", "0": TIE}


def test_gold_map_maps_raw_values_including_ints(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1, label=1), row(2, label="2"), row(3, label=0)])
    items = load_items(dataset_cfg(gold_field="label", gold_map=GOLD_MAP), path).items
    assert [it.gold for it in items] == ["model_x", "model_y", TIE]


def test_unknown_gold_value_names_value_and_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1, label=1), row(2, label=3)])
    with pytest.raises(DatasetError, match="gold value '3'") as info:
        load_items(dataset_cfg(gold_field="label", gold_map=GOLD_MAP), path)
    assert f"{path}:2" in str(info.value)


def test_gold_map_target_must_be_a_system_or_tie(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1, label=1)])
    with pytest.raises(DatasetError, match="model_z"):
        load_items(dataset_cfg(gold_field="label", gold_map={"1": "model_z"}), path)


def test_gold_without_map_must_be_a_system_name(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1, label="model_y"), row(2, label=TIE), row(3, label="x")])
    with pytest.raises(DatasetError) as info:
        load_items(dataset_cfg(gold_field="label"), path)
    assert f"{path}:3" in str(info.value)
    items = load_items(dataset_cfg(gold_field="label"), path, max_items=2).items
    assert [it.gold for it in items] == ["model_y", TIE]


def test_missing_gold_field_is_named(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1)])
    with pytest.raises(DatasetError, match="'label'") as info:
        load_items(dataset_cfg(gold_field="label", gold_map=GOLD_MAP), path)
    assert f"{path}:1" in str(info.value)


# --- paths -----------------------------------------------------------------------------------------


def test_pkg_path_finds_shipped_llmbar_natural(tmp_path: Path) -> None:
    path = resolve_path("pkg://runner/data/llmbar/natural.jsonl", tmp_path)
    assert path.is_file()
    assert path == PROJECT_ROOT / "runner" / "data" / "llmbar" / "natural.jsonl"


def test_relative_path_is_under_root_and_absolute_path_is_kept(tmp_path: Path) -> None:
    assert resolve_path("data/x.jsonl", tmp_path) == tmp_path / "data" / "x.jsonl"
    absolute = tmp_path / "abs.jsonl"
    assert resolve_path(str(absolute), Path("/elsewhere")) == absolute


def test_shipped_llmbar_natural_loads_with_its_config() -> None:
    cfg = dataset_cfg(
        name="llmbar_natural",
        ours=SystemConfig(name="output_1", field="output_1"),
        baseline=SystemConfig(name="output_2", field="output_2"),
        gold_field="label",
        gold_map={"1": "output_1", "2": "output_2"},
    )
    items = load_items(cfg, resolve_path("pkg://runner/data/llmbar/natural.jsonl", PROJECT_ROOT)).items
    assert len(items) == 100
    assert items[0].id == "natural-000"
    assert items[-1].id == "natural-099"
    assert {it.gold for it in items} == {"output_1", "output_2"}


# --- on_bad_row: skip ------------------------------------------------------------------------------


def test_error_mode_returns_no_skipped_rows(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1), row(2)])
    assert load_items(dataset_cfg(), path).skipped == ()


def test_skip_mode_skips_wrong_types_unknown_gold_and_non_objects(tmp_path: Path) -> None:
    lines = [row(1, label=1), row(2, label=9), row(3, label=2, out_x=True), ["r4"], row(5, label=0)]
    path = write_jsonl(tmp_path / "d.jsonl", lines)
    loaded = load_items(dataset_cfg(gold_field="label", gold_map=GOLD_MAP), path, on_bad_row=OnBadRow.skip)
    assert [it.id for it in loaded.items] == ["r1", "r5"]
    assert [(s.where, s.reason.split(" ")[0]) for s in loaded.skipped] == [
        (f"{path}:2", "gold"),
        (f"{path}:3", "field"),
        (f"{path}:4", "expected"),
    ]
    assert "'9'" in loaded.skipped[0].reason
    assert "'out_x'" in loaded.skipped[1].reason


def test_skip_mode_max_items_counts_loaded_items_only(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1), "{bad", row(2, input=None), row(3), row(4), "{bad"])
    loaded = load_items(dataset_cfg(), path, max_items=2, on_bad_row=OnBadRow.skip)
    assert [it.id for it in loaded.items] == ["r1", "r3"]
    assert [s.where for s in loaded.skipped] == [f"{path}:2", f"{path}:3"]


def test_skip_mode_keeps_the_first_of_duplicate_ids(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1, out_x="first"), row(1, out_x="second")])
    loaded = load_items(dataset_cfg(), path, on_bad_row=OnBadRow.skip)
    assert [it.candidates[0].text for it in loaded.items] == ["first"]
    assert loaded.skipped[0].reason == f"duplicate id 'r1' (first at {path}:1)"


def test_skip_mode_with_no_good_row_is_an_error_naming_the_first_bad_one(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", ["{bad", row(2, out_y=None)])
    with pytest.raises(DatasetError, match="every row is bad") as info:
        load_items(dataset_cfg(), path, on_bad_row=OnBadRow.skip)
    assert f"{path}:1" in str(info.value)
    assert "2 skipped" in str(info.value)


def test_skip_mode_json_file_names_row_indexes(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"examples": [row(1), {"id": "r2"}, row(3)]}), encoding="utf-8")
    loaded = load_items(dataset_cfg(), path, on_bad_row=OnBadRow.skip)
    assert [it.id for it in loaded.items] == ["r1", "r3"]
    assert [s.where for s in loaded.skipped] == [f"{path}[row 1]"]


@pytest.mark.parametrize("text", ['{"rows": []}', '"just a string"', "[\n{oops}\n]"])
def test_a_file_that_is_not_a_list_of_rows_is_an_error_even_in_skip_mode(tmp_path: Path, text: str) -> None:
    path = tmp_path / "d.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        load_items(dataset_cfg(), path, on_bad_row=OnBadRow.skip)
    assert str(path) in str(info.value)


def test_a_badly_encoded_jsonl_line_is_one_bad_row(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(json.dumps(row(1)).encode() + b'\n{"id": "r2", "input": "\xff"}\n' + json.dumps(row(3)).encode())
    with pytest.raises(DatasetError, match=f"{path}:2: not valid UTF-8"):
        load_items(dataset_cfg(), path)
    loaded = load_items(dataset_cfg(), path, on_bad_row=OnBadRow.skip)
    assert [it.id for it in loaded.items] == ["r1", "r3"]
    assert [s.where for s in loaded.skipped] == [f"{path}:2"]


def test_crlf_line_endings_load(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"\r\n".join(json.dumps(row(i)).encode() for i in (1, 2)) + b"\r\n")
    assert [it.source for it in load_items(dataset_cfg(), path).items] == [f"{path}:1", f"{path}:2"]


def test_loaded_dataset_keeps_only_refs_and_streams_items_again(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1), "{bad", row(3), row(4)])
    loaded = load_items(dataset_cfg(), path, max_items=2, on_bad_row=OnBadRow.skip)
    assert [r.id for r in loaded.refs] == [i.id for i in loaded.iter_items()]
    assert [r.source for r in loaded.refs] == [f"{path}:1", f"{path}:3"]
    assert not any(hasattr(r, "candidates") for r in loaded.refs)  # no texts are held
    assert list(loaded.iter_items()) == list(loaded.iter_items())  # each pass re-reads the file


# --- the seeded dev/test split (dataset.split) ---------------------------------------------------------


def _split_cfg(**kw) -> DatasetConfig:
    return DatasetConfig(name="s", path="x", **kw)


def test_split_is_deterministic_disjoint_complete_and_near_its_fraction() -> None:
    ids = [f"item-{n}" for n in range(2000)]
    cfg = _split_cfg(split_test_fraction=0.3, split_seed=7)
    first = [split_of(i, cfg) for i in ids]
    assert first == [split_of(i, cfg) for i in ids]  # same seed, same split, in any process
    assert set(first) == {"dev", "test"}
    assert abs(first.count("test") / len(ids) - 0.3) < 0.04
    other = [split_of(i, _split_cfg(split_test_fraction=0.3, split_seed=8)) for i in ids]
    assert other != first  # another seed, another split


@pytest.mark.parametrize(("kw", "message"), [({"split": "train"}, "dataset.split='train' is not one of"),
                                              ({"split_test_fraction": 1.0}, "must be between 0 and 1")])
def test_bad_split_settings_are_refused(kw: dict, message: str) -> None:
    with pytest.raises(DatasetError, match=re.escape(message)):
        check_split(_split_cfg(**kw))


def test_load_items_splits_a_file_into_disjoint_complete_dev_and_test_whatever_the_row_order(tmp_path: Path) -> None:
    rows = [row(i) for i in range(200)]
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    shuffled = write_jsonl(tmp_path / "shuffled.jsonl", rows[::-1])

    def ids(split: str | None, file: Path = path, max_items: int | None = None, **kw: object) -> list[str]:
        return [r.id for r in load_items(dataset_cfg(split=split, split_seed=3, **kw), file, max_items).refs]

    dev, test = ids("dev"), ids("test")
    assert set(dev).isdisjoint(test) and sorted(dev + test) == sorted(ids(None))  # disjoint and complete
    assert dev == [i for i in ids(None) if i in set(dev)]  # file order kept
    assert 80 <= len(test) <= 120  # split_test_fraction 0.5
    assert set(ids("test", shuffled)) == set(test)  # by id, not by position
    assert ids("dev", max_items=5) == dev[:5]  # max_items caps the split, not the file
    assert 25 <= len(ids("test", split_test_fraction=0.2)) <= 55


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.5])
def test_split_fraction_outside_zero_one_is_refused_when_loading(tmp_path: Path, fraction: float) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1)])
    with pytest.raises(DatasetError, match=re.escape(f"dataset.split_test_fraction={fraction}")):
        load_items(dataset_cfg(split="dev", split_test_fraction=fraction), path)


# --- text that cannot be sent (issue 17) ----------------------------------------------------------


@pytest.mark.parametrize("escaped", ["\\ud800", "tail \\udfff", "\\ud83d alone"])
@pytest.mark.parametrize("fld", ["input", "out_x"])
def test_lone_surrogate_is_an_error_naming_file_line_and_field(tmp_path: Path, fld: str, escaped: str) -> None:
    bad = json.dumps(row(2)).replace(f'"{fld}": "', f'"{fld}": "{escaped}', 1)
    path = write_jsonl(tmp_path / "d.jsonl", [row(1), bad, row(3)])
    with pytest.raises(DatasetError) as info:
        load_items(dataset_cfg(), path)
    assert f"{path}:2" in str(info.value)
    assert repr(fld) in str(info.value) and "surrogate" in str(info.value)


def test_lone_surrogate_in_a_json_file_names_the_row(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text("[" + json.dumps(row(1)) + ", " + json.dumps(row(2)).replace('"q', '"\\udc00q') + "]")
    with pytest.raises(DatasetError) as info:
        load_items(dataset_cfg(), path)
    assert f"{path}[row 1]" in str(info.value) and "'input'" in str(info.value)


def test_escaped_surrogate_pair_is_one_valid_character(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [json.dumps(row(1)).replace('"x answer', '"\\ud83d\\ude00 x answer')])
    assert load_items(dataset_cfg(), path).items[0].candidates[0].text.startswith("\U0001f600 x answer")


def test_lone_surrogate_is_skipped_and_listed_under_skip(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(1), json.dumps(row(2)).replace('"q', '"\\ud800q')])
    loaded = load_items(dataset_cfg(), path, on_bad_row=OnBadRow.skip)
    assert [r.id for r in loaded.refs] == ["r1"]
    assert loaded.skipped[0].where == f"{path}:2" and "surrogate" in loaded.skipped[0].reason


@pytest.mark.parametrize("value", [42, 1.5, -0.0])
def test_a_number_as_the_judged_text_names_field_and_line(tmp_path: Path, value: object) -> None:
    # a number in a candidate field was converted to text on db5e2c4 and judged
    path = write_jsonl(tmp_path / "d.jsonl", [row(1), row(2, out_y=value)])
    with pytest.raises(DatasetError) as info:
        load_items(dataset_cfg(), path)
    assert f"{path}:2" in str(info.value)
    expected = ("field 'out_y' must be a JSON string (the judged text) or a JSON object or list, "
                f"got {type(value).__name__}")
    assert expected in str(info.value)
