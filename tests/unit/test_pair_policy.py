"""The rubric's pair_error (runner.judging.pair_policy): ``drop`` leaves a pair with a failed order out of every
statistic and reports it; ``keep`` (the default) leaves the report as it was."""

from __future__ import annotations

import pytest

from runner.core.choices import PairError
from runner.core.errors import ConfigurationError
from runner.judging.pair_policy import apply_pair_error
from runner.modes.pairwise import report as pairwise_report
from runner.modes.pairwise.setup import check_pair_error
from tests.builders import AB, BA, both_orders, judgment, pairwise_cfg, refs, round_trips

pytestmark = pytest.mark.usefixtures("hydra_conf")


def test_the_shipped_fastchat_rubric_composes_with_its_token_table_and_drop_policy() -> None:
    cfg = pairwise_cfg("rubric=mtbench_fastchat")
    assert cfg.rubric.pair_error is PairError.drop
    assert cfg.rubric.parser.name == "verdict_tokens"
    assert list(cfg.rubric.parser.params["tokens"]) == ["[[A]]", "[[B]]", "[[C]]"]  # the order is the rule
    check_pair_error(cfg)  # order=both, one judge: accepted


def test_drop_leaves_the_failed_pair_out_and_reports_it() -> None:
    report, _ = pairwise_report.build(pairwise_cfg(), refs(gold=True), both_orders())
    keep_doc = report.to_json()
    typed, metrics = pairwise_report.build(pairwise_cfg("rubric=mtbench_fastchat"), refs(gold=True),
                                       both_orders())
    drop_doc = typed.to_json()
    assert "pair_errors" not in keep_doc  # keep writes summary.json as before
    # i2's second repeat: a tie in order AB, an unreadable answer in order BA
    assert drop_doc["pair_errors"] == {"policy": "drop", "dropped_pairs": 1, "dropped_judgments": 2,
                                       "dropped_items": ["i2"]}
    assert drop_doc["gold"]["n_pairs"] == keep_doc["gold"]["n_pairs"] - 1
    assert drop_doc["aggregated_results"]["i2"]["verdicts"] == ["ours", "ours"]  # its first repeat still counts
    assert keep_doc["aggregated_results"]["i2"]["verdicts"] == ["ours", "ours", "tie"]
    assert metrics["pair_errors/dropped_pairs"] == 1.0
    assert typed.pair_errors is not None and typed.pair_errors.dropped_items == ("i2",)
    round_trips(drop_doc)


def test_drop_takes_every_stage_of_a_failed_pair_and_nothing_else() -> None:
    failed = [judgment("i0", AB, "A"), judgment("i0", BA, None), judgment("i0", BA, "B", stage="synthesis")]
    fine = [judgment("i1", AB, "A"), judgment("i1", BA, "B")]
    kept, dropped = apply_pair_error(PairError.drop, failed + fine)
    assert list(kept) == failed + fine
    # the synthesis round replaced the unreadable BA answer, so i0 has a verdict in both orders: nothing dropped
    assert dropped is not None and dropped.pairs == 0
    failed = [judgment("i0", AB, "A", stage="synthesis"), judgment("i0", AB, "A"), judgment("i0", BA, None)]
    kept, dropped = apply_pair_error(PairError.drop, failed + fine)
    assert list(kept) == fine
    assert dropped is not None and (dropped.pairs, dropped.judgments, dropped.items) == (1, 3, ("i0",))
    everything = failed + fine
    assert apply_pair_error(PairError.keep, everything) == (everything, None)


@pytest.mark.parametrize(("overrides", "message"), [
    (("rubric=mtbench_fastchat", "order=swap_random"), "set order=both"),
    (("rubric=mtbench_fastchat", "judge=ensemble"), "applies to a single judge"),
])
def test_drop_is_refused_where_there_are_no_pairs_to_drop(overrides: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        check_pair_error(pairwise_cfg(*overrides))
