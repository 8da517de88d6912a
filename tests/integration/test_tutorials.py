"""The tutorials' runnable commands (docs/tutorials/, docs/how-to/ci-gates.md) do what their pages say: each test
reads its command from the page itself, runs it in this process (recorded or replayed judges, no key, no network)
and checks the lines the page quotes."""

from __future__ import annotations

import json

from runner.app import aggregate_cli
from tests.docs_blocks import REPO, commands


def page_command(page: str, needle: str) -> list[str]:
    """The overrides of the page's one judgesweep command that contains ``needle``."""
    found = [args for _, args in commands([REPO / "docs" / page]) if any(needle in a for a in args)]
    assert len(found) == 1, found
    return found[0]


def output(run) -> str:
    return run.proc.stdout + run.proc.stderr


def test_the_agent_rubric_tutorial_scores_its_recorded_answers(run_cli) -> None:
    run = run_cli(*page_command("tutorials/agent-rubric.md", "judge=recorded"), "tracking=off")
    assert run.proc.returncode == 0, output(run)
    assert "passed 10, failed 1, not scored 1 of 12 items: pass rate 83.3%" in output(run)
    assert "PASS gate.min_pass_rate" in output(run)
    rows = [json.loads(line) for line in (run.run_dir / "results.jsonl").read_text().splitlines()]
    unscored = [r for r in rows if r["status"] == "unscored"]
    assert len(unscored) == 1 and unscored[0]["raw_response"].startswith("The output looks fine")
    assert unscored[0]["parse_error"]


def test_the_reply_quality_tutorial_correlates_with_humans_and_fails_its_gate(run_cli) -> None:
    run = run_cli(*page_command("tutorials/reply-quality.md", "judge=recorded"), "tracking=off")
    assert run.proc.returncode == 1
    assert "human agreement (n=16): pearson" in output(run)
    assert "FAIL gate.min_mean_score: mean score 4.812 < 6" in output(run)


def test_the_robust_pairwise_tutorial_runs_on_replayed_gpt4(run_cli) -> None:
    run = run_cli(*page_command("tutorials/robust-pairwise.md", "judge=replay_gpt4"), "tracking=off")
    assert run.proc.returncode == 0, output(run)
    assert "confidence: unanimous" in output(run) and "agreement with gold" in output(run)
    assert {"summary.json", "users_summary.json", "results.jsonl", "report.html"} <= {
        p.name for p in run.run_dir.iterdir()}
    # the page's aggregate command on this run's results (issue 44 point 7): the run's statistics, the run's AC1
    [args] = [a for _, a in commands([REPO / "docs" / "tutorials" / "robust-pairwise.md"])
              if a[0] == "aggregate" and "rubric=llmbar" in a]
    out = run.run_dir.parent / "agg"
    args = [str(run.run_dir / "results.jsonl") if "*" in a else f"output_dir={out}" if "output_dir=" in a else a
            for a in args[1:]]
    assert aggregate_cli.main([*args, "output.plots=false"]) == 0
    ac1 = [json.loads((d / "summary.json").read_text())["statistics"]["chance_corrected"]["all"]["gwet_ac1"]
           for d in (run.run_dir, out)]
    assert ac1[0]["value"] == ac1[1]["value"], ac1


def test_the_ci_gate_how_to_fails_the_cheaper_judge_against_its_baseline(run_cli) -> None:
    first, second = (args for _, args in commands([REPO / "docs" / "how-to" / "ci-gates.md"]))
    assert second == page_command("how-to/ci-gates.md", "gate.baseline_run")
    baseline = run_cli(*first)
    assert baseline.proc.returncode == 0, output(baseline)
    run_id = json.loads((baseline.run_dir / "run.json").read_text())["mlflow_run_id"]
    gated = [a.replace("<RUN_ID>", run_id) for a in second]
    run = run_cli(*gated)
    assert run.proc.returncode == 1
    assert "FAIL gate.max_drop: agreement/accuracy_all 0.8250 vs 0.9500 in baseline run" in output(run)
