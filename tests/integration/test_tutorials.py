"""Every `judgesweep` command of the tutorials (docs/tutorials/*.md) and the CI-gate and ensembles how-tos' commands
that need no key run here as written: each test reads its commands from the pages (RUNS says which test runs which
command, and test_every_command_of_the_tutorials_is_run_by_a_test fails on a command no test runs), runs them in this
process (replayed or recorded judges, no key, no network; ``tracking=off`` added, which no page's output depends on)
and checks what the page says they print. A command that needs a key runs too: it must stop before any call, naming
the key (issue 44 point 7)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from runner.app import aggregate_cli, calibration, compare_cli
from tests.docs_blocks import REPO, blocks, commands
from tests.integration.conftest import REPLAY_SWEEP, copy_store, replay_sweep

TUTORIALS = sorted((REPO / "docs" / "tutorials").glob("*.md"))
USERS_FILES = REPO / "tests" / "fixtures" / "users" / "aggregate"

# Every judgesweep command of docs/tutorials/*.md, as "<page>: <arguments>", and the test of this module that runs it.
RUNS = {
    "agent-rubric.md: experiment=agent_rubric dry_run=true":
        "test_the_agent_rubric_tutorial_scores_its_recorded_answers",
    "agent-rubric.md: experiment=agent_rubric judge=recorded judge.path=pkg://runner/data/examples/agent_answers.jsonl":
        "test_the_agent_rubric_tutorial_scores_its_recorded_answers",
    "agent-rubric.md: experiment=agent_rubric": "test_the_commands_that_need_a_key_stop_before_any_call_naming_it",
    "agent-rubric.md: experiment=agent_rubric rubric=agent_output_strict":
        "test_the_commands_that_need_a_key_stop_before_any_call_naming_it",
    "agent-rubric.md: experiment=agent_rubric dataset.path=my/validation.json":
        "test_the_commands_that_need_a_key_stop_before_any_call_naming_it",
    "agent-rubric.md: experiment=agent_rubric_generate":
        "test_the_commands_that_need_a_key_stop_before_any_call_naming_it",
    "agent-rubric.md: experiment=reply_quality": "test_the_commands_that_need_a_key_stop_before_any_call_naming_it",
    "reply-quality.md: experiment=reply_quality dry_run=true":
        "test_the_reply_quality_tutorial_correlates_with_humans_fails_its_gate_and_reaggregates",
    "reply-quality.md: experiment=reply_quality judge=recorded judge.path=pkg://runner/data/examples/reply_answers.jsonl":
        "test_the_reply_quality_tutorial_correlates_with_humans_fails_its_gate_and_reaggregates",
    "robust-pairwise.md: experiment=robust_pairwise judge=replay_gpt4 prompt=llmbar_vanilla rubric=llmbar "
    "dataset=llmbar_natural max_items=20": "test_the_robust_pairwise_tutorial_runs_on_replayed_gpt4",
    "robust-pairwise.md: aggregate eval1.json eval2.json eval3.json experiment=robust_pairwise":
        "test_the_users_evaluation_files_reaggregate",
    "robust-pairwise.md: aggregate scores.jsonl experiment=reply_quality gate.min_mean_score=null":
        "test_the_reply_quality_tutorial_correlates_with_humans_fails_its_gate_and_reaggregates",
    "robust-pairwise.md: aggregate eval1.json eval2.json eval3.json experiment=robust_pairwise "
    "aggregation=dawid_skene": "test_the_users_evaluation_files_reaggregate",
    "robust-pairwise.md: aggregate eval1.json eval2.json eval3.json experiment=robust_pairwise aggregation=weighted "
    "'+aggregation.params.weights={eval1: 3}'": "test_the_users_evaluation_files_reaggregate",
    "robust-pairwise.md: aggregate runA/results.jsonl runB/results.jsonl members=gpt4,chatgpt aggregation=dawid_skene":
        "test_two_judges_runs_reaggregate_as_an_ensemble",
    "robust-pairwise.md: -m experiment=robust_pairwise repeats=1 sample=0,1,2":
        "test_the_independent_samples_sweep_stops_each_job_naming_its_key",
    "sweep.md: -m judge=replay_gpt4,replay_chatgpt prompt=llmbar_vanilla,llmbar_vanilla_norules,llmbar_swap":
        "test_the_sweep_tutorial_shows_items_by_configuration_and_compares_them",
    "sweep.md: compare --sweep 'outputs/multirun/<date>/<time>'":
        "test_the_sweep_tutorial_shows_items_by_configuration_and_compares_them",
    "sweep.md: -m experiment=calibrate_llmbar":
        "test_the_calibration_pages_held_out_line_is_what_its_best_config_gives",
    "sweep.md: -m experiment=calibrate_llmbar hydra.sweeper.n_trials=30":
        "test_the_calibration_pages_held_out_line_is_what_its_best_config_gives",
}


# ... and by pattern, the commands another change may reword: the aggregate of the robust-pairwise tutorial's runs
# (issue 44 point 1 adds what it lacks).
PATTERNS = {r"robust-pairwise\.md: aggregate 'outputs/runs/\*/\*/results\.jsonl' ":
            "test_the_robust_pairwise_runs_reaggregate"}


def page_commands() -> list[str]:
    """Every judgesweep command of the tutorials as "<page>: <arguments>", in page order."""
    return [f"{page.name}: {shlex.join(args)}" for page, args in commands(TUTORIALS)]


def runner_of(command: str) -> str | None:
    """The test that runs a tutorial command, or None."""
    return RUNS.get(command) or next((test for pattern, test in PATTERNS.items() if re.match(pattern, command)), None)


def commands_of(test: str) -> list[list[str]]:
    """The arguments of the tutorial commands ``test`` runs, read from the pages, in page order."""
    return [shlex.split(command.split(": ", 1)[1]) for command in page_commands() if runner_of(command) == test]


def page_command(page: str, needle: str) -> list[str]:
    """The overrides of the page's one judgesweep command that contains ``needle``."""
    found = [args for _, args in commands([REPO / "docs" / page]) if any(needle in a for a in args)]
    assert len(found) == 1, found
    return found[0]


def output(run) -> str:
    return run.proc.stdout + run.proc.stderr


def test_every_command_of_the_tutorials_is_run_by_a_test() -> None:
    on_pages = page_commands()
    assert len(on_pages) == len(set(on_pages)) >= 20
    assert [c for c in on_pages if runner_of(c) is None] == [], "tutorial commands no test runs: add them to RUNS"
    assert sorted(set(RUNS) - set(on_pages)) == [], "RUNS names commands no page has"
    assert {t for t in [*RUNS.values(), *PATTERNS.values()] if not callable(globals().get(t))} == set()
    assert len(commands_of("test_the_robust_pairwise_runs_reaggregate")) == 2


def test_the_agent_rubric_tutorial_scores_its_recorded_answers(run_cli) -> None:
    dry, recorded = commands_of("test_the_agent_rubric_tutorial_scores_its_recorded_answers")
    assert "dry run, no call made" in output(run_cli(*dry, "tracking=off"))
    run = run_cli(*recorded, "tracking=off")
    assert run.proc.returncode == 0, output(run)
    assert "passed 10, failed 1, not scored 1 of 12 items: pass rate 83.3%" in output(run)
    assert "PASS gate.min_pass_rate" in output(run)
    rows = [json.loads(line) for line in (run.run_dir / "results.jsonl").read_text().splitlines()]
    unscored = [r for r in rows if r["status"] == "unscored"]
    assert len(unscored) == 1 and unscored[0]["raw_response"].startswith("The output looks fine")
    assert unscored[0]["parse_error"]


def test_the_tutorials_recorded_answers_ship_in_the_package() -> None:
    """The no-key tutorials read their recorded answers from the package (pkg://runner/...), which the wheel carries
    file by file (tests/integration/test_wheel_install.py), so they run from an installed wheel in any directory."""
    from runner.inputs.datasets import resolve_path

    package = REPO / "runner"
    paths = [a.split("=", 1)[1] for _, args in commands(TUTORIALS) for a in args if a.startswith("judge.path=")]
    assert len(paths) == 2
    for path in paths:
        assert path.startswith("pkg://runner/data/"), path
        found = resolve_path(path, Path("/nonexistent"))
        assert found.is_file() and found.resolve().is_relative_to(package.resolve()), found


def test_the_commands_that_need_a_key_stop_before_any_call_naming_it(run_cli) -> None:
    """The agent-rubric page's live commands (its preset's gpt4o_mini needs OPENAI_API_KEY) compose, and stop in one
    line naming the key before any call or any file of a run."""
    live = commands_of("test_the_commands_that_need_a_key_stop_before_any_call_naming_it")
    assert len(live) == 5
    for args in live:
        run = run_cli(*args, "tracking=off")
        assert run.proc.returncode == 1, (args, output(run))
        assert "MissingApiKey: judge.api_key_env=OPENAI_API_KEY: environment variable OPENAI_API_KEY is not set" in \
            output(run) or "generator.api_key_env=OPENAI_API_KEY" in output(run), (args, output(run))
        assert not (run.run_dir / "journal.jsonl").exists()


@pytest.mark.slow
def test_the_independent_samples_sweep_stops_each_job_naming_its_key(run_cli) -> None:
    """The robust-pairwise page's three independent samples as a sweep (the preset's gpt4o_mini, a key): without
    OPENAI_API_KEY every one of its three jobs stops before any call, naming the key."""
    (args,) = commands_of("test_the_independent_samples_sweep_stops_each_job_naming_its_key")
    run = run_cli(*args[1:], "tracking=off", multirun=True)
    assert run.proc.returncode == 1, output(run)
    assert output(run).count("environment variable OPENAI_API_KEY is not set") == 3, output(run)
    assert not list(run.run_dir.glob("*/journal.jsonl"))


def test_the_reply_quality_tutorial_correlates_with_humans_fails_its_gate_and_reaggregates(run_cli, tmp_path,
                                                                                           monkeypatch) -> None:
    dry, recorded, again = commands_of(
        "test_the_reply_quality_tutorial_correlates_with_humans_fails_its_gate_and_reaggregates")
    assert "dry run, no call made" in output(run_cli(*dry, "tracking=off"))
    run = run_cli(*recorded, "tracking=off")
    assert run.proc.returncode == 1
    assert "human agreement (n=16): pearson" in output(run)
    assert "FAIL gate.min_mean_score: mean score 4.812 < 6" in output(run)
    # "Scores you already have are re-aggregated without a call": this run's scores as the page's scores.jsonl
    monkeypatch.chdir(tmp_path)
    shutil.copy(run.run_dir / "results.jsonl", tmp_path / again[1])
    assert aggregate_cli.main([*again[1:], "tracking=off", "output_dir=agg"]) == 0  # the gate is off
    first = json.loads((run.run_dir / "summary.json").read_text())
    assert json.loads((tmp_path / "agg" / "summary.json").read_text())["summary"]["average_overall"] == \
        first["summary"]["average_overall"]


def test_the_robust_pairwise_tutorial_runs_on_replayed_gpt4(run_cli) -> None:
    (args,) = commands_of("test_the_robust_pairwise_tutorial_runs_on_replayed_gpt4")
    run = run_cli(*args, "tracking=off")
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


def test_the_robust_pairwise_runs_reaggregate(run_cli, tmp_path, monkeypatch) -> None:
    """The tutorial's run three times (three run directories under outputs/runs/), then the page's two aggregate
    commands over outputs/runs/*/*/results.jsonl (the shell's glob) from that directory. The replayed judge answers
    alike whatever the sample, so the three are copies: each aggregate still counts every run's votes."""
    (run_args,) = commands_of("test_the_robust_pairwise_tutorial_runs_on_replayed_gpt4")
    for n in range(3):
        run = run_cli(*run_args, "tracking=off", run_dir=tmp_path / "outputs" / "runs" / "day" / f"time{n}")
        assert run.proc.returncode == 0, output(run)
    votes = run.summary()["summary"]["num_evaluation_runs"]  # the preset's repeats=3
    monkeypatch.chdir(tmp_path)
    for args in commands_of("test_the_robust_pairwise_runs_reaggregate"):
        files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.glob(args[1]))
        assert len(files) == 3
        out = tmp_path / next(a.split("=", 1)[1] for a in args if a.startswith("output_dir="))
        shutil.rmtree(out, ignore_errors=True)
        assert aggregate_cli.main([*files, *args[2:]]) == 0
        summary = json.loads((out / "summary.json").read_text())
        assert summary["summary"]["num_evaluation_runs"] == 3 * votes  # each run's votes per item, three runs


def test_the_users_evaluation_files_reaggregate(tmp_path, monkeypatch, capsys) -> None:
    """The page's eval1.json eval2.json eval3.json commands on three users' files (tests/fixtures/users/aggregate/)."""
    for n in (1, 2, 3):
        shutil.copy(USERS_FILES / f"eval{n}.json", tmp_path)
    monkeypatch.chdir(tmp_path)
    for n, args in enumerate(commands_of("test_the_users_evaluation_files_reaggregate")):
        assert aggregate_cli.main([*args[1:], "tracking=off", f"output_dir=agg{n}"]) == 0, capsys.readouterr()
        summary = json.loads((tmp_path / f"agg{n}" / "summary.json").read_text())
        assert summary["aggregated_results"], args
    assert "ensemble" in json.loads((tmp_path / "agg1" / "summary.json").read_text())  # dawid_skene: members


def test_two_judges_runs_reaggregate_as_an_ensemble(run_cli, tmp_path, monkeypatch) -> None:
    """`aggregate runA/results.jsonl runB/results.jsonl members=gpt4,chatgpt aggregation=dawid_skene`: runA and runB
    are replayed GPT-4's and ChatGPT's runs on LLMBar Natural (the default dataset), 10 items each."""
    (args,) = commands_of("test_two_judges_runs_reaggregate_as_an_ensemble")
    for name, judge in (("runA", "replay_gpt4"), ("runB", "replay_chatgpt")):
        run = run_cli(f"judge={judge}", "max_items=10", "tracking=off", run_dir=tmp_path / name)
        assert run.proc.returncode == 0, output(run)
    monkeypatch.chdir(tmp_path)
    assert aggregate_cli.main([*args[1:], "tracking=off", "output_dir=agg"]) == 0
    summary = json.loads((tmp_path / "agg" / "summary.json").read_text())
    assert set(summary["ensemble"]["members"]) == {"gpt4", "chatgpt"}


def test_the_sweep_tutorial_shows_items_by_configuration_and_compares_them(tmp_path_factory, tmp_path, monkeypatch,
                                                                            capsys) -> None:
    """The page's sweep is the session's replay sweep (conftest.REPLAY_SWEEP, run once and shared): its report.html
    holds the item x configuration section the page names; `judgesweep compare --sweep <its directory>` runs from a
    directory whose default store (outputs/mlflow.db) is a copy of the sweep's."""
    sweep_args, compare_args = commands_of("test_the_sweep_tutorial_shows_items_by_configuration_and_compares_them")
    assert sweep_args == ["-m", *REPLAY_SWEEP]
    sweep = replay_sweep(tmp_path_factory)
    assert sweep.proc.returncode == 0, sweep.output
    report = (sweep.run_dir / "report.html").read_text(encoding="utf-8")
    assert "Items x configurations (100 items, 6 jobs)" in report
    assert "Items x configurations (100 items, 6 jobs)" in (REPO / "docs" / "tutorials" / "sweep.md").read_text()
    (tmp_path / "outputs").mkdir()
    copy_store(sweep.mlflow_uri, tmp_path / "outputs")
    monkeypatch.chdir(tmp_path)
    args = [a.replace("outputs/multirun/<date>/<time>", str(sweep.run_dir)) for a in compare_args[1:]]
    compare_cli.main([*args, "--no-log"])
    printed = capsys.readouterr().out
    assert "Holm" in printed and printed.count("replay_gpt4") >= 3


def test_the_calibration_pages_held_out_line_is_what_its_best_config_gives(run_cli) -> None:
    """The page prints the search's two lines; the held-out one is the best configuration (the dev line's) run once
    on the test split, so that run here must print the page's line, interval included. The searches themselves run
    in tests/integration/test_calibration.py (2 trials, 30 items: the preset and its callback; 10 or 30 trials only
    take longer)."""
    searches = commands_of("test_the_calibration_pages_held_out_line_is_what_its_best_config_gives")
    assert [a[:2] for a in searches] == [["-m", "experiment=calibrate_llmbar"]] * 2
    (printed,) = [text for _, text in blocks("", [REPO / "docs" / "tutorials" / "sweep.md"]) if "calibration:" in text]
    dev_line, test_line = printed.strip().splitlines()
    dev = re.fullmatch(r"calibration: best of (\d+) trials on dev \((\d+) items\): (\S+) ([\d.]+) with (.*)", dev_line)
    assert dev, dev_line
    best = dict(o.split("=", 1) for o in dev[5].split())
    run = run_cli("experiment=calibrate_llmbar", *(f"{k}={v}" for k, v in best.items()), "dataset.split=test",
                  "tracking=off")
    assert run.proc.returncode == 0, output(run)
    metrics = json.loads((run.run_dir / "metrics.json").read_text())
    outcome = {"objective": dev[3], "best_params": best, "trials": int(dev[1]),
               "dev": {"value": float(dev[4]), "items": int(dev[2])},
               "test": {"value": metrics[dev[3]], "ci_low": metrics[f"{dev[3]}_ci_low"],
                        "ci_high": metrics[f"{dev[3]}_ci_high"], "items": int(metrics["items/total"])}}
    assert calibration.console_lines(outcome) == [dev_line, test_line]


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


def test_the_ensembles_how_to_runs_without_a_key_and_a_member_left_alone_is_said(run_cli) -> None:
    """Its no-key commands run as written (max_items=20 added: 100 items x 2 members x 2 orders is that run, longer);
    the replace-one command composes and, without the key its new member needs, stops before any call naming it;
    removing one of the shipped two (issue 44 point 7: it failed with a bare count) names the judge that is left."""
    page = [args for _, args in commands([REPO / "docs" / "how-to" / "ensembles.md"]) if args[0] == "judge=ensemble"]
    plain, dawid_skene, add, replace = page
    for args in (plain, dawid_skene):
        run = run_cli(*args, "tracking=off", "max_items=20")
        assert run.proc.returncode == 0, output(run)
        assert "ensemble of replay_gpt4, replay_chatgpt" in output(run), output(run)
    for args in (add, replace):
        run = run_cli(*args, "tracking=off")
        assert run.proc.returncode == 1 and "judge.members.mini.api_key_env=OPENAI_API_KEY" in output(run), output(run)
    removed = [a for a in replace if "mini" not in a]
    run = run_cli(*removed, "tracking=off")
    assert run.proc.returncode == 1
    said = ("judge ensemble: one member is left (replay_gpt4) and an ensemble needs two or more judge.members: "
            "judge=replay_gpt4 runs it alone")
    assert said in output(run)
    assert said in " ".join((REPO / "docs" / "how-to" / "ensembles.md").read_text().split())


def test_the_providers_how_to_dry_runs_a_local_server_without_a_key_or_a_call(run_cli) -> None:
    (args,) = [args for _, args in commands([REPO / "docs" / "how-to" / "providers.md"])]
    assert "dry_run=true" in args and "judge=local_openai" in args
    run = run_cli(*args, "tracking=off")
    assert run.proc.returncode == 0, output(run)
    assert "dry run, no call made" in output(run) and "judge local_openai (openai/llama3.1)" in output(run)
