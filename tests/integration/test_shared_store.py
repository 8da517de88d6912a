"""Processes started at once in a fresh working directory share its default MLflow store (outputs/mlflow.db) and
response cache: the first to arrive creates them, the others wait for it and use them; none fails on a half-made
store ("table runs already exists", alembic's "Online migration expected to match one row"). The processes are the
point."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from tests.integration.conftest import REPO, live_judge, offline_env

pytestmark = pytest.mark.slow

PROCESSES = 2  # one creates the store and the cache, the other waits for it


def test_processes_started_at_once_share_a_fresh_store_and_cache(fake_server, tmp_path):
    fake_server.reply = lambda body: "Verdict: [[A]]"
    dataset = tmp_path / "pairs.jsonl"
    dataset.write_text("".join(json.dumps({"id": f"q{n}", "prompt": f"question {n}", "chat": f"chat {n}",
                                           "simple_chat": f"simple {n}"}) + "\n" for n in range(2)))
    args = [sys.executable, "-m", "runner", *live_judge(fake_server), "prompt=mtbench_pair", "rubric=mtbench_verdict",
            "dataset=chat_vs_simple", f"dataset.path={dataset}", f"prompts_dir={REPO / 'prompts'}",
            "output.plots=false"]  # the default store and cache are the point, not the figures
    procs = [subprocess.Popen([*args, f"hydra.run.dir={tmp_path / f'run{n}'}", f"judge.seed={n}"], cwd=tmp_path,
                              env=offline_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for n in range(PROCESSES)]
    outputs = [proc.communicate(timeout=600)[0] for proc in procs]
    for proc, out in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, out

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("judgesweep").experiment_id])
    assert len(runs) == PROCESSES and {r.info.status for r in runs} == {"FINISHED"}
    assert (tmp_path / "outputs" / "mlflow.db.lock").is_file()  # the lock the store was created under (README)
    # every process wrote its answers (each its own seed: 2 items x 2 orders) to the one cache
    with contextlib.closing(sqlite3.connect(tmp_path / "outputs" / "cache" / "responses.sqlite")) as conn:
        assert conn.execute("SELECT count(*) FROM responses").fetchone()[0] == PROCESSES * 2 * 2
