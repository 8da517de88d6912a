"""The cost of keeping what the judge saw and of one MLflow trace per judgment, at N judgments (default 10,000).

Measures, on LLMBar-sized prompts (the Vanilla template around two shipped outputs, one distinct prompt per
judgment): the message store's time and disk (runner.storage.messages), and the time of logging N traces into a
fresh sqlite MLflow store (runner.outputs.tracking.traces.log_traces), the part a tracked run adds after its paid
stages. With ``--end-to-end``, also whole runs of N judgments (N/2 items x 2 orders, the fake server at 0 ms,
concurrency 32, cache off, through benchmarks.harness as ``make bench`` runs them): tracking=off, tracking on with
``tracking.traces=false``, and tracking on with traces, their wall times and the run directory's message store.
Prints one JSON record with the date, commit and load average::

    .venv/bin/python -m benchmarks.genai_traces --n 10000 [--end-to-end] [--without 5f40af7] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import tempfile
import time
from pathlib import Path

from runner.core.run_settings import TrackingConfig
from runner.core.types import Message
from runner.outputs.tracking import TraceRecord, connection, log_traces
from runner.storage.messages import MessageStore

REPO = Path(__file__).resolve().parents[1]


def _prompts(n: int) -> list[tuple[Message, ...]]:
    rows = [json.loads(line) for line in (REPO / "runner/data/llmbar/natural.jsonl").read_text().splitlines()]
    template = (REPO / "prompts/llmbar_vanilla.j2").read_text()
    out = []
    for k in range(n):
        row = rows[k % len(rows)]
        text = " ".join(str(v) for v in row.values())
        out.append((Message("system", template[:600]), Message("user", f"[{k}] {template[600:]} {text}")))
    return out


def end_to_end(n: int, latency_ms: float = 0.0) -> dict[str, object]:
    """Wall seconds of whole runs of ``n`` judgments against a server answering after ``latency_ms``: tracking
    off, tracking without traces, with traces."""
    from benchmarks.data import write_dataset
    from benchmarks.harness import FakeServer, judgesweep_cmd, run_measured

    out: dict[str, object] = {"latency_ms": latency_ms}
    with tempfile.TemporaryDirectory(prefix="judgesweep-genai-e2e-") as tmp, \
            FakeServer(latency_ms=latency_ms, record=False) as srv:
        work = Path(tmp)
        data = write_dataset(work / "data.jsonl", n // 2)
        for name, tracking, extra in (("warm_store", work, ()), ("tracking_off", None, ()),
                                      ("traces_off", work, ("tracking.traces=false",)), ("traces_on", work, ())):
            size = 32 if name == "warm_store" else n // 2  # the first run creates the store's tables, unmeasured
            cmd = judgesweep_cmd(srv.base_url, data, size, work / name, work / "cache.sqlite", order="both",
                                 tracking=tracking, extra=extra)
            m = run_measured(cmd, work, name, timeout_s=3600)
            if m.rc != 0:
                raise RuntimeError(f"{name} failed ({m.rc}):\n{m.tail()}")
            store = work / name / "messages.sqlite"
            out[name] = {"wall_s": round(m.wall_s, 1), "cpu_s": m.cpu_s and round(m.cpu_s, 1),
                         "messages_sqlite_bytes": store.stat().st_size if store.is_file() else None,
                         "journal_bytes": (work / name / "journal.jsonl").stat().st_size}
    off, on = out["tracking_off"]["wall_s"], out["traces_on"]["wall_s"]  # type: ignore[index]
    out["traces_on_vs_tracking_off"] = round(on / off - 1, 3)
    return out


def without(n: int, commit: str, reps: int = 2) -> dict[str, list[float]]:
    """Wall seconds of whole runs of ``n`` judgments, tracking off, of this checkout and of ``commit`` (one without
    the message store: the time it costs), alternated ``reps`` times; ``commit`` runs from a ``git archive``
    of it with this checkout's Python environment."""
    from benchmarks.data import write_dataset
    from benchmarks.harness import FakeServer, judgesweep_cmd

    out: dict[str, list[float]] = {"this": [], commit: []}
    with tempfile.TemporaryDirectory(prefix="judgesweep-genai-without-") as tmp, FakeServer(record=False) as srv:
        work, old = Path(tmp), Path(tmp) / "old"
        old.mkdir()
        archive = subprocess.run(["git", "archive", commit], cwd=REPO, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        data = write_dataset(work / "data.jsonl", n // 2)
        for rep in range(reps):
            for name, root in (("this", REPO), (commit, old)):
                cmd = judgesweep_cmd(srv.base_url, data, n // 2, work / f"{rep}_{name}", work / "c.sqlite",
                                     order="both")
                env = {**os.environ, "PYTHONPATH": str(root), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
                started = time.perf_counter()
                subprocess.run(cmd, cwd=root, env=env, capture_output=True, check=True)
                out[name].append(round(time.perf_counter() - started, 1))
    return out


def _top(profiler: cProfile.Profile, n: int = 15) -> list[str]:
    """The ``n`` functions of most cumulative time, as cProfile prints them."""
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(n)
    return [line for line in out.getvalue().splitlines() if line.strip()][-n:]


def main() -> None:
    """Run the measurement and print its record."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--end-to-end", action="store_true", help="also time whole runs (three of N judgments)")
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0],
                        help="the server's latency in the whole runs (one set of runs per value)")
    parser.add_argument("--profile", action="store_true", help="cProfile the traces' writing: where each ms goes")
    parser.add_argument("--without", metavar="COMMIT", help="also time whole runs of this checkout and of COMMIT "
                        "(without the message store), tracking off, alternated twice")
    args = parser.parse_args()
    n = args.n
    prompts = _prompts(n)
    with tempfile.TemporaryDirectory(prefix="judgesweep-genai-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        with MessageStore(root / "messages.sqlite") as store:
            keys = [store.put(m) for m in prompts]
        store_s = time.perf_counter() - t0
        raw = sum(len(m.content.encode()) for p in prompts for m in p)
        disk = (root / "messages.sqlite").stat().st_size
        cfg = TrackingConfig(uri=f"sqlite:///{root / 'mlflow.db'}", experiment="bench")
        client = connection.client(cfg)
        run_id = client.create_run(connection.experiment_id(client, cfg)).info.run_id
        with MessageStore(root / "messages.sqlite", read_only=True) as store:
            records = [TraceRecord(item_id=str(k), repeat=0, order="ab", stage="judge", messages=store.get(key),
                                   messages_sha256=key,
                                   raw_response="Output (a) is better.", status="scored", label="A", winner="ours",
                                   scores=None, score=None, parse_error=None, latency_s=0.4,
                                   expectations={"gold": "ours"}, judge_model="openai/gpt-4")
                       for k, key in enumerate(keys)]
        profiler = cProfile.Profile() if args.profile else None
        t0, c0 = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        written = log_traces(cfg, run_id, records, time.time_ns())
        if profiler is not None:
            profiler.disable()
        traces_s, traces_cpu_s = time.perf_counter() - t0, time.process_time() - c0
        profile = _top(profiler) if profiler is not None else None
    runs = [end_to_end(n, ms) for ms in args.latency_ms] if args.end_to_end else None
    baseline = without(n, args.without) if args.without else None
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    print(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit.stdout.strip(),
                      "loadavg": os.getloadavg(), "judgments": n, "message_store_s": round(store_s, 2),
                      "message_store_bytes": disk, "messages_raw_bytes": raw, "traces_written": written,
                      "traces_s": round(traces_s, 1), "traces_ms_each": round(1000 * traces_s / n, 2),
                      "traces_cpu_ms_each": round(1000 * traces_cpu_s / n, 2), "profile": profile,
                      "runs": runs, "without": baseline, "loadavg_after": os.getloadavg()}))


if __name__ == "__main__":
    main()
