"""Unit tests for runner.core.metric_names: every rename is in the docs (docs/outputs.md), and a value logged under
an old name is still found (gate.baseline_run against a run from before the rename)."""

from __future__ import annotations

import re
from pathlib import Path

from runner.core import metric_names

README = Path(__file__).resolve().parents[2] / "docs" / "outputs.md"  # "Renamed metrics", moved from README.md


def test_every_renamed_key_is_listed_in_the_docs_with_its_old_name() -> None:
    rows = set(re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|$", README.read_text(), flags=re.M))
    expected = set(metric_names.RENAMED.items()) | {(old + "<reason>", new + "<reason>")
                                                    for old, new in metric_names.RENAMED_PREFIXES.items()}
    expected |= {(f"ensemble/<method>/{old}", f"ensemble/<method>/{new}")
                 for old, new in metric_names.RENAMED_PER_METHOD.items()}
    assert expected <= rows


def test_a_value_logged_under_an_old_name_is_found_under_the_new_one() -> None:
    old_run = {"ci/average_overall_low": 6.5, "by_tag/easy/ci/pass_rate_high": 0.9, "parse_failures/no_label": 2.0}
    assert metric_names.lookup(old_run, "score/mean_ci_low") == 6.5
    assert metric_names.lookup(old_run, "by_tag/easy/pass/rate_ci_high") == 0.9
    assert metric_names.lookup(old_run, "judge/parse_failures/no_label") == 2.0
    assert metric_names.lookup(old_run, "score/mean") is None
    assert metric_names.lookup({"score/mean_ci_low": 1.0, "ci/average_overall_low": 0.0}, "score/mean_ci_low") == 1.0


def test_an_old_name_maps_to_its_new_one_and_a_current_name_to_none() -> None:
    assert metric_names.renamed_to("generation/cost_usd") == "cost/generation_usd"
    assert metric_names.renamed_to("by_category/math/ci/average_overall_high") == "by_category/math/score/mean_ci_high"
    assert metric_names.renamed_to("parse_failures/ambiguous") == "judge/parse_failures/ambiguous"
    assert metric_names.renamed_to("score/mean") is None and metric_names.renamed_to("judge/parse_failure_rate") is None


def test_a_win_rate_counts_ties_as_half_and_a_share_of_strict_wins_is_a_wins_share() -> None:
    """Issue 31 point 7: one name per number; runs logged before the rename are still read."""
    assert metric_names.renamed_to("verdict/win_rate_with_ties") == "verdict/win_rate"
    assert metric_names.renamed_to("verdict/ours_win_rate") == "verdict/ours_wins_share"
    assert metric_names.renamed_to("ensemble/majority_vote/ours_win_rate") == "ensemble/majority_vote/ours_wins_share"
    assert metric_names.renamed_to("ensemble/minus_best_member") is None
    old_run = {"verdict/win_rate_with_ties": 0.5556, "ensemble/dawid_skene/ours_win_rate": 0.3333}
    assert metric_names.lookup(old_run, "verdict/win_rate") == 0.5556
    assert metric_names.lookup(old_run, "ensemble/dawid_skene/ours_wins_share") == 0.3333
