"""budget.max_usd (issue 34 point 4): calls are sent only while the spent cost plus the worst case of the calls in
flight stays within it; at the limit the run writes its partial summary, exits BUDGET_REACHED with one line and the
resume command, and a resume with a higher limit pays only what the journal lacks. Real HTTP through litellm to the
fake server, priced as gpt-4o-mini (judge.price_as)."""

from __future__ import annotations

import json
import re

import litellm
import pytest

from runner.core.errors import BUDGET_REACHED
from runner.storage import store
from tests.fakes.openai_server import Reply
from tests.integration.conftest import live_judge
from tests.integration.shared import live_members

ITEMS = 8  # chat_vs_simple's first items, one order each: 8 calls
ANSWER = Reply(content="[[A]]", prompt_tokens=300, completion_tokens=100)
PER_CALL = sum(litellm.cost_per_token(model="gpt-4o-mini", prompt_tokens=300, completion_tokens=100))
# answers that use nearly all of max_tokens (512): the run costs about what the dry run's upper bound says
LONG = Reply(content="[[A]]", prompt_tokens=300, completion_tokens=500)
PER_LONG_CALL = sum(litellm.cost_per_token(model="gpt-4o-mini", prompt_tokens=300, completion_tokens=500))


def overrides(server, *extra: str) -> list[str]:
    return [*live_judge(server), "judge.price_as=gpt-4o-mini", "prompt=mtbench_pair", "rubric=mtbench_verdict",
            "dataset=chat_vs_simple", f"max_items={ITEMS}", "order=fixed", "cache.mode=off", "tracking=off",
            "concurrency=1", *extra]


def stop_line(output: str) -> re.Match:
    found = re.search(r"budget\.max_usd reached: spent \$([\d.]+) of the \$([\d.]+) limit, and the next call could "
                      r"cost up to \$([\d.]+) \(\$[\d.]+ in all, over the limit\), so nothing more was sent\. Every "
                      r"answer is kept: continue with resume=(\S+) budget\.max_usd=<more>", output)
    assert found, output
    return found


def journal_lines(run_dir) -> int:
    return len((run_dir / store.JOURNAL_NAME).read_text().splitlines())


def test_a_budget_below_the_dry_run_estimate_stops_then_a_resume_with_more_pays_nothing_twice(run_cli, fake_server):
    """The Done-when: set below the dry run's estimate, the run stops at the limit; resumed with a higher limit it
    runs to the end, and the fake server saw each call once."""
    dry = run_cli(*overrides(fake_server, "dry_run=true"))
    estimate = float(re.search(r"^cost: prompts \$[\d.]+, at most \$([\d.]+)$", dry.proc.stdout, re.M)[1])
    limit = estimate / 2
    fake_server.reply = lambda body: LONG
    stopped = run_cli(*overrides(fake_server, f"budget.max_usd={limit}"))
    assert stopped.proc.returncode == BUDGET_REACHED, stopped.output
    spent, said_limit, _, resume = stop_line(stopped.output).groups()
    assert float(said_limit) == pytest.approx(limit, abs=1e-6) and resume == str(stopped.run_dir)
    paid_first = len(fake_server.requests)
    assert 0 < paid_first < ITEMS and float(spent) <= limit
    assert float(spent) == pytest.approx(paid_first * PER_LONG_CALL, abs=1e-6)
    assert journal_lines(stopped.run_dir) == paid_first  # every paid answer kept
    summary = json.loads((stopped.run_dir / store.SUMMARY_NAME).read_text())
    assert "stopped by budget.max_usd" in json.dumps(summary), summary  # the partial summary says why

    # a little more than before, far less than the whole run costs: the answers journaled before cost nothing
    # against it (counted, they would leave room for no call)
    assert ITEMS * PER_LONG_CALL > 1.01 * limit
    resumed = run_cli(*overrides(fake_server, f"budget.max_usd={1.01 * limit}"), f"resume={stopped.run_dir}",
                      run_dir=stopped.run_dir)
    assert resumed.proc.returncode == 0, resumed.output
    prompts = [json.dumps(body["messages"]) for body in fake_server.requests]
    assert len(prompts) == ITEMS == len(set(prompts))  # the resume paid exactly the calls the journal lacked
    results = (resumed.run_dir / "results.jsonl").read_text().splitlines()
    assert len(results) == ITEMS


def test_the_budget_stops_exactly_at_the_limit(run_cli, fake_server):
    """One call at a time: the run pays while its spending plus the next call's worst case fits, and stops at the
    first call whose worst case would not: spent <= limit < spent + that worst case, said in one line on stderr (the
    CLI process's exit code and line: test_a_sweeps_jobs_share_one_budget_through_its_ledger)."""
    fake_server.reply = lambda body: ANSWER
    limit = 5.5 * PER_CALL  # a worst case (prompt + max_tokens=512 completion tokens) is several answers' cost
    run = run_cli(*overrides(fake_server, f"budget.max_usd={limit}"))
    assert run.proc.returncode == BUDGET_REACHED, run.output
    [line] = [line for line in run.proc.stderr.splitlines() if "budget.max_usd reached" in line]
    assert line.startswith("judgesweep: budget.max_usd reached")
    spent, _, worst, _ = (float(g) if n < 3 else g for n, g in enumerate(stop_line(line).groups()))
    paid = len(fake_server.requests)
    assert paid >= 1 and spent == pytest.approx(paid * PER_CALL, abs=1e-6)
    assert spent <= limit < spent + worst
    assert worst > PER_CALL  # the worst case counts max_tokens, not the answer's 100 tokens


def test_an_unpriced_judge_with_a_budget_is_refused_before_any_call(run_cli, fake_server):
    fake_server.reply = lambda body: ANSWER
    run = run_cli(*live_judge(fake_server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
                  "max_items=2", "order=fixed", "tracking=off", "budget.max_usd=1")
    assert run.proc.returncode != 0
    assert "budget.max_usd=1.0 needs priced calls" in run.output and "judge.model=openai/fake-judge" in run.output
    assert fake_server.requests == []


def test_a_budget_must_be_positive(run_cli, fake_server):
    run = run_cli(*overrides(fake_server, "budget.max_usd=0"))
    assert run.proc.returncode != 0 and "budget.max_usd=0.0: must be > 0" in run.output
    assert fake_server.requests == []


def test_a_sweeps_jobs_share_one_budget_through_its_ledger(run_process, fake_server):
    """Two jobs of one multirun, one after the other: the second starts with what the first paid in the sweep's
    ledger and stops once the sweep's spending plus its next call's worst case would pass the one limit; on their
    own budgets (not shared) it would have paid all but one of its calls. The CLI process (the exit code is the point)
    says so in one line on stderr."""
    fake_server.reply = lambda body: ANSWER
    limit = 7.5 * PER_CALL  # a worst case is ~3.3 answers: job 0 pays its 4 calls, job 1 then has room for one
    run = run_process(*[o for o in overrides(fake_server, f"budget.max_usd={limit}") if not o.startswith("max_items")],
                      "max_items=4,6", "output.plots=false", multirun=True)
    assert run.proc.returncode == BUDGET_REACHED, run.output
    assert len(fake_server.requests) == 4 + 1
    ledger = json.loads((run.run_dir / "budget_ledger.json").read_text())
    assert ledger["spent"] == pytest.approx(5 * PER_CALL) and ledger["spent"] <= limit
    assert ledger["reserved"] == {}  # every reservation settled
    [line] = [line for line in run.proc.stderr.splitlines() if "budget.max_usd reached" in line]  # the CLI's one line
    assert line.startswith("judgesweep: budget.max_usd reached")
    spent, said_limit, _, _ = stop_line(line).groups()
    assert float(spent) == pytest.approx(5 * PER_CALL, abs=1e-6) and float(said_limit) == pytest.approx(limit, abs=1e-6)


def panel(server, *extra: str) -> list[str]:
    """An ensemble of two members on the fake server (told apart by their seed), each priced as gpt-4o-mini."""
    return [*live_members(server), "judge.members.a.price_as=gpt-4o-mini", "judge.members.b.price_as=gpt-4o-mini",
            "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple", f"max_items={ITEMS}",
            "order=fixed", "cache.mode=off", "tracking=off", "concurrency=1", *extra]


def test_a_panel_s_members_spend_from_one_budget_and_a_resume_with_more_pays_nothing_twice(run_cli, fake_server):
    """budget.max_usd for an ensemble: every member's calls are admitted into one limit; below the dry run's
    estimate (both members' upper bounds) the run stops with the member whose next call did not fit named, writes its
    partial summary; resumed with more it finishes, the fake server having seen each member's call once."""
    dry = run_cli(*panel(fake_server, "dry_run=true"))
    assert dry.proc.returncode == 0, dry.output
    bounds = re.findall(r"^cost: prompts \$[\d.]+, at most \$([\d.]+)$", dry.proc.stdout, re.M)
    assert len(bounds) == 2, dry.proc.stdout  # one estimate per member, at its own price
    assert "judge member a (openai/fake-judge)" in dry.proc.stdout
    limit = sum(map(float, bounds)) / 2
    fake_server.reply = lambda body: LONG
    stopped = run_cli(*panel(fake_server, f"budget.max_usd={limit}"))
    assert stopped.proc.returncode == BUDGET_REACHED, stopped.output
    found = re.search(r"budget\.max_usd reached: spent \$([\d.]+) of the \$([\d.]+) limit, and member [ab]'s next "
                      r"call could cost up to \$[\d.]+ \(\$[\d.]+ in all, over the limit\), so nothing more was sent\. "
                      r"Every answer is kept: continue with resume=(\S+) budget\.max_usd=<more>", stopped.output)
    assert found, stopped.output
    spent, said_limit, resume = float(found[1]), float(found[2]), found[3]
    paid_first = len(fake_server.requests)
    assert 0 < paid_first < 2 * ITEMS and spent <= limit and resume == str(stopped.run_dir)
    assert said_limit == pytest.approx(limit, abs=1e-6)
    assert spent == pytest.approx(paid_first * PER_LONG_CALL, abs=1e-6)
    assert {body["seed"] for body in fake_server.requests} == {1, 2}  # both members paid from the one budget
    members = stopped.run_dir / "members"
    assert journal_lines(members / "a") + journal_lines(members / "b") == paid_first  # every paid answer kept
    summary = json.loads((stopped.run_dir / store.SUMMARY_NAME).read_text())
    assert "stopped by budget.max_usd" in json.dumps(summary), summary

    resumed = run_cli(*panel(fake_server, f"budget.max_usd={2 * ITEMS * PER_LONG_CALL}"),
                      f"resume={stopped.run_dir}", run_dir=stopped.run_dir)
    assert resumed.proc.returncode == 0, resumed.output
    calls = [(body["seed"], json.dumps(body["messages"])) for body in fake_server.requests]
    assert len(calls) == 2 * ITEMS == len(set(calls))  # each member's each call made once, across both processes
    assert len((resumed.run_dir / "results.jsonl").read_text().splitlines()) == 2 * ITEMS


def test_a_panel_with_an_unpriced_member_and_a_budget_is_refused_naming_it(run_cli, fake_server):
    run = run_cli(*[o for o in panel(fake_server, "budget.max_usd=1") if o != "judge.members.b.price_as=gpt-4o-mini"])
    assert run.proc.returncode != 0
    assert "no price for judge.members.b.model=openai/fake-judge: set judge.members.b.price_as=" in run.output
    assert fake_server.requests == []
