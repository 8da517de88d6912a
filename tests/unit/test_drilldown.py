"""Unit tests for the report's per-item drill-down: runner.modes.drilldown (flags, what is kept, the cap), the modes'
item outcomes, and runner.outputs.item_report (texts are escaped data, long ones folded, filters in the page)."""

from __future__ import annotations

from runner.core.types import Candidate, Item, JudgeRequest, JudgeResponse, Judgment, Order, Status, Verdict
from runner.inputs.datasets import ItemRef
from runner.modes import drilldown
from runner.modes.catalog import mode_named
from runner.modes.drilldown import ItemOutcome
from runner.modes.sections import Gate
from runner.outputs import html_report, item_report
from tests.builders import won

HOSTILE = "<script>alert(1)</script>"


def judgment(item: str, order: Order | None, winner: str | None, text: str = "Output (a)", repeat: int = 0,
             status: Status = Status.SCORED, reason: str | None = None) -> Judgment:
    """tests.builders.won with the label that shows ``winner`` (ours or the baseline) in ``order``."""
    label = None if winner is None else ("A" if (winner == "ours") == (order is Order.AB) else "B")
    return won(item, winner, order, label=label, repeat=repeat, status=status, reason=reason,
               response=JudgeResponse(text), messages_hash="h")


def pairwise_run() -> tuple[list[ItemRef], list[Judgment], list[Item]]:
    refs = [ItemRef("i1", "ours", "f:1", category="math"), ItemRef("i2", "ours", "f:2"),
            ItemRef("i3", "baseline", "f:3"), ItemRef("i4", None, "f:4")]
    judgments = [judgment("i1", Order.AB, "ours"), judgment("i1", Order.BA, "ours"),
                 judgment("i2", Order.AB, "ours"), judgment("i2", Order.BA, "baseline", text=HOSTILE),
                 judgment("i3", Order.AB, "ours"), judgment("i3", Order.BA, "ours"),
                 judgment("i4", Order.AB, None, "no idea", status=Status.UNSCORED, reason="no label found"),
                 judgment("i4", Order.BA, "ours")]
    items = [Item(r.id, {"instruction": f"question {r.id} " + "x" * (500 if r.id == "i1" else 5)},
                  (Candidate("ours", HOSTILE), Candidate("baseline", "plain"))) for r in refs]
    return refs, judgments, items


def test_flags_come_from_the_mode_and_from_the_calls_and_texts_are_kept_per_item():
    refs, judgments, items = pairwise_run()
    outcomes = {"i3": ItemOutcome("ours (unanimous)", frozenset({"wrong"}))}
    d = drilldown.build(refs, outcomes, judgments, lambda: judgments, lambda: items)
    by_id = {e.id: e for e in d.entries}
    assert by_id["i2"].flags == ("flip",) and by_id["i3"].flags == ("wrong",) and by_id["i4"].flags == ("unscored",)
    assert by_id["i1"].flags == () and by_id["i1"].groups == ("math",) and by_id["i4"].gold == "-"
    assert [a.raw for a in by_id["i2"].answers] == ["Output (a)", HOSTILE]
    assert [a.call for a in by_id["i2"].answers] == ["order ab, repeat 0", "order ba, repeat 0"]
    assert by_id["i4"].answers[0].parsed == "unscored: no label found"
    assert by_id["i1"].inputs[1:] == (("ours", HOSTILE), ("baseline", "plain"))
    assert d.counts == {"wrong": 1, "flip": 1, "unscored": 1, "failed": 0} and d.total == 4


def test_an_ensemble_s_calls_name_their_member_and_flips_are_counted_within_a_member():
    refs, judgments, items = pairwise_run()
    judges = ["m1", "m2"] * 4  # each item's two orders answered by different members: no member flips
    d = drilldown.build(refs, {}, judgments, lambda: judgments, lambda: items, judges)
    by_id = {e.id: e for e in d.entries}
    assert [a.call for a in by_id["i2"].answers] == ["member m1, order ab, repeat 0", "member m2, order ba, repeat 0"]
    assert d.counts["flip"] == 0


def test_a_run_above_the_limit_draws_its_flagged_items_first_in_dataset_order():
    refs, judgments, items = pairwise_run()
    d = drilldown.build(refs, {}, judgments, lambda: judgments, lambda: items, limit=2)
    assert [e.id for e in d.entries] == ["i2", "i4"] and d.total == 4 and drilldown.LIMIT == 2_000
    html = html_report.run_report({}, {}, "t", "pairwise", d)
    assert "<h2>Items (2 of 4)</h2>" in html and "draws\n2 of the run's 4 items, the flagged ones first" in html


def test_the_page_escapes_texts_folds_long_ones_and_carries_the_filters():
    refs, judgments, items = pairwise_run()
    d = drilldown.build(refs, {}, judgments, lambda: judgments, lambda: items)
    html = str(item_report.render(d))
    assert HOSTILE not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<script>") == 1  # the page's own filter script, nothing from the data
    assert "(512 characters)</summary>" in html  # i1's long instruction folded under its start
    assert 'data-flags="flip"' in html and 'data-flag="unscored"' in html and "unscored\n(1)" in html
    assert '<option>math</option>' in html and "http" not in html  # no network: nothing fetched


def test_pairwise_outcomes_name_the_final_verdict_and_wrong_against_gold():
    doc = {"summary": {}, "trust": {}, "aggregated_results": {
        "a": {"verdicts": ["ours"], "verdict_counts": {"ours": 1}, "final_verdict": "ours", "confidence": "unanimous"},
        "b": {"verdicts": [], "verdict_counts": {}, "final_verdict": None, "confidence": None},
        "c": {"verdicts": ["tie"], "verdict_counts": {"tie": 1}, "final_verdict": "tie", "confidence": "unanimous"}}}
    refs = [ItemRef("a", "ours", ""), ItemRef("b", "ours", ""), ItemRef("c", "baseline", "")]
    out = mode_named("pairwise").item_outcomes(doc, refs)
    assert out["a"] == ItemOutcome("ours (unanimous)", verdict="ours")  # the verdict a sweep compares jobs on
    assert out["b"].flags == {"unscored"} and out["c"].flags == {"wrong"}


def detail(item: str, **fields) -> dict:
    base = {"id": item, "status": "scored", "tags": [], "category": None, "overall": 4.0, "passed": True,
            "scores": {"x": 4.0}, "repeat_scores": [4.0], "std": None, "human_score": None, "reasoning": "",
            "improvement_suggestions": None, "judge_pass": [], "violations": {}, "unscored_reasons": []}
    return {**base, **fields}


def test_pointwise_outcomes_flag_failed_wrong_inconsistent_and_unscored_items():
    doc = {"summary": {"human_correlation": {"tolerance": 1.0}, "consistency": {"threshold": 0.5}},
           "detailed_results": [
               detail("ok", human_score=4.5), detail("low", overall=2.0, passed=False),
               detail("ai", violations={"ai_phrases": ["I understand"]}), detail("far", human_score=1.0),
               detail("spread", std=1.2), detail("none", status="unscored", overall=None, passed=None,
                                                 unscored_reasons=["no JSON object"])]}
    out = mode_named("pointwise").item_outcomes(doc, [])
    assert out["ok"] == ItemOutcome("4 pass", verdict="pass")
    assert out["low"].flags == {"failed"} and out["ai"].flags == {"failed"}
    assert out["ai"].reasons == ("check ai_phrases: I understand",)
    assert out["far"].flags == {"wrong"} and out["spread"].flags == {"flip"}
    assert out["none"] == ItemOutcome("unscored", frozenset({"unscored"}), ("no JSON object",))


def test_the_written_page_is_the_rendered_page_byte_for_byte_and_a_failure_leaves_none(tmp_path, monkeypatch):
    refs, judgments, items = pairwise_run()
    d = drilldown.build(refs, {}, judgments, lambda: judgments, lambda: items)
    title = "local_openai · api_base=http://127.0.0.1:1… · ü"  # beyond Latin-1, as a run name can be
    path = html_report.write_run_report(tmp_path, {}, {"items/total": 4.0}, title, "pairwise", drilldown=lambda: d)
    assert path is not None
    assert path.read_bytes() == html_report.run_report({}, {"items/total": 4.0}, title, "pairwise",
                                                       d).encode("utf-8")

    def broken(_: object) -> object:
        yield "<div>"
        raise RuntimeError("drawing failed half way")

    monkeypatch.setattr(item_report, "pieces", broken)
    assert html_report.write_run_report(tmp_path, {}, {}, "t2", "pairwise", drilldown=lambda: d) is None
    assert path.read_bytes().startswith(b"<!doctype html>") and b"<title>t2" not in path.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]  # the earlier page, no half page beside it


def test_flips_are_the_items_whose_winner_changes_with_the_order_within_a_judge_and_repeat() -> None:
    import random

    rng = random.Random(7)
    judgments, judges = [], []
    for n in range(300):  # shuffled, as an ensemble's or a resumed run's judgments may come
        for repeat in range(3):
            for order in (Order.AB, Order.BA):
                for judge in ("m1", "m2"):
                    winner = rng.choice(["ours", "baseline", "tie", None])
                    status = Status.SCORED if winner is not None else Status.UNSCORED
                    judgments.append(judgment(f"i{n}", order, winner, repeat=repeat, status=status))
                    judges.append(judge)
    pairs = list(zip(judgments, judges, strict=True))
    rng.shuffle(pairs)
    seen: dict[tuple, set] = {}
    for j, judge in pairs:  # the reference: a set of winners per (item, judge, repeat)
        if j.status is Status.SCORED:
            seen.setdefault((j.item_id, judge, j.request.repeat), set()).add(j.winner)
    expected = {key[0] for key, winners in seen.items() if len(winners) > 1}
    flips, unscored = drilldown._flip_and_unscored([j for j, _ in pairs], [judge for _, judge in pairs])
    assert flips == expected and 0 < len(flips) < 300
    assert unscored == {j.item_id for j in judgments if j.status is not Status.SCORED}
    assert drilldown._flip_and_unscored([], None) == (set(), set())


def test_each_call_shows_the_prompt_it_was_sent_and_each_item_is_an_anchor():
    """Issue 33.2: the rendered messages (looked up by the judgment's messages hash) in each call's drill-down,
    escaped; every item has the ``item-<id>`` anchor the sweep report's cells link to."""
    refs, judgments, items = pairwise_run()
    asked: list[str] = []

    def messages(hashes):
        asked.extend(hashes)
        return {"h": [{"role": "system", "content": "Judge fairly."}, {"role": "user", "content": HOSTILE}]}

    d = drilldown.build(refs, {}, judgments, lambda: judgments, lambda: items, messages=messages)
    assert all(a.prompt == f"system: Judge fairly.\n\nuser: {HOSTILE}" for e in d.filled() for a in e.answers)
    assert set(asked) == {"h"}
    page = item_report.render(d)
    assert "<summary>prompt sent</summary><pre>system: Judge fairly.\n\nuser: &lt;script&gt;" in page
    assert all(f'id="item-{r.id}"' in page for r in refs)


def test_a_pointwise_runs_flip_filter_says_inconsistent_not_position_flip():
    refs, judgments, items = pairwise_run()
    pointwise = drilldown.build(refs, {}, judgments, lambda: judgments, lambda: items, ordered=False)
    pairwise = drilldown.build(refs, {}, judgments, lambda: judgments, lambda: items)
    assert "inconsistent across repeats" in item_report.render(pointwise)
    assert "position flip" not in item_report.render(pointwise)
    assert "position flip" in item_report.render(pairwise)


def test_report_header_comes_first_with_the_gates_and_the_title_says_pass_or_fail(tmp_path):
    """Issue 33.2: what the run is and its gates' PASS/FAIL at the top (and in the title); its links drawn."""
    header = html_report.RunHeader((("judge", "replay_gpt4"), ("dataset", "llmbar_natural"),
                                    ("date", "2026-11-28 02:14 UTC"),
                                    ("sweep", html_report.Link("the sweep's report.html", "../report.html"))),
                                   ("judge", "dataset", "date"))
    gates = [{"name": "min_agreement", "passed": False, "message": "agreement 0.7 < 0.8"}]
    path = html_report.write_run_report(tmp_path, {"gates": gates}, {"agreement/accuracy_all": 0.7}, "gpt4",
                                        "pairwise", header=header)
    page = path.read_text()
    title = "gpt4 (judge replay_gpt4, dataset llmbar_natural, 2026-11-28 02:14 UTC) - gates FAIL"
    assert f"<title>{title}</title>" in page and f"<h1>{title}</h1>" in page
    assert page.index("This run") < page.index("<td>gate min_agreement</td>") < page.index("Headline")
    assert "<td>FAIL agreement 0.7 &lt; 0.8</td>" in page and '<a href="../report.html">' in page
    assert html_report.titled("gpt4", [Gate("g", True, 1.0, 0.5, "ok")]) == "gpt4 - gates PASS"
    assert html_report.titled("gpt4", []) == "gpt4"


def test_prompts_are_read_as_the_page_is_written_a_chunk_of_items_at_a_time():
    refs = [ItemRef(f"i{k}", None, f"f:{k}") for k in range(150)]
    items = [Item(r.id, {"instruction": "q"}, (Candidate("ours", "a"), Candidate("baseline", "b"))) for r in refs]
    judgments = [Judgment(JudgeRequest(r.id, 0, order, "judge", f"{r.id}-{order.value}"), JudgeResponse("x"),
                          Verdict("A"), "ours", Status.SCORED) for r in refs for order in (Order.AB, Order.BA)]
    asked: list[list[str]] = []

    def messages(hashes):
        asked.append(list(hashes))
        return {h: [{"role": "user", "content": f"judge {h} <b>"}] for h in hashes}

    d = drilldown.build(refs, {}, judgments, lambda: judgments, lambda: items, messages=messages)
    assert asked == [] and all(a.prompt == "" for e in d.entries for a in e.answers)  # nothing held by the record
    html = str(item_report.render(d))
    assert [len(hashes) for hashes in asked] == [2 * drilldown.PROMPT_CHUNK, 2 * (150 - drilldown.PROMPT_CHUNK)]
    assert asked[1][-1] == "i149-ba" and "prompt sent</summary><pre>user: judge i149-ba &lt;b&gt;</pre>" in html
