"""Secret values redacted from every log record before a handler writes it.

A :class:`~runner.core.types.Secret` never prints itself, but libraries log the values they were handed: litellm's
DEBUG logger prints the request it sends (``api_key='sk-...'``), httpx's the headers. A filter on each handler
(``logging.Filter`` on a handler sees every record that reaches it, from any logger, at any level) replaces each
registered value in the record's message, arguments, exception and stack text with ``***``.

The values are process-wide: every job of a process registers its keys (:func:`protect`) and installs the filter on
the handlers configured at that moment (:func:`install`); Hydra configures logging again for each job of a sweep.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

__all__ = ["MASK", "RedactSecrets", "install", "install_everywhere", "protect", "protected", "redact"]

MASK = "***"
# Shorter values would redact ordinary words; every provider's key is far longer.
MIN_SECRET_LENGTH = 8

# Process-wide state: the secret values of every job this process ran (a key is still a key after its job ends).
_secrets: set[str] = set()
_formatter = logging.Formatter()


def protect(values: Iterable[str]) -> None:
    """Register secret values to be redacted from every record from now on (short or empty values are ignored)."""
    _secrets.update(v for v in values if len(v) >= MIN_SECRET_LENGTH)


def protected() -> frozenset[str]:
    """The registered secret values."""
    return frozenset(_secrets)


def redact(text: str) -> str:
    """``text`` with every registered secret value replaced by ``***`` (longest first: one key may contain another)."""
    for secret in sorted(_secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    return text


class RedactSecrets(logging.Filter):
    """Rewrites a record so that no registered secret reaches the handler's output; never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102
        if not _secrets:
            return True
        # The message is formatted here, once, so a secret in an argument (a dict, a request object's repr) goes too.
        message = record.getMessage()
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = _formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
            # the formatter prints exc_text when set; the traceback objects would not be redacted
            record.exc_info = None
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


_FILTER = RedactSecrets()


def install(handlers: Iterable[logging.Handler]) -> None:
    """Put the filter on each handler (once)."""
    for handler in handlers:
        if not any(isinstance(f, RedactSecrets) for f in handler.filters):
            handler.addFilter(_FILTER)


def install_everywhere() -> None:
    """Put the filter on every handler of the root logger and of every named logger that has handlers of its own
    (litellm adds one to its loggers when imported; MLflow to ``mlflow``)."""
    loggers: list[logging.Logger] = [logging.getLogger()]
    loggers += [lg for lg in logging.root.manager.loggerDict.values() if isinstance(lg, logging.Logger)]
    for logger in loggers:
        install(logger.handlers)
