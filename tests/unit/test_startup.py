"""Start-up imports: the CLI composes, prints help and validates without litellm, MLflow or the statistics stack,
and a run imports the statistics stack only after its judge calls (issue 12: start-up to the first request).

Each check runs a fresh interpreter, the only way to see what an import pulls in (importing the run's modules, then
a run with plots off and one with them on: one interpreter, each step's imports told apart by where they come in its
output). What is asserted is which modules are loaded, never how long
anything takes (speed is for benchmarks/).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Needed by no step before the first judge call.
STATISTICS = {"scipy", "statsmodels", "krippendorff", "sklearn", "matplotlib"}
# Needed by no step of --help, --cfg or config validation.
RUN_ONLY = {"litellm", "openai", "mlflow"} | STATISTICS
IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", re.MULTILINE)


def imported_by(*args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``python -X importtime <args>`` from the repo root; its result and the top-level packages it imported."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HYDRA_FULL_ERROR": "1"}
    proc = subprocess.run([sys.executable, "-X", "importtime", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)
    return proc, {name.split(".")[0] for name in IMPORTED.findall(proc.stderr)}


def test_importing_the_cli_imports_no_run_module():
    proc, modules = imported_by("-c", "import runner.app.cli, sys; "
                                      "print(sorted(m for m in sys.modules if m.startswith('runner.')))")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert modules & RUN_ONLY == set()
    loaded = set(proc.stdout.split("'")[1::2])
    assert loaded & {"runner.run.pipeline", "runner.llm.client", "runner.outputs.tracking",
                     "runner.run.outcome"} == set()


@pytest.mark.parametrize(("flags", "printed"), [
    (["--help"], "judge: "),  # the judge group and its options
    (["--cfg", "job"], "name: replay_gpt4"),  # the composed config
    (["--cfg", "job", "judge=gpt4o_mini"], "api_key_env: OPENAI_API_KEY"),  # a judge with a key, not needed here
])
def test_help_and_cfg_compose_without_litellm_mlflow_or_statistics(flags, printed):
    proc, modules = imported_by("-m", "runner", *flags)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert printed in proc.stdout
    assert modules & RUN_ONLY == set()


def test_the_position_bias_tests_import_no_scipy_stats():
    # A pairwise run without gold needs scipy.stats for nothing else: ~52 MB at the run's peak (issue 28).
    code = ("from runner.core.types import JudgeRequest, JudgeResponse, Judgment, Order, Status, Verdict\n"
            "from runner.modes.bias import position_bias\n"
            "js = [Judgment(JudgeRequest(f'i{i}', 0, o, 'judge', ''), JudgeResponse(text='.'), Verdict('A'),\n"
            "               'ours' if o is Order.AB else 'base', Status.SCORED)\n"
            "      for i in range(10) for o in (Order.AB, Order.BA)]\n"
            "r = position_bias(js)\n"
            "print(r['binomial_p'], r['sign_test_p'])\n")
    proc, _ = imported_by("-c", code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # the first slot wins all 20 verdicts, so all 10 items lean toward it
    assert proc.stdout.split() == [repr(2 * 0.5**20), repr(2 * 0.5**10)]
    assert "scipy.stats" not in set(IMPORTED.findall(proc.stderr))


IMPORTED_PIPELINE = "-- runner.run.pipeline imported --"


@pytest.fixture(scope="module")
def pipeline_then_sweep(tmp_path_factory) -> tuple[subprocess.CompletedProcess, str, str, str]:
    """One fresh interpreter (``python -X importtime``) for two checks: it imports runner.run.pipeline first, then runs
    ``python -m runner -m tracking=off max_items=3 output.plots=false,true``, a multirun whose jobs run in order, plots
    off (job 0), then on (job 1). -X importtime's lines (stderr), a line printed after the import and the launcher's
    "#1 : ..." line (stdout), unbuffered into one pipe, tell what each step imported. The process, what the import
    imported, what job 0 did, what job 1 (and the sweep's end) did; the sweep directory is ``proc.sweep_dir``."""
    tmp = tmp_path_factory.mktemp("startup_sweep")
    args = ["-m", "tracking=off", "max_items=3", "output.plots=false,true", f"hydra.sweep.dir={tmp / 'multirun'}",
            f"cache.path={tmp / 'cache.sqlite'}"]
    code = (f"import runner.run.pipeline\nprint({IMPORTED_PIPELINE!r}, flush=True)\nimport runpy, sys\n"
            f"sys.argv = ['runner', *{args!r}]\nrunpy.run_module('runner', run_name='__main__', alter_sys=True)\n")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HYDRA_FULL_ERROR": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)
    proc.sweep_dir = tmp / "multirun"  # type: ignore[attr-defined]
    pipeline, marked, sweep = proc.stdout.partition(IMPORTED_PIPELINE)
    job_0, second, job_1 = sweep.partition("#1 : ")
    assert marked and second, proc.stdout[-3000:]
    return proc, pipeline, job_0, job_1


def test_everything_a_run_needs_before_its_first_judge_call_imports_no_statistics_or_mlflow(pipeline_then_sweep):
    # runner.run.pipeline imports every module of a run (prepare, the paid stages, and the outcome they hand on): the
    # fresh interpreter's first import
    proc, imported, _, _ = pipeline_then_sweep
    assert proc.returncode == 0, proc.stdout[-2000:]
    modules = {name.split(".")[0] for name in IMPORTED.findall(imported)}
    assert "litellm" in modules  # the run's modules were really imported
    assert modules & (STATISTICS | {"mlflow"}) == set()
    # nor at all: pandas with pyarrow is ~65 MB at the run's peak (the sweep report's item view imported it once)
    assert modules & {"pandas", "pyarrow"} == set()


def test_a_run_imports_matplotlib_only_to_draw_its_plots(pipeline_then_sweep):
    # output.plots=false (CI gates, large sweeps): report.html with its tables and no figure, matplotlib not imported
    proc, _, job_0, job_1 = pipeline_then_sweep
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "output.plots=true" in job_1.splitlines()[0].lower(), proc.stdout[-2000:]
    for plots, imported, job in ((False, job_0, "0"), (True, job_1, "1")):
        modules = {name.split(".")[0] for name in IMPORTED.findall(imported)}
        report = (proc.sweep_dir / job / "report.html").read_text(encoding="utf-8")
        assert "<h2>Verdict distribution</h2>" in report
        assert ("matplotlib" in modules) is plots and ("data:image/png" in report) is plots
        assert ("plots are off (output.plots=false)" in report) is not plots
