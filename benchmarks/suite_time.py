"""How long `make test` and `make test-fast` take in a clean clone, and where their CPU goes (`make test-time`).

    python -m benchmarks.suite_time [--runs 2] [--out benchmarks/suite_time.json] [--keep]

Clones HEAD into a temporary directory, runs `make install` there, then `make test` and `make test-fast` ``--runs``
times each, back to back, exactly as the README runs them. Each is timed (wall, and the CPU of every process it
waited for) with the 1-minute load average before and after. Before each it measures the machine's speed
(:data:`YARDSTICK`: the CPU of `python -c "import litellm"` in the clone's venv, median of 3; what every judgesweep
process pays first): it moved from 3.4 to 2.4 CPU-s within one session, and the suite's time with it.

The runs load this module as a pytest plugin as well (``PYTEST_ADDOPTS=-p benchmarks.suite_time``): each test
process appends, for every test, its wall time, its own CPU and the CPU of the processes it started and waited for
(``RUSAGE_CHILDREN``) to ``$JUDGESWEEP_SUITE_CPU_DIR``. From these, for each `make test`: the CPU in the test
processes, the CPU in processes tests start (judgesweep's CLI, its publishing process, servers), the modules that
spend most, and the floor those set on 2 cores: no ordering of the tests ends before CPU / cores.

Prints Markdown rows for docs/performance.md's test-time table and writes everything to ``--out``. Never run by
`make test`: it takes ~20 minutes (two of each on 2 cores) and says nothing a test should assert.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
CPU_DIR_VAR = "JUDGESWEEP_SUITE_CPU_DIR"
YARDSTICK = ("-c", "import litellm")


# --- the pytest plugin: one JSON line per test, in each test process -------------------------------------------

def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Record the test's wall time, own CPU and waited-for children's CPU (setup, call and teardown)."""
    directory = os.environ.get(CPU_DIR_VAR)
    if not directory:
        yield
        return
    start, (own, children) = time.monotonic(), _cpu()
    yield
    own_after, children_after = _cpu()
    row = {"test": item.nodeid, "wall_s": round(time.monotonic() - start, 4),
           "own_cpu_s": round(own_after - own, 4), "child_cpu_s": round(children_after - children, 4)}
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(Path(directory) / f"{worker}-{os.getpid()}.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")


# --- what the rows say -----------------------------------------------------------------------------------------

def read_rows(directory: Path) -> list[dict[str, Any]]:
    """Every test's row written under ``directory`` by the plugin."""
    return [json.loads(line) for path in sorted(directory.glob("*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def split(rows: list[dict[str, Any]], cores: int, top: int = 10) -> dict[str, Any]:
    """The CPU in the test processes and in the processes tests started, the floor each sets on ``cores`` cores,
    and the ``top`` modules by wall time (a module's tests run in one process: `--dist loadscope`)."""
    own = sum(r["own_cpu_s"] for r in rows)
    children = sum(r["child_cpu_s"] for r in rows)
    by_module: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for r in rows:
        module = by_module[r["test"].split("::", 1)[0]]
        module[0] += r["wall_s"]
        module[1] += r["own_cpu_s"]
        module[2] += r["child_cpu_s"]
        module[3] += 1
    modules = sorted(by_module.items(), key=lambda kv: -kv[1][0])[:top]
    return {
        "tests": len(rows),
        "own_cpu_s": round(own, 1),
        "child_cpu_s": round(children, 1),
        "floor_s": round((own + children) / cores, 1),
        "child_floor_s": round(children / cores, 1),
        "modules": [{"module": name, "wall_s": round(w, 1), "own_cpu_s": round(o, 1), "child_cpu_s": round(c, 1),
                     "tests": int(n)} for name, (w, o, c, n) in modules],
    }


# --- the clean clone and its timed runs ------------------------------------------------------------------------

def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``cmd``; its wall time, the CPU of every process it waited for, load before/after, exit code, output."""
    before_load = round(os.getloadavg()[0], 2)
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    return {"cmd": " ".join(cmd), "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "returncode": proc.returncode,
            "load_before": before_load, "load_after": round(os.getloadavg()[0], 2), "output": proc.stdout + proc.stderr}


def _pytest_line(output: str) -> str:
    """pytest's last line without its = padding (``2253 passed, 3 skipped, ... in 360.12s``)."""
    lines = [line.strip(" =") for line in output.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    return lines[-1] if lines else "no pytest summary"


def yardstick(python: Path, times: int = 3) -> float:
    """Median CPU-s of ``python -c "import litellm"``: this machine's speed today, beside its test times."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return statistics.median(_run([str(python), *YARDSTICK], REPO, env)["cpu_s"] for _ in range(times))


def _minutes(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60} s" if whole >= 60 else f"{whole} s"


def row(target: str, commit: str, run: dict[str, Any], speed: float) -> str:
    """One Markdown row of docs/performance.md's test-time table."""
    day = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    passed = re.search(r"(\d+) passed", run["pytest"])
    return (f"| `{target}` | {day}, {commit} | {_minutes(run['wall_s'])}, {run['cpu_s']:.0f} CPU-s "
            f"(`import litellm` {speed:.2f} CPU-s) | {passed.group(1) if passed else run['pytest']} passed "
            f"| {run['load_before']:.2f} -> {run['load_after']:.2f} |")


def measure(runs: int, keep: bool) -> dict[str, Any]:
    """The clean clone, its install, ``runs`` x (make test, make test-fast), the CPU split of each make test."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="judgesweep-suite-time-"))
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", CPU_DIR_VAR)}
    result: dict[str, Any] = {"commit": commit, "cores": os.cpu_count(), "clone": str(clone), "runs": []}
    install = _run(["make", "install"], clone, env)
    result["install"] = {k: v for k, v in install.items() if k != "output"}
    if install["returncode"] != 0:
        raise SystemExit(f"make install failed in {clone}:\n{install['output'][-3000:]}")
    python = clone / ".venv" / "bin" / "python"
    for n in range(runs):
        for target in ("test", "test-fast"):
            speed = yardstick(python)  # beside each run: it moved from 3.4 to 2.4 CPU-s within one session
            cpu_dir = work / f"cpu-{target}-{n}"
            cpu_dir.mkdir()
            run = _run(["make", target], clone, {**env, "PYTEST_ADDOPTS": "-p benchmarks.suite_time",
                                                  CPU_DIR_VAR: str(cpu_dir)})
            run["pytest"] = _pytest_line(run.pop("output"))
            run["target"] = f"make {target}"
            run["split"] = split(read_rows(cpu_dir), os.cpu_count() or 1)
            run["import_litellm_cpu_s"] = speed
            result["runs"].append(run)
            print(row(f"make {target}", commit, run, speed), flush=True)
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="how many times each target runs (default 2)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "suite_time.json")
    parser.add_argument("--keep", action="store_true", help="keep the clone and the per-test rows")
    args = parser.parse_args(argv)
    result = measure(args.runs, args.keep)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for run in result["runs"]:
        s = run["split"]
        print(f"{run['target']}: {run['cpu_s']:.0f} CPU-s in all; in the test processes {s['own_cpu_s']:.0f}, in "
              f"processes the tests started {s['child_cpu_s']:.0f} (alone {s['child_floor_s']:.0f} s on "
              f"{result['cores']} cores); {run['pytest']}")
    return 0 if all(r["returncode"] == 0 for r in result["runs"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
