"""Building blocks of the benchmarks: the fake server as its own process, measured CLI runs, journals.

Every process the benchmarks start runs from the repo root with the same interpreter and environment
(``LITELLM_LOCAL_MODEL_COST_MAP=True``, loopback exempt from proxies), so the numbers compare like
with like.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
CLK_TCK = os.sysconf("SC_CLK_TCK")


def bench_env() -> dict[str, str]:
    """The environment of every process a benchmark starts."""
    env = dict(os.environ)
    env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_PROXY": "127.0.0.1,localhost",
                "no_proxy": "127.0.0.1,localhost", "HYDRA_FULL_ERROR": "1", "PYTHONUNBUFFERED": "1"})
    return env


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class FakeServer:
    """``python -m tests.fakes.openai_server`` in its own process, on a free loopback port.

    Args:
        latency_ms: Delay before every reply.
        rpm: The server's requests-per-minute limit (429 beyond it), or None.
        nodelay: Run it through benchmarks/nodelay_server.py (TCP_NODELAY on), a diagnostic variant.
    """

    def __init__(self, latency_ms: float = 0.0, rpm: int | None = None, nodelay: bool = False) -> None:
        self.latency_ms = latency_ms
        self.rpm = rpm
        self.nodelay = nodelay
        self.proc: subprocess.Popen | None = None
        self.base_url = ""

    def __enter__(self) -> FakeServer:
        module = "benchmarks.nodelay_server" if self.nodelay else "tests.fakes.openai_server"
        cmd = [PYTHON, "-m", module, "--port", "0", "--latency-ms", str(self.latency_ms)]
        if self.rpm is not None:
            cmd += ["--rpm", str(self.rpm)]
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=bench_env(), stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip() if self.proc.stdout else ""
        if not line.startswith("listening on "):
            self.__exit__()
            raise RuntimeError(f"fake server did not start: {line!r}")
        self.base_url = line.removeprefix("listening on ")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def stats(self) -> dict[str, Any]:
        """``GET /v1/_stats`` plus the server process's CPU seconds so far (``server_cpu_s``)."""
        with urllib.request.urlopen(f"{self.base_url}/_stats", timeout=10) as resp:
            stats = json.loads(resp.read())
        stats["server_cpu_s"] = _cpu_s(self.proc.pid) if self.proc else None
        return stats

    def reset(self) -> None:
        """``POST /v1/_reset``: forget requests, counters and timestamps."""
        request = urllib.request.Request(f"{self.base_url}/_reset", data=b"{}", method="POST")
        with urllib.request.urlopen(request, timeout=10) as resp:
            resp.read()


@dataclass
class Measured:
    """One measured child process (see benchmarks/measure.py)."""

    rc: int
    launch_ts: float
    end_ts: float
    wall_s: float
    maxrss_mb: float
    user_s: float
    sys_s: float
    stdout: str
    stderr: str


def run_measured(cmd: list[str], workdir: Path, tag: str, timeout_s: float | None = None) -> Measured:
    """Run ``cmd`` under a fresh benchmarks.measure helper; its output goes to ``workdir/tag.*``."""
    out, so, se = (workdir / f"{tag}.{ext}" for ext in ("json", "stdout", "stderr"))
    subprocess.run([PYTHON, "-m", "benchmarks.measure", str(out), str(so), str(se), "--", *cmd], cwd=REPO,
                   env=bench_env(), check=True, timeout=timeout_s)
    data = json.loads(out.read_text())
    return Measured(**data, stdout=so.read_text(errors="replace"), stderr=se.read_text(errors="replace"))


def judgesweep_cmd(api_base: str, dataset: Path, n: int, run_dir: Path, cache_path: Path, cache_mode: str = "off",
                   concurrency: int = 32, extra: tuple[str, ...] = (), python_args: tuple[str, ...] = ()) -> list[str]:
    """The judgesweep command line of every scenario (the first ``n`` rows of ``dataset``, order=fixed)."""
    return [PYTHON, *python_args, "-m", "runner", "judge=local_openai", "judge.model=openai/fake-judge",
            f"judge.api_base={api_base}", "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
            f"dataset.path={dataset}", f"max_items={n}", "order=fixed", f"concurrency={concurrency}",
            "progress=false", "tracking=off", f"cache.mode={cache_mode}", f"cache.path={cache_path}",
            f"hydra.run.dir={run_dir}", *extra]


def bare_loop_cmd(api_base: str, dataset: Path, n: int, concurrency: int = 32,
                  settings: tuple[str, ...] = (), judge_params: bool = False) -> list[str]:
    """The command line of benchmarks/bare_loop.py."""
    cmd = [PYTHON, "-m", "benchmarks.bare_loop", "--api-base", api_base, "--dataset", str(dataset), "--n", str(n),
           "--concurrency", str(concurrency)]
    for setting in settings:
        cmd += ["--set", setting]
    return cmd + (["--judge-params"] if judge_params else [])


def raw_http_cmd(api_base: str, dataset: Path, n: int, concurrency: int = 32) -> list[str]:
    """The command line of benchmarks/raw_http_loop.py (plain aiohttp, no litellm)."""
    return [PYTHON, "-m", "benchmarks.raw_http_loop", "--api-base", api_base, "--dataset", str(dataset), "--n", str(n),
            "--concurrency", str(concurrency)]


def journal_summary(run_dir: Path) -> dict[str, Any]:
    """Rows, distinct items, statuses and answer sources in a run's journal.jsonl."""
    path = run_dir / "journal.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.is_file() else []
    return {"rows": len(rows), "items": len({r["item_id"] for r in rows}),
            "status": dict(Counter(r["status"] for r in rows)), "source": dict(Counter(r["source"] for r in rows)),
            "rate_limited": sum(r.get("rate_limited") or 0 for r in rows),
            "attempts": sum(r.get("attempts") or 0 for r in rows)}


def calls_per_s(stats: dict[str, Any]) -> float | None:
    """Answered requests per second between the first request's arrival and the last answer."""
    first, last = stats.get("first_request_ts"), stats.get("last_response_ts")
    if not first or not last or last <= first:
        return None
    return stats["accepted"] / (last - first)


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages (other work on the machine skews every number)."""
    return [round(x, 2) for x in os.getloadavg()]


def wait_quiet(max_load: float = 0.5, max_wait_s: float = 0.0) -> float:
    """Wait up to ``max_wait_s`` for the 1-minute load average to fall below ``max_load``; return it."""
    deadline = time.monotonic() + max_wait_s
    while os.getloadavg()[0] > max_load and time.monotonic() < deadline:
        time.sleep(5)
    return os.getloadavg()[0]
