"""``runner.outputs.results.load`` over real runs: the tracked replay sweep of the CLI (conftest.replay_sweep: 2
judges x 3 prompts on LLMBar Natural, ``python -m runner -m`` into a real sqlite store, made once per session and read
by test_replay_sweep, test_sweep_best and test_compare too), by directory and by run id, and an untracked pointwise run
against the loopback server (in this process), read from its directory (and from its journal alone). The same sweep
is the one that shows a sweep in MLflow: one parent run with a readable label, its jobs nested under it with readable
names. Nothing here writes to the sweep or its store (a run created in it is created in a copy, copy_store)."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from runner.outputs import results
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.conftest import copy_store, live_judge, replay_sweep, run_in_process
from tests.integration.shared import answer

pytestmark = pytest.mark.integration

JUDGES = {"replay_gpt4", "replay_chatgpt"}
PROMPTS = {"llmbar_vanilla", "llmbar_vanilla_norules", "llmbar_swap"}
# what summary.json does not determine: the judge calls, generation, the run's wall time
CALL_FAMILIES = ("judge/", "calls/", "tokens/", "cost/", "latency/", "parse_failures/", "generation/", "run/")
# judgments per job: 100 items x 2 orders, and the Swap prompt's synthesis calls (2 per item its two orders
# disagreed on: 7 items of GPT-4's, 38 of ChatGPT's)
JUDGMENTS = {("replay_gpt4", "llmbar_swap"): 214, ("replay_chatgpt", "llmbar_swap"): 276}


@dataclass(frozen=True)
class Runs:
    """Where the sweep and the pointwise run wrote."""

    sweep_dir: Path  # 6 jobs x 100 items x 2 orders (and synthesis calls), tracked in store `sweep_uri`
    sweep_uri: str
    pointwise_dir: Path  # agent_rubric on 4 items, tracking=off


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    """The session's replay sweep, and the pointwise run in this process (runner.run_experiment, as the CLI runs
    it)."""
    sweep = replay_sweep(tmp_path_factory)
    assert sweep.proc.returncode == 0, sweep.output
    point = tmp_path_factory.mktemp("pointwise")
    with FakeOpenAIServer() as server:
        server.reply = answer
        pointwise = run_in_process(point, point / "run", ("experiment=agent_rubric", "max_items=4", "tracking=off",
                                                          *live_judge(server)))
    assert pointwise.returncode == 0, pointwise.stdout + pointwise.stderr
    assert not (point / "mlflow.db").exists()
    return Runs(sweep.run_dir, sweep.mlflow_uri, point / "run")


@pytest.fixture(scope="module")
def swept(runs) -> results.Results:
    """The sweep, loaded by its directory."""
    return results.load(runs.sweep_dir, tracking_uri=runs.sweep_uri)


def summary(run_dir: str | Path) -> dict:
    """A run directory's summary.json."""
    return json.loads((Path(run_dir) / "summary.json").read_text())


def test_a_sweep_is_a_parent_run_with_its_jobs_nested_under_it(runs):
    """(Was tests/integration/test_sweep_parent.py, on a sweep of its own: 2 replay judges, one prompt, a few items;
    the name of a job with a scalar override, max_items=10, is in tests/unit/test_naming.py.)"""
    client = MlflowClient(tracking_uri=runs.sweep_uri)
    found = client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id])
    (parent,) = [r for r in found if r.data.tags.get("judgesweep.kind") == "sweep"]
    jobs = [r for r in found if "judgesweep.kind" not in r.data.tags]
    assert re.fullmatch(r"sweep \d{4}-\d\d-\d\d \d\d:\d\d · judge×prompt", parent.info.run_name), parent.info.run_name
    assert parent.info.status == "FINISHED" and parent.data.metrics["sweep/jobs"] == 6  # the table is in it
    assert "sweep_table.csv" in {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {r.data.tags["mlflow.parentRunId"] for r in jobs} == {parent.info.run_id}
    assert {r.info.run_name for r in jobs} == {f"{judge} · {prompt}" for judge in ("gpt4", "chatgpt")
                                               for prompt in ("vanilla", "vanilla_norules", "swap")}
    # results.load and judgesweep-compare still find the jobs by the sweep's tag
    assert {r.data.tags["judgesweep.sweep"] for r in found} == {str(runs.sweep_dir.resolve())}


def test_a_sweep_dir_gives_one_row_per_run_with_choices_params_and_metrics(swept, runs):
    assert len(swept.runs) == 6 and set(swept.runs["judge"]) == JUDGES and set(swept.runs["prompt"]) == PROMPTS
    assert list(swept.runs["status"]) == ["FINISHED"] * 6
    assert repr(swept).startswith("Results(runs=6, metrics=") and repr(swept).endswith("judgments=1290, items=600)")
    assert set(swept.runs["sweep"]) == {str(runs.sweep_dir.resolve())}
    # scalar params read back as numbers, one not set (max_items: null) as missing
    assert swept.runs["repeats"].tolist() == [1] * 6 and swept.runs["max_items"].isna().all()
    assert set(swept.runs["judge.model"]) == {"replay/gpt-4", "replay/chatgpt"}
    assert isinstance(swept.runs["start_time"].dtype, pd.DatetimeTZDtype)
    assert list(swept.metrics["run_id"]) == list(swept.runs["run_id"])
    for run in swept.runs.itertuples():
        gold = summary(run.run_dir)["gold"]
        row = swept.metrics.set_index("run_id").loc[run.run_id]
        assert row["accuracy/mean"] == pytest.approx(gold["accuracy_mean"])
        assert row["accuracy/ab"] == pytest.approx(gold["accuracy_ab"])
        assert row["judge/calls"] == JUDGMENTS.get((run.judge, run.prompt), 200) and row["judge"] == run.judge


def test_judgments_and_items_of_a_sweep_carry_run_id_and_choices(swept):
    judgments = swept.judgments
    assert len(judgments) == 4 * 200 + 214 + 276
    assert judgments.groupby("judge").size().to_dict() == {"replay_gpt4": 2 * 200 + 214,
                                                           "replay_chatgpt": 2 * 200 + 276}
    assert judgments.groupby(["judge", "prompt"]).size().to_dict() == {
        (judge, prompt): JUDGMENTS.get((judge, prompt), 200) for judge in JUDGES for prompt in PROMPTS}
    assert judgments.groupby("run_id")["item_id"].nunique().tolist() == [100] * 6
    assert set(judgments["order"]) == {"ab", "ba"} and set(judgments["status"]) == {"scored"}
    assert judgments["item_id"].str.startswith("natural-").all() and judgments["gold"].notna().all()
    items = swept.items
    assert len(items) == 600 and items.groupby("run_id").size().tolist() == [100] * 6
    for run_id, group in items.groupby("run_id"):
        run_dir = swept.runs.set_index("run_id").loc[run_id, "run_dir"]
        aggregated = summary(run_dir)["aggregated_results"]
        assert dict(zip(group["item_id"], group["final_verdict"], strict=True)) == {
            item: agg["final_verdict"] for item, agg in aggregated.items()}
        counts = group["verdict_counts.output_1"] + group["verdict_counts.output_2"]
        assert (counts + group.get("verdict_counts.tie", 0) == 2).all()  # two orders per item
    # the items' gold agrees with the logged accuracy over both orders (of the prompts with no synthesis calls)
    metrics = swept.metrics.set_index("run_id")
    for run in swept.runs[swept.runs["prompt"] != "llmbar_swap"].itertuples():
        mine = judgments[judgments["run_id"] == run.run_id]
        accuracy = (mine["winner"] == mine["gold"]).mean()
        assert accuracy == pytest.approx(metrics.loc[run.run_id, "accuracy/mean"]), (run.judge, run.prompt)


def test_a_run_id_and_a_relative_sweep_dir_in_the_default_store(swept, runs, tmp_path, monkeypatch):
    run_id = swept.runs["run_id"].iloc[1]
    one = results.load(run_id, tracking_uri=runs.sweep_uri)
    assert one.runs["run_id"].tolist() == [run_id] and len(one.judgments) == 200 and len(one.items) == 100
    pd.testing.assert_frame_equal(one.metrics, swept.metrics.iloc[[1]].reset_index(drop=True), check_like=True)
    # default store: ./outputs/mlflow.db of the working directory; a sweep dir may be relative to it
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "mlflow.db").symlink_to(runs.sweep_uri.removeprefix("sqlite:///"))
    (tmp_path / "multirun").symlink_to(runs.sweep_dir)
    monkeypatch.chdir(tmp_path)
    assert results.load("multirun").runs["run_id"].tolist() == swept.runs["run_id"].tolist()
    assert results.load(run_id).runs["run_id"].tolist() == [run_id]


def test_a_tracked_job_dir_read_from_its_files_matches_mlflow(swept, runs):
    job = results.load(runs.sweep_dir / "0")
    run = job.runs.iloc[0]
    assert run["run_id"] in set(swept.runs["run_id"]) and run["status"] == "FINISHED"
    assert run["run_dir"] == str((runs.sweep_dir / "0").resolve()) and run["judgments_from"] == "results.jsonl"
    # every logged metric but those of the calls themselves is recomputed from summary.json, to the same value
    logged = swept.metrics.set_index("run_id").loc[run["run_id"]].filter(like="/")
    from_files = job.metrics.filter(like="/").iloc[0]
    # correct/mean is the view's own (the traces' Feedback means, as mlflow.genai.evaluate logs them)
    assert set(from_files.index) == {name for name in logged.index
                                     if not name.startswith(CALL_FAMILIES) and name != "correct/mean"}
    assert len(from_files) > 30 and "accuracy/mean" in from_files and "agreement/cohen_kappa" in from_files
    assert from_files.to_dict() == pytest.approx(logged[from_files.index].to_dict())
    # run.json leaves out the operational choice `tracking`, so a run dir's frames have no such column
    mine = swept.judgments["run_id"] == run["run_id"]
    pd.testing.assert_frame_equal(job.judgments, swept.judgments[mine].drop(columns="tracking").reset_index(drop=True))
    pd.testing.assert_frame_equal(job.items, swept.items[swept.items["run_id"] == run["run_id"]]
                                  .drop(columns="tracking").reset_index(drop=True))


def test_an_untracked_pointwise_run_dir_gives_items_from_detailed_results(runs):
    loaded = results.load(runs.pointwise_dir)
    run = loaded.runs.iloc[0]
    assert run["run_id"] == str(runs.pointwise_dir.resolve()) and run["status"] == "FINISHED"
    assert run[["prompt.mode", "experiment", "judge"]].tolist() == ["pointwise", "agent_rubric", "local_openai"]
    items, detailed = loaded.items, summary(runs.pointwise_dir)["detailed_results"]
    assert items["item_id"].tolist() == [d["id"] for d in detailed] and len(items) == 4
    assert (items["scores.accuracy"] == 4.0).all() and items["passed"].all() and (items["overall"] == 4.0).all()
    assert items["tags"].map(len).gt(0).all() and (items["run_id"] == run["run_id"]).all()
    assert len(loaded.judgments) == 4 and (loaded.judgments["score"] == 4.0).all()
    metrics = loaded.metrics.iloc[0]
    assert metrics["score/mean"] == 4.0 and metrics["pass/rate"] == 1.0 and metrics["gate/passed"] == 1.0
    assert metrics["items/scored"] == summary(runs.pointwise_dir)["summary"]["scored"] == 4


def test_an_unfinished_run_is_read_from_its_journal(runs, tmp_path):
    crashed = tmp_path / "crashed"
    shutil.copytree(runs.pointwise_dir, crashed)
    (crashed / "summary.json").unlink()
    (crashed / "results.jsonl").unlink()
    journal = crashed / "journal.jsonl"
    first = json.loads(journal.read_text().splitlines()[0])
    # a call retried on resume (its last line counts) and a line torn by a crash
    journal.write_text(journal.read_text() + json.dumps({**first, "raw_response": "retried"}) + "\n" + '{"item_id": ')
    loaded = results.load(crashed)
    assert loaded.runs[["status", "judgments_from"]].values.tolist() == [["INCOMPLETE", "journal.jsonl"]]
    assert len(loaded.judgments) == 4 and "latency_s" in loaded.judgments
    assert (loaded.judgments["raw_response"] == "retried").sum() == 1
    assert loaded.items.empty and not any("/" in column for column in loaded.metrics.columns)


def test_a_sweep_without_a_store_is_read_from_its_job_dirs(swept, runs, tmp_path):
    loaded = results.load(runs.sweep_dir, tracking_uri=f"sqlite:///{tmp_path / 'none.db'}")
    assert loaded.runs["run_id"].tolist() == swept.runs["run_id"].tolist()  # run.json keeps the MLflow ids
    assert len(loaded.judgments) == 1290 and loaded.runs["judgments_from"].tolist() == ["results.jsonl"] * 6
    assert not (tmp_path / "none.db").exists()


def test_unknown_refs_raise_lookup_error(runs, tmp_path):
    with pytest.raises(LookupError, match="no MLflow run '0123456789abcdef0123456789abcdef'"):
        results.load("0123456789abcdef0123456789abcdef", tracking_uri=runs.sweep_uri)
    with pytest.raises(LookupError, match="'no-such-run' is not a run directory, a sweep directory or an MLflow"):
        results.load("no-such-run", tracking_uri=runs.sweep_uri)
    with pytest.raises(LookupError, match="is neither a run directory nor a sweep"):
        results.load(tmp_path, tracking_uri=runs.sweep_uri)
    (tmp_path / "store").mkdir()
    copy = copy_store(runs.sweep_uri, tmp_path / "store")  # the session's store stays as the sweep left it
    client = MlflowClient(tracking_uri=copy)
    comparison = client.create_run(client.get_experiment_by_name("judgesweep").experiment_id,
                                   tags={"judgesweep.kind": "comparison"}).info.run_id
    with pytest.raises(LookupError, match=f"MLflow run {comparison} is a comparison run, not a judge run"):
        results.load(comparison, tracking_uri=copy)
    with pytest.raises(LookupError, match="no MLflow store at sqlite:///"):
        results.load("0123456789abcdef0123456789abcdef", tracking_uri=f"sqlite:///{tmp_path / 'none.db'}")
    assert not (tmp_path / "none.db").exists()
