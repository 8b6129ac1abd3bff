"""The central shield: one shield sees every agent's proposal (SROLE, Sen & Shen ICDCS'22)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .base import BatchShieldResult, Shield, arbitrate, colliding_nodes


class CentralShield(Shield):
    """One shield for the whole cluster; never admits a collision.

    Rule (SROLE's shield, with the arbitration of :mod:`edgesched.shields.base`): every agent
    sends its proposal to the shield; on each node the proposals are admitted in order of
    the proposer's preference for them while they fit the node's free capacity; each denied
    agent takes its next preferred action that fits what is left (or defers), and the new
    choices are arbitrated again until every agent is admitted or defers. Every admitted set
    fits its node, so the output has no collision; a proposal without collision is returned
    unchanged.

    Deployment model (for the scalability study): the shield runs on the cluster's
    *center* node (smallest worst-case latency to every node); each proposing agent sends one
    message and receives one, so ``messages = 2 x proposers`` all at the one shield, and the
    network latency is the longest round trip to the center. ``compute_s`` is the measured
    wall time of the decision.

    Bound to several copies of a batched simulator, one call shields every copy (one shield
    per copy, the same decisions as a shield bound to each copy alone).

    Args:
        sim: the simulator whose decisions it shields (or a view: see :class:`Shield`).
    """

    name = "central"

    def __init__(self, sim: Any) -> None:
        super().__init__(sim)
        self.host = int(np.argmin(self._lat.max(axis=1)))
        self._rtt = 2.0 * self._lat[:, self.host]

    def shield_batch(
        self, actions: np.ndarray, prefs: np.ndarray | None = None, timed: bool | None = None
    ) -> BatchShieldResult:
        """See :meth:`Shield.shield_batch` (one shield: timed or not, the same wall time)."""
        nb, n = self.num_copies, self.num_agents
        frame = self._frame()
        # validation and default preferences are the agents' side, as for regional shields
        proposed, prefs, invalid = self._prepare(frame, actions, prefs)
        t0 = time.perf_counter()
        act = proposed.copy()
        agents = np.flatnonzero(act > 0)
        targets, alloc = self.proposals(frame, agents, act[agents])
        room = frame.free
        coll = colliding_nodes(targets, alloc, room)
        cagents = np.zeros(nb * n, bool)
        if coll.any():
            cagents[agents[coll[targets]]] = True
            room = room.copy()
            tried = np.zeros(prefs.shape, bool)
            # each pass removes at least one action per denied agent, so this bound is never
            # reached in practice; it only guards against an infinite loop
            for _ in range(self.num_actions + 1):
                admitted = arbitrate(targets, alloc, prefs[agents, act[agents]], room)
                np.subtract.at(room, targets[admitted], alloc[admitted])
                denied = agents[~admitted]
                if not len(denied):
                    break
                tried[denied, act[denied]] = True
                act[denied] = self.alternatives(frame, denied, prefs, tried, room)
                agents = denied[act[denied] > 0]
                targets, alloc = self.proposals(frame, agents, act[agents])
            else:  # pragma: no cover - see the loop comment
                act[agents] = 0
        elapsed = time.perf_counter() - t0
        proposers = (proposed > 0).reshape(nb, n)
        n_prop = proposers.sum(axis=1)
        return BatchShieldResult(
            actions=act.reshape(nb, n),
            collision_agents=cagents.reshape(nb, n),
            network_ms=np.where(proposers, self._rtt, 0.0).max(axis=1),
            compute_s=elapsed,
            compute_total_s=elapsed,
            proposed_collisions=coll.reshape(nb, n).sum(axis=1),
            interventions=(act != proposed).reshape(nb, n).sum(axis=1),
            messages=2 * n_prop,
            max_messages_per_shield=2 * n_prop,
            invalid=invalid,
        )
