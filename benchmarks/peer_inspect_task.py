"""The inspect-ai peer of the ``tracking`` scenario: one sample per prepared request, one generate, the verdict
read with a regex. Runs in the peer's own venv (benchmarks/peers.sh), never imported by judgesweep's code::

    benchmarks/.peers/inspect-venv/bin/inspect eval benchmarks/peer_inspect_task.py -T requests=REQUESTS.jsonl \
        --model openai-api/fake/fake-judge --max-connections 32 ...

``REQUESTS.jsonl`` holds one ``{"id", "system", "user"}`` row per sample (benchmarks/peers.py writes it from
benchmarks/request.py, so the three contenders send the same request).
"""

from __future__ import annotations

import json

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser
from inspect_ai.scorer import pattern
from inspect_ai.solver import generate


@task
def judge_requests(requests: str) -> Task:
    """One sample per row of ``requests``; target "A", the fake server's answer, scored by its [[X]] verdict."""
    samples = []
    with open(requests, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            samples.append(Sample(id=row["id"], target="A", input=[ChatMessageSystem(content=row["system"]),
                                                                    ChatMessageUser(content=row["user"])]))
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=pattern(r"\[\[([ABC])\]\]"))
