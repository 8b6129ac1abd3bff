"""The policy interface shared by learned and heuristic schedulers.

A scheduler maps what an agent may see - observations, action masks, the global ``state()``
and the static action layout - to one action per agent. It never reads simulator internals,
so the evaluation harness treats learned and heuristic schedulers alike.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class EnvSpec:
    """Static facts about a scenario's multi-agent view.

    Attributes:
        scenario: versioned scenario id, e.g. ``edge50-v0``.
        num_agents: N.
        obs_dim: length of one agent's observation vector.
        state_dim: length of the global state vector.
        num_actions: size of each agent's Discrete action space.
        pending_slots: P, pending jobs an agent may choose among.
        num_targets: K+1, placement targets per agent (itself first).
        num_levels: L, allocation levels.
        job_features: F, features per pending job in an observation.
        num_priorities: priority classes.
        num_models: models in the scenario's catalog.
        level_scale: (L, 3) per level, multiplier of a task's minimum (cpu, gpu, mem) demand.
        level_add: (L, 3) per level, absolute (cpu, gpu, mem) added; a level allocates
            ``min_demand * level_scale[l] + level_add[l]``.
        cap_max: the largest node capacity per resource (the observations' normalizer).
        model_rates: (M,) per model (in the one-hot's order), samples/s of one reference
            worker (one GPU at speed 1, the model's minimum cores), from the measured
            profiles: a job's declared size over its model's rate is its expected time on
            one such worker. Empty where the progress model has no throughputs (TapFinger's
            rules).
        config: the :class:`~edgesched.envs.config.SimConfig` these facts come from (the
            scenario's parameters with a run's overrides applied); ``None`` for a spec
            written by hand. Not part of the spec's equality. A learner that builds its own
            view of the scenario (``dqn_central``'s central view) reads it, so that a policy
            trained with overrides is rebuilt at its own shapes.

    Observation layout of one agent (``EdgeSchedParallelEnv`` docstring; all slices are
    available from :meth:`obs_slices`): own node features (``NODE_FEATURES`` = 9: free
    fraction of cpu/gpu/mem, capacity / max capacity x3, speed / max speed, running
    workers / 8, queue length / 10), time of day (sin, cos), queue length / 10, then P
    pending-job blocks of F features (present, min demand / max capacity x3, workers / 4,
    log size / 20, priority one-hot, model one-hot, placed workers / 4, waiting slots / 100),
    then K+1 target blocks of ``NODE_FEATURES + 3`` (the target's node features, link
    present, log10 bandwidth / 2, latency / 100 ms).
    """

    scenario: str
    num_agents: int
    obs_dim: int
    state_dim: int
    num_actions: int
    pending_slots: int
    num_targets: int
    num_levels: int
    job_features: int = 0
    num_priorities: int = 0
    num_models: int = 0
    level_scale: tuple[tuple[float, ...], ...] = ()
    level_add: tuple[tuple[float, ...], ...] = ()
    cap_max: tuple[float, ...] = ()
    model_rates: tuple[float, ...] = ()
    # typed Any: this module imports nothing from edgesched.envs (no cycle)
    config: Any = field(default=None, compare=False, repr=False)

    def obs_slices(self) -> dict[str, slice]:
        """Where each block of an agent's observation lies (see class docstring)."""
        # obs_dim = (NODE_FEATURES + 3) * (1 + K+1) + P * F: the node block's width follows
        # from the spec alone, so this module needs nothing from edgesched.envs (which
        # imports it for ScenarioHandle.spec; importing back would make a cycle)
        jobs0 = (self.obs_dim - self.pending_slots * self.job_features) // (1 + self.num_targets)
        node_features = jobs0 - 3
        nbr0 = jobs0 + self.pending_slots * self.job_features
        return {
            "own": slice(0, node_features),
            "time": slice(node_features, node_features + 2),
            "queue": slice(node_features + 2, jobs0),
            "jobs": slice(jobs0, nbr0),
            "targets": slice(nbr0, nbr0 + self.num_targets * jobs0),
        }

    def action(self, slot: np.ndarray, target: np.ndarray, level: np.ndarray) -> np.ndarray:
        """Encode (pending slot, target index, level) as actions; 0 is defer."""
        return 1 + (slot * self.num_targets + target) * self.num_levels + level

    def placement_mask(self, mask: np.ndarray) -> np.ndarray:
        """View a (N, A) mask's placements as (N, P, K+1, L)."""
        n = mask.shape[0]
        return mask[:, 1:].reshape(n, self.pending_slots, self.num_targets, self.num_levels)

    @staticmethod
    def of(sim) -> EnvSpec:
        """The spec of an :class:`~edgesched.envs.core.EdgeClusterSim`.

        To get the spec of a scenario without building a simulator of your own, resolve it
        once (:func:`edgesched.envs.handle.resolve_scenario`) and read the handle's
        ``spec``: it builds one simulator on first access and keeps the answer. A batched
        simulator's spec is that of one copy.
        """
        name = f"{sim.scenario_id}" if getattr(sim, "scenario_id", None) else "custom"
        return EnvSpec(
            scenario=name,
            num_agents=sim.agents_per_copy,
            obs_dim=sim.obs_dim,
            state_dim=sim.state_dim,
            num_actions=sim.num_actions,
            pending_slots=sim.pending_slots,
            num_targets=sim.k1,
            num_levels=sim.num_levels,
            job_features=sim.job_features,
            num_priorities=sim.num_priorities,
            num_models=sim.num_models,
            level_scale=tuple(map(tuple, sim.level_scale.tolist())),
            level_add=tuple(map(tuple, sim.level_add.tolist())),
            cap_max=tuple(sim.capacity.max(axis=0).tolist()),
            model_rates=tuple(rates.tolist())
            if (rates := sim.progress_model.reference_rates()) is not None
            else (),
            config=sim.cfg,
        )


class Scheduler(ABC):
    """A multi-agent scheduler: one action per agent per decision round.

    Args:
        spec: the scenario's static facts.
    """

    name: str = "scheduler"
    needs_graph: bool = False
    """Set True to receive the heterogeneous graph view as ``act(..., graph=...)``."""
    reallocates: bool = False
    """Set True to re-allocate running jobs once per slot through :meth:`reallocate`."""

    def __init__(self, spec: EnvSpec) -> None:
        self.spec = spec

    def reset(self, seed: int | None = None) -> None:  # noqa: B027 - optional hook
        """Start an episode (stateless schedulers need nothing)."""

    @abstractmethod
    def act(
        self,
        obs: np.ndarray,
        mask: np.ndarray,
        state: np.ndarray | None,
        graph: dict | None = None,
    ) -> np.ndarray:
        """Return actions (N,) for observations (N, D), masks (N, A) and the global state.

        ``graph`` (the simulator's heterogeneous graph view) is passed only to schedulers
        that set ``needs_graph``.
        """

    def reallocate(self, view: Any) -> tuple[np.ndarray, np.ndarray]:
        """Resize running jobs at the start of a slot (preemptive schedulers).

        The evaluation loop calls it for schedulers that set :attr:`reallocates`, once per
        slot: at the start of an episode and whenever the clock has advanced since the last
        call, before that slot's first decision round. The changes are applied with
        ``EdgeClusterSim.resize``: every worker of a job moves one allocation level down or
        up (``grid`` allocation: one GPU at the same CPUs), growth only where its nodes
        have room, and a slot in which a job's allocation changed progresses at the
        scenario's ``switch_weight``.

        Args:
            view: the cluster's read-only :class:`~edgesched.envs.view.ClusterView`.

        Returns:
            ``(jobs, delta)``: distinct running job ids (local) and -1, 0 or +1 for each.
            The default changes nothing.
        """
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)

    def act_with_preferences(
        self,
        obs: np.ndarray,
        mask: np.ndarray,
        state: np.ndarray | None,
        graph: dict | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Actions plus each agent's preference scores over its actions (for shields).

        Returns:
            ``(actions (N,), prefs (N, A) or None)``; higher scores are preferred. The
            default gives no preferences, and a shield then ranks alternatives itself
            (:func:`edgesched.shields.base.default_preferences`). Learned schedulers return
            their action probabilities.
        """
        return self.act(obs, mask, state, graph=graph), None
