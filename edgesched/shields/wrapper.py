"""PettingZoo wrapper: run any policy shielded through the ``ParallelEnv`` API."""

from __future__ import annotations

from typing import Any

import numpy as np
from pettingzoo.utils.wrappers import BaseParallelWrapper

from .base import ShieldStats


class ShieldedParallelEnv(BaseParallelWrapper):
    """Wrap an :class:`~edgesched.envs.parallel.EdgeSchedParallelEnv` with a collision shield.

    ``step(actions)`` treats ``actions`` as the agents' proposals, lets the shield replace
    colliding ones, and steps the environment with the shield's joint action. Preference
    orders come from :meth:`set_preferences` (e.g. a policy's probabilities, valid for the
    next step only); without them the shield uses
    :func:`~edgesched.shields.base.default_preferences`.

    Every agent's info carries ``executed_action`` and ``shield`` (the step's
    :class:`~edgesched.shields.base.ShieldResult` counters); at the episode's end
    ``info['episode']`` also holds the shield summary (:meth:`ShieldStats.summary`) and
    ``collisions_proposed`` counts the proposals' collisions (before the shield).

    Args:
        env: the parallel environment.
        shield: registered shield name (``central``, ``regional``).
        **shield_kwargs: shield options.

    Example:
        >>> from edgesched import make_parallel
        >>> env = ShieldedParallelEnv(make_parallel("edge10"), "central")
    """

    def __init__(self, env: Any, shield: str = "central", **shield_kwargs: Any) -> None:
        super().__init__(env)
        from . import make_shield

        self.shield = make_shield(shield, env.unwrapped.sim, **shield_kwargs)
        if self.shield is None:
            raise ValueError("shield='none' wraps nothing; use the environment itself")
        self.stats = ShieldStats()
        self._prefs: np.ndarray | None = None

    def set_preferences(self, prefs: np.ndarray | dict[str, np.ndarray]) -> None:
        """Preference scores (higher first) for the next step: (N, A) array or per agent."""
        sim = self.env.unwrapped.sim
        if isinstance(prefs, dict):
            prefs = np.stack([np.asarray(prefs[a], float) for a in self.possible_agents])
        self._prefs = np.asarray(prefs, float).reshape(sim.num_agents, sim.num_actions)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset the environment and the shield's episode statistics."""
        self.stats = ShieldStats()
        self._prefs = None
        return self.env.reset(seed=seed, options=options)

    def step(self, actions: dict[str, int]):
        """Shield the proposals ``actions``, then step the environment."""
        agents = self.possible_agents
        missing = [a for a in agents if a not in actions]
        if missing and self.env.agents:
            return self.env.step(actions)  # let the environment raise its own error
        arr = np.array([actions[a] for a in agents], dtype=np.int64)
        res = self.shield(arr, self._prefs)
        self._prefs = None
        self.stats.add(res)
        executed = dict(zip(agents, res.actions.tolist(), strict=True))
        obs, rew, term, trunc, infos = self.env.step(executed)
        step_info = {
            "proposed_collisions": res.proposed_collisions,
            "interventions": res.interventions,
            "residual_collisions": res.residual_collisions,
            "latency_ms": 1e3 * res.compute_s,
            "messages": res.messages,
            "rounds": res.rounds,
        }
        new_infos = {}
        for a, act in executed.items():
            info = dict(infos[a])
            info["executed_action"] = act
            info["shield"] = step_info
            new_infos[a] = info
        if "episode" in infos[agents[0]]:
            ep = dict(infos[agents[0]]["episode"])
            ep["collisions_proposed"] = int(self.stats.totals["proposed_collisions"])
            ep.update(self.stats.summary())
            for a in agents:
                new_infos[a]["episode"] = ep
        return obs, rew, term, trunc, new_infos
