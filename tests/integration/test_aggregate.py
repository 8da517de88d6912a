"""``judgesweep aggregate``: existing evaluation files re-aggregated in this process (runner.app.aggregate_cli.main),
no judge call: the users' per-run JSON files (tests/fixtures/users/aggregate/), judgesweep's own results.jsonl from
three runs, generic JSONL scores; the errors naming file and line; the MLflow run read back from its sqlite store."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from runner.app import aggregate_cli
from tests.fakes.openai_server import Reply
from tests.integration.conftest import REPO, live_judge, offline_env

USERS = Path(__file__).resolve().parents[1] / "fixtures" / "users" / "aggregate"
EVALS = [str(USERS / f"eval{n}.json") for n in (1, 2, 3)]
RESULTS = [USERS / f"results{n}.json" for n in (1, 2, 3)]  # {"evaluation_completed": ..., "results": {id: {...}}}
SYSTEMS = {"ours": "chat", "baseline": "simple-chat", "tie": "tie"}
OFF = "tracking=off"
ROBUST = "experiment=robust_pairwise"  # ours = chat, baseline = simple-chat


def aggregate(out: Path, *args: str) -> int:
    """``judgesweep aggregate`` into ``out``; without report.html's figures, as run_cli's runs (no test here looks at
    them)."""
    plots = () if any(a.startswith("output.plots=") for a in args) else ("output.plots=false",)
    return aggregate_cli.main([*args, f"output_dir={out}", *plots])


def summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def test_three_users_files_follow_the_vote_rules(tmp_path, capsys):
    assert aggregate(tmp_path / "agg", *EVALS, ROBUST, OFF) == 0
    doc = summary(tmp_path / "agg")
    s, items = doc["summary"], doc["aggregated_results"]
    assert (s["num_evaluation_runs"], s["total_subsets"], s["successful_evaluations"]) == (3, 4, 4)
    # q1: 3 x ours; q2: 2 of 3 ours wins; q3: three different verdicts -> tie; q4: 3 x baseline
    assert {k: (v["final_verdict"], v["confidence"]) for k, v in items.items()} == {
        "q1": ("chat", "unanimous"), "q2": ("chat", "majority"), "q3": ("tie", "no_consensus"),
        "q4": ("simple-chat", "unanimous")}
    assert items["q3"]["verdicts"] == ["chat", "simple-chat", "tie"]
    assert s["final_verdict_distribution"] == {"chat": 2, "simple-chat": 1, "tie": 1}
    assert s["confidence_distribution"] == {"unanimous": 2, "majority": 1, "no_consensus": 1}
    assert (s["ours_win_rate"], s["baseline_win_rate"], s["tie_rate"]) == (0.5, 0.25, 0.25)
    assert "trust" in doc and doc["bias"]["position"]["pairs_both_orders"] == 0  # orders unknown: no position data
    rows = [json.loads(line) for line in (tmp_path / "agg" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and (rows[0]["item_id"], rows[0]["winner"], rows[0]["raw_response"]) == (
        "q1", "chat", "more specific")
    assert (tmp_path / "agg" / "metrics.json").is_file() and (tmp_path / "agg" / "report.html").is_file()
    assert "confidence: unanimous 2, majority 1, no_consensus 1" in capsys.readouterr().out


def test_one_users_file_is_one_vote_per_item(tmp_path):
    assert aggregate(tmp_path / "agg", EVALS[1], ROBUST, OFF) == 0
    s = summary(tmp_path / "agg")["summary"]
    assert s["num_evaluation_runs"] == 1
    assert s["confidence_distribution"]["unanimous"] == 4
    assert s["final_verdict_distribution"] == {"chat": 1, "simple-chat": 3, "tie": 0}


def test_ours_and_baseline_name_the_systems_the_role_words_stand_for(tmp_path):
    assert aggregate(tmp_path / "agg", *EVALS, ROBUST, OFF, "ours=new-bot", "baseline=old-bot") == 0
    s = summary(tmp_path / "agg")["summary"]
    assert s["final_verdict_distribution"] == {"new-bot": 2, "old-bot": 1, "tie": 1}


def test_the_cli_dispatches_aggregate_and_writes_under_outputs_aggregate(tmp_path, monkeypatch):
    from runner.app import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["judgesweep", "aggregate", *EVALS, ROBUST, OFF, "output.plots=false"])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == 0
    [written] = (tmp_path / "outputs" / "aggregate").iterdir()
    assert summary(written)["summary"]["num_evaluation_runs"] == 3


@pytest.mark.parametrize(("content", "expected"), [
    ('{"evaluations": [\n{"subset_id": "q1", "winner": "ours"},\n{"subset_id": "q2",, }\n]}',
     r"bad\.json:3: not valid JSON"),
    ('{"evaluations": [\n{"subset_id": "q1", "winner": "ours"},\n{"subset_id": "q2", "winner": "better"},\n'
     '{"subset_id": "q3", "winner": "tie"},\n{"subset_id": "q4", "winner": "tie"}\n]}',
     r"bad\.json:3: item 'q2': verdict 'better' is not one of \['ours', 'baseline', 'tie', 'chat', 'simple-chat'\]"),
    ('{"evaluations": [{"subset_id": "q1", "winner": "ours"}]}',
     r"bad\.json: its item ids do not match .*eval1\.json's: 3 missing \(q2, q3, q4\)"),
])
def test_bad_files_fail_naming_file_and_line(tmp_path, capsys, content, expected):
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    assert aggregate(tmp_path / "agg", EVALS[0], str(bad), ROBUST, OFF) == 1
    err = capsys.readouterr().err
    assert err.startswith("judgesweep aggregate: error: ")
    assert pytest.importorskip("re").search(expected, err), err
    assert not (tmp_path / "agg").exists()


def test_results_of_three_runs_give_the_summary_of_one_run_with_three_repeats(tmp_path, run_cli):
    # separate runs meant as repetitions: sample=0,1,2 (without it, runs 2 and 3 are the cache's copies of run 1)
    runs = [run_cli("max_items=6", "tracking=off", f"sample={s}") for s in range(3)]
    assert all(r.proc.returncode == 0 for r in runs), runs[0].output
    repeated = run_cli("max_items=6", "repeats=3", "tracking=off")
    assert repeated.proc.returncode == 0, repeated.output
    assert aggregate(tmp_path / "agg", *(str(r.run_dir / "results.jsonl") for r in runs), OFF) == 0
    doc, want = summary(tmp_path / "agg"), repeated.summary()
    assert doc["aggregated_results"] == want["aggregated_results"]
    # when the run ended; the calls it made; the repeated run's answers are the three runs' (from the cache)
    run_only = {"evaluation_completed", "failed_calls", "retries", "answers_from_cache"}
    assert want["summary"]["answers_from_cache"] == 6 * 2 * 3
    assert {k: v for k, v in doc["summary"].items() if k not in run_only} == {
        k: v for k, v in want["summary"].items() if k not in run_only}
    assert doc["gold"] == want["gold"]  # the results' gold column: agreement with gold, per order
    assert doc["bias"]["position"] == want["bias"]["position"]  # orders known: position bias as the run's


def test_generic_scores_give_the_pointwise_report(tmp_path):
    votes = tmp_path / "scores.jsonl"
    lines = [{"id": "r1", "scores": {"naturalness": 8, "appropriateness": 6, "intent_match": 6}, "repeat": 0},
             {"id": "r1", "scores": {"naturalness": 6, "appropriateness": 6, "intent_match": 6}, "repeat": 1},
             {"id": "r2", "score": 3, "repeat": 0, "tags": ["short"]},
             {"id": "r2", "score": 5, "repeat": 1, "tags": ["short"]}]
    votes.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    # the preset's gate applies: a mean of 5.2 is below its 6.0, and the command exits 1 after writing the summary
    assert aggregate(tmp_path / "agg", str(votes), "experiment=reply_quality", OFF) == 1
    assert summary(tmp_path / "agg")["gates"][0]["passed"] is False
    assert aggregate(tmp_path / "agg", str(votes), "experiment=reply_quality", "gate.min_mean_score=null", OFF,
                     "overwrite=true") == 0  # the first call's files are there
    doc = summary(tmp_path / "agg")
    # the preset's output.summary_keys=reply_quality: the users' format beside summary.json, as a run of it writes
    users = json.loads((tmp_path / "agg" / "users_summary.json").read_text())
    assert users["summary"]["average_score"] == doc["summary"]["average_overall"]
    by_id = {d["id"]: d for d in doc["detailed_results"]}
    assert by_id["r1"]["overall"] == pytest.approx((6.8 + 6.0) / 2)  # 0.4/0.3/0.3 weights, mean over 2 repeats
    assert by_id["r2"]["overall"] == 4.0
    assert doc["summary"]["scored"] == 2
    assert aggregate(tmp_path / "median", str(votes), "experiment=reply_quality", "aggregation=median",
                     "gate.min_mean_score=null", OFF) == 0
    assert {d["id"]: d["overall"] for d in summary(tmp_path / "median")["detailed_results"]}["r2"] == 4.0
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text('{"id": "r1", "scores": {"warmth": 5}}\n')
    assert aggregate(tmp_path / "unknown", str(unknown), "experiment=reply_quality", OFF) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "r1", "scores": {"naturalness": 11, "appropriateness": 6, "intent_match": 6}}\n')
    assert aggregate(tmp_path / "bad", str(bad), "experiment=reply_quality", OFF) == 1
    assert aggregate(tmp_path / "pair", str(votes), OFF) == 1  # scores under a pairwise prompt: refused


def test_the_mlflow_run_is_tagged_and_holds_the_files_sha256(tmp_path, empty_mlflow_store):
    shutil.copyfile(empty_mlflow_store(), tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert aggregate(tmp_path / "agg", *EVALS, ROBUST, f"tracking.uri={uri}",
                     f"tracking.artifact_location={tmp_path / 'art'}") == 0
    client = MlflowClient(tracking_uri=uri)
    [run] = client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id],
                               "tags.`judgesweep.kind` = 'aggregation'")
    import hashlib

    assert run.data.params["aggregate.file.2.sha256"] == hashlib.sha256(Path(EVALS[2]).read_bytes()).hexdigest()
    assert run.data.params["aggregate.file.0"] == EVALS[0]
    assert run.data.params["aggregate.file.0.format"] == "users_json"
    assert run.data.params["aggregation.name"] == "majority_vote" and run.data.params["aggregate.repeats"] == "3"
    # what the aggregation used, not the judge, prompt and dataset of the composed config that no file came from
    assert (run.data.params["choice.experiment"], run.data.params["aggregate.mode"]) == ("robust_pairwise", "pairwise")
    assert sorted(k for k in run.data.params if k.startswith("choice.")) == ["choice.aggregation",
                                                                             "choice.experiment"]
    assert not [k for k in run.data.params if k.split(".")[0] in ("judge", "prompt")]
    assert run.data.params["dataset.ours.name"] == "chat"  # what the role word ours stood for (ours=)
    assert run.data.metrics["verdict/ours_wins_share"] == 0.5
    assert run.data.metrics["confidence/no_consensus_count"] == 1
    assert {a.path for a in client.list_artifacts(run.info.run_id)} >= {"summary.json", "results.jsonl"}
    assert run.info.status == "FINISHED"


# --------------------------------------------------------------------------------- the users' {"results": ...} files


def file_votes() -> dict[str, list[str | None]]:
    """Item -> its vote in each of the users' results files, in file order (None: the run's call failed)."""
    votes: dict[str, list[str | None]] = {}
    for path in RESULTS:
        for item, entry in json.loads(path.read_text())["results"].items():
            votes.setdefault(item, []).append(entry["verdict"])
    return votes


def majority(votes: list[str | None]) -> tuple[str | None, str | None]:
    """The users' rule, computed here on its own: a side wins with a majority of the valid votes, all valid and equal
    is unanimous, anything else a tie without consensus; no valid vote, no verdict."""
    valid = [SYSTEMS[v] for v in votes if v is not None]
    if not valid:
        return None, None
    top, n = Counter(valid).most_common(1)[0]
    if 2 * n <= len(valid):
        return "tie", "no_consensus"
    return top, "unanimous" if n == len(votes) else "majority"


def test_users_results_files_give_the_majority_of_their_votes(tmp_path):
    assert aggregate(tmp_path / "agg", *map(str, RESULTS), ROBUST, OFF) == 0
    doc = summary(tmp_path / "agg")
    got = {k: (v["final_verdict"], v["confidence"]) for k, v in doc["aggregated_results"].items()}
    assert got == {item: majority(votes) for item, votes in file_votes().items()}
    assert got["q3"] == ("tie", "no_consensus") and got["q5"] == ("simple-chat", "majority")  # 2 valid votes of 3
    s = doc["summary"]
    assert (s["num_evaluation_runs"], s["total_subsets"], s["successful_evaluations"]) == (3, 6, 5)
    assert s["failed_items"] == ["q6"] and s["skipped_rows"] == []
    users = json.loads((tmp_path / "agg" / "users_summary.json").read_text())  # the users' format: their 10 keys
    assert users["aggregated_results"]["q6"]["final_verdict"] is None and len(users["summary"]) == 10
    assert {k: users["summary"][k] for k in ("total_subsets", "successful_evaluations")} == {
        "total_subsets": 6, "successful_evaluations": 5}
    rows = [json.loads(line) for line in (tmp_path / "agg" / "results.jsonl").read_text().splitlines()]
    failed = [r for r in rows if r["status"] == "error"]
    assert len(failed) == 4 and all("context_length_exceeded" in r["error"] for r in failed)


def live_reply(votes: dict[str, list[str | None]], texts: dict[str, tuple[str, str]]):
    """The fake judge's answer to each call: the vote the users' file r holds for repeat r (the request's seed, the
    judge's seed 0 + r), as [[A]]/[[B]]/[[C]] for the order the call shows; a failed vote a context-length 400."""
    def reply(body: dict) -> Reply:
        prompt = body["messages"][-1]["content"]
        item = re.search(r"question (q\d)", prompt).group(1)
        vote = votes[item][body["seed"]]
        if vote is None:
            return Reply(status=400, error_message="This model's maximum context length is 128000 tokens. However, "
                                                   "your messages resulted in 131072 tokens.")
        ours_first = prompt.index(texts[item][0]) < prompt.index(texts[item][1])
        label = {"tie": "C", "ours": "A" if ours_first else "B", "baseline": "B" if ours_first else "A"}[vote]
        return Reply(content=f"My verdict: [[{label}]]")
    return reply


def test_users_results_files_give_the_verdicts_of_a_live_run_of_those_votes(tmp_path, run_cli, fake_server):
    votes = file_votes()
    texts = {item: (f"the chat answer to {item}", f"the simple answer to {item}") for item in votes}
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps({"id": item, "prompt": f"question {item}?", "chat": ours,
                                        "simple_chat": baseline}) + "\n" for item, (ours, baseline) in texts.items()))
    fake_server.reply = live_reply(votes, texts)
    live = run_cli(ROBUST, *live_judge(fake_server), f"dataset.path={data}", "cache.mode=off", OFF)
    assert live.proc.returncode == 0, live.output
    assert aggregate(tmp_path / "agg", *map(str, RESULTS), ROBUST, OFF) == 0
    doc, want = summary(tmp_path / "agg"), live.summary()
    assert doc["aggregated_results"] == want["aggregated_results"]
    run_only = {"evaluation_completed", "failed_calls", "retries"}  # when the run ended; the calls it made
    assert {k: v for k, v in doc["summary"].items() if k not in run_only} == {
        k: v for k, v in want["summary"].items() if k not in run_only}
    assert want["summary"]["failed_calls"] == 4


@pytest.mark.slow  # a fresh python process: what it imports is the point
@pytest.mark.parametrize("content", [
    '{"evaluation_completed": true,\n "results": {"q1": {"verdict": "better"}}}',
    '{"evaluations": [\n {"subset_id": "q1", "winner": "better"}]}'])
def test_a_refused_file_is_refused_before_the_reports_modules_are_imported(tmp_path, content):
    # what made a refusal slow (a minute on a loaded machine): litellm, MLflow and the statistics stack imported
    # before the first file was read
    bad = tmp_path / "run1.json"
    bad.write_text(content)
    code = ("import sys; from runner.app import aggregate_cli; code = aggregate_cli.main(sys.argv[1:]); "
            "print(code, sorted(m for m in ('litellm', 'mlflow', 'scipy', 'runner.run.reaggregation') "
            "if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code, str(bad), ROBUST, OFF], capture_output=True, text=True,
                          cwd=tmp_path, env=offline_env({"PYTHONPATH": str(REPO)}), timeout=300)
    assert f"{bad}:2: item 'q1': verdict 'better' is not one of" in proc.stderr
    assert proc.stdout.split() == ["1", "[]"], proc.stdout + proc.stderr
