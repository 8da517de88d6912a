"""The request every baseline loop sends: judgesweep's ``mtbench_pair`` messages for a chat_vs_simple row.

Kept apart from the loops so the bare openai SDK loop and the plain aiohttp loop do not import litellm
(which alone costs ~3 s and ~200 MB) just to build their messages.
"""

from __future__ import annotations

import json

SYSTEM = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by two AI assistants to "
    "the user question displayed below. You should choose the assistant that follows the user's instructions and "
    "answers the user's question better. Your evaluation should consider factors such as the helpfulness, "
    "relevance, accuracy, depth, creativity, and level of detail of their responses. Begin your evaluation by "
    "comparing the two responses and provide a short explanation. Avoid any position biases and ensure that the "
    "order in which the responses were presented does not influence your decision. Do not allow the length of the "
    "responses to influence your evaluation. Do not favor certain names of the assistants. Be as objective as "
    "possible. After providing your explanation, output your final verdict by strictly following this format: "
    '"[[A]]" if assistant A is better, "[[B]]" if assistant B is better, and "[[C]]" for a tie.'
)
JUDGE_PARAMS = {"temperature": 0.0, "max_tokens": 512, "seed": 0, "timeout": 120.0}


def build_messages(row: dict) -> list[dict[str, str]]:
    """The mtbench_pair messages for one dataset row (``prompt``, ``chat``, ``simple_chat``)."""
    user = (f"[User Question]\n{row['prompt']}\n\n[The Start of Assistant A's Answer]\n{row['chat']}\n"
            f"[The End of Assistant A's Answer]\n\n[The Start of Assistant B's Answer]\n{row['simple_chat']}\n"
            "[The End of Assistant B's Answer]")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def load_rows(path: str, n: int) -> list[dict]:
    """The first ``n`` rows of a JSONL dataset (fewer if the file is shorter)."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            rows.append(json.loads(line))
            if len(rows) >= n:
                break
    return rows
