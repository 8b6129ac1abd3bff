"""Errors of the simulator package (a leaf module: every other module may import it)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A scenario parameter is unknown or outside its allowed range."""
