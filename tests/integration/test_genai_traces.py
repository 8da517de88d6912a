"""MLflow GenAI views of a run, read back from a real sqlite store: one trace per judgment with a Feedback and
an Expectation, the prompt in the registry (a version per template change), the dataset as a run input, the
judge's input in results.load, human feedback read back, traces off, and no duplicate trace on resume; as a
native ``mlflow.genai.evaluate`` run shows them: each trace's request the item's own fields (so two runs' traces
of a judgment pair in the UI's Compare), a ``correct`` Feedback beside the verdict where there is gold, a ``pass``
Feedback where the rubric has a threshold, and their ``<name>/mean`` metrics."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest
from mlflow.entities import AssessmentSource, AssessmentSourceType, Expectation, Feedback
from mlflow.tracking import MlflowClient

from runner.outputs import results
from tests.integration.conftest import live_judge
from tests.integration.shared import SCORES, generated_text, generation_overrides, generator_and_judge

pytestmark = [pytest.mark.integration, pytest.mark.traces]  # run_cli keeps MLflow traces on

ITEMS = 20  # LLMBar Natural with the replay judge: 20 items x 2 orders
NATURAL = Path(__file__).resolve().parents[2] / "runner/data/llmbar/natural.jsonl"


def _traces(uri: str, run_id: str) -> list:
    mlflow.set_tracking_uri(uri)
    experiment = MlflowClient(uri).get_run(run_id).info.experiment_id
    return mlflow.search_traces(locations=[experiment], run_id=run_id, return_type="list")


def test_run_is_an_evaluation_with_one_trace_per_judgment(run_cli):
    run = run_cli("judge=replay_gpt4", f"max_items={ITEMS}")
    assert run.proc.returncode == 0, run.proc.stdout + run.proc.stderr
    loaded = results.load(run.run_dir, tracking_uri=run.mlflow_uri)
    run_id = loaded.runs.loc[0, "run_id"]
    traces = _traces(run.mlflow_uri, run_id)
    assert len(traces) == len(loaded.judgments) == 2 * ITEMS
    rows = {row["id"]: row for row in map(json.loads, NATURAL.read_text().splitlines())}
    correct = []
    for trace in traces:
        kinds = {type(a) for a in trace.info.assessments}
        assert kinds == {Feedback, Expectation}, trace.info.assessments
        by_name = {a.name: a for a in trace.info.assessments}
        feedback = by_name["verdict"]
        assert feedback.source.source_type == AssessmentSourceType.LLM_JUDGE and feedback.rationale
        # beside the verdict, as a code scorer's: whether it is the gold label
        assert by_name["correct"].source.source_type == AssessmentSourceType.CODE
        assert by_name["correct"].value is (feedback.value == by_name["gold"].value)
        correct.append(by_name["correct"].value)
        assert {s.name for s in trace.data.spans} == {"judge", "render", "call", "parse"}
        # the request is the item's own fields (cut), the judge's messages are the call span's
        item = trace.info.trace_metadata["judgesweep.item_id"]
        request = json.loads(trace.data.request)
        assert request["item_id"] == item and request["order"] == trace.info.trace_metadata["judgesweep.order"]
        for name, field in (("instruction", "input"), ("output_1", "output_1"), ("output_2", "output_2")):
            assert rows[item][field].startswith(request[name].removesuffix("…")), name
        assert trace.info.request_preview == json.dumps(request, ensure_ascii=False)[:1000]
        call = next(s for s in trace.data.spans if s.name == "call")
        assert call.inputs[-1]["role"] == "user" and rows[item]["output_1"][:100] in call.inputs[-1]["content"]
    assert len({t.info.request_preview for t in traces}) == len(traces)  # one request per judgment
    assert set(correct) == {True, False}  # the replayed judge is right on some items and wrong on others
    client = MlflowClient(run.mlflow_uri)
    tracked = client.get_run(run_id)
    # the traces' Feedback means, as evaluate logs them; metrics.json's keys unchanged beside them
    assert tracked.data.metrics["correct/mean"] == pytest.approx(sum(correct) / len(correct))
    written = json.loads((run.run_dir / "metrics.json").read_text())
    assert "correct/mean" not in written and tracked.data.metrics["accuracy/mean"] == written["accuracy/mean"]
    assert tracked.data.tags["mlflow.runType"] == "genai_evaluate"
    assert [d.dataset.name for d in tracked.inputs.dataset_inputs] == ["llmbar_natural"]
    linked = json.loads(tracked.data.tags["mlflow.linkedPrompts"])
    assert linked == [{"name": "llmbar_vanilla", "version": "1"}]
    # the input text is in results.load, read by run id too
    by_id = results.load(run_id, tracking_uri=run.mlflow_uri)
    messages = by_id.judgments["messages"]
    assert messages.notna().all() and all(m[-1]["role"] == "user" and m[-1]["content"] for m in messages)
    # a person's feedback on a trace is read back
    mlflow.log_feedback(trace_id=traces[0].info.trace_id, name="correct", value=False, rationale="A is wrong",
                        source=AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id="ann@example.com"))
    feedback = results.load(run_id, tracking_uri=run.mlflow_uri).feedback
    assert feedback[["name", "value", "source_id"]].values.tolist() == [["correct", False, "ann@example.com"]]
    assert feedback.loc[0, "item_id"] == traces[0].info.trace_metadata["judgesweep.item_id"]


def test_two_runs_traces_pair_on_their_request(run_cli):
    """The UI's Compare of two runs pairs their traces by request preview (a run's second trace of one request goes
    unpaired): two judges on the same items give the same requests, one per judgment, each its item's."""
    gpt4 = run_cli("judge=replay_gpt4", "max_items=5")
    chatgpt = run_cli("judge=replay_chatgpt", "max_items=5")
    assert gpt4.proc.returncode == chatgpt.proc.returncode == 0, chatgpt.proc.stderr
    requests = []
    for run in (gpt4, chatgpt):
        run_id = results.load(run.run_dir, tracking_uri=run.mlflow_uri).runs.loc[0, "run_id"]
        traces = _traces(run.mlflow_uri, run_id)
        previews = [t.info.request_preview for t in traces]
        assert len(set(previews)) == len(previews) == 2 * 5
        assert len({json.loads(p)["instruction"] for p in previews}) == 5  # the items differ, not just the orders
        requests.append({t.info.request_preview: t.info.trace_metadata["judgesweep.item_id"] for t in traces})
    assert requests[0] == requests[1]


def test_prompt_versions_follow_the_template(run_cli):
    first = run_cli("judge=replay_gpt4", "max_items=2")
    second = run_cli("judge=replay_gpt4", "max_items=2")
    assert first.proc.returncode == second.proc.returncode == 0, second.proc.stderr
    client = MlflowClient(first.mlflow_uri)
    assert [int(v.version) for v in client.search_prompt_versions("llmbar_vanilla")] == [1]
    swap = run_cli("judge=replay_gpt4", "prompt=llmbar_swap", "max_items=2")  # its synthesis template too
    assert swap.proc.returncode == 0, swap.proc.stderr
    run_id = results.load(swap.run_dir, tracking_uri=swap.mlflow_uri).runs.loc[0, "run_id"]
    linked = json.loads(client.get_run(run_id).data.tags["mlflow.linkedPrompts"])
    assert sorted(p["name"] for p in linked) == ["llmbar_swap", "llmbar_swap.synthesis"]


def test_traces_off_and_resume(run_cli, tmp_path):
    off = run_cli("judge=replay_gpt4", "max_items=2", "tracking.traces=false")
    assert off.proc.returncode == 0, off.proc.stderr
    run_id = results.load(off.run_dir, tracking_uri=off.mlflow_uri).runs.loc[0, "run_id"]
    assert _traces(off.mlflow_uri, run_id) == []
    on = run_cli("judge=replay_gpt4", "max_items=2")
    run_id = results.load(on.run_dir, tracking_uri=on.mlflow_uri).runs.loc[0, "run_id"]
    again = run_cli("judge=replay_gpt4", "max_items=2", f"resume={on.run_dir}", run_dir=on.run_dir)
    assert again.proc.returncode == 0, again.proc.stderr
    assert len(_traces(on.mlflow_uri, run_id)) == 4


def test_a_changed_template_adds_a_version(tmp_path, empty_mlflow_store):
    from runner.core.run_settings import TrackingConfig
    from runner.outputs import tracking

    store = tmp_path / "mlflow.db"
    store.write_bytes(empty_mlflow_store().read_bytes())
    cfg = TrackingConfig(uri=f"sqlite:///{store}", experiment="prompts")
    client = tracking._client(cfg)
    runs = [client.create_run(tracking._experiment_id(client, cfg)).info.run_id for _ in range(3)]
    versions = [tracking.register_prompt(cfg, runs[0], "my_prompt", "Judge {{ output }}", "a"),
                tracking.register_prompt(cfg, runs[1], "my_prompt", "Judge {{ output }}", "a"),
                tracking.register_prompt(cfg, runs[2], "my_prompt", "Judge {{ output }} strictly", "b")]
    assert versions == [1, 1, 2]
    linked = [json.loads(client.get_run(r).data.tags["mlflow.linkedPrompts"]) for r in runs]
    assert [link[0]["version"] for link in linked] == ["1", "1", "2"]


def test_scores_and_unscored_answers_over_http(run_cli, fake_server):
    """Pointwise: one Feedback per criterion; an answer that does not parse: a Feedback with an error, no value.
    The call span carries the attempts and the token usage the server reported."""
    replies = iter([json.dumps({"scores": SCORES, "reasoning": "Fine."}), "no idea"] * 10)
    fake_server.reply = lambda body: next(replies)
    run = run_cli("experiment=agent_rubric", "max_items=2", *live_judge(fake_server))
    run_id = results.load(run.run_dir, tracking_uri=run.mlflow_uri).runs.loc[0, "run_id"]
    by_item = {t.info.trace_metadata["judgesweep.item_id"]: t for t in _traces(run.mlflow_uri, run_id)}
    assert len(by_item) == 2
    scored, unscored = sorted(by_item.values(), key=lambda t: len(t.info.assessments), reverse=True)
    feedback = {a.name: a.value for a in scored.info.assessments
                if isinstance(a, Feedback) and a.source.source_type == AssessmentSourceType.LLM_JUDGE}
    assert feedback and set(feedback) <= set(SCORES) and all(v == SCORES[k] for k, v in feedback.items())
    # the rubric's pass threshold (3.5) on the overall score (4), as a code scorer's Feedback
    (passed,) = [a for a in scored.info.assessments if a.name == "pass"]
    assert passed.value is True and passed.source.source_type == AssessmentSourceType.CODE
    (failed,) = [a for a in unscored.info.assessments if isinstance(a, Feedback)]  # no made-up pass
    assert failed.value is None and failed.error.error_code == "UNSCORED" and failed.rationale == "no idea"
    # the request is the example's own input and the agent's output
    examples = {e["id"]: e for e in json.loads(
        (Path(__file__).resolve().parents[2] / "runner/data/examples/agent_examples.json").read_text())["examples"]}
    for item, trace in by_item.items():
        request = json.loads(trace.data.request)
        for name, field in (("input", "input"), ("agent", "output")):
            value = examples[item][field]  # a structured one as the judge reads it: indented JSON
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)
            assert text.startswith(request[name].removesuffix("…")), name
    metrics = MlflowClient(run.mlflow_uri).get_run(run_id).data.metrics
    assert metrics["pass/mean"] == 1.0 and all(metrics[f"{name}/mean"] == SCORES[name] for name in feedback)
    assert "correct/mean" not in metrics  # no gold
    call = next(s for s in scored.data.spans if s.name == "call")
    assert call.attributes["attempts"] == 1 and [e.name for e in call.events] == ["attempt"]
    assert call.attributes["mlflow.chat.tokenUsage"]["input_tokens"] > 0


def test_an_ensemble_has_one_trace_per_member_judgment(run_cli):
    run = run_cli("judge=ensemble", "max_items=3")
    assert run.proc.returncode == 0, run.proc.stdout + run.proc.stderr
    loaded = results.load(run.run_dir, tracking_uri=run.mlflow_uri)
    traces = _traces(run.mlflow_uri, loaded.runs.loc[0, "run_id"])
    assert len(traces) == len(loaded.judgments) == 2 * 3 * 2  # 2 members x 3 items x 2 orders
    members = {t.info.trace_metadata["judgesweep.judge"] for t in traces}
    assert members == {"replay_gpt4", "replay_chatgpt"}
    sources = {next(a for a in t.info.assessments if isinstance(a, Feedback)).source.source_id for t in traces}
    assert len(sources) == 2  # each member's own model
    assert loaded.judgments["messages"].notna().all()  # one store for the members, beside the run's files
    calls = [next(s for s in t.data.spans if s.name == "call") for t in traces]
    assert all(call.inputs and call.inputs[-1]["role"] == "user" for call in calls)  # and their traces read it
    requests = [json.loads(t.data.request) for t in traces]  # a member's judgment is its own request
    assert {r["judge"] for r in requests} == members and len({t.info.request_preview for t in traces}) == 12


def test_a_generated_candidate_is_its_items_request(run_cli, fake_server):
    """A generation run's request holds the item's fields and the output the generator wrote (generations.jsonl),
    under the generator's name; an item whose generation failed was not judged and has no trace."""
    fake_server.reply = generator_and_judge()
    run = run_cli(*generation_overrides(fake_server), "max_items=5")
    run_id = results.load(run.run_dir, tracking_uri=run.mlflow_uri).runs.loc[0, "run_id"]
    requests = {t.info.trace_metadata["judgesweep.item_id"]: json.loads(t.data.request)
                for t in _traces(run.mlflow_uri, run_id)}
    assert set(requests) == {"agent-001", "agent-002", "agent-003", "agent-004"}  # agent-005's generation failed
    for item, request in requests.items():
        assert request["local_openai"] == generated_text(item) and request["input"] and "agent" not in request
