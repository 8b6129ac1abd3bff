"""Heuristic schedulers behind the policy interface (DESIGN §4.3).

Registered here: ``random`` and ``local_only``; the other classic heuristics of DESIGN §4.3
plug into the same registry.
"""

from __future__ import annotations

import numpy as np

from edgesched.policy import EnvSpec, Scheduler

_REGISTRY: dict[str, type[Scheduler]] = {}


def register_baseline(cls: type[Scheduler]) -> type[Scheduler]:
    """Class decorator: register a heuristic under ``cls.name``."""
    _REGISTRY[cls.name] = cls
    return cls


def list_baselines() -> list[str]:
    """Names of the registered heuristics."""
    return sorted(_REGISTRY)


def make_baseline(name: str, spec: EnvSpec, seed: int | None = None) -> Scheduler:
    """Instantiate a registered heuristic; unknown names list the registry."""
    if name not in _REGISTRY:
        raise KeyError(f"unknown baseline {name!r}; registered baselines: {list_baselines()}")
    policy = _REGISTRY[name](spec)
    policy.reset(seed)
    return policy


@register_baseline
class RandomScheduler(Scheduler):
    """Uniformly random among each agent's feasible actions, defer included.

    The reference point of the normalized score (DESIGN §6).
    """

    name = "random"

    def reset(self, seed: int | None = None) -> None:
        """Seed the scheduler's own generator."""
        self.rng = np.random.default_rng(seed)

    def act(self, obs, mask, state, graph=None) -> np.ndarray:
        """Random feasible action per agent."""
        return (self.rng.random(mask.shape) * mask).argmax(axis=1)


@register_baseline
class LocalOnlyScheduler(Scheduler):
    """Each agent runs its head-of-queue task on its own node at the minimum allocation.

    Rule: place when that fits, otherwise defer. No coordination, so no collisions. It is
    the "no offloading" baseline of edge scheduling papers (e.g. SROLE's comparison).
    """

    name = "local_only"

    def act(self, obs, mask, state, graph=None) -> np.ndarray:
        """Place locally at level 0 when feasible, else defer."""
        n = mask.shape[0]
        own = self.spec.action(np.zeros(n, int), np.zeros(n, int), np.zeros(n, int))
        return np.where(mask[np.arange(n), own], own, 0)
