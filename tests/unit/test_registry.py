"""Unit tests for runner.core.registry: lookup, parameter binding and the start-up dry run of an entry."""

from __future__ import annotations

import re

import pytest

from runner.core.errors import ConfigurationError, ParamsError
from runner.core.registry import Registry, UnknownNameError

THINGS: Registry = Registry("thing")


@THINGS.register("pattern")
def find(text: str, *, pattern: str = "x") -> bool:
    return re.search(pattern, text) is not None


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(UnknownNameError, match=r"unknown thing 'patern'; known: pattern"):
        THINGS.get("patern")


def test_a_parameter_that_does_not_bind_is_a_params_error_and_still_a_type_error():
    with pytest.raises(ParamsError, match="thing 'pattern': parameters {'patern': 'a'} do not fit") as caught:
        THINGS.check_params("pattern", {"patern": "a"})
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ConfigurationError)


def test_a_dry_run_catches_a_value_the_entry_refuses_and_names_the_key():
    THINGS.dry_run("pattern", {"pattern": "a+"}, "")
    with pytest.raises(ParamsError, match=r"^rubric\.parser\.params: thing 'pattern': .*missing \)"):
        THINGS.dry_run("pattern", {"pattern": "(a"}, "", key="rubric.parser.params")
    with pytest.raises(ParamsError, match=r"^k: thing 'pattern': parameters {'nope': 1} do not fit"):
        THINGS.dry_run("pattern", {"nope": 1}, "", key="k")
    with pytest.raises(UnknownNameError):
        THINGS.dry_run("missing", {}, "")
