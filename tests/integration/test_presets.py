"""Every preset in conf/experiment/ runs through a real multirun, so no preset can rot.

Presets whose judge needs an API key are pointed at the loopback server (the preset's other choices
stay); replay presets run as they are.
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.integration.conftest import REPO, live_judge

PRESETS = sorted(p.stem for p in (REPO / "conf" / "experiment").glob("*.yaml"))


def needs_key(preset: str) -> bool:
    """True when the preset's judge reads an API key (a live provider)."""
    doc = yaml.safe_load((REPO / "conf" / "experiment" / f"{preset}.yaml").read_text())
    judge = next((d["override /judge"] for d in doc.get("defaults", []) if "override /judge" in d), None)
    if judge is None:
        return False
    return bool(yaml.safe_load((REPO / "conf" / "judge" / f"{judge}.yaml").read_text()).get("api_key_env"))


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_runs_in_a_multirun(run_cli, fake_server, preset):
    extra = live_judge(fake_server) if needs_key(preset) else []
    result = run_cli(f"experiment={preset}", "max_items=4", *extra, multirun=True)
    assert result.proc.returncode == 0, result.output
    summaries = list(result.run_dir.glob("*/summary.json"))
    assert len(summaries) == 1
    summary = json.loads(summaries[0].read_text())["summary"]
    assert summary["total_subsets"] == 4 and summary["successful_evaluations"] >= 1
