"""Separate runs meant as independent repetitions are independent, or say loudly that they are not (issue 44 point
1): a run whose answers the response cache served says how many on the console and in summary.json; ``sample=s``
asks the repeats of its own (judge seed, swap_random coin, cache key), so three runs ``sample=0,1,2`` re-aggregated
give what one ``repeats=3`` run gives; ``judgesweep aggregate`` names result files that are copies of each other."""

from __future__ import annotations

import json
from pathlib import Path

from runner.app import aggregate_cli
from tests.fakes.openai_server import Reply
from tests.integration.conftest import live_judge

PAIRS = Path(__file__).resolve().parents[1] / "fixtures" / "users" / "failures" / "pairs.jsonl"
ITEMS = 4


def by_seed(body: dict) -> Reply:
    """A judge whose answer follows the request's seed (judge.seed + repeat): seed 1 prefers B, others A."""
    return Reply(content="[[B]]" if body.get("seed") == 1 else "[[A]]")


def robust(tmp_path: Path, server, *extra: str) -> list[str]:
    data = tmp_path / "pairs.jsonl"
    if not data.exists():
        data.write_text("".join(PAIRS.read_text().splitlines(keepends=True)[:ITEMS]))
    return ["experiment=robust_pairwise", *live_judge(server), f"dataset.path={data}", "tracking=off",
            "output.plots=false", *extra]


def test_a_run_served_from_the_cache_says_so_and_another_sample_is_independent(run_cli, fake_server, tmp_path):
    fake_server.reply = by_seed
    first = run_cli(*robust(tmp_path, fake_server, "repeats=1"), run_dir=tmp_path / "r0")
    assert first.proc.returncode == 0, first.output
    assert "answers_from_cache" not in first.summary()["summary"] and "response cache" not in first.output
    paid = len(fake_server.requests)
    again = run_cli(*robust(tmp_path, fake_server, "repeats=1"), run_dir=tmp_path / "again")
    assert again.proc.returncode == 0, again.output
    assert len(fake_server.requests) == paid  # every answer a copy of the first run's
    assert again.summary()["summary"]["answers_from_cache"] == ITEMS
    assert f"{ITEMS} of {ITEMS} judge answers came from the response cache" in again.output
    assert "no independent sample of the judge; for an independent repetition run with sample=1" in again.output
    other = run_cli(*robust(tmp_path, fake_server, "repeats=1", "sample=1"), run_dir=tmp_path / "r1")
    assert other.proc.returncode == 0, other.output
    assert len(fake_server.requests) == paid + ITEMS  # asked again: its own samples
    assert {r["seed"] for r in fake_server.requests[paid:]} == {1}
    assert "answers_from_cache" not in other.summary()["summary"]
    finals = {k: v["verdicts"] for k, v in other.summary()["aggregated_results"].items()}
    assert finals != {k: v["verdicts"] for k, v in first.summary()["aggregated_results"].items()}


def test_aggregate_names_files_that_are_copies_and_keeps_an_earlier_output(run_cli, fake_server, tmp_path, capsys):
    fake_server.reply = by_seed
    files = []
    for name in ("r0", "copy"):
        run = run_cli(*robust(tmp_path, fake_server, "repeats=1"), run_dir=tmp_path / name)
        assert run.proc.returncode == 0, run.output
        files.append(str(run.run_dir / "results.jsonl"))
    twin = tmp_path / "twin.jsonl"  # r0's rows, keys sorted: other bytes, the same answers
    twin.write_text("".join(json.dumps(json.loads(line), sort_keys=True) + "\n"
                            for line in Path(files[0]).read_text().splitlines()))
    out = tmp_path / "agg"
    args = [*files, str(twin), "experiment=robust_pairwise", f"dataset.path={tmp_path / 'pairs.jsonl'}", "tracking=off",
            "output.plots=false", f"output_dir={out}"]
    capsys.readouterr()
    assert aggregate_cli.main(args) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    assert len(warnings) == 3, warnings  # one line for each two files
    assert f"{files[0]} and {files[1]} are the same file" in warnings[0]  # byte for byte: the cache's answers
    assert f"{files[0]} and {twin}: {ITEMS} of {ITEMS} items have the same raw answers" in warnings[1]
    assert "not independent votes" in warnings[1]
    written = (out / "summary.json").read_text()
    assert aggregate_cli.main([*args[:2], *args[3:]]) == 1  # the output of the first: kept
    assert f"output_dir={out} already holds files" in capsys.readouterr().err
    assert (out / "summary.json").read_text() == written
    assert aggregate_cli.main([*args[:2], *args[3:], "overwrite=true"]) == 0  # said so: written over
    assert json.loads((out / "summary.json").read_text())["summary"]["num_evaluation_runs"] == 2


def test_three_samples_re_aggregated_are_one_run_with_three_repeats(run_cli, fake_server, tmp_path):
    fake_server.reply = by_seed
    files = []
    for sample in (0, 1, 2):
        run = run_cli(*robust(tmp_path, fake_server, "repeats=1", f"sample={sample}"), run_dir=tmp_path / f"s{sample}")
        assert run.proc.returncode == 0, run.output
        files.append(str(run.run_dir / "results.jsonl"))
    paid = len(fake_server.requests)
    assert paid == 3 * ITEMS
    out = tmp_path / "agg"
    assert aggregate_cli.main([*files, *robust(tmp_path, fake_server)[:1], f"dataset.path={tmp_path / 'pairs.jsonl'}",
                               "tracking=off", "output.plots=false", f"output_dir={out}"]) == 0
    aggregated = json.loads((out / "summary.json").read_text())
    one = run_cli(*robust(tmp_path, fake_server), run_dir=tmp_path / "k3")  # repeats=3: the same three samples
    assert one.proc.returncode == 0, one.output
    assert len(fake_server.requests) == paid  # ... served from the cache: they are the same requests
    doc = one.summary()
    for key in ("final_verdict_distribution", "confidence_distribution", "ours_win_rate", "num_evaluation_runs"):
        assert aggregated["summary"][key] == doc["summary"][key], key
    assert doc["summary"]["confidence_distribution"]["majority"] == ITEMS  # seed 1 dissents on every item
    assert {k: v["final_verdict"] for k, v in aggregated["aggregated_results"].items()} == \
        {k: v["final_verdict"] for k, v in doc["aggregated_results"].items()}
