"""Learned schedulers (DESIGN §4.1). One registry; Hydra's ``conf/algo/`` mirrors it.

Each entry maps an algorithm name to a trainer factory ``(algo_cfg, spec, seed) -> Trainer``.
torch is imported only when a trainer is built, so ``import edgesched`` stays light.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_REGISTRY: dict[str, Callable[..., Any]] = {}


def register_algorithm(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: register a trainer factory under ``name``."""

    def deco(factory: Callable[..., Any]) -> Callable[..., Any]:
        _REGISTRY[name] = factory
        return factory

    return deco


def list_algorithms() -> list[str]:
    """Names of the registered learned schedulers."""
    return sorted(_REGISTRY)


def make_trainer(name: str, algo_cfg: Any, spec: Any, seed: int) -> Any:
    """Build the trainer of algorithm ``name``; unknown names list the registry."""
    if name not in _REGISTRY:
        raise KeyError(f"unknown algorithm {name!r}; registered algorithms: {list_algorithms()}")
    return _REGISTRY[name](algo_cfg, spec, seed)


@register_algorithm("mappo")
def _mappo(algo_cfg: Any, spec: Any, seed: int) -> Any:
    from .mappo import PPOTrainer

    return PPOTrainer(algo_cfg, spec, seed, centralized_critic=True)


@register_algorithm("ippo")
def _ippo(algo_cfg: Any, spec: Any, seed: int) -> Any:
    from .mappo import PPOTrainer

    return PPOTrainer(algo_cfg, spec, seed, centralized_critic=False)
