"""Name -> function registries: parsers, aggregations, and whatever else is chosen by config.

Dispatch is by lookup, never by an if/elif chain over strings, and an unknown name fails with the
list of known ones so a typo in YAML is caught at start-up.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from runner.core.errors import ParamsError

F = TypeVar("F", bound=Callable[..., Any])


class UnknownNameError(KeyError):
    """Raised when config names something that is not registered."""

    def __str__(self) -> str:  # KeyError would repr() the message and add quotes
        return str(self.args[0])


class Registry(Generic[F]):
    """A named collection of functions of one kind.

    Args:
        kind: What the entries are ("parser", "aggregation"), used in error messages.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, F] = {}

    def register(self, name: str) -> Callable[[F], F]:
        """Decorator that registers a function under ``name``."""

        def decorate(fn: F) -> F:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._entries[name] = fn
            return fn

        return decorate

    def get(self, name: str) -> F:
        """Return the entry called ``name`` or raise :class:`UnknownNameError` listing known names."""
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries)) or "(none)"
            raise UnknownNameError(f"unknown {self.kind} {name!r}; known: {known}") from None

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._entries)

    def check_params(self, name: str, params: dict[str, Any], fixed: int = 1) -> None:
        """Check that ``params`` bind to the entry's keyword parameters.

        Args:
            name: The registered name.
            params: Keyword parameters from config.
            fixed: How many leading positional parameters the caller supplies itself.

        Raises:
            UnknownNameError: If ``name`` is not registered.
            ParamsError: If a parameter is unknown or a required one is missing.
        """
        fn = self.get(name)
        sig = inspect.signature(fn)
        placeholders = [object()] * fixed
        try:
            sig.bind(*placeholders, **params)
        except TypeError as exc:
            raise ParamsError(f"{self.kind} {name!r}: parameters {params!r} do not fit {sig}: {exc}") from None

    def dry_run(self, name: str, params: dict[str, Any], *args: Any, key: str = "") -> None:
        """Check ``params`` by calling the entry once on harmless ``args`` (an empty judge answer, say), so a
        value it refuses (an invalid regex, a string where a list belongs) fails at start-up rather than on
        the first paid answer. Only for pure entries: the call's result is dropped.

        Args:
            name: The registered name.
            params: Keyword parameters from config.
            *args: The leading positional arguments of one harmless call.
            key: The config key the parameters come from, to start the error message with.

        Raises:
            UnknownNameError: If ``name`` is not registered.
            ParamsError: If the parameters do not bind or the entry refuses their values.
        """
        prefix = f"{key}: " if key else ""
        try:
            self.check_params(name, params, fixed=len(args))
            self.get(name)(*args, **params)
        except ParamsError as exc:
            raise ParamsError(f"{prefix}{exc}") from None
        except (TypeError, ValueError, re.error) as exc:
            raise ParamsError(f"{prefix}{self.kind} {name!r}: parameters {params!r}: {exc}") from None
