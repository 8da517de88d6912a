"""Unit tests for runner.core.judgments.Judgments: a run's judgments in columns, read back equal to what went in."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from runner.core.judgments import Judgments
from runner.core.types import JudgeRequest, JudgeResponse, Judgment, Order, Status, Verdict
from runner.judging.aggregation import final_judgments


def journaled(item_id: str = "i1", repeat: int = 0, order: Order | None = Order.AB, stage: str = "judge",
              label: str | None = "A", winner: str | None = "ours", status: Status = Status.SCORED,
              **response: object) -> Judgment:
    """A judgment as the executor keeps it once journaled: no text, no messages hash, its line's offset."""
    fields: dict = {"text": None, "finish_reason": "stop", "prompt_tokens": 1233, "completion_tokens": 2,
                    "cost_usd": None, "latency_s": 0.84409, "journal_at": 4096, **response}
    reason = None if status is Status.SCORED else "no_verdict: nothing matched"
    return Judgment(JudgeRequest(item_id, repeat, order, stage, ""), JudgeResponse(**fields),
                    Verdict(label=label if reason is None else None, reason=reason),
                    winner if reason is None else None, status)


WHOLE = [  # judgments the columns cannot hold exactly: kept as they are
    Judgment(JudgeRequest("i2", 0, Order.BA, "judge", "ab" * 32), JudgeResponse(text="[[B]]", latency_s=0.5),
             Verdict(label="B"), "ours", Status.SCORED),  # its text and hash still in memory
    Judgment(JudgeRequest("i3", 1, None, "judge", ""), JudgeResponse(text=None, error_type="Timeout", error="slow"),
             Verdict(label=None, reason="call_failed: Timeout"), None, Status.ERROR),
    Judgment(JudgeRequest("i4", 0, None, "judge", ""), JudgeResponse(text=None, journal_at=7, latency_s=1.0),
             Verdict(label=None, scores=MappingProxyType({"accuracy": 4.0}), extras=MappingProxyType({"why": "ok"})),
             None, Status.SCORED, score=4.0),
    journaled(latency_s=1),  # an int where a float belongs: its type is kept too
    journaled(cost_usd=float("nan")),
    journaled(paid=2),  # a malformed answer sent again (judge.retry_malformed): paid for twice
    journaled(repaid=1),  # sent by an earlier process of the run, whose answer never reached its journal
    journaled(notes=("substituted: 1 lone surrogate(s) in the text replaced by U+FFFD",)),  # kept with a note
    journaled(tokens_known=False, prompt_tokens=0, completion_tokens=0),  # usage that was not a count
]
COMPACT = [
    journaled(),
    journaled("i1", 0, Order.BA, label="B", winner="ours"),
    journaled("i1", 1, Order.AB, label="tie", winner="tie", cost_usd=0.00042, journal_at=None),
    journaled("i2", 0, Order.AB, status=Status.UNSCORED, label=None, winner=None),
    journaled("i2", 0, Order.BA, stage="synthesis", source="cache", attempts=0, rate_limited=2),
]


def test_every_judgment_reads_back_equal_and_of_the_same_types() -> None:
    appended = [*COMPACT, *WHOLE, *COMPACT]
    store = Judgments(appended)
    assert len(store) == len(appended)
    assert list(store) == appended and store == appended
    def types(j: Judgment) -> list[type]:
        return [type(v) for v in (j.response.latency_s, j.response.cost_usd, j.score, j.response.journal_at)]

    assert [types(j) for j in store] == [types(j) for j in appended]
    assert store[0] == appended[0] and store[-1] == appended[-1] and store[2:4] == appended[2:4]
    assert store[5] is WHOLE[0]  # kept whole, not rebuilt
    with pytest.raises(IndexError):
        store[len(appended)]


def test_only_judgments_that_do_not_fit_the_columns_are_kept_whole() -> None:
    assert "0 kept whole" in repr(Judgments(COMPACT))
    assert f"{len(WHOLE)} kept whole" in repr(Judgments([*COMPACT, *WHOLE]))


def test_requests_come_from_the_columns_in_order() -> None:
    store = Judgments([*COMPACT, *WHOLE])
    assert list(store.requests()) == [(j.request.item_id, j.request.repeat, j.request.order, j.request.stage)
                                      for j in [*COMPACT, *WHOLE]]


def test_taken_reorders_and_selects() -> None:
    appended = [*COMPACT, *WHOLE]
    store = Judgments(appended)
    picks = [6, 0, 3, 6, 9]
    assert store.taken(picks) == [appended[p] for p in picks]
    assert store.taken([]) == []
    assert store == appended  # taken copies: the store it was taken from is unchanged
    store.reorder(reversed(range(len(appended))))
    assert store == appended[::-1]


def test_final_judgments_of_a_run_with_one_call_per_key_is_the_store_itself() -> None:
    """The usual run (no synthesis round): nothing is copied into a list of Judgment objects."""
    store = Judgments(COMPACT[:4])
    assert final_judgments(store) is store
    with_synthesis = Judgments(COMPACT)  # i2/0/ba appears once, as synthesis: still one per key
    assert final_judgments(with_synthesis) is with_synthesis


def test_final_judgments_keeps_the_last_per_key_in_first_seen_order() -> None:
    first = journaled("i1", 0, Order.AB, label="A", winner="ours")
    synthesis = journaled("i1", 0, Order.AB, stage="synthesis", label="B", winner="baseline")
    other = journaled("i2", 0, Order.AB)
    for judgments in ([first, other, synthesis], Judgments([first, other, synthesis])):
        assert list(final_judgments(judgments)) == [synthesis, other]


def test_keys_unique_needs_final_stages_and_one_judgment_per_key() -> None:
    stages = ("judge", "synthesis")
    assert Judgments().keys_unique(stages)
    assert Judgments(COMPACT).keys_unique(stages)
    assert not Judgments([*COMPACT, COMPACT[0]]).keys_unique(stages)  # a key twice
    assert not Judgments([journaled(stage="generate")]).keys_unique(stages)
    # the same item and order in two repeats, or the same repeat in two orders, are different keys
    keys = [journaled(repeat=0), journaled(repeat=1), journaled(repeat=1, order=Order.BA)]
    assert Judgments(keys).keys_unique(stages)


@pytest.mark.parametrize("seed", range(4))
def test_keys_unique_equals_a_set_of_key_tuples(seed: int) -> None:
    """The in-place sorted key of (item, repeat, order) finds a repeated key exactly when a set of key tuples does,
    also with repeats that do not start at 0 and judgments without an order."""
    import random

    rng = random.Random(seed)
    for _ in range(30):
        keys = {(f"i{rng.randrange(40)}", rng.randrange(3, 9), rng.choice([Order.AB, Order.BA, None]))
                for _ in range(rng.randrange(1, 60))}
        judgments = [journaled(item, repeat, order) for item, repeat, order in keys]
        rng.shuffle(judgments)
        if rng.random() < 0.5:  # a key twice
            judgments.append(rng.choice(judgments))
        expected = len({(j.item_id, j.request.repeat, j.request.order) for j in judgments}) == len(judgments)
        assert Judgments(judgments).keys_unique(("judge",)) == expected


def test_the_columns_cover_every_field_of_a_judgment() -> None:
    """A field added to Judgment or one of its parts must be stored by runner.core.judgments (a column, or the
    judgment kept whole when it is set), or it would silently read back as its default."""
    from dataclasses import fields

    assert {f.name for f in fields(Judgment)} == {"request", "response", "verdict", "winner", "status", "score"}
    assert {f.name for f in fields(JudgeRequest)} == {"item_id", "repeat", "order", "stage", "messages_hash"}
    assert {f.name for f in fields(JudgeResponse)} == {
        "text", "finish_reason", "prompt_tokens", "completion_tokens", "cost_usd", "latency_s", "error_type", "error",
        "attempts", "rate_limited", "source", "journal_at", "paid", "repaid", "notes", "tokens_known"}
    assert {f.name for f in fields(Verdict)} == {"label", "reason", "scores", "extras"}
