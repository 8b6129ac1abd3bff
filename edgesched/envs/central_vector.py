"""Gymnasium vector view of the cluster head: B heads as one batched single-agent environment."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from .central_core import CentralHeads
from .config import SimConfig
from .core import OBS_BOUND
from .scenarios import Scenario, scenario_config
from .vector import CopiesVectorEnv


class EdgeSchedCentralVectorEnv(CopiesVectorEnv):
    """Batched centralized edge-cluster scheduling (Gymnasium ``VectorEnv``).

    Description:
        ``num_envs`` copies of :class:`~edgesched.envs.central.EdgeSchedCentralEnv` (one
        cluster head deciding every queued task, one at a time) stepped as one array program
        over :class:`~edgesched.envs.central_core.CentralHeads`. Sub-environment ``b``
        follows, bit for bit, a lone central view reset with ``options={"workload_seed":
        s}`` for its seed ``s`` and given the same actions. This is what
        ``gymnasium.make_vec("edgesched/<Scenario>-vN", num_envs=B)`` builds (the ids'
        ``vector_entry_point``); ``vectorization_mode="sync"`` still gives Gymnasium's
        ``SyncVectorEnv`` of lone views, whose seeds pick other workloads.

    Agents:
        One head per sub-environment.

    Observation:
        Per sub-environment the lone view's ``Box(float32, (F + N*(NODE_FEATURES+1) + 3,))``;
        batched, ``(num_envs, D)``. :meth:`action_masks` gives the feasible actions, (B, A)
        bool.

    Action:
        Per sub-environment ``Discrete(1 + N*L)`` as in the lone view; ``step`` takes an
        integer array of shape ``(num_envs,)``. Another shape or dtype raises
        :class:`~edgesched.envs.core.InvalidActionError`; a masked or out-of-range action
        passes over the job and is counted under the default ``invalid_action='defer'``
        (``'raise'`` raises).

    Reward:
        As the lone view: -(jobs in the system) per slot over the slots the step ran, 0 for
        decisions within a slot; float64, shape ``(num_envs,)``.

    Episode end:
        As the lone view, per sub-environment. Autoreset follows Gymnasium's
        ``AutoresetMode.NEXT_STEP`` (``metadata["autoreset_mode"]``): the step that ends an
        episode returns its last observation; the next ``step`` ignores that
        sub-environment's action and returns its first observation, reward 0. Auto-resets
        draw their seeds from a generator seeded by the ``reset`` seed.

    Info:
        Gymnasium's vector convention, ``(num_envs,)`` arrays with ``_key`` masks: the
        step counters :data:`~edgesched.envs.central.INFO_KEYS`, and for the
        sub-environments whose episode ended in this step ``info["episode_metrics"]`` (the
        scalar episode metrics, ``episode_return_mean`` the head's return) with
        ``info["_episode_metrics"]``.

    Arguments:
        scenario: registered scenario name or a :class:`SimConfig`.
        num_envs: sub-environments (heads) ``B >= 1``.
        **overrides: any :class:`SimConfig` parameter, validated.

    Version history:
        v1: first release (the lone view's dynamics, batched; see its version history).
    """

    def __init__(
        self, scenario: str | SimConfig = "edge10", num_envs: int = 1, **overrides: Any
    ) -> None:
        self.scenario: Scenario | None
        self.scenario, cfg = scenario_config(scenario, overrides)
        self.heads = CentralHeads(cfg, copies=num_envs)
        self._init_copies(self.heads.copies)
        self.single_observation_space = spaces.Box(
            -OBS_BOUND, OBS_BOUND, (self.heads.obs_size,), np.float32
        )
        self.single_action_space = spaces.Discrete(self.heads.num_actions)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    @property
    def config(self) -> SimConfig:
        """The validated scenario configuration."""
        return self.heads.sim.cfg

    def action_masks(self) -> np.ndarray:
        """(B, A) bool: each head's feasible actions now (a copy)."""
        return self.heads.masks().copy()

    # ------------------------------------------------------------------ hooks
    def _reset_copies(self, copies: np.ndarray | None, seeds: list[Any]) -> None:
        if copies is None:
            self.heads.reset(seeds)
        else:
            self.heads.reset_copies(copies, seeds)

    def _obs(self) -> np.ndarray:
        return self.heads.observations()

    def _episode_metrics(self, b: int) -> dict[str, Any]:
        return self.heads.episode_metrics(b)

    def _checked_actions(self, actions: Any) -> np.ndarray:
        what = (
            f"(num_envs,) = ({self.num_envs},), one Discrete({self.heads.num_actions}) action "
            "per head"
        )
        return self._int_actions(actions, (self.num_envs,), what)

    def _step_copies(self, actions: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        rewards, step_info = self.heads.step(actions)
        return rewards.copy(), step_info

    def _end_flags(self) -> tuple[np.ndarray, np.ndarray]:
        return self.heads.end_flags()


__all__ = ["EdgeSchedCentralVectorEnv"]
