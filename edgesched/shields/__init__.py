"""Collision shields (DESIGN §4.2). The registry holds ``none`` until the shields land."""

from __future__ import annotations

_REGISTRY: dict[str, object] = {"none": None}


def list_shields() -> list[str]:
    """Names of the registered shields (``none`` = no shield in the loop)."""
    return sorted(_REGISTRY)
