"""Config mappings whose keys are the user's own names (a dataset's categories, an ensemble's members), set on the
command line without Hydra's ``+``.

Hydra closes every mapping of the composed config, typed ``dict[str, ...]`` ones included, before it applies the
command line, so ``rubric.category_weights.casual.naturalness=0.6`` for a category the rubric does not list yet
failed with "Key 'casual' is not in struct" until written ``+rubric.category_weights.casual.naturalness=0.6``. An
override of a key under :data:`OPEN_MAPPINGS` is given to Hydra as ``++key=value`` (add or override): the same as
``key=value`` for a key that exists, an added one otherwise; its value is still checked against the schema's type.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["OPEN_MAPPINGS", "opened"]

# name -> value mappings whose names are the user's data; every other key stays closed (a misspelling fails)
OPEN_MAPPINGS = ("rubric.category_weights.", "judge.weights.")


def opened(overrides: Sequence[str]) -> list[str]:
    """``overrides`` with each plain ``key=value`` under :data:`OPEN_MAPPINGS` written ``++key=value``; any other
    argument (a ``+``/``~`` override, a flag, a group choice) as it is."""
    return [f"++{o}" if o.startswith(OPEN_MAPPINGS) and "=" in o else o for o in overrides]
