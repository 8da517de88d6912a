"""The caps of runner.core.input_limits (docs/bring-your-own-data.md, "Limits on config and data files"): no false
refusal of what judgesweep ships or of ordinary anchors and merge keys; a JSONL row over a cap is one bad row at its
line (skipped under on_bad_row: skip), and the lines after it read on. The hostile files themselves, in a project:
tests/integration/test_hostile_files.py."""

from __future__ import annotations

import json

import pytest

from runner.core import locations
from runner.core.input_limits import UnsafeFile, check_yaml
from runner.inputs import rows
from runner.inputs.rows import RowError, read_rows


def test_every_packaged_yaml_file_passes():
    files = sorted(locations.PACKAGED_CONF.rglob("*.yaml"))
    assert len(files) > 20
    for path in files:
        check_yaml(path, path.read_text(encoding="utf-8"))


def test_anchors_and_merge_keys_within_the_cap_pass_and_a_repeated_key_is_named(tmp_path):
    path = tmp_path / "judge.yaml"
    check_yaml(path, "base: &base {a: 1, b: [1, 2]}\none:\n  <<: *base\n  a: 2\ntwo:\n  <<: *base\nthree: *base\n")
    with pytest.raises(UnsafeFile, match=r"judge.yaml:4: duplicate key 'a'"):
        check_yaml(path, "one:\n  a: 1\n  b: {a: 1}\n  a: 2\n")


def test_a_jsonl_row_over_a_cap_is_one_bad_row_at_its_line(tmp_path, monkeypatch):
    monkeypatch.setattr(rows, "MAX_LINE_BYTES", 300)
    good = json.dumps({"id": "a", "text": "x"})
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join([good, json.dumps({"id": "b", "text": "y" * 700}), '{"id": "c", "t": ' + "[" * 101
                               + "]" * 101 + "}", good]) + "\n")
    read = list(read_rows(path))
    assert [where for where, _ in read] == [f"{path}:{n}" for n in (1, 2, 3, 4)]
    assert read[0][1] == read[3][1] == {"id": "a", "text": "x"}  # the line after the long one reads whole
    assert isinstance(read[1][1], RowError) and "longer than 300 bytes" in str(read[1][1])
    assert isinstance(read[2][1], RowError) and "nested deeper than 100" in str(read[2][1])
