"""judge.batch: a run's calls through the OpenAI Files and Batches protocol (the fake server's, real HTTP through
litellm), killed with -9 once the batch exists and resumed; failed and expired rows sent again live;
batch.wait=false submits and exits 0, a resume collects."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest
from mlflow.tracking import MlflowClient

from runner.core.errors import BUDGET_REACHED
from runner.llm.batches import batch_price
from runner.storage.batch_log import BATCHES_NAME
from tests.fakes.openai_server import verdict_by_prompt
from tests.integration.conftest import REPO, cli_args, live_judge, offline_env, one_ca_file
from tests.integration.shared import live_members

N_ITEMS = 20  # x 2 orders = 40 judgments: each test's counts hold at any size; KILL_ITEMS is the one the issue set
THRESHOLD = N_ITEMS  # judge.batch_threshold under a run's 2 * N_ITEMS calls
KILL_ITEMS = 500  # the Done-when's run: x 2 orders = 1,000 judgments
# what a batched judgment's results.jsonl row may differ in from the same live judgment's: its cost (batch price)
BATCH_PRICED = ("cost_usd",)


@pytest.fixture(autouse=True)
def one_ca(tmp_path, monkeypatch) -> None:
    """SSL_CERT_FILE of one CA (conftest.one_ca_file) for the runs of these tests, in this process and the ones it
    starts: certifi's bundle loaded per batch client was most of these tests' CPU."""
    monkeypatch.setenv("SSL_CERT_FILE", one_ca_file(tmp_path))


def write_dataset(path, items: int = N_ITEMS) -> None:
    with path.open("w") as fh:
        for n in range(items):
            fh.write(json.dumps({"id": f"q{n}", "prompt": f"question {n}", "chat": f"chat {n} " * (n % 7 + 1),
                                 "simple_chat": f"simple {n}"}) + "\n")


def overrides(server, dataset, *extra: str) -> list[str]:
    return [*live_judge(server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
            f"dataset.path={dataset}", "order=both", "cache.mode=off", "tracking=off", "batch.poll_s=0.05", *extra]


def results(run_dir) -> bytes:
    return (run_dir / "results.jsonl").read_bytes()


@pytest.mark.slow  # judgesweep as a process, killed with -9
def test_batch_killed_after_creation_resumes_with_one_batch_and_a_live_runs_results(run_cli, fake_server, tmp_path):
    """Issue 34's Done-when, line 1: 1,000 judgments with judge.batch=on, killed with -9 once the batch exists and
    resumed, give a live run's results.jsonl (every field but the cost, at the batch price) from exactly one batch."""
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset, KILL_ITEMS)
    fake_server.reply = verdict_by_prompt
    priced = ("judge.price_as=gpt-4o-mini",)  # live and batch prices differ: the cost is the one field that may
    live = run_cli(*overrides(fake_server, dataset, *priced))
    assert live.proc.returncode == 0, live.output
    assert len(fake_server.requests) == 2 * KILL_ITEMS

    fake_server.reset()
    fake_server.batches.polls_per_step = 10**6  # the batch stays "validating" until the kill
    run_dir = tmp_path / "batched"
    batched = overrides(fake_server, dataset, "judge.batch=on", *priced)
    proc = subprocess.Popen(cli_args(tmp_path, run_dir, tuple(batched)),
                            cwd=REPO, env=offline_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and '"event": "batch"' not in _read(run_dir / BATCHES_NAME):
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert fake_server.batches.created == 1 and fake_server.requests == []
    assert len(fake_server.batches.files) == 1  # one input file uploaded: 1,000 lines
    [uploaded] = fake_server.batches.files.values()
    assert len(uploaded.splitlines()) == 2 * KILL_ITEMS

    fake_server.batches.polls_per_step = 1
    resumed = run_cli(*batched, f"resume={run_dir}", run_dir=run_dir)
    assert resumed.proc.returncode == 0, resumed.output
    assert fake_server.batches.created == 1  # collected, never submitted again
    assert len(fake_server.batches.files) == 1 + 1  # no second upload; the batch's output file
    assert fake_server.requests == []  # no live call: every answer came from the batch
    journal = [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]
    assert len(journal) == 2 * KILL_ITEMS and {row["source"] for row in journal} == {"call"}
    live_rows, batch_rows = rows(live.run_dir), rows(run_dir)
    assert len(batch_rows) == len(live_rows) == 2 * KILL_ITEMS
    # ids, verdicts, raw text, parsed fields and tokens compared; how an answer came (latency, attempts, source) is
    # the journal's, not results.jsonl's (runner.storage.journal.OPERATIONAL_FIELDS)
    assert {"item_id", "order", "winner", "verdict_label", "raw_response", "prompt_tokens"} <= set(batch_rows[0])
    assert "latency_s" not in batch_rows[0]
    for live_row, batch_row in zip(live_rows, batch_rows, strict=True):
        assert {k: v for k, v in batch_row.items() if k not in BATCH_PRICED} == \
            {k: v for k, v in live_row.items() if k not in BATCH_PRICED}
        assert batch_row["cost_usd"] == pytest.approx(live_row["cost_usd"] / 2)  # gpt-4o-mini's batch price: half


def rows(run_dir) -> list[dict]:
    return [json.loads(line) for line in results(run_dir).splitlines()]


def test_failed_and_expired_rows_are_sent_again_live_and_counted(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    fake_server.reply = verdict_by_prompt
    failing = {"q3", "q7"}
    fake_server.batches.fail = lambda custom_id: json.loads(custom_id)[0] in failing
    run = run_cli(*overrides(fake_server, dataset, "judge.batch=on"))
    assert run.proc.returncode == 0, run.output
    assert len(fake_server.requests) == 2 * len(failing)  # both orders of each failed item, live
    collected = [json.loads(line) for line in (run.run_dir / BATCHES_NAME).read_text().splitlines()][-1]
    assert collected["event"] == "collected" and collected["resent"] == 2 * len(failing)
    assert collected["answered"] == 2 * (N_ITEMS - len(failing))
    # a batch answer has no latency of its own: the latency figures are the live calls' (the 4 sent again)
    metrics = json.loads((run.run_dir / "metrics.json").read_text())
    assert metrics["latency/p50_s"] > 0 and metrics["latency/p95_s"] > 0

    fake_server.reset()
    fake_server.batches.fail = lambda custom_id: False
    fake_server.batches.expire_after = 10
    expired = run_cli(*overrides(fake_server, dataset, "judge.batch=on"))
    assert expired.proc.returncode == 0, expired.output
    assert len(fake_server.requests) == 2 * N_ITEMS - 10
    assert f"ended expired: 10 answers, {2 * N_ITEMS - 10} rows unanswered (sent live)" in expired.output
    assert results(expired.run_dir) == results(run.run_dir)


def fail_once(items: set[str]):
    """A batch row predicate: the rows of ``items`` fail the first time they are in a batch, not after."""
    failed: set[str] = set()

    def fail(custom_id: str) -> bool:
        if json.loads(custom_id)[0] in items and custom_id not in failed:
            failed.add(custom_id)
            return True
        return False

    return fail


def test_batch_retry_sends_failed_and_expired_rows_again_in_a_new_batch_and_counts_them(run_cli, fake_server,
                                                                                       tmp_path):
    """batch.retry=batch: what a batch left unanswered goes in a new batch (batch_input_1.jsonl), not live; the
    batch journal has both batches and calls/batch_resent counts the rows sent again."""
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    fake_server.reply = verdict_by_prompt
    live = run_cli(*overrides(fake_server, dataset))
    assert live.proc.returncode == 0, live.output
    fake_server.reset()
    failing = {"q3", "q7"}
    fake_server.batches.fail = fail_once(failing)
    run = run_cli(*overrides(fake_server, dataset, "judge.batch=on", "batch.retry=batch"))
    assert run.proc.returncode == 0, run.output
    assert fake_server.requests == [] and fake_server.batches.created == 2  # no live call: a second batch
    second = (run.run_dir / "batch_input_1.jsonl").read_text().splitlines()
    assert sorted(json.loads(json.loads(line)["custom_id"])[0] for line in second) == sorted([*failing, *failing])
    collected = [json.loads(line) for line in (run.run_dir / BATCHES_NAME).read_text().splitlines()
                 if '"collected"' in line]
    assert [(c["n"], c["answered"], c["resent"]) for c in collected] == [(0, 2 * N_ITEMS - 4, 4), (1, 4, 0)]
    assert json.loads((run.run_dir / "metrics.json").read_text())["calls/batch_resent"] == 4
    assert "rows unanswered (sent again in a new batch)" in run.output
    assert results(run.run_dir) == results(live.run_dir)

    fake_server.reset()  # an expired batch: its unanswered rows in a new batch, which completes
    fake_server.batches.fail = lambda custom_id: False
    fake_server.batches.expire_after, fake_server.batches.expire_times = 10, 1
    expired = run_cli(*overrides(fake_server, dataset, "judge.batch=on", "batch.retry=batch"))
    assert expired.proc.returncode == 0, expired.output
    assert fake_server.requests == [] and fake_server.batches.created == 2 + 2  # (the server counts since its start)
    said = f"ended expired: 10 answers, {2 * N_ITEMS - 10} rows unanswered (sent again in a new batch)"
    assert said in expired.output
    assert json.loads((expired.run_dir / "metrics.json").read_text())["calls/batch_resent"] == 2 * N_ITEMS - 10
    assert results(expired.run_dir) == results(live.run_dir)

    fake_server.reset()  # rows that fail in every batch: once a batch answers none of them, they go live
    fake_server.batches.expire_after = None
    fake_server.batches.fail = lambda custom_id: json.loads(custom_id)[0] in failing
    stubborn = run_cli(*overrides(fake_server, dataset, "judge.batch=on", "batch.retry=batch"))
    assert stubborn.proc.returncode == 0, stubborn.output
    assert fake_server.batches.created == 4 + 2 and len(fake_server.requests) == 2 * len(failing)
    assert json.loads((stubborn.run_dir / "metrics.json").read_text())["calls/batch_resent"] == 4 + 4


def test_batch_retry_resumes_across_processes_without_paying_twice(run_cli, fake_server, tmp_path):
    """batch.retry=batch with batch.wait=false: each process submits or collects one step and exits 0; the resumes
    collect the first batch (its answers saved), submit the second over its failed rows, then collect it and read
    the first batch's saved answers again: two batches, no live call, every judgment once."""
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    fake_server.reply = verdict_by_prompt
    fake_server.batches.fail = fail_once({"q5"})
    run_dir = tmp_path / "rounds"
    args = overrides(fake_server, dataset, "judge.batch=on", "batch.retry=batch", "batch.wait=false")
    first = run_cli(*args, run_dir=run_dir)
    assert first.proc.returncode == 0 and fake_server.batches.created == 1, first.output
    for _ in range(10):
        if (run_dir / "results.jsonl").exists():
            break
        step = run_cli(*args, f"resume={run_dir}", run_dir=run_dir)
        assert step.proc.returncode == 0, step.output
    assert fake_server.batches.created == 2 and fake_server.requests == []
    journal = [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]
    assert len(journal) == 2 * N_ITEMS == len({(r["item_id"], r["order"]) for r in journal})
    assert len(results(run_dir).splitlines()) == 2 * N_ITEMS


@pytest.mark.slow  # judgesweep as a process, sent SIGINT
def test_ctrl_c_while_waiting_for_the_batch_exits_130_with_the_resume_command_and_a_resume_collects_it(
        run_cli, run_process, fake_server, tmp_path):
    """The interrupt contract holds while a run waits for its batch: SIGINT ends the process with 130 and one line
    naming resume=<run dir> (no traceback); the batch goes on at the provider: a resume with batch.wait=false exits 0
    saying how to collect it, and a resume collects it."""
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    fake_server.reply = verdict_by_prompt
    fake_server.batches.polls_per_step = 10**6  # the batch stays "validating" until the signal
    run_dir = tmp_path / "waiting"
    args = overrides(fake_server, dataset, "judge.batch=on")
    proc = subprocess.Popen(cli_args(tmp_path, run_dir, tuple(args)), cwd=REPO, env=offline_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and fake_server.batches.polls < 2:  # polled twice: waiting
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    [line] = [ln for ln in out.splitlines() if "interrupted by SIGINT" in ln]
    assert f"resume={run_dir}" in line
    assert fake_server.batches.created == 1 and fake_server.requests == []

    # a resume with batch.wait=false, as a process too (the CLI's exit code is the point): the batch still validating,
    # it says how to collect it and exits 0
    later = run_process(*args, "batch.wait=false", f"resume={run_dir}", run_dir=run_dir)
    assert later.proc.returncode == 0, later.output
    assert f"collect it with resume={run_dir}" in later.output
    assert not (run_dir / "results.jsonl").exists()
    assert fake_server.batches.created == 1 and fake_server.requests == []

    fake_server.batches.polls_per_step = 1
    resumed = run_cli(*args, f"resume={run_dir}", run_dir=run_dir)
    assert resumed.proc.returncode == 0, resumed.output
    assert fake_server.batches.created == 1 and fake_server.requests == []
    assert len(results(run_dir).splitlines()) == 2 * N_ITEMS


def test_wait_false_submits_and_exits_zero_then_resume_collects(run_cli, fake_server, tmp_path):
    """In this process (a batch.wait=false process's exit code and line: the Ctrl-C test's resume)."""
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    fake_server.reply = verdict_by_prompt
    run_dir = tmp_path / "later"
    submitted = run_cli(*overrides(fake_server, dataset, "judge.batch=on", "batch.wait=false"), run_dir=run_dir)
    assert submitted.proc.returncode == 0, submitted.output
    assert f"collect it with resume={run_dir}" in submitted.output
    assert not (run_dir / "results.jsonl").exists() and fake_server.batches.created == 1
    collected = run_cli(*overrides(fake_server, dataset, "judge.batch=on"), f"resume={run_dir}", run_dir=run_dir)
    assert collected.proc.returncode == 0, collected.output
    assert fake_server.batches.created == 1 and fake_server.requests == []
    assert len(results(run_dir).splitlines()) == 2 * N_ITEMS


def _read(path) -> str:
    return path.read_text() if path.is_file() else ""


def test_batch_on_for_a_judge_without_a_batch_api_is_refused_before_any_call(run_cli, tmp_path):
    refused = run_cli("max_items=2", "tracking=off", "judge.batch=on")  # the default judge: replayed GPT-4
    assert refused.proc.returncode == 1
    assert "judge.batch=on: judge replay_gpt4 (replay/gpt-4) has no batch API" in refused.output
    assert not (refused.run_dir / "journal.jsonl").exists()


def test_auto_sends_live_below_the_threshold_and_batches_above_it(run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    fake_server.reply = verdict_by_prompt
    below = run_cli(*overrides(fake_server, dataset, "judge.batch=auto"))  # 2 * N_ITEMS calls <= 1000
    assert below.proc.returncode == 0, below.output
    assert fake_server.batches.created == 0 and len(fake_server.requests) == 2 * N_ITEMS
    fake_server.reset()
    above = run_cli(*overrides(fake_server, dataset, "judge.batch=auto", f"judge.batch_threshold={THRESHOLD}"))
    assert above.proc.returncode == 0, above.output
    assert fake_server.batches.created == 1 and fake_server.requests == []
    assert results(above.run_dir) == results(below.run_dir)


def test_dry_run_shows_the_live_and_the_batch_price_side_by_side(run_cli, fake_server):
    result = run_cli("judge=gpt4o_mini", f"judge.api_base={fake_server.base_url}", "dry_run=true", "tracking=off")
    assert result.proc.returncode == 0, result.output
    live = re.search(r"^cost: prompts \$([\d.]+), at most \$([\d.]+)$", result.proc.stdout, re.M)
    batch = re.search(r"^cost through the batch API: prompts \$([\d.]+), at most \$([\d.]+)$", result.proc.stdout,
                      re.M)
    assert live and batch, result.proc.stdout
    assert float(batch[2]) == pytest.approx(float(live[2]) / 2, abs=2e-4)  # gpt-4o-mini's batch prices: half
    assert fake_server.requests == [] and fake_server.batches.created == 0


def test_a_cancelled_batch_is_reported_and_its_rows_are_sent_again_and_counted_in_mlflow(run_cli, fake_server,
                                                                                        tmp_path):
    """Issue 34 point 3: a batch cancelled at the provider ends with what it returned (nothing here); its rows go
    live, counted as calls/batch_resent in metrics.json, summary.json and MLflow."""
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    fake_server.reply = verdict_by_prompt
    tracked = [o for o in overrides(fake_server, dataset, "judge.batch=on") if o != "tracking=off"]
    submitted = run_cli(*tracked, "batch.wait=false")
    assert submitted.proc.returncode == 0, submitted.output
    [batch_id] = fake_server.batches.batches
    assert fake_server.batches.cancel(batch_id)["status"] == "cancelled"
    resumed = run_cli(*tracked, f"resume={submitted.run_dir}", run_dir=submitted.run_dir)
    assert resumed.proc.returncode == 0, resumed.output
    assert f"batch {batch_id} ended cancelled: 0 answers, {2 * N_ITEMS} rows unanswered (sent live)" in resumed.output
    assert len(fake_server.requests) == 2 * N_ITEMS and fake_server.batches.created == 1
    metrics = json.loads((resumed.run_dir / "metrics.json").read_text())
    assert metrics["calls/batch_resent"] == 2 * N_ITEMS
    summary = json.loads((resumed.run_dir / "summary.json").read_text())
    assert summary["summary"]["batch_resent"] == 2 * N_ITEMS
    client = MlflowClient(tracking_uri=resumed.mlflow_uri)
    runs = client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id])
    assert [r.data.metrics["calls/batch_resent"] for r in runs] == [2 * N_ITEMS]


def test_a_batch_over_the_budget_is_refused_before_its_upload(run_cli, fake_server, tmp_path):
    """Issue 34 point 3: with budget.max_usd, a batch's worst case is booked before submission."""
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    fake_server.reply = verdict_by_prompt
    run = run_cli(*overrides(fake_server, dataset, "judge.batch=on", "judge.price_as=gpt-4o-mini",
                             "budget.max_usd=0.001"))
    assert run.proc.returncode == BUDGET_REACHED, run.output
    assert re.search(rf"budget\.max_usd reached: spent \$0\.000000 of the \$0\.001000 limit, and a batch of "
                     rf"{2 * N_ITEMS} calls could cost up to \$[\d.]+ \(\$[\d.]+ in all, over the limit\), so nothing "
                     r"more was sent\. Every answer is kept: continue with "
                     rf"resume={re.escape(str(run.run_dir))} budget\.max_usd=<more>", run.output), run.output
    assert fake_server.batches.files == {} and fake_server.batches.created == 0 and fake_server.requests == []
    assert not list(run.run_dir.glob("batch_input_*"))  # a resume with more plans it again
    assert BATCHES_NAME not in {p.name for p in run.run_dir.iterdir()}

    more = run_cli(*overrides(fake_server, dataset, "judge.batch=on", "judge.price_as=gpt-4o-mini",
                              "budget.max_usd=1"), f"resume={run.run_dir}", run_dir=run.run_dir)
    assert more.proc.returncode == 0, more.output
    assert fake_server.batches.created == 1 and fake_server.requests == []
    metrics = json.loads((more.run_dir / "metrics.json").read_text())  # batch answers at price_as's batch price
    expected = batch_price("gpt-4o-mini", int(metrics["tokens/prompt"]), int(metrics["tokens/completion"]))
    assert expected and metrics["cost/usd_total"] == pytest.approx(expected) and metrics["cost/unknown_calls"] == 0


def panel(server, dataset, *extra: str) -> list[str]:
    """Two members on the fake server (told apart by their seed), judging the test's pairs in both orders."""
    return [*live_members(server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
            f"dataset.path={dataset}", "order=both", "cache.mode=off", "tracking=off", "batch.poll_s=0.05", *extra]


def test_a_panel_s_members_are_batched_and_a_resume_collects_without_paying_twice(run_cli, fake_server, tmp_path):
    """judge.batch=on for an ensemble whose members all have a batch API: one batch per member (each journaled in
    its member directory), submitted by a batch.wait=false run that exits 0 and collected by its resume; no live call,
    each member's judgments once, and the results of a live panel run but for the cost."""
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    fake_server.reply = verdict_by_prompt
    live = run_cli(*panel(fake_server, dataset))
    assert live.proc.returncode == 0, live.output
    fake_server.reset()
    run_dir = tmp_path / "panel"
    submitted = run_cli(*panel(fake_server, dataset, "judge.batch=on", "batch.wait=false"), run_dir=run_dir)
    assert submitted.proc.returncode == 0, submitted.output
    assert fake_server.batches.created == 2 and fake_server.requests == []  # every member's batch submitted at once
    said = next(line for line in submitted.output.splitlines() if "collect them with resume=" in line)
    assert said.endswith(f"collect them with resume={run_dir}") and said.count(": batch ") == 2, said  # both named
    collected = run_cli(*panel(fake_server, dataset, "judge.batch=on"), f"resume={run_dir}", run_dir=run_dir)
    assert collected.proc.returncode == 0, collected.output
    assert fake_server.batches.created == 2 and fake_server.requests == []
    for member, seed in (("a", 1), ("b", 2)):
        member_dir = run_dir / "members" / member
        uploaded = (member_dir / "batch_input_0.jsonl").read_text().splitlines()
        assert len(uploaded) == 2 * N_ITEMS and {json.loads(line)["body"]["seed"] for line in uploaded} == {seed}
        journal = [json.loads(line) for line in (member_dir / "journal.jsonl").read_text().splitlines()]
        assert len(journal) == 2 * N_ITEMS == len({(r["item_id"], r["order"]) for r in journal})
        assert '"collected"' in (member_dir / BATCHES_NAME).read_text()
    for live_row, batch_row in zip(rows(live.run_dir), rows(run_dir), strict=True):
        assert {k: v for k, v in batch_row.items() if k not in BATCH_PRICED} == \
            {k: v for k, v in live_row.items() if k not in BATCH_PRICED}


def mixed_panel(server, dataset, *extra: str) -> list[str]:
    """Member a on an openai/ model (a batch API), member b on lm_studio/ (none), both on the fake server."""
    return [*(o.replace("judge.members.b.model=openai/", "judge.members.b.model=lm_studio/")
              for o in panel(server, dataset)), *extra]


def test_a_panel_with_a_member_without_a_batch_api_is_refused_with_on_and_partly_batched_with_auto(
        run_cli, fake_server, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    fake_server.reply = verdict_by_prompt
    refused = run_cli(*mixed_panel(fake_server, dataset, "judge.batch=on"))
    assert refused.proc.returncode == 1, refused.output
    assert "judge.batch=on: ensemble member b (lm_studio/fake-judge) has no batch API" in refused.output
    assert fake_server.requests == [] and fake_server.batches.created == 0
    auto = run_cli(*mixed_panel(fake_server, dataset, "judge.batch=auto", f"judge.batch_threshold={THRESHOLD}"))
    assert auto.proc.returncode == 0, auto.output
    assert fake_server.batches.created == 1  # member a's calls in a batch
    assert len(fake_server.requests) == 2 * N_ITEMS and {body["seed"] for body in fake_server.requests} == {2}
    assert not (auto.run_dir / "members" / "b" / BATCHES_NAME).exists()


def test_a_batched_run_s_stderr_has_no_event_loop_is_closed(run_cli, fake_server, tmp_path):
    """The batch phase's HTTP clients are closed on their own event loop before it ends: runs whose failed rows go
    live after the batch (a later loop, where litellm's unclosed batch clients used to be garbage-collected and their
    close scheduled) log no "Task exception was never retrieved ... Event loop is closed" (without the fix, the
    in-process run shows it)."""
    dataset = tmp_path / "pairs.jsonl"
    write_dataset(dataset)
    fake_server.reply = verdict_by_prompt
    fake_server.batches.fail = lambda custom_id: json.loads(custom_id)[0] in {"q3", "q7"}
    for _ in range(2):  # in this process, as a sweep's jobs run: the second run's loops come after the first's
        run = run_cli(*overrides(fake_server, dataset, "judge.batch=on"))
        assert run.proc.returncode == 0, run.output
        assert "Event loop is closed" not in run.output and "never retrieved" not in run.output, run.output
    assert fake_server.batches.created == 2 and len(fake_server.requests) == 2 * 4


def test_an_ensemble_with_batch_on_and_a_member_without_a_batch_api_is_refused_before_any_call(run_cli):
    """A panel (judge=ensemble) is never batched silently: judge.batch=on with a member whose provider has no batch
    API is refused with one line naming it, before any call."""
    refused = run_cli("judge=ensemble", "max_items=2", "tracking=off", "judge.batch=on")
    assert refused.proc.returncode == 1, refused.output
    assert "judge.batch=on: ensemble member replay_gpt4 (replay/gpt-4) has no batch API" in refused.output
    assert not (refused.run_dir / "journal.jsonl").exists()
