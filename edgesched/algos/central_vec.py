"""B cluster heads as one stable-baselines3 ``VecEnv``: ``dqn_central``'s training environment.

The heads run on one batched simulator (:class:`~edgesched.envs.central_core.CentralHeads`),
so a vector step is one array program over the copies instead of a Python loop over
Gymnasium environments (SB3's ``DummyVecEnv``). It also does what the trainer needs around
the view: every reset starts the next training workload, the optional potential-based
queue shaping, the feasible-action mask appended to the observation (SB3's DQN has no
masks), and the episode metrics of finished copies. With one copy it produces exactly the
transitions the earlier ``DummyVecEnv`` of wrapped central views did
(``tests/test_dqn_masking.py``).

SB3's ``VecEnv`` API rather than Gymnasium's ``VectorEnv``: SB3's off-policy loop reads the
terminal observation and ``TimeLimit.truncated`` from the step's ``infos`` (same-step
auto-reset), which its own ``VecEnv`` contract defines.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import VecEnv

from edgesched.envs.central_core import CentralHeads
from edgesched.envs.config import SimConfig
from edgesched.envs.core import OBS_BOUND
from edgesched.protocol import train_episode_seed

__all__ = ["CentralVecEnv", "work_conserving"]


def work_conserving(mask: np.ndarray) -> np.ndarray:
    """``mask`` (one row or (B, A) rows) without passing (0) where a placement is feasible."""
    out = np.array(mask, dtype=bool)
    out[..., 0] &= ~out[..., 1:].any(axis=-1)
    return out


class CentralVecEnv(VecEnv):
    """``copies`` cluster heads on training workloads, as an SB3 vectorized environment.

    Args:
        config: scenario configuration of the central view.
        copies: heads stepped together (B).
        seed: training seed: the k-th reset of any copy (copies in order) runs workload
            :func:`~edgesched.protocol.train_episode_seed` ``(seed, 0, k)``.
        shaping: ``k`` of the potential ``phi(s) = -k * (queued jobs)``; the reward gets
            ``d * phi(s') - phi(s)`` (``d`` the transition's discount, ``phi = 0`` at a
            terminal state), which changes no policy's ranking (Ng, Harada & Russell 1999).
        gamma: discount per decision, or per slot with ``per_slot``.
        per_slot: the shaping's discount is ``gamma ** (slots the step ran)``.
        masked: append the feasible-action mask (0/1) to each observation.
        conserving: with ``masked``, the mask of :func:`work_conserving`.

    Attributes:
        finished: episode metrics of every finished episode, in the order they ended.
    """

    render_mode: str | None = None  # SB3's VecEnv asks; the heads do not render

    def __init__(
        self,
        config: SimConfig,
        copies: int,
        seed: int,
        *,
        shaping: float = 0.0,
        gamma: float = 0.99,
        per_slot: bool = False,
        masked: bool = False,
        conserving: bool = False,
    ) -> None:
        if conserving and not masked:
            raise ValueError("conserving=True needs masked=True (the mask is what it changes)")
        self.heads = CentralHeads(config, copies=copies)
        n_act = self.heads.num_actions
        size = self.heads.obs_size
        low = np.full(size, -OBS_BOUND, np.float32)
        high = np.full(size, OBS_BOUND, np.float32)
        if masked:
            low = np.concatenate([low, np.zeros(n_act, np.float32)])
            high = np.concatenate([high, np.ones(n_act, np.float32)])
        space = gym.spaces.Box(low, high, dtype=np.float32)
        super().__init__(int(copies), space, gym.spaces.Discrete(n_act))
        self.seed_base = int(seed)
        self.episode = 0
        self.finished: list[dict[str, Any]] = []
        self.shaping = float(shaping)
        self.gamma = float(gamma)
        self.per_slot = bool(per_slot)
        self.masked = bool(masked)
        self.conserving = bool(conserving)
        self._actions: np.ndarray | None = None

    @property
    def config(self) -> SimConfig:
        """The scenario configuration the heads run."""
        return self.heads.sim.cfg

    def _next_seeds(self, count: int) -> list[int]:
        seeds = [train_episode_seed(self.seed_base, 0, self.episode + i) for i in range(count)]
        self.episode += count
        return seeds

    def _obs(self) -> np.ndarray:
        obs = self.heads.observations()
        if not self.masked:
            return obs
        mask = self.heads.masks()
        if self.conserving:
            mask = work_conserving(mask)
        return np.concatenate([obs, mask.astype(np.float32)], axis=1)

    def _phi(self) -> np.ndarray:
        return -self.shaping * self.heads.queued_counts()

    # ------------------------------------------------------------------ VecEnv API
    def reset(self) -> np.ndarray:
        """Start every copy on the next training workloads; (B, D) observations."""
        self.heads.reset(self._next_seeds(self.num_envs))
        self._reset_seeds()  # SB3's seeds are not used: the workloads are set above
        self._reset_options()
        return self._obs()

    def step_async(self, actions: np.ndarray) -> None:
        """Store the (B,) actions for :meth:`step_wait`."""
        self._actions = actions

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """One decision per head; finished copies restart on the next training workloads.

        Returns:
            ``(obs, rewards, dones, infos)`` as SB3's ``VecEnv``: float32 rewards, ``dones``
            terminated or truncated, each info with ``advanced`` (slots run) and
            ``TimeLimit.truncated``, and ``terminal_observation`` where done.
        """
        if self._actions is None:
            raise RuntimeError("step_wait() without step_async(actions)")
        heads = self.heads
        phi0 = self._phi() if self.shaping else None
        rewards, info = heads.step(np.asarray(self._actions).reshape(-1))
        self._actions = None
        term, trunc = heads.end_flags()
        advanced = info["advanced"].tolist()
        r = rewards
        if phi0 is not None:
            # discounts in Python floats, as a lone transition's (gamma ** k)
            d = np.array([self.gamma**k if self.per_slot else self.gamma for k in advanced])
            r = r + d * np.where(term, 0.0, self._phi()) - phi0
        dones = term | trunc
        infos: list[dict[str, Any]] = [
            {"advanced": k, "TimeLimit.truncated": bool(u and not t)}
            for k, t, u in zip(advanced, term.tolist(), trunc.tolist(), strict=True)
        ]
        obs = self._obs()
        if dones.any():
            done = np.flatnonzero(dones)
            for b in done.tolist():
                infos[b]["terminal_observation"] = obs[b].copy()
                self.finished.append(heads.episode_metrics(b))
            heads.reset_copies(done, self._next_seeds(len(done)))
            obs = self._obs()
        return obs, r.astype(np.float32), dones, infos

    def close(self) -> None:
        """Nothing to release (one in-process simulator)."""

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        """This environment's attribute, once per selected copy (they share one object)."""
        return [getattr(self, attr_name)] * len(self._get_indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        """Set an attribute of this environment (shared by every copy)."""
        setattr(self, attr_name, value)

    def env_method(
        self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any
    ) -> list[Any]:
        """Call a method of this environment once per selected copy."""
        method = getattr(self, method_name)
        return [method(*method_args, **method_kwargs) for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        """No copy is wrapped (the heads are one array program, not Gymnasium envs)."""
        return [False] * len(self._get_indices(indices))
