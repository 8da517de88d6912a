"""Unit tests for runner.run.outcome.table_rows: the MLflow results table of a large run is cut, results.jsonl
is not."""

from __future__ import annotations

from runner.core.types import JudgeRequest, JudgeResponse, Judgment, Order, Status, Verdict
from runner.run.outcome import table_rows


def judgment(n: int) -> Judgment:
    request = JudgeRequest(f"q{n}", 0, Order.AB, "judge", "0" * 64)
    return Judgment(request, JudgeResponse(text="[[A]]"), Verdict("A"), "ours", Status.SCORED)


def test_a_table_holds_at_most_limit_rows_and_reads_no_further() -> None:
    consumed = []

    def judgments():
        for n in range(10):
            consumed.append(n)
            yield judgment(n)

    rows = table_rows(judgments(), None, limit=3)
    assert [r["item_id"] for r in rows] == ["q0", "q1", "q2"]
    assert len(consumed) == 4  # one more, to know that the table was cut


def test_an_ensembles_rows_name_their_member() -> None:
    rows = table_rows([judgment(0), judgment(1)], ["gpt4", "chatgpt"], limit=10)
    assert [(r["judge"], r["item_id"], r["raw_response"]) for r in rows] == [("gpt4", "q0", "[[A]]"),
                                                                              ("chatgpt", "q1", "[[A]]")]
