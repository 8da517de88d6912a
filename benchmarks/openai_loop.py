"""A second baseline: the bare openai SDK in a loop, the client litellm itself wraps for ``openai/`` models.

The same requests as benchmarks/bare_loop.py (benchmarks/request.py: judgesweep's ``mtbench_pair``
messages for each dataset row, cycled if ``--n`` is larger), sent with one
``openai.AsyncOpenAI(base_url=..., api_key="x", max_retries=0)`` as
``client.chat.completions.create(model=..., messages=...)`` under an ``asyncio.Semaphore(concurrency)``.
No litellm import, no journal, no cache, no parsing. The gap between this and the bare litellm loop is
what litellm's own per-call work costs; throughput is read from the fake server's ``/v1/_stats`` by the
caller. Prints one JSON line with its own counts.

Standalone: ``python -m benchmarks.openai_loop --api-base http://127.0.0.1:P/v1 --dataset D.jsonl --n 1000``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import openai

from benchmarks.request import JUDGE_PARAMS, build_messages, load_rows


async def run(api_base: str, model: str, rows: list[dict], n: int, concurrency: int, extra: dict) -> dict:
    """Make ``n`` calls, at most ``concurrency`` in flight; return counts, client wall and CPU seconds."""
    client = openai.AsyncOpenAI(base_url=api_base, api_key="x", max_retries=0)
    slots = asyncio.Semaphore(concurrency)
    errors: dict[str, int] = {}
    todo = iter(range(n))
    ok = 0

    async def worker() -> None:
        # as in bare_loop.py: only the calls in flight exist at any time, whatever n is
        nonlocal ok
        for i in todo:
            async with slots:
                messages = build_messages(rows[i % len(rows)])
                try:
                    resp = await client.chat.completions.create(model=model, messages=messages, **extra)
                except Exception as exc:  # a benchmark counts failures instead of stopping
                    errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                    continue
            ok += bool(resp.choices[0].message.content)

    started, cpu = time.perf_counter(), time.process_time()
    async with client:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return {"n": n, "ok": ok, "errors": errors, "client_wall_s": time.perf_counter() - started,
            "client_cpu_s": time.process_time() - cpu}


def main() -> None:
    """Command-line entry point; prints one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api-base", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rows", type=int, default=None, help="load only this many rows and cycle (default n)")
    parser.add_argument("--model", default="fake-judge", help="the model name sent (litellm's openai/fake-judge)")
    parser.add_argument("--judge-params", action="store_true", help="send judgesweep's decoding params too")
    args = parser.parse_args()
    rows = load_rows(args.dataset, args.rows or args.n)
    extra = dict(JUDGE_PARAMS) if args.judge_params else {}
    result = asyncio.run(run(args.api_base, args.model, rows, args.n, args.concurrency, extra))
    result["settings"] = (["judge_params"] if args.judge_params else []) + [f"model={args.model}"]
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
