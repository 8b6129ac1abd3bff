"""PettingZoo wrapper: run any policy shielded through the ``ParallelEnv`` API."""

from __future__ import annotations

from typing import Any

import numpy as np
from pettingzoo.utils.wrappers import BaseParallelWrapper

from .base import ShieldStats

SHIELD_INFO_KEYS = (
    "executed_action",
    "shield_proposed_collisions",
    "shield_interventions",
    "shield_residual_collisions",
    "shield_latency_ms",
    "shield_messages",
    "shield_rounds",
)
"""Keys the wrapper adds to every agent's info, at ``reset`` (all 0) and every step."""


class ShieldedParallelEnv(BaseParallelWrapper):
    """Wrap an :class:`~edgesched.envs.parallel.EdgeSchedParallelEnv` with a collision shield.

    ``step(actions)`` treats ``actions`` as the agents' proposals, lets the shield replace
    colliding ones, and steps the environment with the shield's joint action. Preference
    orders come from :meth:`set_preferences` (e.g. a policy's probabilities, valid for the
    next step only); without them the shield uses
    :func:`~edgesched.shields.base.default_preferences`.

    Invalid proposals (masked or out of range) follow the environment's ``invalid_action``:
    under ``'raise'`` the step raises before the shield runs and nothing changes; under
    ``'defer'`` (default) they defer and are counted in the environment's ``invalid_actions``
    (per step in the infos and in the episode metrics), so the shield cannot hide them.

    Every agent's info holds the environment's flat keys plus :data:`SHIELD_INFO_KEYS`
    (``executed_action`` and the step's :class:`~edgesched.shields.base.ShieldResult`
    counters, prefixed ``shield_``), all present from ``reset`` on. When an episode ends,
    :attr:`last_episode_metrics` holds the environment's metrics plus the shield summary
    (:meth:`ShieldStats.summary`), with ``collisions_proposed`` counting the proposals'
    collisions (before the shield).

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
        self._last_metrics: dict[str, Any] | None = None

    @property
    def last_episode_metrics(self) -> dict[str, Any] | None:
        """The ended episode's metrics with the shield summary; ``None`` while one runs."""
        return self._last_metrics

    def set_preferences(self, prefs: np.ndarray | dict[str, np.ndarray]) -> None:
        """Preference scores (higher first) for the next step: (N, A) array or per agent."""
        view = self.shield.view
        if isinstance(prefs, dict):
            prefs = np.stack([np.asarray(prefs[a], float) for a in self.possible_agents])
        self._prefs = np.asarray(prefs, float).reshape(view.num_agents, view.num_actions)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset the environment and the shield's episode statistics."""
        self.stats = ShieldStats()
        self._prefs = None
        self._last_metrics = None
        obs, infos = self.env.reset(seed=seed, options=options)
        extra = dict.fromkeys(SHIELD_INFO_KEYS, 0)
        extra["shield_latency_ms"] = 0.0  # a float at every step: keep its type from reset on
        return obs, {a: {**info, **extra} for a, info in infos.items()}

    def step(self, actions: dict[str, int]):
        """Shield the proposals ``actions``, then step the environment."""
        agents = self.possible_agents
        env = self.env.unwrapped
        if not self.env.agents or set(actions) != set(self.env.agents):
            return self.env.step(actions)  # let the environment raise its own error
        view = self.shield.view
        # the environment's own checks, before the shield could turn an invalid proposal
        # into a defer unseen: strict mode raises with nothing changed, defer mode counts
        proposals = view.check_actions(env._action_array(actions))
        bad = view.invalid_mask
        res = self.shield(proposals, self._prefs)
        self._prefs = None
        self.stats.add(res)
        executed = dict(zip(agents, res.actions.tolist(), strict=True))
        obs, rew, term, trunc, infos = self.env.step(executed)
        step_info = {
            "shield_proposed_collisions": int(res.proposed_collisions),
            "shield_interventions": int(res.interventions),
            "shield_residual_collisions": int(res.residual_collisions),
            "shield_latency_ms": 1e3 * res.compute_s,
            "shield_messages": int(res.messages),
            "shield_rounds": int(res.rounds),
        }
        n_bad = 0 if bad is None else int(np.count_nonzero(bad))
        new_infos = {}
        for i, (a, act) in enumerate(executed.items()):
            info = {**infos[a], **step_info, "executed_action": act}
            if n_bad:
                info["invalid_actions"] = n_bad
                info["invalid_action"] = int(bad[i])
            new_infos[a] = info
        if not self.env.agents:
            ep = dict(self.env.last_episode_metrics)
            ep["collisions_proposed"] = int(self.stats.totals["proposed_collisions"])
            ep.update(self.stats.summary())
            self._last_metrics = ep
        return obs, rew, term, trunc, new_infos
