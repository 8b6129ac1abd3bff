"""What every collision shield shares: the result record and the arbitration engine.

A *proposal* is one agent's placement (its action > 0): the job at the chosen pending slot,
the target node, and the allocation of the chosen level. An *action collision*
is a node with two or more proposals whose allocations together exceed its free capacity.

The engine has two vectorized operations, used by the central and the regional shields
alike:

* :func:`arbitrate`: on each node, admit proposals in preference order while the running sum
  of their allocations fits the node's remaining room (the admitted set is a prefix of the
  preference order). A node whose proposals fit together admits all of them, so a
  collision-free joint action passes unchanged.
* :func:`choose_alternatives`: a denied agent takes its next action in preference order among
  those not tried yet whose allocation fits the room the shield knows of; deferring (action
  0) is always available, so every agent ends with an action.

The preference of an agent over its actions is a score per action (higher first): the
policy's probabilities for learned schedulers, or :func:`default_preferences` (a
least-loaded ranking that keeps the proposal first) for policies that give none.

Shields read the simulator only through its read-only
:class:`~edgesched.envs.view.ClusterView`, and test collisions with the simulator's own
:func:`~edgesched.envs.view.colliding_nodes`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgesched.envs.view import CAPACITY_EPS, ClusterView, colliding_nodes

EPS = CAPACITY_EPS
"""Capacity tolerance; the simulator's mask and collision check use the same."""

__all__ = [
    "EPS",
    "Shield",
    "ShieldResult",
    "ShieldStats",
    "arbitrate",
    "choose_alternatives",
    "colliding_nodes",
    "default_preferences",
]


@dataclass
class ShieldResult:
    """One shielded decision round.

    Attributes:
        actions: (N,) executed joint action.
        proposed_collisions: nodes where the proposal collided (the simulator's definition).
        collision_agents: (N,) bool, agents whose proposal took part in a collision (the
            learner's penalty in SROLE).
        interventions: agents whose executed action differs from their proposal.
        residual_collisions: nodes still colliding in ``actions`` (only a regional shield's
            unconfirmed boundary placements can cause them; 0 for the central shield).
        compute_s: decision latency, seconds of computation on the critical path (regional
            shields run concurrently, so per phase the slowest shield counts).
        compute_total_s: seconds of computation summed over all shields.
        network_ms: modelled message latency on the critical path, from the topology's
            fastest-path latencies (agents to their shield and back, shield to shield per
            round).
        messages: messages sent (agent to shield, shield to agent, shield to shield).
        shield_messages: the shield-to-shield part of ``messages``.
        max_messages_per_shield: messages sent or received by the busiest shield.
        rounds: shield-to-shield coordination rounds used.
        invalid: proposals that were masked (treated as defer).
    """

    actions: np.ndarray
    proposed_collisions: int = 0
    collision_agents: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    interventions: int = 0
    residual_collisions: int = 0
    compute_s: float = 0.0
    compute_total_s: float = 0.0
    network_ms: float = 0.0
    messages: int = 0
    shield_messages: int = 0
    max_messages_per_shield: int = 0
    rounds: int = 0
    invalid: int = 0


class ShieldStats:
    """Running totals over many rounds (what evaluation and training logs report)."""

    KEYS = (
        "proposed_collisions",
        "interventions",
        "residual_collisions",
        "compute_s",
        "compute_total_s",
        "network_ms",
        "messages",
        "shield_messages",
        "max_messages_per_shield",
        "rounds",
        "invalid",
    )

    def __init__(self) -> None:
        self.steps = 0
        self.totals = dict.fromkeys(self.KEYS, 0.0)

    def add(self, res: ShieldResult) -> None:
        """Accumulate one round."""
        self.steps += 1
        for k in self.KEYS:
            self.totals[k] += float(getattr(res, k))

    def summary(self) -> dict[str, float]:
        """Per-episode totals of collisions and interventions, per-step means of the rest."""
        s = max(self.steps, 1)
        t = self.totals
        return {
            "shield_interventions": t["interventions"],
            "shield_residual_collisions": t["residual_collisions"],
            "shield_latency_ms": 1e3 * t["compute_s"] / s,
            "shield_compute_total_ms": 1e3 * t["compute_total_s"] / s,
            "shield_network_ms": t["network_ms"] / s,
            "shield_messages_per_step": t["messages"] / s,
            "shield_inter_messages_per_step": t["shield_messages"] / s,
            "shield_max_messages_per_shield": t["max_messages_per_shield"] / s,
            "shield_rounds_per_step": t["rounds"] / s,
        }


class Shield(ABC):
    """A collision shield bound to one simulator's static cluster.

    Args:
        sim: the simulator (:class:`edgesched.envs.core.EdgeClusterSim`) whose decisions it
            shields; its current load, queues and masks are read at every call, through
            :attr:`view`.

    Attributes:
        sim: the simulator.
        view: its read-only :class:`~edgesched.envs.view.ClusterView`.
    """

    name: str = "shield"

    def __init__(self, sim: Any) -> None:
        # a simulator (one copy) or the ClusterView of one copy of a batched simulator
        self.view = _as_view(sim)
        idx = np.arange(1, self.view.num_actions)
        self._slot, self._k, self._lvl = self.view.decode(idx)
        self._lat = self.view.cluster.pair_lat

    @abstractmethod
    def shield(self, actions: np.ndarray, prefs: np.ndarray | None = None) -> ShieldResult:
        """Turn a proposed joint action into a collision-free one.

        Args:
            actions: (N,) proposed actions (masked entries are treated as defer).
            prefs: (N, A) preference scores, higher first; ``None`` uses
                :func:`default_preferences`.
        """

    def __call__(self, actions: np.ndarray, prefs: np.ndarray | None = None) -> ShieldResult:
        """Alias of :meth:`shield`."""
        return self.shield(actions, prefs)

    # ------------------------------------------------------------------ helpers
    def _prepare(
        self, actions: np.ndarray, prefs: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, int]:
        view = self.view
        a = np.asarray(actions)
        if a.shape != (view.num_agents,) or a.dtype.kind not in "iu":
            raise ValueError(
                f"actions must be an integer array of shape ({view.num_agents},); got shape "
                f"{a.shape} dtype {a.dtype}"
            )
        ok = (a >= 0) & (a < view.num_actions)
        ok[ok] = view.mask[np.flatnonzero(ok), a[ok]]
        invalid = int((~ok).sum())
        a = np.where(ok, a, 0).astype(np.int64)
        if prefs is None:
            prefs = default_preferences(view, a)
        else:
            prefs = np.asarray(prefs, dtype=np.float64)
            if prefs.shape != (view.num_agents, view.num_actions):
                raise ValueError(
                    f"prefs must have shape ({view.num_agents}, {view.num_actions}); got "
                    f"{prefs.shape}"
                )
        return a, prefs, invalid

    def proposals(self, agents: np.ndarray, acts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Targets and allocations of placements ``acts`` (> 0) of ``agents``."""
        view = self.view
        slot, k, level = view.decode(acts)
        jobs = view.pending[agents, slot]
        return view.neighbors[agents, k], view.alloc(jobs, level)

    def alternatives(
        self,
        agents: np.ndarray,
        prefs: np.ndarray,
        tried: np.ndarray,
        room: np.ndarray,
        node_ok: np.ndarray | None = None,
    ) -> np.ndarray:
        """Each agent's best untried action that fits ``room`` (0 = defer), see module doc."""
        return choose_alternatives(
            self.view, agents, prefs, tried, room, self._slot, self._k, self._lvl, node_ok
        )


def arbitrate(
    targets: np.ndarray, alloc: np.ndarray, priority: np.ndarray, room: np.ndarray
) -> np.ndarray:
    """Admit, per node, the longest preference-ordered prefix of proposals that fits.

    Args:
        targets: (M,) node of each proposal.
        alloc: (M, 3) allocation of each proposal.
        priority: (M,) preference of each proposal (ties: lower index first).
        room: (N, 3) remaining capacity per node.

    Returns:
        (M,) bool, admitted proposals. Their allocations fit ``room`` jointly per node.
    """
    m = len(targets)
    if m == 0:
        return np.zeros(0, bool)
    # Most rounds have one proposal per node; then each is admitted iff it fits alone, and
    # skipping the sort matters for small regional shields, whose cost is call overhead.
    if m <= 64 and len(set(targets.tolist())) == m:
        return (alloc <= room[targets] + EPS).all(axis=1)
    order = np.lexsort((np.arange(m), -priority, targets))
    t = targets[order]
    a = alloc[order]
    start = np.ones(m, bool)
    start[1:] = t[1:] != t[:-1]
    seg = np.maximum.accumulate(np.where(start, np.arange(m), 0))
    cum = np.cumsum(a, axis=0)
    within = cum - (cum[seg] - a[seg])  # running sum within each node's segment
    fail = (within > room[t] + EPS).any(axis=1)
    nfail = np.cumsum(fail)
    ok_sorted = (nfail - (nfail[seg] - fail[seg])) == 0  # nothing failed earlier on the node
    admitted = np.empty(m, bool)
    admitted[order] = ok_sorted
    return admitted


def choose_alternatives(
    sim: Any,
    agents: np.ndarray,
    prefs: np.ndarray,
    tried: np.ndarray,
    room: np.ndarray,
    slot_of: np.ndarray,
    k_of: np.ndarray,
    lvl_of: np.ndarray,
    node_ok: np.ndarray | None = None,
) -> np.ndarray:
    """Next action in preference order per agent among feasible, untried, fitting ones.

    Args:
        sim: the simulator or its :class:`~edgesched.envs.view.ClusterView` (queues,
            allocation table, masks).
        agents: (M,) agents to re-plan.
        prefs: (N, A) preference scores.
        tried: (N, A) actions already denied this round.
        room: (N, 3) the room the deciding shield knows of.
        slot_of: pending slot of each placement action ``1..A-1``.
        k_of: target index of each placement action.
        lvl_of: allocation level of each placement action.
        node_ok: optional (N,) bool, nodes the shield may still place on.

    Returns:
        (M,) actions; 0 (defer) when deferring is preferred or nothing fits.
    """
    if len(agents) == 0:
        return np.zeros(0, np.int64)
    view = _as_view(sim)
    jobs = view.pending[agents][:, slot_of]
    tgt = view.neighbors[agents][:, k_of]
    tsafe = np.where(tgt >= 0, tgt, 0)
    # an empty slot (job -1) indexes some real job's row; the mask rules those actions out
    alloc = view.alloc(jobs, lvl_of)
    fits = (alloc <= room[tsafe] + EPS).all(-1) & view.mask[agents, 1:] & ~tried[agents, 1:]
    if node_ok is not None:
        fits &= node_ok[tsafe]
    score = np.where(fits, prefs[agents, 1:], -np.inf)
    best = score.argmax(axis=1)
    rows = np.arange(len(agents))
    take = np.isfinite(score[rows, best]) & (score[rows, best] >= prefs[agents, 0])
    return np.where(take, best + 1, 0).astype(np.int64)


def default_preferences(sim: Any, proposed: np.ndarray) -> np.ndarray:
    """A least-loaded ranking for policies without probabilities.

    The proposal ranks first; then placements of the same task at the same level, by the
    target's free capacity (mean free fraction over resources); then other placements by the
    same measure; deferring ranks last. Infeasible actions get ``-inf``.

    Args:
        sim: the simulator or its :class:`~edgesched.envs.view.ClusterView`.
        proposed: (N,) the proposed (valid) actions.

    Returns:
        (N, A) preference scores.
    """
    view = _as_view(sim)
    n, na = view.num_agents, view.num_actions
    slot, k, lvl = view.decode(np.arange(1, na))
    free_frac = (view.free * view.inv_capacity).mean(axis=1)
    tgt = view.neighbors[:, k]  # (N, A-1)
    ff = free_frac[np.where(tgt >= 0, tgt, 0)]
    prefs = np.empty((n, na))
    prefs[:, 0] = 0.0
    prefs[:, 1:] = 1.0 + np.clip(ff, 0.0, 1.0)
    placing = proposed > 0
    p_slot, _, p_lvl = view.decode(np.where(placing, proposed, 1))
    same = (slot[None, :] == p_slot[:, None]) & (lvl[None, :] == p_lvl[:, None]) & placing[:, None]
    prefs[:, 1:] += same
    prefs[np.arange(n), proposed] = 10.0
    prefs[~view.mask] = -np.inf
    prefs[:, 0] = np.where(placing, 0.0, 10.0)
    return prefs


def _as_view(sim: Any) -> ClusterView:
    """``sim`` itself when it is a view already, else a view of it."""
    return sim if isinstance(sim, ClusterView) else ClusterView(sim)
