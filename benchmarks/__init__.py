"""Benchmarks for judgesweep: throughput, rate-limit pacing, cache, memory and start-up.

Run them with ``make bench``; see benchmarks/README.md for what each number means. Nothing here is a
test: timings are measured and reported, never asserted.
"""
