"""Inside the phases of the ``fixed_cost`` scenario: one judgesweep case run once under py-spy and once with
``-X importtime``, the top frames and imports printed per process.

1. ``py-spy record --subprocesses --nonblocking -r 200 -f raw`` (not pausing the process at each sample, which
   slowed a run several times over; ``--idle`` adds the samples where a thread waits: wall time rather than CPU):
   the folded stacks aggregated here, per process (py-spy's ``process PID:"cmd"`` root frame), into the frames
   with the most samples anywhere in the stack (cumulative; importlib's and runpy's frozen frames left out) and at
   its top (self), in seconds (samples / rate); line numbers are dropped so a function is one frame.
2. ``python -X importtime``: the main process's top-level imports by cumulative time, and the heaviest modules by
   their own time (a child process's imports are in the py-spy stacks, not here).

Cases: make_run / make_run_off (the console script, no override / tracking=off, in a fresh temp cwd),
one_call, calls_30, calls_1000 (and each with _off): the scenario's commands against a fake server (the default
runs with a store made by one unprofiled run first).

Standalone: ``python -m benchmarks.fixed_cost --profile make_run [--idle] [--top 15] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import itertools
import re
import shutil
import subprocess
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

from benchmarks.data import write_dataset
from benchmarks.harness import PYTHON, REPO, FakeServer, bench_env, judgesweep_cmd, make_run_cmd
from benchmarks.scenarios import warm_store

CASES = {"make_run": None, "one_call": (1, "fixed", 200), "calls_30": (15, "both", 0),
         "calls_1000": (1000, "fixed", 200)}
LINE_NO = re.compile(r":\d+\)$")
RATE = 200
_RUNS = itertools.count()


def aggregate(folded: Iterable[str]) -> dict[str, dict[str, Counter]]:
    """py-spy raw (folded) lines -> per process: ``total``, ``cumulative`` and ``self`` sample counts per frame.

    With ``--subprocesses`` every stack starts with ``process PID:"cmd"``, a child's under its parent's too.
    """
    out: dict[str, dict[str, Counter]] = defaultdict(lambda: {"total": Counter(), "cumulative": Counter(),
                                                              "self": Counter()})
    for line in folded:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [LINE_NO.sub(")", f) for f in stack.split(";")]
        # a child's stacks hang under its parent's "process" frame: the innermost one names the process
        roots = [i for i, f in enumerate(frames) if f.startswith("process ")]
        process = frames[roots[-1]] if roots else "process ?"
        frames = frames[roots[-1] + 1:] if roots else frames
        agg, n = out[process], int(count)
        agg["total"]["samples"] += n
        for frame in set(frames):
            if "(<frozen " not in frame:  # runpy's and importlib's own frames sit under every import: no signal
                agg["cumulative"][frame] += n
        if frames:
            agg["self"][frames[-1]] += n
    return dict(out)


def import_times(stderr: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """``-X importtime`` lines -> (top-level imports by cumulative us, modules by self us), largest first."""
    top, own = [], []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = line.removeprefix("import time:").split("|", 2)
        own.append((int(self_us), name.strip()))
        if not name[1:].startswith(" "):  # one space after the bar, then two per nesting level
            top.append((int(cumulative_us), name.strip()))
    return sorted(top, reverse=True), sorted(own, reverse=True)


def _commands(case: str, work: Path, srv: FakeServer | None, python_args: tuple[str, ...]) -> list[str]:
    off = case.endswith("_off")
    base = case.removesuffix("_off")
    if base == "make_run":
        cmd = make_run_cmd()
        if python_args:
            cmd = [PYTHON, *python_args, *(cmd[1:] if cmd[0] == PYTHON else cmd)]
        return cmd + (["tracking=off"] if off else [])
    n, order, _ = CASES[base]
    assert srv is not None
    data = write_dataset(work / f"data_{n}.jsonl", n)
    store = None if off else warm_store(srv, data, work)
    return judgesweep_cmd(srv.base_url, data, n, work / f"run_{next(_RUNS)}", work / "cache.sqlite",
                          order=order, tracking=store, python_args=python_args)


def _run(case: str, work: Path, srv: FakeServer | None, idle: bool, top: int) -> None:
    env = {**bench_env(), "PYTHONPATH": str(REPO)}
    cwd = Path(tempfile.mkdtemp(prefix="cwd_", dir=work))
    raw = work / "pyspy.txt"
    spy = [str(Path(PYTHON).parent / "py-spy"), "record", "--subprocesses", "-r", str(RATE), "-f", "raw", "-o",
           str(raw), "--nonblocking", *(["--idle"] if idle else []), "--", *_commands(case, work, srv, ())]
    subprocess.run(spy, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    for process, agg in aggregate(raw.read_text(errors="replace").splitlines()).items():
        total = agg["total"]["samples"]
        print(f"\n{process[:160]}\n  {total} samples = {total / RATE:.2f} s {'wall' if idle else 'on CPU'}")
        for kind in ("cumulative", "self"):
            print(f"  top {top} frames by {kind} samples (s, share):")
            for frame, n in agg[kind].most_common(top):
                print(f"    {n / RATE:7.2f}  {n / total:6.1%}  {frame[:140]}")
    if srv is not None:
        srv.reset()
    cwd = Path(tempfile.mkdtemp(prefix="cwd_", dir=work))
    timed = subprocess.run(_commands(case, work, srv, ("-X", "importtime")), cwd=cwd, env=env, capture_output=True,
                           text=True, check=False)
    first, own = import_times(timed.stderr)
    print(f"\n-X importtime, main process: {sum(us for us, _ in first) / 1e6:.2f} s in top-level imports")
    for title, rows in (("top-level imports by cumulative", first), ("modules by self", own)):
        print(f"  {title} time (s):")
        for us, name in rows[:top]:
            print(f"    {us / 1e6:7.3f}  {name.strip()}")


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [c + s for c in CASES for s in ("", "_off")]
    parser.add_argument("--profile", required=True, choices=names, metavar="CASE", help=", ".join(names))
    parser.add_argument("--idle", action="store_true", help="py-spy --idle: waiting samples too (wall time)")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--keep", type=Path, help="keep the work files (py-spy's raw stacks) in this directory")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="judgesweep-profile-", dir=args.keep))
    latency = None if args.profile.startswith("make_run") else CASES[args.profile.removesuffix("_off")][2]
    try:
        if latency is None:
            _run(args.profile, work, None, args.idle, args.top)
        else:
            with FakeServer(latency_ms=latency) as srv:
                _run(args.profile, work, srv, args.idle, args.top)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"\nkept {work}")
