"""Heuristic schedulers behind the policy interface.

Registered here: ``random`` and ``local_only``. The other classic heuristics
(``round_robin``, ``least_loaded``, ``best_fit``, ``fifo``, ``sjf``, ``tiresias``,
``optimus``, ``drf``, ``min_alloc``) live in :mod:`edgesched.baselines.heuristics`, the
preemptive ``tiresias_preemptive`` and ``optimus_preemptive`` (which re-allocate running
jobs every slot) in :mod:`edgesched.baselines.preemptive`; both register into the same
registry on import. Schedulers that are meaningful for one cluster
head also offer ``act_central(obs, mask)`` for the Gymnasium central view
(``random``, ``least_loaded``, ``best_fit``, ``min_alloc``).
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

    The reference point of the normalized score.
    """

    name = "random"

    def reset(self, seed: int | None = None) -> None:
        """Seed the scheduler's own generator."""
        self.rng = np.random.default_rng(seed)

    def act(self, obs, mask, state, graph=None) -> np.ndarray:
        """Random feasible action per agent."""
        return (self.rng.random(mask.shape) * mask).argmax(axis=1)

    def act_central(self, obs: np.ndarray, mask: np.ndarray) -> int:
        """Central view: uniformly random feasible action (pass included)."""
        return int((self.rng.random(np.shape(mask)) * mask).argmax())


@register_baseline
class LocalOnlyScheduler(Scheduler):
    """Each agent runs its head-of-queue task on its own node at the minimum allocation.

    Rule: the first occupied pending slot is the head; place it when that fits, otherwise
    defer. The minimum allocation is the lowest feasible level (level 0 in ``scale`` mode;
    in ``grid`` mode level 0 may lie below the job's minimum demand, e.g. (0 CPU, 1 GPU) in
    ``tapfinger-hetero6``). No coordination, so no collisions. It is the "no offloading"
    baseline of edge scheduling papers (e.g. SROLE's comparison).

    Under ``pending_refill='immediate'`` the slots hold the queue in order, so the first
    occupied slot is slot 0 whenever any is occupied. Under ``'on_advance'`` a placed job
    leaves its slot empty, and the refill puts no job in two slots of one agent: once the
    queue is all in slots, slot 0 can stay empty for the rest of the episode, so serving
    slot 0 alone left 21.7 of 384 jobs per episode unfinished on ``tapfinger-hetero6``
    under the original TapFinger rules (10 held-out seeds; the records of e041817).
    """

    name = "local_only"

    def act(self, obs, mask, state, graph=None) -> np.ndarray:
        """Place the first occupied slot's task locally at the lowest feasible level."""
        from .heuristics import obs_layout  # heuristics registers through this module

        n, p, f = mask.shape[0], self.spec.pending_slots, self.spec.job_features
        lay = obs_layout(self.spec)
        present = obs[:, lay.jobs].reshape(n, p, f)[..., lay.job_present] > 0
        slot = present.argmax(axis=1)  # 0 when no slot is occupied (then nothing fits)
        own = self.spec.placement_mask(mask)[np.arange(n), slot, 0, :]  # (N, L): own node
        level = own.argmax(axis=1)
        act = self.spec.action(slot, np.zeros(n, int), level)
        return np.where(own.any(axis=1), act, 0)


# the classic heuristics and their preemptive forms register themselves on import
from . import heuristics, preemptive  # noqa: E402, F401
