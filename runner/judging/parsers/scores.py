"""Read pointwise scores out of a judge's raw text.

A pointwise judge scores one output on several criteria and answers in JSON. Each score parser is a
pure function registered in :data:`SCORE_PARSERS` under the name a rubric YAML uses
(``parser: json_scores``). It takes the judge text, the criteria that apply to the item and its own
keyword parameters, and returns a :class:`~runner.core.types.Verdict` whose ``scores`` hold one number per
criterion. Like the pairwise parsers in :mod:`runner.judging.parsers.labels` it never raises on judge text and never
guesses: a missing, non-numeric or out-of-range score leaves the whole verdict unscored with a short
snake_case ``reason`` naming the criterion, because an overall score over a subset of the criteria
would not be comparable with the others.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from runner.core.registry import Registry
from runner.core.types import Criterion, Verdict
from runner.judging.parsers.json_objects import MALFORMED, scan_objects
from runner.judging.parsers.registry import EMPTY, INVALID_JSON, MISSING_KEY, clip, has_text

NOT_A_NUMBER = "not_a_number"
OUT_OF_RANGE = "out_of_range"
AMBIGUOUS_KEY = "ambiguous_key"

SCORE_PARSERS: Registry[Callable[..., Verdict]] = Registry("score parser")

# A score sent as a string must be exactly a number: "4", " 4.5 ", "-1". Not "4/5", "4 points", "nan".
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_SCORE_FIELD = "score"  # {"accuracy": {"score": 4, "reason": "..."}}
_REASON_FIELDS = ("reason", "reasoning", "explanation", "justification", "rationale")
_EXTRA_SCHEMAS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "reasoning": {"type": "string"},
    "improvement_suggestions": {"type": "array", "items": {"type": "string"}},
    "pass": {"type": "boolean"},
})


class _Unreadable(Exception):
    """Internal: carries the reason a verdict cannot be read up to the parser, which returns it."""


def parse_scores(
    parser_name: str, text: str | None, criteria: Sequence[Criterion], params: Mapping[str, Any]
) -> Verdict:
    """Parse ``text`` with the score parser registered as ``parser_name``.

    Args:
        parser_name: A name registered in :data:`SCORE_PARSERS`.
        text: The judge's raw output; ``None`` when the response had no content.
        criteria: The criteria that apply to the item; every one must be scored.
        params: The parser's keyword parameters from the rubric config.

    Returns:
        The verdict: ``scores`` has every criterion, or it is empty and ``reason`` says why.

    Raises:
        runner.core.registry.UnknownNameError: If no score parser has that name (a config error, not judge text).
        ValueError: If ``criteria`` is empty or repeats a name (a caller error, not judge text).
    """
    return SCORE_PARSERS.get(parser_name)(text, criteria, **dict(params))


@SCORE_PARSERS.register("json_scores")
def parse_json_scores(
    text: str | None,
    criteria: Sequence[Criterion],
    *,
    scores_key: str = "scores",
    extra_keys: Sequence[str] = ("reasoning", "improvement_suggestions", "pass"),
) -> Verdict:
    """Read per-criterion scores from a JSON object, bare or fenced, with prose around it.

    Scores may sit under ``scores_key`` (``{"scores": {"accuracy": 4}, "reasoning": "..."}``) or at the
    top level (``{"accuracy": 4, "reasoning": "..."}``); a score may also be an object holding it
    (``{"accuracy": {"score": 4, "reason": "..."}}``). The answer is the last top-level object that
    names a criterion, unless an object that does not decode follows it (a truncated or malformed
    answer after a restated example must not fall back to the example). Keys match exactly first,
    then case-insensitively with spaces and hyphens read as underscores (``Format Compliance``); a criterion's
    ``aliases`` are read the same way (``mcp_usage_correct`` for ``tool_usage``) and its score is kept under its name.

    Args:
        text: The judge's raw output.
        criteria: The criteria that apply to the item; every one must be scored within its range.
        scores_key: The key that holds the nested scores object.
        extra_keys: Top-level keys copied into ``extras`` as the judge sent them (its ``pass`` too).

    Returns:
        ``Verdict(label=None, scores=..., extras=...)`` with read-only mappings. ``extras`` also holds
        ``criterion_reasons`` (per-criterion reasons) and ``ignored_scores`` (scores for criteria not
        asked for, e.g. ``tool_usage`` where it does not apply) when there are any. Unreadable: reason
        ``empty``, ``invalid_json``, ``missing_key``, ``missing_key: <name>``, ``ambiguous_key: <name>``,
        ``not_a_number: <name>=<value>`` or ``out_of_range: <name>=<value> not in [<min>, <max>]``.

    Raises:
        TypeError: If ``extra_keys`` is one string rather than a list of them.
        ValueError: If ``criteria`` is empty or repeats a name.
    """
    _check_arguments(criteria, extra_keys)
    if not has_text(text):
        return Verdict(label=None, reason=EMPTY)
    try:
        obj, scored, flat = _choose_answer(text, criteria, scores_key)
        scores, reasons, claimed = _read_scores(scored, criteria)
    except _Unreadable as exc:
        return Verdict(label=None, reason=str(exc))
    extras = {key: obj[key] for key in extra_keys if key in obj}
    if reasons:
        extras["criterion_reasons"] = reasons
    skip = {scores_key, *extra_keys} if flat else set()
    ignored = {key: value for key, value in scored.items() if key not in claimed and key not in skip
               and (not flat or _looks_like_score(value))}
    if ignored:
        extras["ignored_scores"] = ignored
    return Verdict(label=None, scores=MappingProxyType(scores), extras=MappingProxyType(extras))


def score_schema(
    criteria: Sequence[Criterion],
    extra_keys: Sequence[str] = ("reasoning", "improvement_suggestions"),
    *,
    scores_key: str = "scores",
) -> dict[str, Any]:
    """The JSON schema a pointwise judge can be asked to follow (an OpenAI strict ``json_schema``).

    Strict mode needs every property required, ``additionalProperties: false`` and no ``minimum`` /
    ``maximum``, so each criterion's range is stated in its description instead. ``reasoning`` is a
    string, ``improvement_suggestions`` a list of strings, ``pass`` a boolean, any other extra key a
    string.

    Args:
        criteria: The criteria the judge scores, in prompt order.
        extra_keys: Top-level keys the judge must also fill, after the scores.
        scores_key: The key holding the scores object (the parser's ``scores_key``).

    Returns:
        A JSON-serialisable schema: ``{scores_key: {<criterion>: number, ...}, <extra_key>: ..., ...}``.
    """
    properties = {c.name: {"type": "number", "description": _range_description(c)} for c in criteria}
    scores = {"type": "object", "properties": properties, "required": [c.name for c in criteria],
              "additionalProperties": False}
    top: dict[str, Any] = {scores_key: scores}
    top.update({key: copy.deepcopy(_EXTRA_SCHEMAS.get(key, {"type": "string"})) for key in extra_keys})
    return {"type": "object", "properties": top, "required": list(top), "additionalProperties": False}


def _range_description(criterion: Criterion) -> str:
    scale = f"Score from {_show_bound(criterion.min)} to {_show_bound(criterion.max)}."
    return f"{criterion.description.strip()} {scale}" if criterion.description.strip() else scale


def _check_arguments(criteria: Sequence[Criterion], extra_keys: Sequence[str]) -> None:
    if isinstance(extra_keys, str):
        raise TypeError("json_scores: extra_keys must be a list of keys, not one string")
    names = [c.name for c in criteria]
    if not names:
        raise ValueError("json_scores: no criteria to score; skip items where no criterion applies")
    if len(set(names)) != len(names):
        raise ValueError(f"json_scores: criterion names repeat: {names}")


def _choose_answer(
    text: str, criteria: Sequence[Criterion], scores_key: str
) -> tuple[Mapping[str, Any], Mapping[str, Any], bool]:
    """The answer object, the mapping holding its scores, and whether they are flat (top level)."""
    seen_object = False
    for obj in reversed(list(scan_objects(text))):
        if obj is MALFORMED:
            raise _Unreadable(INVALID_JSON)
        seen_object = True
        nested = _lookup_all(obj, scores_key)
        if len(nested) == 1 and isinstance(obj[nested[0]], Mapping) and _names_any(obj[nested[0]], criteria):
            return obj, obj[nested[0]], False
        if _names_any(obj, criteria):
            return obj, obj, True
    raise _Unreadable(MISSING_KEY if seen_object else INVALID_JSON)


def _normalise_key(key: str) -> str:
    return re.sub(r"[\s\-]+", "_", key.strip().lower())


def _lookup_all(mapping: Mapping[str, Any], name: str) -> list[str]:
    """Keys of ``mapping`` that stand for ``name``: the exact key, else every loosely equal one."""
    if name in mapping:
        return [name]
    wanted = _normalise_key(name)
    return [key for key in mapping if isinstance(key, str) and _normalise_key(key) == wanted]


def _criterion_keys(mapping: Mapping[str, Any], criterion: Criterion) -> list[str]:
    """Keys of ``mapping`` that stand for ``criterion``: its name's, then each alias's (``mcp_usage_correct``)."""
    keys = _lookup_all(mapping, criterion.name)
    for alias in criterion.aliases:
        keys += [key for key in _lookup_all(mapping, alias) if key not in keys]
    return keys


def _names_any(mapping: Mapping[str, Any], criteria: Sequence[Criterion]) -> bool:
    return any(_criterion_keys(mapping, c) for c in criteria)


def _read_scores(
    scored: Mapping[str, Any], criteria: Sequence[Criterion]
) -> tuple[dict[str, float], dict[str, Any], set[str]]:
    """Every criterion's score, the per-criterion reasons, and the keys those came from."""
    scores: dict[str, float] = {}
    reasons: dict[str, Any] = {}
    claimed: set[str] = set()
    for criterion in criteria:
        keys = _criterion_keys(scored, criterion)
        if not keys:
            raise _Unreadable(f"{MISSING_KEY}: {criterion.name}")
        if len(keys) > 1:  # "Accuracy" and "accuracy" (or a name and its alias) both there: one would be a guess
            raise _Unreadable(f"{AMBIGUOUS_KEY}: {criterion.name}")
        raw = scored[keys[0]]
        if isinstance(raw, Mapping) and _SCORE_FIELD in raw:
            reason_field = next((f for f in _REASON_FIELDS if f in raw), None)
            if reason_field is not None:
                reasons[criterion.name] = raw[reason_field]
            raw = raw[_SCORE_FIELD]
        scores[criterion.name] = _check_score(criterion, raw)
        claimed.add(keys[0])
    return scores, reasons, claimed


def _as_number(raw: Any) -> int | float | None:
    """``raw`` as a finite number if it is one (or a string that is exactly one), else None."""
    if isinstance(raw, bool):  # True is an int in Python, but never a score
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float):
        return raw if math.isfinite(raw) else None
    if isinstance(raw, str) and _NUMBER.fullmatch(raw.strip()):
        value = float(raw.strip())
        return value if math.isfinite(value) else None
    return None


def _check_score(criterion: Criterion, raw: Any) -> float:
    """``raw`` as the criterion's score; unreadable unless it is a number within the criterion's range."""
    number = _as_number(raw)
    if number is None:
        raise _Unreadable(f"{NOT_A_NUMBER}: {criterion.name}={_show_value(raw)}")
    # Compared before float(): a huge JSON integer would overflow float() but is simply out of range.
    if not criterion.min <= number <= criterion.max:
        bounds = f"[{_show_bound(criterion.min)}, {_show_bound(criterion.max)}]"
        raise _Unreadable(f"{OUT_OF_RANGE}: {criterion.name}={_show_value(raw)} not in {bounds}")
    return float(number)


def _show_value(raw: Any) -> str:
    """The judge's value as it wrote it (a string without quotes), clipped for a reason string."""
    return clip(raw.strip() if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=repr))


def _looks_like_score(value: Any) -> bool:
    """Whether a flat top-level value is a score (so an unasked criterion), not a comment or a flag."""
    if isinstance(value, Mapping):
        return _SCORE_FIELD in value
    return _as_number(value) is not None


def _show_bound(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else repr(float(bound))
