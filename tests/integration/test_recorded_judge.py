"""judge=recorded: a user's recorded raw judge outputs, keyed by (item id, order, repeat), served through litellm's
custom-provider path and scored by every report as live answers are (README: Score recorded judge outputs)."""

from __future__ import annotations

import json
from pathlib import Path

from mlflow.tracking import MlflowClient

from runner.llm import recordings_export
from tests.integration.conftest import REPO

USERS = REPO / "tests" / "fixtures" / "users" / "recorded"
# Per-call facts that a recording does not hold (tokens) or that no two runs share (latency).
VOLATILE = ("tokens/", "cost/usd_list", "cost/list_", "latency/", "run/wall_s")


def metrics(uri: str, run_dir: Path) -> dict[str, float]:
    """The MLflow metrics of the run written to ``run_dir``, without VOLATILE ones."""
    run_id = json.loads((run_dir / "run.json").read_text())["mlflow_run_id"]
    logged = MlflowClient(tracking_uri=uri).get_run(run_id).data.metrics
    return {k: v for k, v in logged.items() if not k.startswith(VOLATILE)}


def test_recorded_judge_reproduces_the_default_llmbar_run(run_cli, tmp_path):
    replayed = run_cli()  # `make run`: replay_gpt4 on LLMBar Natural, both orders
    assert replayed.proc.returncode == 0, replayed.output
    recordings = tmp_path / "gpt4_natural.jsonl"
    # python -m runner.llm.recordings_export <run dir> <out.jsonl>
    assert recordings_export.main([str(replayed.run_dir), str(recordings)]) == 0
    assert len(recordings.read_text().splitlines()) == 200
    first = json.loads(recordings.read_text().splitlines()[0])
    assert set(first) == {"id", "order", "repeat", "output", "finish_reason"}

    rec = run_cli("judge=recorded", f"judge.path={recordings}")
    assert rec.proc.returncode == 0, rec.output
    assert "accuracy AB 95.0% / BA 96.0% / mean 95.5% / both 93.0% / positional agreement 95.0%" in rec.proc.stdout
    recorded_summary, replayed_summary = rec.summary(), replayed.summary()
    for doc in (recorded_summary, replayed_summary):  # when each was written: the one thing that differs
        del doc["summary"]["evaluation_completed"]
    assert recorded_summary == replayed_summary  # verdicts, gold, trust and bias sections, every figure
    recorded_metrics = metrics(rec.mlflow_uri, rec.run_dir)
    assert recorded_metrics == metrics(replayed.mlflow_uri, replayed.run_dir)
    assert recorded_metrics["judge/scored"] == 200 and recorded_metrics["cost/usd_total"] == 0
    # recorded answers cost nothing and their tokens are not known (0)
    assert json.loads((rec.run_dir / "metrics.json").read_text())["tokens/total"] == 0


def users_pairs(*overrides: str) -> tuple[str, ...]:
    """The users' robust pairwise files (chat vs simple-chat) judged by their recorded MT-Bench-style verdicts."""
    return ("prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
            f"dataset.path={USERS / 'pairs.jsonl'}", "judge=recorded", *overrides)


def test_a_missing_recording_is_an_error_naming_the_item_before_any_call(run_cli, tmp_path):
    partial = tmp_path / "partial.jsonl"
    lines = (USERS / "pairwise_recordings.jsonl").read_text().splitlines()
    partial.write_text("\n".join(line for line in lines if '"mood-03", "order": "ba"' not in line) + "\n")
    run = run_cli(*users_pairs(f"judge.path={partial}", "order=both"))
    assert run.proc.returncode == 1
    assert f"recordings file {partial} has no output for 1 planned judge call(s): id mood-03, order ba, repeat 0" \
        in run.output
    assert not (run.run_dir / "journal.jsonl").exists()  # stopped in prepare: nothing ran


def test_a_pairwise_run_in_both_orders_from_a_hand_made_recordings_file(run_cli):
    # a relative path is found like a dataset's: in the user's project (the working directory) first
    run = run_cli(*users_pairs(f"judge.path={(USERS / 'pairwise_recordings.jsonl').relative_to(REPO)}",
                               "order=both"))
    assert run.proc.returncode == 0, run.output
    rows = [json.loads(line) for line in (run.run_dir / "results.jsonl").read_text().splitlines()]
    winners = {(r["item_id"], r["order"]): r["winner"] for r in rows}
    assert winners == {("greet-01", "ab"): "chat", ("greet-01", "ba"): "chat", ("plan-02", "ab"): "chat",
                       ("plan-02", "ba"): "chat", ("mood-03", "ab"): "tie", ("mood-03", "ba"): "simple-chat"}
    assert rows[-1]["raw_response"] == "Assistant A is more direct. [[A]]"  # the recorded text, as a live answer's
    assert run.summary()["summary"]["successful_evaluations"] == 3


def test_a_pointwise_run_with_repeats_from_a_hand_made_recordings_file(run_cli):
    run = run_cli("experiment=reply_quality", "judge=recorded", f"judge.path={USERS / 'pointwise_recordings.jsonl'}",
                  "dataset.path=" + str(USERS / "replies.jsonl"), "gate.min_mean_score=null")
    assert run.proc.returncode == 0, run.output
    rows = [json.loads(line) for line in (run.run_dir / "results.jsonl").read_text().splitlines()]
    assert [(r["item_id"], r["repeat"], r["status"]) for r in rows] == [
        ("r-1", 0, "scored"), ("r-1", 1, "scored"), ("r-1", 2, "scored"),
        ("r-2", 0, "scored"), ("r-2", 1, "scored"), ("r-2", 2, "unscored")]  # "no JSON here": unscored, as live
    assert rows[0]["scores"] == {"naturalness": 9, "appropriateness": 8, "intent_match": 9}


def test_another_recordings_file_is_read_not_the_response_cache(run_cli, tmp_path):
    flipped = tmp_path / "flipped.jsonl"
    flipped.write_text((USERS / "pairwise_recordings.jsonl").read_text().replace("[[A]]", "[[X]]")
                       .replace("[[B]]", "[[A]]").replace("[[X]]", "[[B]]"))
    first = run_cli(*users_pairs(f"judge.path={USERS / 'pairwise_recordings.jsonl'}", "order=both"))
    second = run_cli(*users_pairs(f"judge.path={flipped}", "order=both"))  # same messages, same cache file
    assert first.proc.returncode == second.proc.returncode == 0, second.output
    winner = [json.loads(line)["winner"] for line in (second.run_dir / "results.jsonl").read_text().splitlines()]
    assert winner[:4] == ["simple-chat"] * 4


def test_a_recorded_judge_needs_a_path_and_a_single_round_strategy(run_cli):
    no_path = run_cli(*users_pairs())
    assert no_path.proc.returncode == 1 and "judge.path" in no_path.output
    synth = run_cli("judge=recorded", f"judge.path={USERS / 'pairwise_recordings.jsonl'}", "prompt=llmbar_swap")
    assert synth.proc.returncode == 1
    assert "a recorded judge answers first-round calls only" in synth.output


def test_a_run_with_failed_calls_replays_from_its_own_export(run_cli, fake_server, tmp_path):
    # issue 30: the export writes a failed call as a failure, so judge=recorded on it covers every call and ends as
    # the run did (it stopped on the missing line before)
    from tests.fakes.openai_server import Reply
    from tests.integration.conftest import live_judge

    fake_server.reply = lambda body: (Reply(status=500) if "driving test" in body["messages"][-1]["content"]
                                      else "Assistant A is better. [[A]]")
    setup = ("prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
             f"dataset.path={USERS / 'pairs.jsonl'}", "order=fixed", "max_error_rate=0.5", "max_unscored_rate=0.5",
             "cache.mode=off", "tracking=off")
    live = run_cli(*live_judge(fake_server), "judge.max_retries=0", *setup)
    assert live.proc.returncode == 0, live.output
    assert live.summary()["summary"]["failed_items"] == ["mood-03"]
    recordings = tmp_path / "with_failures.jsonl"
    assert recordings_export.main([str(live.run_dir), str(recordings)]) == 0
    lines = [json.loads(line) for line in recordings.read_text().splitlines()]
    assert len(lines) == 3  # every call, the failed one too
    [failed] = [line for line in lines if "error" in line]
    assert (failed["id"], failed["error_type"]) == ("mood-03", "InternalServerError") and "output" not in failed

    served = len(fake_server.requests)
    replay = run_cli("judge=recorded", f"judge.path={recordings}", *setup)
    assert replay.proc.returncode == 0, replay.output
    assert len(fake_server.requests) == served  # nothing sent: the recordings answer (and fail) every call
    ours, theirs = replay.summary(), live.summary()
    for doc in (ours, theirs):
        del doc["summary"]["evaluation_completed"]
    assert ours["summary"] == theirs["summary"] and ours["aggregated_results"] == theirs["aggregated_results"]
    [row] = [r for r in replay.journal() if r["item_id"] == "mood-03"]
    assert row["status"] == "error" and row["attempts"] == 1  # failed once, not retried
    assert "recorded failure: InternalServerError: " in row["error"]
