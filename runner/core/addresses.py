"""Every server address in the config (``api_base`` of the judge, its replicas and members, and the generator) is an
http(s) URL with a host, checked once on the typed config before anything runs.

litellm takes any string: ``judge.api_base=notaurl`` used to be sent 20 calls and 64 retries of connection errors,
then a RunAborted that named no key.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

from runner.core.config import JudgeConfig, RunConfig
from runner.core.errors import ConfigurationError

__all__ = ["BadAddress", "check_addresses"]

SCHEMES = ("http", "https")


class BadAddress(ConfigurationError):
    """An ``api_base`` that is not an http(s) URL with a host."""


def _addresses(model: JudgeConfig, path: str) -> Iterator[tuple[str, str | None]]:
    yield f"{path}.api_base", model.api_base
    for n, replica in enumerate(model.replicas):
        yield f"{path}.replicas[{n}].api_base", replica.api_base
    for name, member in model.members.items():
        yield from _addresses(member, f"{path}.members.{name}")


def _problem(address: str) -> str | None:
    """What is wrong with ``address`` as a server's base URL, or None when nothing is."""
    try:
        parts = urlsplit(address)
        _ = parts.port  # raises for a port that is not a number in 0-65535
    except ValueError as exc:
        return f"not a URL ({exc})"
    if parts.scheme.lower() not in SCHEMES:
        return "not an http:// or https:// URL" if parts.scheme else "not a URL (no http:// or https://)"
    if not parts.hostname:
        return "a URL without a host"
    return None


def check_addresses(cfg: RunConfig) -> None:
    """Check every ``api_base`` in the config; None (the provider's own address) is valid.

    Raises:
        BadAddress: Naming every bad key and its value, one per line, with an example of a valid one.
    """
    models = [(cfg.judge, "judge")] + ([(cfg.generator, "generator")] if cfg.generator is not None else [])
    bad = [f"{key}={value!r}: {problem}; expected e.g. http://127.0.0.1:8000/v1"
           for model, path in models for key, value in _addresses(model, path)
           if value is not None and (problem := _problem(value)) is not None]
    if bad:
        raise BadAddress("\n".join(bad))
