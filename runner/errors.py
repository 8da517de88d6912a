"""Errors shared by several modules."""

from __future__ import annotations


class ConfigurationError(ValueError):
    """The composed configuration cannot run; raised before any judge call."""
