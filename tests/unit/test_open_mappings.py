"""Overrides under the open mappings (runner.run.open_mappings; issue 44, point 6): ``++`` added, nothing else
touched."""

from runner.run.open_mappings import opened


def test_only_plain_overrides_under_an_open_mapping_are_opened() -> None:
    given = ["rubric.category_weights.casual.naturalness=0.6", "judge.weights.a=3", "+rubric.category_weights.x.y=1",
             "~judge.weights.b", "rubric.pass_threshold=3", "rubric=reply_quality", "--config-dir", "conf", "-m"]
    assert opened(given) == ["++rubric.category_weights.casual.naturalness=0.6", "++judge.weights.a=3", *given[2:]]
