"""Metric keys that were renamed so that one spelling holds everywhere, and how to find a value logged under an
old name (``gate.baseline_run`` compares against runs logged before the rename).

The rules the renames enforce: a confidence bound is ``<family>/<name>_ci_low`` / ``_ci_high`` beside its value;
token counts of every stage are ``tokens/*`` and money is ``cost/*``; every parse-failure count is in ``judge/``.
docs/outputs.md lists each rename (tests/unit/test_metric_names.py keeps the two in step).
"""

from __future__ import annotations

from collections.abc import Mapping

# old key -> new key
RENAMED = {
    "ci/average_overall_low": "score/mean_ci_low",
    "ci/average_overall_high": "score/mean_ci_high",
    "ci/pass_rate_low": "pass/rate_ci_low",
    "ci/pass_rate_high": "pass/rate_ci_high",
    "generation/tokens_prompt": "tokens/generation_prompt",
    "generation/tokens_completion": "tokens/generation_completion",
    "generation/cost_usd": "cost/generation_usd",
    # one name per number (issue 31): a win rate counts ties as half; the share of strict wins is a wins share
    "verdict/win_rate_with_ties": "verdict/win_rate",
    "verdict/ours_win_rate": "verdict/ours_wins_share",
    "verdict/baseline_win_rate": "verdict/baseline_wins_share",
    # one p-value of position bias (issue 44): the sign test over items, the report's; before, this key held it and
    # bias/first_position_p a test counting every verdict (repeats of an item as independent)
    "bias/position_sign_test_p": "bias/first_position_p",
}
# old prefix -> new prefix, for families with a key per label (``parse_failures/<reason>``)
RENAMED_PREFIXES = {"parse_failures/": "judge/parse_failures/"}
# sections whose metrics repeat under a group prefix (``by_tag/<tag>/score/mean_ci_low``)
GROUP_FAMILIES = ("by_tag/", "by_category/")
# old leaf -> new leaf of the keys an ensemble logs per aggregation method (``ensemble/<method>/<leaf>``)
ENSEMBLE = "ensemble/"
RENAMED_PER_METHOD = {"ours_win_rate": "ours_wins_share"}


def _split_method(name: str) -> tuple[str, str]:
    """(``ensemble/<method>/``, leaf) for a per-method ensemble key, else ("", "")."""
    if name.startswith(ENSEMBLE) and name.count("/") == 2:
        cut = name.rindex("/") + 1
        return name[:cut], name[cut:]
    return "", ""


def _split_group(name: str) -> tuple[str, str]:
    """(``by_tag/<tag>/``, rest) for a grouped key, else ("", name)."""
    for family in GROUP_FAMILIES:
        if name.startswith(family) and name.count("/") >= 3:
            group_end = name.index("/", len(family)) + 1
            return name[:group_end], name[group_end:]
    return "", name


def old_names(name: str) -> list[str]:
    """The names ``name`` was logged under before it was renamed (empty when it never was)."""
    group, rest = _split_group(name)
    olds = [group + old for old, new in RENAMED.items() if new == rest]
    olds += [group + old + rest[len(new):] for old, new in RENAMED_PREFIXES.items() if rest.startswith(new)]
    method, leaf = _split_method(name)
    olds += [method + old for old, new in RENAMED_PER_METHOD.items() if method and leaf == new]
    return olds


def renamed_to(name: str) -> str | None:
    """The current name of ``name`` when it is an old (renamed) key, else None."""
    group, rest = _split_group(name)
    if rest in RENAMED:
        return group + RENAMED[rest]
    for old, new in RENAMED_PREFIXES.items():
        if rest.startswith(old):
            return group + new + rest[len(old):]
    method, leaf = _split_method(name)
    if method and leaf in RENAMED_PER_METHOD:
        return method + RENAMED_PER_METHOD[leaf]
    return None


def lookup(metrics: Mapping[str, float], name: str) -> float | None:
    """``metrics[name]``, or its value under an old name (a run logged before the rename), or None."""
    for candidate in (name, *old_names(name)):
        if candidate in metrics:
            return float(metrics[candidate])
    return None
