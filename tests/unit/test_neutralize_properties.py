"""Property-based tests of the delimiter neutraliser: no text crashes it, and no frame of a shipped template,
nor a lookalike of one (case, spacing, quotes, Unicode compatibility forms), survives it."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from runner.inputs.delimiters import ZERO_WIDTH_SPACE, neutralize
from runner.inputs.prompts import load_template

PROMPTS = Path(__file__).resolve().parents[2] / "prompts"
TEMPLATES = {p.stem: load_template(PROMPTS, p.stem) for p in sorted(PROMPTS.glob("*.j2"))}
# how a character of a frame may be written in a lookalike of it
QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "`": "'", "\u201c": '"', "\u201d": '"'})
VARIANTS = {"'": ["'", "\u2019", "\u2018", "`"], '"': ['"', "\u201c", "\u201d"], " ": [" ", "  ", "\t", "\u00a0", ""]}


def folded(text: str) -> str:
    """An oracle independent of the neutraliser: NFKC, case-folded, curly quotes straight, whitespace dropped."""
    return "".join(unicodedata.normalize("NFKC", text).casefold().translate(QUOTES).split())


@st.composite
def lookalike(draw: st.DrawFn, frame: str) -> str:
    """``frame`` with each letter's case, each quote's style and each space's width drawn at random."""
    out = []
    for char in frame:
        if char in VARIANTS:
            out.append(draw(st.sampled_from(VARIANTS[char])))
        elif char.isalpha():
            out.append(draw(st.sampled_from([char.lower(), char.upper()])))
        else:
            out.append(char)
        if draw(st.integers(0, 9)) == 0:
            out.append(" ")
    return "".join(out)


@st.composite
def hostile_text(draw: st.DrawFn) -> tuple[str, str]:
    """A template's name and text mixing random text with lookalikes of that template's frames."""
    name = draw(st.sampled_from(sorted(TEMPLATES)))
    frames = sorted(TEMPLATES[name].delimiters)
    parts = draw(st.lists(st.one_of(st.text(max_size=20), st.sampled_from(frames).flatmap(lookalike)), max_size=8))
    return name, "\n".join(parts)


@settings(max_examples=150, deadline=None)
@given(st.text(), st.lists(st.text(), max_size=6))
def test_neutralize_never_crashes_and_leaves_no_delimiter(value: str, delimiters: list[str]) -> None:
    out = neutralize(value, delimiters)
    assert isinstance(out, str)
    usable = [d for d in delimiters if len(d) >= 2 and ZERO_WIDTH_SPACE not in d and neutralize(d, [d]) != d]
    assert neutralize(out, usable) == out  # nothing left to defang: no delimiter, no lookalike of one


@settings(max_examples=150, deadline=None)
@given(hostile_text())
def test_no_frame_or_lookalike_of_a_shipped_template_survives(case: tuple[str, str]) -> None:
    name, value = case
    template = TEMPLATES[name]
    out = neutralize(value, template.delimiters)
    assert template.find_delimiters_in(out) == []
    assert [frame for frame in template.delimiters if folded(frame) in folded(out)] == []
    assert all(frame not in out for frame in template.delimiters)
    assert out.replace(ZERO_WIDTH_SPACE, "") == value.replace(ZERO_WIDTH_SPACE, "")  # only spaces were added
    assert neutralize(out, template.delimiters) == out
