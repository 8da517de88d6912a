"""The fenced code blocks of README.md and docs/: what tests/unit/test_docs.py checks and the tutorials' tests run."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", flags=re.M | re.S)


def blocks(kind: str, pages: list[Path] = PAGES) -> list[tuple[Path, str]]:
    """Every fenced block of the given language in the pages, with its page."""
    return [(page, m.group(2)) for page in pages for m in FENCE.finditer(page.read_text(encoding="utf-8"))
            if m.group(1) == kind]


def commands(pages: list[Path] = PAGES) -> list[tuple[Path, list[str]]]:
    """Every judgesweep command of the pages' bash blocks as its argument list (continuations joined, comments,
    env assignments and `.venv/bin/` dropped, `a && b` split)."""
    found = []
    for page, text in blocks("bash", pages):
        for line in text.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            while words:
                cut = words.index("&&") if "&&" in words else len(words)
                part, words = words[:cut], words[cut + 1:]
                while part and re.fullmatch(r"[A-Z_]+=.*", part[0]):
                    part = part[1:]
                if part and part[0].removeprefix(".venv/bin/") == "judgesweep":
                    found.append((page, part[1:]))
    return found
