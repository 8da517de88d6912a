"""A synthetic chat_vs_simple dataset of any size: realistic-looking prompts and 1-2 KB answers.

Rows have the fields of conf/dataset/chat_vs_simple.yaml (``id``, ``prompt``, ``chat``,
``simple_chat``). Texts are assembled from a pool of generated sentences (with the odd bullet list and
code block), so every row is different (distinct cache keys) and generating 100,000 rows takes seconds.
The same ``seed`` and ``n`` always give the same file.

Standalone: ``python -m benchmarks.data OUT.jsonl N [--seed 0]``.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

SUBJECTS = ["the cache", "a Python list", "your budget", "the first draft", "this approach", "the train to Sintra",
            "a sourdough starter", "the quarterly report", "an index on that column", "the landlord",
            "a good night's sleep", "the test suite", "the API gateway", "your cover letter", "the garden bed",
            "compound interest", "the migration script", "a rolling average", "the museum pass", "the recipe"]
VERBS = ["usually works better than", "is cheaper than", "tends to break when combined with", "pairs well with",
         "should be checked before", "can replace", "is often confused with", "depends heavily on",
         "is worth comparing against", "rarely matters as much as"]
OBJECTS = ["a second opinion", "the default settings", "a small experiment", "the official documentation",
           "a weekly routine", "the older version", "a plain text file", "the local bakery", "a staging server",
           "the manufacturer's guide", "an early start", "a spreadsheet", "the return policy", "a cold snap"]
TAILS = ["in most cases", "if you keep an eye on the details", "according to people who have tried both",
         "unless the numbers say otherwise", "at least for a first attempt", "when time is short",
         "as long as you write it down", "for anyone on a tight schedule", "especially in winter",
         "once you have measured it"]
OPENERS = ["Sure.", "Good question.", "Here is what I would do.", "Short answer: it depends.", "Happy to help.",
           "Let's break it down.", "Yes, that is possible."]
QUESTIONS = ["How do I {v} {o}?", "Can you explain why {s} {vb} {o}?", "What's the best way to handle {s}?",
             "Is it a good idea to use {s} for {o}?", "Write a short plan for dealing with {s}.",
             "Compare {s} and {o} for a beginner.", "My friend says {s} {vb} {o}. Is that true?"]
ACTIONS = ["set up", "fix", "plan around", "get rid of", "speed up", "explain", "budget for", "test"]
CODE = ["```python\nresult = sorted(items, key=lambda x: x.score, reverse=True)[:10]\n```",
        "```bash\ngrep -rn 'TODO' src/ | wc -l\n```",
        "```sql\nSELECT user_id, count(*) FROM orders GROUP BY user_id HAVING count(*) > 3;\n```"]


def _sentence(rng: random.Random) -> str:
    text = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(TAILS)}."
    return text[0].upper() + text[1:]


def _answer(rng: random.Random, pool: list[str], low: int, high: int) -> str:
    """An answer of ``low``..``high`` characters: an opener, sentences, maybe a list or a code block."""
    target = rng.randint(low, high)
    parts = [rng.choice(OPENERS)]
    size = len(parts[0])
    while size < target:
        roll = rng.random()
        if roll < 0.08:
            chunk = "\n" + "\n".join(f"- {rng.choice(pool)}" for _ in range(rng.randint(2, 4))) + "\n"
        elif roll < 0.11:
            chunk = "\n" + rng.choice(CODE) + "\n"
        else:
            chunk = rng.choice(pool)
        parts.append(chunk)
        size += len(chunk) + 1
    return " ".join(parts)[:high]


def _question(rng: random.Random) -> str:
    text = rng.choice(QUESTIONS).format(v=rng.choice(ACTIONS), o=rng.choice(OBJECTS), s=rng.choice(SUBJECTS),
                                        vb=rng.choice(VERBS))
    if rng.random() < 0.5:
        text += " " + _sentence(rng) + " " + _sentence(rng)
    return text[0].upper() + text[1:]


def write_dataset(path: Path, n: int, seed: int = 0, answer_chars: tuple[int, int] = (1000, 2000)) -> Path:
    """Write ``n`` rows to ``path`` (JSONL) unless an identical file is already there; return ``path``.

    Args:
        path: The JSONL file to write.
        n: Number of rows.
        seed: Seeds every choice; the same (n, seed, answer_chars) gives the same bytes.
        answer_chars: Length range of each answer (``chat`` and ``simple_chat``), in characters.
    """
    stamp = path.with_suffix(".stamp")
    key = json.dumps({"n": n, "seed": seed, "answer_chars": list(answer_chars)})
    if path.is_file() and stamp.is_file() and stamp.read_text() == key:
        return path
    rng = random.Random(seed)
    pool = [_sentence(rng) for _ in range(5000)]
    low, high = answer_chars
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            row = {"id": f"item-{i:06d}", "prompt": _question(rng), "chat": _answer(rng, pool, low, high),
                   "simple_chat": _answer(rng, pool, low, high)}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    stamp.write_text(key)
    return path


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("n", type=int)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    write_dataset(args.out, args.n, args.seed)


if __name__ == "__main__":
    main()
