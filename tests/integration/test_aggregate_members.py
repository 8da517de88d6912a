"""``judgesweep aggregate`` with the files as an ensemble's members (``aggregation=weighted|dawid_skene``, or
``members=...``): the users' per-run JSON files and judgesweep's results.jsonl re-aggregated in this process give
what a ``judge=ensemble`` run with the same members gives (posteriors, final verdicts, the ensemble section)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from runner.app import aggregate_cli
from runner.modes.ensemble import combine_labels

USERS = Path(__file__).resolve().parents[1] / "fixtures" / "users" / "aggregate"
EVALS = [str(USERS / f"eval{n}.json") for n in (1, 2, 3)]
OFF = "tracking=off"
ROBUST = "experiment=robust_pairwise"  # ours = chat, baseline = simple-chat
NAMES = {"ours": "chat", "baseline": "simple-chat", "tie": "tie"}


def aggregate(out: Path, *args: str) -> int:
    """``judgesweep aggregate`` into ``out``, without report.html's figures (as run_cli's runs; none looked at)."""
    return aggregate_cli.main([*args, f"output_dir={out}", "output.plots=false"])


def summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def finals(doc: dict) -> dict:
    return {k: v["final_verdict"] for k, v in doc["aggregated_results"].items()}


def test_dawid_skene_over_three_users_files_is_the_fit_of_three_members(tmp_path):
    assert aggregate(tmp_path / "ds", *EVALS, ROBUST, OFF, "aggregation=dawid_skene") == 0
    doc = summary(tmp_path / "ds")
    votes = {f"eval{n}": {e["subset_id"]: NAMES[e["winner"]] for e in json.loads(Path(p).read_text())["evaluations"]}
             for n, p in zip((1, 2, 3), EVALS, strict=True)}
    want = combine_labels(votes, "dawid_skene", None, max_iter=1000, tol=1.0e-6, smoothing=0.0)
    assert finals(doc) == {k: want.labels[k] for k in votes["eval1"]}
    for item, entry in doc["aggregated_results"].items():
        reference = {str(k): p for k, p in want.items[item].posterior.items()}
        assert entry["details"]["posterior"] == pytest.approx(reference, abs=1e-6)
    section = doc["ensemble"]
    assert (section["combine"], section["members"]) == ("dawid_skene", ["eval1", "eval2", "eval3"])
    assert set(section["dawid_skene"]["estimated_accuracy"]) == {"eval1", "eval2", "eval3"}
    written = rows(tmp_path / "ds")
    assert [r["judge"] for r in written[:5]] == ["eval1"] * 4 + ["eval2"]  # each vote under its member
    assert written[0]["posterior"] == doc["aggregated_results"][written[0]["item_id"]]["details"]["posterior"]
    member = json.loads((tmp_path / "ds" / "members" / "eval2" / "summary.json").read_text())  # as a run's members/
    assert finals(member) == {"q1": "chat", "q2": "simple-chat", "q3": "simple-chat", "q4": "simple-chat"}


def test_weighted_breaks_the_tie_the_weights_say(tmp_path):
    # q3: eval1 ours, eval2 baseline, eval3 tie: no majority without weights, eval1's 3 of 5 with them
    assert aggregate(tmp_path / "even", *EVALS, ROBUST, OFF, "aggregation=weighted") == 0
    assert finals(summary(tmp_path / "even")) == {"q1": "chat", "q2": "chat", "q3": "tie", "q4": "simple-chat"}
    assert aggregate(tmp_path / "w", *EVALS, ROBUST, OFF, "aggregation=weighted",
                     "+aggregation.params.weights={eval1: 3}") == 0
    doc = summary(tmp_path / "w")
    assert finals(doc) == {"q1": "chat", "q2": "chat", "q3": "chat", "q4": "simple-chat"}
    assert doc["ensemble"]["combine"] == "weighted"
    assert aggregate(tmp_path / "w2", *EVALS, ROBUST, OFF, "aggregation=weighted",
                     "+aggregation.params.weights={eval2: 3}") == 0
    assert finals(summary(tmp_path / "w2"))["q2"] == "simple-chat"  # 3 against 2: the heavy dissenter wins


def test_members_named_on_the_command_line_and_majority_over_members(tmp_path):
    assert aggregate(tmp_path / "m", *EVALS, ROBUST, OFF, "members=a,b,c", "aggregation=weighted",
                     "+aggregation.params.weights={c: 5}") == 0
    doc = summary(tmp_path / "m")
    assert doc["ensemble"]["members"] == ["a", "b", "c"]
    assert finals(doc)["q3"] == "tie" and finals(doc)["q2"] == "chat"  # c's verdicts: its weight is a majority
    assert aggregate(tmp_path / "aab", *EVALS, ROBUST, OFF, "members=a,a,b") == 0  # one name twice: a's repeats
    assert summary(tmp_path / "aab")["ensemble"]["members"] == ["a", "b"]
    member_a = json.loads((tmp_path / "aab" / "members" / "a" / "summary.json").read_text())
    assert member_a["summary"]["num_evaluation_runs"] == 2 and finals(member_a)["q2"] == "tie"  # chat vs simple-chat
    assert aggregate(tmp_path / "mv", *EVALS, ROBUST, OFF, "members=true") == 0
    doc = summary(tmp_path / "mv")
    assert doc["ensemble"]["combine"] == "majority_vote"
    assert finals(doc) == {"q1": "chat", "q2": "chat", "q3": "tie", "q4": "simple-chat"}
    # mean of the members' preference for ours: q3 (1 + 0 + 1/2) / 3 = 1/2, a tie; q2 2/3, ours
    assert aggregate(tmp_path / "mean", *EVALS, ROBUST, OFF, "members=true", "aggregation=mean") == 0
    doc = summary(tmp_path / "mean")
    assert doc["ensemble"]["combine"] == "mean" and finals(doc)["q3"] == "tie" and finals(doc)["q2"] == "chat"


@pytest.mark.parametrize(("args", "expected"), [
    (("aggregation=weighted", "+aggregation.params.weights={eval9: 2}"),
     r"aggregation\.params\.weights\.eval9: not a member .*\['eval1', 'eval2', 'eval3'\]"),
    (("aggregation=weighted", "members=false"), r"weighted combines the members of an ensemble.*members="),
    (("aggregation=dawid_skene", "members=a,b"), r"members=a,b names 2 members for 3 files"),
    (("aggregation=weighted", "members=a,a,a"), r"the files hold one member \(a\), an ensemble needs two or more"),
])
def test_member_errors_name_the_key(tmp_path, capsys, args, expected):
    assert aggregate(tmp_path / "agg", *EVALS, ROBUST, OFF, *args) == 1
    err = capsys.readouterr().err
    assert re.search(expected, err), err
    assert not (tmp_path / "agg").exists()


@pytest.mark.parametrize("combine", ["dawid_skene", "weighted"])
def test_a_failed_vote_beside_two_agreeing_members_is_a_majority(tmp_path, combine):
    # docs/how-to/resume.md: unanimous needs every vote valid and equal; eval3's failed call on q1 (an error, no
    # verdict) beside eval1's and eval2's "ours" makes q1 a majority, as a repeats' vote does
    failed = tmp_path / "eval3.json"
    results = {e["subset_id"]: {"verdict": e["winner"]} for e in json.loads(Path(EVALS[2]).read_text())["evaluations"]}
    failed.write_text(json.dumps({"results": {**results, "q1": {"error": "Request timed out"}}}))
    assert aggregate(tmp_path / "agg", *EVALS[:2], str(failed), ROBUST, OFF, f"aggregation={combine}") == 0
    items = summary(tmp_path / "agg")["aggregated_results"]
    assert (items["q1"]["final_verdict"], items["q1"]["confidence"]) == ("chat", "majority")
    assert items["q1"]["details"]["num_votes"] == 2
    assert items["q4"]["confidence"] == "unanimous"  # three valid votes for simple-chat


def test_dawid_skene_needs_three_annotators(tmp_path, capsys):
    assert aggregate(tmp_path / "agg", *EVALS[:2], ROBUST, OFF, "aggregation=dawid_skene") == 1
    assert "dawid_skene needs three or more annotators" in capsys.readouterr().err


def test_bad_member_file_still_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"evaluations": [\n{"subset_id": "q1", "winner": "ours"},\n{"subset_id": "q2", "winner": "x"}\n]}')
    assert aggregate(tmp_path / "agg", *EVALS[:2], str(bad), ROBUST, OFF, "aggregation=dawid_skene") == 1
    assert re.search(r"bad\.json:3: item 'q2': verdict 'x'", capsys.readouterr().err)


RUN_ONLY = {"evaluation_completed", "failed_calls", "retries"}  # when the run ended; the calls it made


def test_results_of_member_runs_give_the_ensemble_runs_report(tmp_path, run_cli):
    common = ("max_items=8", "tracking=off")
    ensemble = run_cli("judge=ensemble", "+aggregation@judge.combine=dawid_skene", *common)
    gpt4, chatgpt = run_cli("judge=replay_gpt4", *common), run_cli("judge=replay_chatgpt", *common)
    assert all(r.proc.returncode == 0 for r in (ensemble, gpt4, chatgpt)), ensemble.output
    want = ensemble.summary()
    # the members' own runs, named on the command line; and the ensemble run's results (its judge column)
    assert aggregate(tmp_path / "runs", str(gpt4.run_dir / "results.jsonl"), str(chatgpt.run_dir / "results.jsonl"),
                     "members=replay_gpt4,replay_chatgpt", "aggregation=dawid_skene", OFF) == 0
    assert aggregate(tmp_path / "own", str(ensemble.run_dir / "results.jsonl"), "aggregation=dawid_skene", OFF) == 0
    for out in (tmp_path / "runs", tmp_path / "own"):
        doc = summary(out)
        assert doc["aggregated_results"] == want["aggregated_results"]
        assert {k: v for k, v in doc["summary"].items() if k not in RUN_ONLY} == {
            k: v for k, v in want["summary"].items() if k not in RUN_ONLY}
        assert doc["ensemble"] == want["ensemble"]
        assert doc["trust"] == want["trust"]
        posteriors = {r["item_id"]: r["posterior"] for r in rows(out)}
        assert posteriors == {r["item_id"]: r["posterior"] for r in rows(ensemble.run_dir)}
        for member in ("replay_gpt4", "replay_chatgpt"):
            own, theirs = (json.loads((d / "members" / member / "summary.json").read_text())
                           for d in (out, ensemble.run_dir))
            assert own["aggregated_results"] == theirs["aggregated_results"]
    # unnamed, two results.jsonl are told apart by their run directories
    assert aggregate(tmp_path / "dirs", str(gpt4.run_dir / "results.jsonl"), str(chatgpt.run_dir / "results.jsonl"),
                     "aggregation=dawid_skene", OFF) == 0
    assert summary(tmp_path / "dirs")["ensemble"]["members"] == [f"{gpt4.run_dir.name}-results",
                                                                 f"{chatgpt.run_dir.name}-results"]
    assert finals(summary(tmp_path / "dirs")) == finals(want)


def test_judge_column_members_of_a_pointwise_ensemble(tmp_path):
    votes = tmp_path / "scores.jsonl"
    lines = [{"id": "r1", "score": 8, "judge": "x/a"}, {"id": "r1", "score": 4, "judge": "b"},
             {"id": "r2", "score": 3, "judge": "x/a"}, {"id": "r2", "score": 5, "judge": "b"}]
    votes.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    args = (str(votes), "experiment=reply_quality", "gate.min_mean_score=null", OFF)
    assert aggregate(tmp_path / "w", *args, "aggregation=weighted", "+aggregation.params.weights={x_a: 3}") == 0
    doc = summary(tmp_path / "w")
    assert {d["id"]: d["overall"] for d in doc["detailed_results"]} == {"r1": 7.0, "r2": 3.5}  # (3x + y) / 4
    assert doc["ensemble"]["members"] == ["x_a", "b"]  # a / in a member's name becomes _
    # without members= and with a repeats aggregation, the judge column's values stay repeats of one judge
    assert aggregate(tmp_path / "mean", *args) == 0
    doc = summary(tmp_path / "mean")
    assert "ensemble" not in doc and {d["id"]: d["overall"] for d in doc["detailed_results"]} == {"r1": 6.0, "r2": 4.0}


def test_the_mlflow_run_names_the_members_and_logs_the_ensembles_metrics(tmp_path, empty_mlflow_store):
    from mlflow.tracking import MlflowClient

    shutil.copyfile(empty_mlflow_store(), tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert aggregate(tmp_path / "agg", *EVALS, ROBUST, "aggregation=dawid_skene", f"tracking.uri={uri}",
                     f"tracking.artifact_location={tmp_path / 'art'}") == 0
    client = MlflowClient(tracking_uri=uri)
    [run] = client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id],
                               "tags.`judgesweep.kind` = 'aggregation'")
    assert run.data.params["aggregate.members"] == "eval1,eval2,eval3"
    assert run.data.params["aggregation.name"] == "dawid_skene"
    assert run.data.metrics["ensemble/dawid_skene/ours_wins_share"] == 0.5
    assert "member/eval2/confidence/unanimous_count" in run.data.metrics
