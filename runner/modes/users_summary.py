"""The users' summary: summary.json's content under the key names the users' own scripts write
(``output.summary_keys=users``, set by their presets).

Only keys at known places are renamed, never a key that is the user's data (an item id, a tag, a category, a
member's name): the sections (``summary``, each of ``by_tag`` and ``by_category``, each member's headline of an
ensemble) and the examples (``detailed_results`` and ``summary.failed_examples``). A pairwise summary is already in
the users' format (``summary`` + ``aggregated_results``, with ``failed_items`` and ``skipped_rows``) and has none of
these keys: its users' summary is the same document. summary.json itself keeps judgesweep's names, which every
reader of a run directory (results API, sync, a resumed sweep) reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["EXAMPLE_KEYS", "SECTION_KEYS", "USERS_SUMMARY_NAME", "users_keys"]

USERS_SUMMARY_NAME = "users_summary.json"
# judgesweep's name -> the users' name
SECTION_KEYS = {"average_overall": "average_score", "average_overall_ci": "average_score_ci"}
EXAMPLE_KEYS = {"output": "actual"}


def users_keys(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``doc`` (a summary.json document) with the users' key names; ``doc`` itself is left as it is.

    Raises:
        ValueError: A place that holds both a key and its users' name (cannot happen with the documents the
            run modes write; a silent overwrite would lose a number).
    """
    out = dict(doc)
    if isinstance(doc.get("summary"), Mapping):
        out["summary"] = _section(doc["summary"])
    for group in ("by_tag", "by_category"):
        if isinstance(doc.get(group), Mapping):
            out[group] = {name: _section(sec) for name, sec in doc[group].items()}
    if isinstance(doc.get("detailed_results"), list):
        out["detailed_results"] = [_renamed(row, EXAMPLE_KEYS) for row in doc["detailed_results"]]
    ensemble = doc.get("ensemble")
    if isinstance(ensemble, Mapping) and isinstance(ensemble.get("member_headline"), Mapping):
        out["ensemble"] = {**ensemble, "member_headline": {m: _renamed(h, SECTION_KEYS)
                                                           for m, h in ensemble["member_headline"].items()}}
    return out


def _section(section: Any) -> Any:
    if not isinstance(section, Mapping):
        return section
    out = _renamed(section, SECTION_KEYS)
    if isinstance(section.get("failed_examples"), list):
        out["failed_examples"] = [_renamed(row, EXAMPLE_KEYS) for row in section["failed_examples"]]
    return out


def _renamed(row: Any, names: Mapping[str, str]) -> Any:
    """``row`` with each key of ``names`` renamed in place of the original (the order of the keys is kept)."""
    if not isinstance(row, Mapping):
        return row
    clash = [ours for ours, theirs in names.items() if ours in row and theirs in row]
    if clash:
        raise ValueError(f"users' summary: {clash[0]!r} and {names[clash[0]]!r} in one place")
    return {names.get(key, key): value for key, value in row.items()}
