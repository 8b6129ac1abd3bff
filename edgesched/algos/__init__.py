"""Learned schedulers (DESIGN §4.1). One registry; Hydra's ``conf/algo/`` mirrors it.

Each entry maps an algorithm name to a trainer factory
``(algo_cfg, spec, seed, shield, shield_kwargs) -> Trainer``.
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


def make_trainer(
    name: str,
    algo_cfg: Any,
    spec: Any,
    seed: int,
    shield: str = "none",
    shield_kwargs: dict[str, Any] | None = None,
) -> Any:
    """Build the trainer of algorithm ``name``; unknown names list the registry.

    Args:
        name: registry key.
        algo_cfg: hyperparameters (:class:`edgesched.experiment.schema.AlgoConfig`).
        spec: the scenario's :class:`~edgesched.policy.EnvSpec`.
        seed: training seed.
        shield: registered shield in the training loop.
        shield_kwargs: the shield's options.
    """
    if name not in _REGISTRY:
        raise KeyError(f"unknown algorithm {name!r}; registered algorithms: {list_algorithms()}")
    return _REGISTRY[name](algo_cfg, spec, seed, shield, shield_kwargs or {})


@register_algorithm("mappo")
def _mappo(algo_cfg: Any, spec: Any, seed: int, shield: str, shield_kwargs: dict) -> Any:
    from .mappo import PPOTrainer

    return PPOTrainer(algo_cfg, spec, seed, True, shield, shield_kwargs)


@register_algorithm("ippo")
def _ippo(algo_cfg: Any, spec: Any, seed: int, shield: str, shield_kwargs: dict) -> Any:
    from .mappo import PPOTrainer

    return PPOTrainer(algo_cfg, spec, seed, False, shield, shield_kwargs)


@register_algorithm("srole")
def _srole(algo_cfg: Any, spec: Any, seed: int, shield: str, shield_kwargs: dict) -> Any:
    from .mappo import PPOTrainer

    if shield == "none":
        raise ValueError("srole needs a shield in the loop: shield=central or shield=regional")
    return PPOTrainer(algo_cfg, spec, seed, True, shield, shield_kwargs)


@register_algorithm("dqn_central")
def _dqn_central(algo_cfg: Any, spec: Any, seed: int, shield: str, shield_kwargs: dict) -> Any:
    from .dqn_central import DQNCentralTrainer

    return DQNCentralTrainer(algo_cfg, spec, seed, shield, shield_kwargs)


@register_algorithm("tapfinger")
def _tapfinger(algo_cfg: Any, spec: Any, seed: int, shield: str, shield_kwargs: dict) -> Any:
    from .tapfinger import TapFingerTrainer

    if shield != "none":
        raise ValueError("tapfinger resolves its own task conflicts; use shield=none")
    return TapFingerTrainer(algo_cfg, spec, seed)


@register_algorithm("rlpto")
def _rlpto(algo_cfg: Any, spec: Any, seed: int, shield: str, shield_kwargs: dict) -> Any:
    from .rlpto.trainer import RLPTOTrainer

    if shield != "none":
        raise ValueError("rlpto places with its priority-queue rule; use shield=none")
    return RLPTOTrainer(algo_cfg, spec, seed)
