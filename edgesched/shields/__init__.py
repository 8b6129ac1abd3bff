"""Collision shields. One registry; Hydra's ``conf/shield/`` mirrors it.

* ``none``: no shield in the loop;
* ``central``: :class:`CentralShield`, one shield over all agents (never a collision);
* ``regional``: :class:`RegionalShield`, one per region with a bounded message protocol
  over boundary nodes.

Use :func:`make_shield` to bind a shield to a simulator, or :class:`ShieldedParallelEnv`
to run any policy (heuristics included) shielded through the PettingZoo API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import Shield, ShieldResult, ShieldStats, default_preferences
from .central import CentralShield
from .regional import BOUNDARY_MODES, RegionalShield
from .wrapper import ShieldedParallelEnv

_REGISTRY: dict[str, Callable[..., Shield] | None] = {
    "none": None,
    "central": CentralShield,
    "regional": RegionalShield,
}


def list_shields() -> list[str]:
    """Names of the registered shields (``none`` = no shield in the loop)."""
    return sorted(_REGISTRY)


def make_shield(name: str, sim: Any, **kwargs: Any) -> Shield | None:
    """Bind shield ``name`` to simulator ``sim``; ``none`` returns ``None``.

    Args:
        name: registry key.
        sim: :class:`edgesched.envs.core.EdgeClusterSim`.
        **kwargs: shield options (``regional``: ``rounds``, ``boundary``).

    Raises:
        KeyError: unknown shield (the message lists the registry).
        TypeError: an option the shield does not take.
    """
    if name not in _REGISTRY:
        raise KeyError(f"unknown shield {name!r}; registered shields: {list_shields()}")
    factory = _REGISTRY[name]
    if factory is None:
        return None
    if name == "central" and kwargs:
        raise TypeError(f"shield 'central' takes no options; got {sorted(kwargs)}")
    return factory(sim, **kwargs)


__all__ = [
    "BOUNDARY_MODES",
    "CentralShield",
    "RegionalShield",
    "Shield",
    "ShieldResult",
    "ShieldStats",
    "ShieldedParallelEnv",
    "default_preferences",
    "list_shields",
    "make_shield",
]
