"""Property-based tests (hypothesis): no input crashes the dataset loader or a parser, and a parser never returns a
label the rubric does not offer (nor a score outside a criterion's range)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.core.config import DatasetConfig, SystemConfig
from runner.core.errors import DatasetError
from runner.core.types import Criterion
from runner.inputs.datasets import load_items
from runner.judging.parsers.json_objects import json_objects
from runner.judging.parsers.labels import parse_verdict
from runner.judging.parsers.scores import parse_scores

RUBRICS = Path(__file__).resolve().parents[2] / "conf" / "rubric"
# Fast enough for `make test-fast`: a few hundred examples each, no per-example deadline (a cold import may be slow).
FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Pieces of real judge output, so generated texts reach the parsers' matching paths, not only their "no match" one.
FRAGMENTS = ["[[A]]", "[[B]]", "[[C]]", "[[A>>B]]", "[[B>A]]", "[[A=B]]", "Output (a)", "Output (b)", "Output (c)",
             '{"winner": "A"}', '{"winner": "tie"}', '{"winner": 3}', '{"accuracy": 4, "completeness": 2}',
             '{"score": 11}', '{"score": "7"}', "```json\n", "```", "{", "}", '"', ":", ",", "\n", " ", "1", "2", "3",
             "NaN", "1e309", "-0", "A", "B", "tie", "\\u0000", "\ud800", "\x00", "é"]
judge_text = st.one_of(
    st.none(),
    st.text(max_size=200),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=25).map("".join),
)


def _rubric(name: str) -> dict[str, Any]:
    """A shipped rubric with its defaults list applied (agent_output_strict extends agent_output)."""
    own = yaml.safe_load((RUBRICS / f"{name}.yaml").read_text())
    merged: dict[str, Any] = {}
    for entry in own.pop("defaults", ["_self_"]):
        merged.update(own if entry == "_self_" else _rubric(entry))
    return merged


def _rubrics() -> list[tuple[str, dict[str, Any]]]:
    return [(p.stem, _rubric(p.stem)) for p in sorted(RUBRICS.glob("*.yaml"))]


LABEL_RUBRICS = [(name, r) for name, r in _rubrics() if not r.get("criteria")]
SCORE_RUBRICS = [(name, r) for name, r in _rubrics() if r.get("criteria")]


def _criteria(rubric: dict[str, Any]) -> list[Criterion]:
    return [Criterion(name=c["name"], min=float(c.get("min", 1.0)), max=float(c.get("max", 5.0)),
                      aliases=tuple(c.get("aliases", ()))) for c in rubric["criteria"]]


@pytest.mark.parametrize(("name", "rubric"), LABEL_RUBRICS, ids=[n for n, _ in LABEL_RUBRICS])
@FAST
@given(text=judge_text)
def test_a_label_parser_never_crashes_and_returns_only_offered_labels(name, rubric, text) -> None:
    labels = rubric.get("labels", ["A", "B", "tie"])
    assert "parser" in rubric
    for node in ("parser", "synthesis_parser"):
        if node in rubric:
            verdict = parse_verdict(rubric[node]["name"], text, labels, rubric[node].get("params") or {})
            assert verdict.label is None or verdict.label in labels
            assert (verdict.label is None) == (verdict.reason is not None)


@pytest.mark.parametrize(("name", "rubric"), SCORE_RUBRICS, ids=[n for n, _ in SCORE_RUBRICS])
@FAST
@given(text=judge_text)
def test_a_score_parser_never_crashes_and_scores_only_within_range(name, rubric, text) -> None:
    criteria = _criteria(rubric)
    verdict = parse_scores(rubric["parser"]["name"], text, criteria, rubric["parser"].get("params") or {})
    if verdict.reason is None:
        assert set(verdict.scores) == {c.name for c in criteria}
    bounds = {c.name: (c.min, c.max) for c in criteria}
    for key, score in verdict.scores.items():
        assert math.isfinite(score) and bounds[key][0] <= score <= bounds[key][1]


@FAST
@given(text=judge_text.filter(lambda t: t is not None))
def test_json_objects_returns_only_objects(text) -> None:
    assert all(isinstance(obj, dict) for obj in json_objects(text))


# Ordinary text, and text around the UTF-16 surrogate range: json.dumps writes a lone surrogate as "\ud800", which
# json.loads reads back into a str that cannot be encoded (and sent).
texts = st.one_of(st.text(max_size=20),
                  st.text(st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010, exclude_categories=()), max_size=3))
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | texts,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                          max_size=3),
                           max_leaves=8)
rows = st.one_of(
    json_values,
    st.fixed_dictionaries({"id": json_values, "input": json_values, "out_x": json_values, "out_y": json_values}),
    st.fixed_dictionaries({"id": st.text(max_size=5), "input": texts, "out_x": texts, "out_y": texts}),
)
raw_lines = st.one_of(rows.map(lambda r: json.dumps(r, allow_nan=True)), st.text(max_size=60),
                      st.binary(max_size=40).map(lambda b: b.decode("latin-1")))
DATASET = DatasetConfig(name="tiny", path="unused", id_field="id", variables={"instruction": "input"},
                        ours=SystemConfig(name="model_x", field="out_x"),
                        baseline=SystemConfig(name="model_y", field="out_y"))


@FAST
@given(lines=st.lists(raw_lines, min_size=1, max_size=6))
def test_the_dataset_loader_loads_sendable_text_or_names_the_place(tmp_path_factory, lines) -> None:
    path = tmp_path_factory.mktemp("d") / "d.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    try:
        loaded = load_items(DATASET, path)
    except DatasetError as exc:
        assert str(path) in str(exc)
        return
    for item in loaded.items:
        # whatever loads can be sent: every text encodes as UTF-8 (a lone surrogate never gets past the loader)
        texts = [item.id, *item.variables.values(), *(c.text for c in item.candidates)]
        for text in texts:
            assert isinstance(text, str)
            text.encode("utf-8")  # raises UnicodeEncodeError on a lone surrogate
