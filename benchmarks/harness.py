"""Building blocks of the benchmarks: the fake server as its own process, measured CLI runs, journals.

Every process the benchmarks start runs from the repo root with the same interpreter and environment
(``LITELLM_LOCAL_MODEL_COST_MAP=True``, loopback exempt from proxies), so the numbers compare like
with like.
"""

from __future__ import annotations

import json
import os
import signal
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
        window_s: The server's sliding rate window (``rpm * window_s / 60`` requests per window).
        record: False starts it with ``--no-record`` (counters only: flat memory for long runs).
        sporadic_429: Share of requests answered 429 (Retry-After: 1) whatever the rate, seeded by ``sporadic_seed``.
    """

    def __init__(self, latency_ms: float = 0.0, rpm: int | None = None, nodelay: bool = False,
                 window_s: float = 60.0, record: bool = True, sporadic_429: float = 0.0,
                 sporadic_seed: int = 0) -> None:
        self.sporadic_429 = sporadic_429
        self.sporadic_seed = sporadic_seed
        self.latency_ms = latency_ms
        self.rpm = rpm
        self.nodelay = nodelay
        self.window_s = window_s
        self.record = record
        self.proc: subprocess.Popen | None = None
        self.base_url = ""

    def __enter__(self) -> FakeServer:
        module = "benchmarks.nodelay_server" if self.nodelay else "tests.fakes.openai_server"
        cmd = [PYTHON, "-m", module, "--port", "0", "--latency-ms", str(self.latency_ms)]
        if self.rpm is not None:
            cmd += ["--rpm", str(self.rpm), "--window-s", str(self.window_s)]
        if not self.record:
            cmd.append("--no-record")
        if self.sporadic_429:
            cmd += ["--sporadic-429", str(self.sporadic_429), "--sporadic-seed", str(self.sporadic_seed)]
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
    """One measured child process (see benchmarks/measure.py); after a timeout only rc, the stamps and
    wall_s are known (rc -1, the rest None)."""

    rc: int
    launch_ts: float
    end_ts: float
    wall_s: float
    maxrss_mb: float | None
    user_s: float | None
    sys_s: float | None
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def cpu_s(self) -> float | None:
        """User + system CPU seconds of the child, if known."""
        return None if self.user_s is None or self.sys_s is None else self.user_s + self.sys_s

    def tail(self, chars: int = 2000) -> str:
        """The end of the child's stderr then stdout, to say why it failed."""
        return (self.stderr[-chars:] + self.stdout[-chars // 2:]).strip()


def run_measured(cmd: list[str], workdir: Path, tag: str, timeout_s: float | None = None,
                 env: dict[str, str] | None = None) -> Measured:
    """Run ``cmd`` under a fresh benchmarks.measure helper; its output goes to ``workdir/tag.*``; ``env`` is
    added to bench_env() (the peers' offline settings).

    The helper and the command run in their own process group; after ``timeout_s`` that group (only it)
    is terminated and the result says ``timed_out``, so a hung run cannot stall the whole benchmark.
    """
    out, so, se = (workdir / f"{tag}.{ext}" for ext in ("json", "stdout", "stderr"))
    launched, started = time.time(), time.perf_counter()
    helper = subprocess.Popen([PYTHON, "-m", "benchmarks.measure", str(out), str(so), str(se), "--", *cmd],
                              cwd=REPO, env={**bench_env(), **(env or {})}, start_new_session=True)
    try:
        rc = helper.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop_group(helper)
        text = {p: p.read_text(errors="replace") if p.is_file() else "" for p in (so, se)}
        return Measured(rc=-1, launch_ts=launched, end_ts=time.time(), wall_s=time.perf_counter() - started,
                        maxrss_mb=None, user_s=None, sys_s=None, stdout=text[so],
                        stderr=text[se] + f"\n[benchmark: killed after {timeout_s:.0f} s]", timed_out=True)
    if rc != 0:
        raise RuntimeError(f"benchmarks.measure exited {rc} for {tag}")
    data = json.loads(out.read_text())
    return Measured(**data, stdout=so.read_text(errors="replace"), stderr=se.read_text(errors="replace"))


def _stop_group(helper: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL, to the process group of a helper this module started."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(helper.pid, sig)
        except ProcessLookupError:
            return
        try:
            helper.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def make_run_cmd() -> list[str]:
    """``make run``'s command: the venv's judgesweep console script (``python -m runner`` if there is none)."""
    script = Path(PYTHON).parent / "judgesweep"
    return [str(script)] if script.is_file() else [PYTHON, "-m", "runner"]


def judgesweep_cmd(api_base: str, dataset: Path, n: int, run_dir: Path, cache_path: Path, cache_mode: str = "off",
                   concurrency: int = 32, extra: tuple[str, ...] = (), python_args: tuple[str, ...] = (), *,
                   tracking: Path | None = None, order: str = "fixed", repeats: int = 1,
                   judge: str = "local_openai", model: str = "openai/fake-judge") -> list[str]:
    """The judgesweep command line of every scenario: the first ``n`` rows of ``dataset`` (``max_items``).

    Args:
        tracking: None runs with ``tracking=off``; a directory runs with the default ``tracking=sqlite``,
            its store (``mlflow.db``, ``mlartifacts/``) moved into that directory instead of ./outputs.
        order: ``fixed`` (one call per item per repeat) or ``both`` (two).
        repeats: Judge every item this many times (``repeats=`` is left out when 1).
        judge, model: The judge option and its litellm model string (``local_vllm`` + ``hosted_vllm/fake-judge``:
            litellm's lighter path to the same server).
    """
    if tracking is None:
        track = ["tracking=off"]
    else:
        track = ["tracking=sqlite", f"tracking.uri=sqlite:///{tracking / 'mlflow.db'}",
                 f"tracking.artifact_location={tracking / 'mlartifacts'}"]
    return [PYTHON, *python_args, "-m", "runner", f"judge={judge}", f"judge.model={model}",
            f"judge.api_base={api_base}", "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
            f"dataset.path={dataset}", f"max_items={n}", f"order={order}", *([f"repeats={repeats}"] * (repeats != 1)),
            f"concurrency={concurrency}", "progress=false", *track, f"cache.mode={cache_mode}",
            f"cache.path={cache_path}", f"hydra.run.dir={run_dir}", *extra]


def bare_loop_cmd(api_base: str, dataset: Path, n: int, concurrency: int = 32,
                  settings: tuple[str, ...] = (), judge_params: bool = False,
                  model: str = "openai/fake-judge") -> list[str]:
    """The command line of benchmarks/bare_loop.py."""
    cmd = [PYTHON, "-m", "benchmarks.bare_loop", "--api-base", api_base, "--dataset", str(dataset), "--n", str(n),
           "--concurrency", str(concurrency), "--model", model]
    for setting in settings:
        cmd += ["--set", setting]
    return cmd + (["--judge-params"] if judge_params else [])


def openai_loop_cmd(api_base: str, dataset: Path, n: int, concurrency: int = 32) -> list[str]:
    """The command line of benchmarks/openai_loop.py (the bare openai SDK)."""
    return [PYTHON, "-m", "benchmarks.openai_loop", "--api-base", api_base, "--dataset", str(dataset), "--n", str(n),
            "--concurrency", str(concurrency)]


def raw_http_cmd(api_base: str, dataset: Path, n: int, concurrency: int = 32) -> list[str]:
    """The command line of benchmarks/raw_http_loop.py (plain aiohttp, no litellm)."""
    return [PYTHON, "-m", "benchmarks.raw_http_loop", "--api-base", api_base, "--dataset", str(dataset), "--n", str(n),
            "--concurrency", str(concurrency)]


def journal_summary(run_dir: Path) -> dict[str, Any]:
    """Rows, distinct items, statuses and answer sources in a run's journal.jsonl, and the rows of its
    results.jsonl (None if the run wrote none). Streams both files: a million rows hold no memory."""
    path = run_dir / "journal.jsonl"
    rows, items, status, source, rate_limited, attempts = 0, set(), Counter(), Counter(), 0, 0
    if path.is_file():
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                r = json.loads(line)
                rows += 1
                items.add(r["item_id"])
                status[r["status"]] += 1
                source[r["source"]] += 1
                rate_limited += r.get("rate_limited") or 0
                attempts += r.get("attempts") or 0
    results = run_dir / "results.jsonl"
    result_rows = None
    if results.is_file():
        with results.open("rb") as fh:
            result_rows = sum(1 for line in fh if line.strip())
    return {"rows": rows, "items": len(items), "status": dict(status), "source": dict(source),
            "rate_limited": rate_limited, "attempts": attempts, "results_rows": result_rows}


def calls_per_s(stats: dict[str, Any]) -> float | None:
    """Answered requests per second between the first request's arrival and the last answer."""
    first, last = stats.get("first_request_ts"), stats.get("last_response_ts")
    if not first or not last or last <= first:
        return None
    return stats["accepted"] / (last - first)


def git_commit() -> dict[str, Any]:
    """``git_sha`` of the checkout measured and ``git_dirty``: whether runner/, conf/ or prompts/ differ from it."""
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "runner", "conf", "prompts", "pyproject.toml"],
                           cwd=REPO, capture_output=True, text=True).stdout.strip()
    return {"git_sha": sha or None, "git_dirty": bool(dirty)}


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages (other work on the machine skews every number)."""
    return [round(x, 2) for x in os.getloadavg()]


def wait_quiet(max_load: float = 0.5, max_wait_s: float = 0.0) -> float:
    """Wait up to ``max_wait_s`` for the 1-minute load average to fall below ``max_load``; return it."""
    deadline = time.monotonic() + max_wait_s
    while os.getloadavg()[0] > max_load and time.monotonic() < deadline:
        time.sleep(5)
    return os.getloadavg()[0]
