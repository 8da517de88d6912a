"""The floor under the bare litellm loop: the same requests with plain aiohttp, no litellm, no SDK.

Posts the same mtbench_pair-shaped chat request as benchmarks/bare_loop.py to ``/chat/completions``
under ``asyncio.Semaphore(concurrency)`` with one aiohttp session, reading each JSON answer. What
litellm adds per call is the difference between this and the bare loop; what the server and the event
loop cost on their own is what this one cannot beat.

Standalone: ``python -m benchmarks.raw_http_loop --api-base http://127.0.0.1:P/v1 --dataset D.jsonl``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import aiohttp

from benchmarks.request import build_messages, load_rows


async def run(api_base: str, rows: list[dict], n: int, concurrency: int) -> dict:
    """Make ``n`` requests, at most ``concurrency`` in flight; return counts, wall and CPU seconds."""
    slots = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer x"}) as session:

        async def one(i: int) -> bool:
            body = {"model": "fake-judge", "messages": build_messages(rows[i % len(rows)])}
            async with slots, session.post(f"{api_base}/chat/completions", json=body) as resp:
                data = await resp.json()
            return resp.status == 200 and bool(data["choices"][0]["message"]["content"])

        started, cpu = time.perf_counter(), time.process_time()
        ok = sum(await asyncio.gather(*(one(i) for i in range(n))))
        return {"n": n, "ok": ok, "client_wall_s": time.perf_counter() - started,
                "client_cpu_s": time.process_time() - cpu}


def main() -> None:
    """Command-line entry point; prints one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api-base", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    rows = load_rows(args.dataset, args.n)
    print(json.dumps(asyncio.run(run(args.api_base, rows, args.n, args.concurrency))), flush=True)


if __name__ == "__main__":
    main()
