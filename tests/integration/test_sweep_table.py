"""The sweep table fits 120 columns: rows of a real sweep (jobs run in this process into one sweep directory) with
long override values and many metrics (per-category statistics with their CIs), rendered on a 120-column console."""

from __future__ import annotations

import io
import json

from rich.console import Console

from runner.outputs import sweep
from tests.integration.shared import by_topic, topic_overrides, write_topic_dataset


def test_a_wide_sweep_is_printed_within_120_columns_with_every_value(run_cli, fake_server, tmp_path):
    fake_server.reply = by_topic
    for job in (0, 1):
        dataset = tmp_path / f"pairs_of_a_dataset_with_a_long_descriptive_name_number_{job}.jsonl"
        write_topic_dataset(dataset)
        result = run_cli(*topic_overrides(fake_server, dataset, tmp_path, job), "judge.temperature=0.25",
                         run_dir=tmp_path / "sweep" / str(job))
        assert result.proc.returncode == 0, result.output
    rows = sweep.collect(tmp_path / "sweep")
    assert len([k for k in rows[0] if k.startswith("by_")]) > 10  # many metrics
    screen = io.StringIO()
    sweep.render(rows, Console(file=screen, width=120, force_terminal=True, color_system=None))
    text = screen.getvalue()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 120, "\n" + text
    assert "sweep: 2 jobs (1/" in text  # the metrics that do not fit beside the overrides: a second table
    first_column = "".join(line.split("│")[2].strip() for line in lines if line.count("│") > 2)
    for row in rows:  # each job's differing override, whole even where folded
        assert row["dataset.path"] in first_column
    assert text.count("win_rate") >= 2 and "agreement_ci" not in text  # a CI is under its value, not a column
    # issue 44 point 2: the users' ours_win_rate is a column (strict wins, 2 of 4 items: math's), beside the
    # ties-half rate; no column is a bare "win rate"
    summary = json.loads((tmp_path / "sweep" / "0" / "summary.json").read_text())["summary"]
    assert [row["ours_win_rate"] for row in rows] == [summary["ours_win_rate"]] * 2
    assert "ours_win_rate" in text and "ties-half" in text and "win rate" not in text
    for column in ("agreement", "kappa", "by_category/", "math/", "by_tag/"):
        assert column in text


def test_a_column_is_named_by_its_key_without_hydras_plus(tmp_path):
    """A new category's weight reaches Hydra as ``++rubric.category_weights...`` (runner.run.open_mappings) and an
    added key as ``+key``: the sweep table's column is the key itself (issue 44 point 6)."""
    job = tmp_path / "0" / ".hydra"
    job.mkdir(parents=True)
    (job / "overrides.yaml").write_text("- ++rubric.category_weights.casual.tone=0.5\n- +judge.note=x\n- judge=a\n")
    assert sweep.job_overrides(tmp_path / "0") == {"rubric.category_weights.casual.tone": "0.5", "judge.note": "x",
                                                   "judge": "a"}
