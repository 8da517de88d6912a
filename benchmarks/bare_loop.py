"""The baseline judgesweep is compared with: litellm.acompletion in a loop, nothing else.

Sends one call per dataset row (cycling through the rows if ``--n`` is larger, or ``--rows`` is set)
under an ``asyncio.Semaphore(concurrency)``, with messages of the same shape and size as judgesweep's
``mtbench_pair`` prompt (benchmarks/request.py: the same system text; the user message built with an
f-string instead of Jinja). No journal, no cache, no parsing. Throughput is read from the fake server's
``/v1/_stats`` by the caller, so interpreter start-up is excluded; this script prints one JSON line with
its own counts.

``--set NAME=VALUE`` assigns a litellm module attribute before the first call (VALUE is a Python
literal, e.g. ``--set turn_off_message_logging=True``); ``--judge-params`` sends the extra arguments
judgesweep sends (temperature, max_tokens, seed, timeout), so a difference between the two is not
down to the request.

Standalone: ``python -m benchmarks.bare_loop --api-base http://127.0.0.1:P/v1 --dataset D.jsonl --n 1000``.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import os
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map

import litellm  # noqa: E402

from benchmarks.request import JUDGE_PARAMS, build_messages, load_rows  # noqa: E402


async def run(api_base: str, model: str, rows: list[dict], n: int, concurrency: int,
              extra: dict) -> dict:
    """Make ``n`` calls, at most ``concurrency`` in flight; return counts, client wall and CPU seconds (all
    threads of the process, so litellm's background logging work is included)."""
    slots = asyncio.Semaphore(concurrency)
    errors: dict[str, int] = {}
    todo = iter(range(n))
    ok = 0

    async def worker() -> None:
        # concurrency workers take the next index each, so only the calls in flight exist at any time
        # (no n pending tasks, no n rendered prompts): memory stays flat however large n is.
        nonlocal ok
        for i in todo:
            async with slots:
                messages = build_messages(rows[i % len(rows)])
                try:
                    resp = await litellm.acompletion(model=model, api_base=api_base, api_key="x",
                                                     messages=messages, num_retries=0, **extra)
                except Exception as exc:  # a benchmark counts failures instead of stopping
                    errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                    continue
            ok += bool(resp.choices[0].message.content)

    started, cpu = time.perf_counter(), time.process_time()
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
    parser.add_argument("--model", default="openai/fake-judge")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="set a litellm module attribute (repeatable)")
    parser.add_argument("--judge-params", action="store_true", help="send judgesweep's decoding params too")
    parser.add_argument("--zero-price", action="store_true",
                        help="register the model in litellm's cost map at $0 (an unpriced model makes litellm's "
                             "cost calculation try several names and raise on each)")
    args = parser.parse_args()
    if args.zero_price:
        provider, _, name = args.model.partition("/")
        entry = {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0, "litellm_provider": provider,
                 "mode": "chat"}
        litellm.register_model({args.model: entry, name: entry})
    for assignment in args.set:
        name, _, value = assignment.partition("=")
        if not hasattr(litellm, name):
            raise SystemExit(f"litellm has no attribute {name!r}")
        setattr(litellm, name, ast.literal_eval(value))
    rows = load_rows(args.dataset, args.rows or args.n)
    extra = dict(JUDGE_PARAMS) if args.judge_params else {}
    result = asyncio.run(run(args.api_base, args.model, rows, args.n, args.concurrency, extra))
    result["settings"] = args.set + (["zero_price"] if args.zero_price else []) + \
        (["judge_params"] if args.judge_params else []) + [f"model={args.model}"]
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
