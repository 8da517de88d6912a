"""Every preset in conf/experiment/ runs, so no preset can rot: a calibration search as a real multirun
(python -m runner -m; on replay judges, the one test_calibration reads, run once per session), the others in this
process (runner.run_experiment).

Presets whose judge (or generator) needs an API key are pointed at the loopback server (the preset's
other choices stay); replay presets run as they are. The server answers pointwise prompts with a JSON
score for every criterion any shipped rubric has, pairwise prompts with an MT-Bench verdict.
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.integration.conftest import REPO, SEARCH_ITEMS, SEARCH_TRIALS, CliRun, calibration_search, live_judge
from tests.integration.shared import answer

PRESETS = sorted(p.stem for p in (REPO / "conf" / "experiment").glob("*.yaml"))
# The users' workflows (README intro): their presets also write users_summary.json in the users' own format
# (tests/integration/test_users_reports.py checks each against a file in that format).
USERS_PRESETS = {"agent_rubric", "agent_rubric_generate", "reply_quality", "robust_pairwise"}


def is_search(preset: str) -> bool:
    """A calibration search (an Optuna sweeper): it runs as a multirun process."""
    return "/hydra/sweeper: optuna" in (REPO / "conf" / "experiment" / f"{preset}.yaml").read_text()


def override(preset: str, group: str) -> str | None:
    """The option the preset picks for ``group``, or None."""
    doc = yaml.safe_load((REPO / "conf" / "experiment" / f"{preset}.yaml").read_text())
    return next((d[f"override /{group}"] for d in doc.get("defaults", []) if f"override /{group}" in d), None)


def needs_key(preset: str, group: str = "judge") -> bool:
    """True when the preset's judge (or generator) reads an API key (a live provider)."""
    option = override(preset, group)
    if option is None:
        return False
    return bool(yaml.safe_load((REPO / "conf" / group / f"{option}.yaml").read_text()).get("api_key_env"))


@pytest.mark.parametrize("preset", [pytest.param(p, marks=pytest.mark.slow) if is_search(p) else p for p in PRESETS])
def test_preset_runs(run_cli, fake_server, tmp_path_factory, preset):
    fake_server.reply = answer
    extra = live_judge(fake_server) if needs_key(preset) else []
    if needs_key(preset, "generator"):
        extra += ["generator=local_openai", f"generator.api_base={fake_server.base_url}",
                  "generator.model=openai/fake-generator"]
    search = is_search(preset)
    shared = search and not extra  # a calibration search on replay judges: test_calibration's (once per session)
    trials, items = (SEARCH_TRIALS, SEARCH_ITEMS) if shared else (2 if search else 0, 4)
    if shared:
        cwd, proc = calibration_search(tmp_path_factory, preset)  # trials on dev, then its held-out test run
        result = CliRun(proc=proc, run_dir=cwd / "multirun", mlflow_uri=f"sqlite:///{cwd / 'outputs' / 'mlflow.db'}")
    else:
        if search:  # a calibration search: two trials on dev, then its held-out test run
            extra += [f"hydra.sweeper.n_trials={trials}"]
        result = run_cli(f"experiment={preset}", f"max_items={items}", *extra, multirun=search)
    assert result.proc.returncode == 0, result.output
    summaries = sorted(result.run_dir.glob("*/summary.json")) if search else [result.run_dir / "summary.json"]
    assert len(summaries) == trials + 1  # a search's trials and its held-out test run (a run: itself)
    if search:
        assert json.loads((result.run_dir / "calibration.json").read_text())["test"]["ok"]
    summary = json.loads(summaries[0].read_text())["summary"]
    if "total_subsets" in summary:  # pairwise
        assert summary["total_subsets"] == items and summary["successful_evaluations"] >= 1
    else:  # pointwise
        assert summary["total"] == items and summary["scored"] == items
    users = summaries[0].parent / "users_summary.json"
    assert users.exists() is (preset in USERS_PRESETS)
    if users.exists():
        assert_users_keys(json.loads(summaries[0].read_text()), json.loads(users.read_text()))


def assert_users_keys(ours: dict, theirs: dict) -> None:
    """users_summary.json is the users' own format of summary.json's numbers: average_score for average_overall,
    actual for a judged output (pointwise); the users' 10 summary keys and aggregated_results (pairwise)."""
    if "total_subsets" in ours["summary"]:
        assert list(theirs) == ["summary", "aggregated_results"] and len(theirs["summary"]) == 10
        assert theirs["summary"]["tie_rate"] == ours["summary"]["tie_rate"]
        return
    s = theirs["summary"]
    assert s["average_score"] == ours["summary"]["average_overall"] and "average_overall" not in s
    rows = theirs["detailed_results"]
    assert [r["actual"] for r in rows] == [r["output"] for r in ours["detailed_results"]] and rows[0]["actual"]
    assert not any("output" in r for r in rows)
    assert "average_overall" in ours["summary"]  # summary.json keeps judgesweep's names
