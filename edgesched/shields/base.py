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
:class:`~edgesched.envs.batch_view.BatchView` (every copy of a batched simulator, or the one
copy a :class:`~edgesched.envs.view.ClusterView` shows), and test collisions with the
simulator's own :func:`~edgesched.envs.view.colliding_nodes`. They work on the copies'
agents and nodes flattened copy-major (agent and node ``b*N + i``): copies never share a
node, so one call decides every copy exactly as a shield per copy would, and a lone
simulator is the case of one copy.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgesched.envs.batch_view import BatchView
from edgesched.envs.view import CAPACITY_EPS, ClusterView, colliding_nodes

EPS = CAPACITY_EPS
"""Capacity tolerance; the simulator's mask and collision check use the same."""

__all__ = [
    "EPS",
    "BatchShieldResult",
    "Frame",
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


class BatchShieldResult:
    """One shielded decision round of every copy of a batched simulator.

    The per-copy fields of :class:`ShieldResult` with a leading copy axis; :meth:`of` gives
    copy ``b``'s :class:`ShieldResult`, identical to what a shield bound to that copy alone
    returns (timings aside).

    Attributes:
        actions: (B, N) executed joint actions.
        proposed_collisions, interventions, residual_collisions, messages,
            shield_messages, max_messages_per_shield, rounds, invalid: (B,) ints, as in
            :class:`ShieldResult`.
        collision_agents: (B, N) bool.
        network_ms: (B,) modelled message latency per copy.
        compute_s: seconds of computation on the critical path. Timed per shield (one
            copy's default): as in :class:`ShieldResult`; untimed (several copies' default):
            the wall time of the whole batched call, for all copies together.
        compute_total_s: seconds of computation over all shields (untimed: ``compute_s``).
    """

    COUNTS = (
        "proposed_collisions",
        "interventions",
        "residual_collisions",
        "messages",
        "shield_messages",
        "max_messages_per_shield",
        "rounds",
        "invalid",
    )

    def __init__(
        self,
        actions: np.ndarray,
        collision_agents: np.ndarray,
        network_ms: np.ndarray,
        compute_s: float,
        compute_total_s: float,
        **counts: np.ndarray,
    ) -> None:
        self.actions = actions
        self.collision_agents = collision_agents
        self.network_ms = network_ms
        self.compute_s = compute_s
        self.compute_total_s = compute_total_s
        zero = np.zeros(len(actions), np.int64)
        for k in self.COUNTS:
            setattr(self, k, np.asarray(counts.pop(k, zero), np.int64))
        if counts:
            raise TypeError(f"unknown counts {sorted(counts)}; known: {list(self.COUNTS)}")

    def of(self, b: int) -> ShieldResult:
        """Copy ``b``'s round as a :class:`ShieldResult` (timings: the call's)."""
        return ShieldResult(
            actions=self.actions[b],
            collision_agents=self.collision_agents[b],
            network_ms=float(self.network_ms[b]),
            compute_s=self.compute_s,
            compute_total_s=self.compute_total_s,
            **{k: int(getattr(self, k)[b]) for k in self.COUNTS},
        )


@dataclass
class Frame:
    """One round's state of the shielded copies, flattened: agent and node ``b*N + i``.

    Shields run on these flat arrays, so every copy's round is one array program and a
    lone simulator is the case ``B = 1``; copies never interact, because a flat node is
    only ever the target of agents of its own copy.
    """

    free: np.ndarray  # (B*N, 3)
    mask: np.ndarray  # (B*N, A)
    pending: np.ndarray  # (B*N, P) local job ids, -1 empty


class Shield(ABC):
    """A collision shield bound to a simulator's static cluster, over one or many copies.

    Args:
        sim: the simulator (:class:`edgesched.envs.core.EdgeClusterSim`), a
            :class:`~edgesched.envs.view.ClusterView` of one copy, or a
            :class:`~edgesched.envs.batch_view.BatchView` of all copies. Its current load,
            queues and masks are read at every call.

    Attributes:
        batch: the :class:`~edgesched.envs.batch_view.BatchView` of the shielded copies.
        view: the :class:`~edgesched.envs.view.ClusterView` of the shielded copy when it is
            one (``None`` for several).
        num_copies: B, copies shielded per call.
    """

    name: str = "shield"

    def __init__(self, sim: Any) -> None:
        self.batch = _as_batch_view(sim)
        b = self.batch
        self.num_copies = nb = b.num_copies
        self.num_agents = n = b.num_agents
        self.num_actions = b.num_actions
        self.view = b.view(0) if nb == 1 else None
        idx = np.arange(1, b.num_actions)
        self._slot, self._k, self._lvl = b.decode(idx)
        self._lat = b.cluster.pair_lat
        # flat (copy-major) ids: agent and node b*N + i
        self._copy = np.repeat(np.arange(nb), n)
        self._local = np.tile(np.arange(n), nb)
        nbr = b.neighbors
        off = (np.arange(nb) * n)[:, None, None]
        self._nbr = np.where(nbr[None] >= 0, nbr[None] + off, -1).reshape(nb * n, -1)

    @abstractmethod
    def shield_batch(
        self, actions: np.ndarray, prefs: np.ndarray | None = None, timed: bool | None = None
    ) -> BatchShieldResult:
        """Turn every copy's proposed joint action into a collision-free one.

        Args:
            actions: (B, N) proposed actions (masked entries are treated as defer).
            prefs: (B, N, A) preference scores, higher first; ``None`` uses
                :func:`default_preferences`.
            timed: time each shield's work separately (the deployment latency model of
                ``compute_s``) rather than the whole call; default: when ``B = 1``. The
                actions are the same either way.
        """

    def shield(self, actions: np.ndarray, prefs: np.ndarray | None = None) -> ShieldResult:
        """Turn one copy's proposed joint action into a collision-free one.

        Args:
            actions: (N,) proposed actions (masked entries are treated as defer).
            prefs: (N, A) preference scores, higher first; ``None`` uses
                :func:`default_preferences`.

        Raises:
            TypeError: the shield is bound to several copies (use :meth:`shield_batch`).
        """
        if self.num_copies != 1:
            raise TypeError(
                f"this shield is bound to {self.num_copies} copies: call shield_batch with "
                f"(B, N) = ({self.num_copies}, {self.num_agents}) actions"
            )
        n, na = self.num_agents, self.num_actions
        a = _checked_actions(actions, (n,), "(N,)")
        p = None if prefs is None else _checked_prefs(prefs, (n, na), "(N, A)")
        res = self.shield_batch(a[None], None if p is None else p[None])
        return res.of(0)

    def __call__(self, actions: np.ndarray, prefs: np.ndarray | None = None) -> ShieldResult:
        """Alias of :meth:`shield`."""
        return self.shield(actions, prefs)

    # ------------------------------------------------------------------ helpers
    def _frame(self) -> Frame:
        b = self.batch
        bn = self.num_copies * self.num_agents
        return Frame(
            free=b.free.reshape(bn, 3),
            mask=b.mask.reshape(bn, -1),
            pending=b.pending.reshape(bn, -1),
        )

    def _prepare(
        self, frame: Frame, actions: np.ndarray, prefs: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Flat valid proposals, flat preferences and invalid proposals per copy."""
        nb, n, na = self.num_copies, self.num_agents, self.num_actions
        a = _checked_actions(actions, (nb, n), "(B, N)").reshape(-1)
        ok = (a >= 0) & (a < na)
        ok[ok] = frame.mask[np.flatnonzero(ok), a[ok]]
        invalid = np.bincount(self._copy[~ok], minlength=nb)
        a = np.where(ok, a, 0).astype(np.int64)
        if prefs is None:
            p = default_preferences(self.batch, a.reshape(nb, n)).reshape(nb * n, na)
        else:
            p = _checked_prefs(prefs, (nb, n, na), "(B, N, A)").reshape(nb * n, na)
        return a, p, invalid

    def proposals(
        self, frame: Frame, agents: np.ndarray, acts: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Flat targets and allocations of placements ``acts`` (> 0) of flat ``agents``."""
        slot, k, level = self.batch.decode(acts)
        jobs = frame.pending[agents, slot]
        return self._nbr[agents, k], self.batch.alloc(self._copy[agents], jobs, level)

    def alternatives(
        self,
        frame: Frame,
        agents: np.ndarray,
        prefs: np.ndarray,
        tried: np.ndarray,
        room: np.ndarray,
        room_key: np.ndarray | None = None,
        own_only: np.ndarray | None = None,
    ) -> np.ndarray:
        """Each flat agent's best untried action that fits ``room`` (0 = defer).

        Args:
            frame: the round's state.
            agents: (M,) flat agents to re-plan.
            prefs: (B*N, A) preference scores.
            tried: (B*N, A) actions already denied this round.
            room: rows of remaining capacity: (B*N, 3) per flat node, or ``room_key`` rows.
            room_key: optional (M,) ``g``: agent ``i`` reads row ``g * B*N + node`` of
                ``room`` (each regional shield's own knowledge of the nodes).
            own_only: optional (B*N,) group of each flat node: only nodes of the agent's
                own group may be chosen (``own_only[node] == own_only[agent]``).
        """
        if len(agents) == 0:
            return np.zeros(0, np.int64)
        jobs = frame.pending[agents][:, self._slot]
        tgt = self._nbr[agents][:, self._k]
        tsafe = np.where(tgt >= 0, tgt, 0)
        # an empty slot (job -1) reads some job's row; the mask rules those actions out
        alloc = self.batch.alloc(self._copy[agents][:, None], jobs, self._lvl)
        rows = tsafe if room_key is None else room_key[:, None] * len(self._copy) + tsafe
        feasible = frame.mask[agents, 1:] & ~tried[agents, 1:]
        if own_only is not None:
            feasible &= own_only[tsafe] == own_only[agents][:, None]
        return choose_alternatives(alloc, room[rows], feasible, prefs[agents])


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
    alloc: np.ndarray, room: np.ndarray, feasible: np.ndarray, prefs: np.ndarray
) -> np.ndarray:
    """Next action in preference order per agent among feasible, untried, fitting ones.

    Args:
        alloc: (M, A-1, 3) allocation of each agent's placement actions ``1..A-1``.
        room: (M, A-1, 3) the room the deciding shield knows of on each action's target.
        feasible: (M, A-1) bool, placements the mask allows and not denied yet this round.
        prefs: (M, A) preference scores (column 0: deferring).

    Returns:
        (M,) actions; 0 (defer) when deferring is preferred or nothing fits.
    """
    if len(prefs) == 0:
        return np.zeros(0, np.int64)
    fits = (alloc <= room + EPS).all(-1) & feasible
    score = np.where(fits, prefs[:, 1:], -np.inf)
    best = score.argmax(axis=1)
    rows = np.arange(len(prefs))
    take = np.isfinite(score[rows, best]) & (score[rows, best] >= prefs[:, 0])
    return np.where(take, best + 1, 0).astype(np.int64)


def default_preferences(sim: Any, proposed: np.ndarray) -> np.ndarray:
    """A least-loaded ranking for policies without probabilities.

    The proposal ranks first; then placements of the same task at the same level, by the
    target's free capacity (mean free fraction over resources); then other placements by the
    same measure; deferring ranks last. Infeasible actions get ``-inf``.

    Args:
        sim: the simulator, a :class:`~edgesched.envs.view.ClusterView` (then ``proposed``
            is (N,)) or a :class:`~edgesched.envs.batch_view.BatchView` (then (B, N)).
        proposed: the proposed (valid) actions.

    Returns:
        (N, A) or (B, N, A) preference scores.
    """
    view = _as_batch_view(sim)
    proposed = np.asarray(proposed)
    lone = proposed.ndim == 1
    prop = proposed.reshape(view.num_copies, view.num_agents)
    na = view.num_actions
    slot, k, lvl = view.decode(np.arange(1, na))
    free_frac = (view.free * view.inv_capacity).mean(axis=-1)  # (B, N)
    tgt = view.neighbors[:, k]  # (N, A-1)
    ff = free_frac[:, np.where(tgt >= 0, tgt, 0)]  # (B, N, A-1)
    prefs = np.empty((*prop.shape, na))
    prefs[..., 0] = 0.0
    prefs[..., 1:] = 1.0 + np.clip(ff, 0.0, 1.0)
    placing = prop > 0
    p_slot, _, p_lvl = view.decode(np.where(placing, prop, 1))
    same = (slot == p_slot[..., None]) & (lvl == p_lvl[..., None]) & placing[..., None]
    prefs[..., 1:] += same
    np.put_along_axis(prefs, prop[..., None], 10.0, axis=-1)
    prefs[~view.mask] = -np.inf
    prefs[..., 0] = np.where(placing, 0.0, 10.0)
    return prefs[0] if lone else prefs


def _checked_actions(actions: Any, shape: tuple[int, ...], words: str) -> np.ndarray:
    a = np.asarray(actions)
    if a.shape != shape or a.dtype.kind not in "iu":
        raise ValueError(
            f"actions must be an integer array of shape {words} = {shape}; got shape "
            f"{a.shape} dtype {a.dtype}"
        )
    return a


def _checked_prefs(prefs: Any, shape: tuple[int, ...], words: str) -> np.ndarray:
    p = np.asarray(prefs, dtype=np.float64)
    if p.shape != shape:
        raise ValueError(f"prefs must have shape {words} = {shape}; got {p.shape}")
    return p


def _as_batch_view(sim: Any) -> BatchView:
    """A batch view of ``sim``: itself, the one copy a ClusterView shows, or every copy."""
    if isinstance(sim, BatchView):
        return sim
    if isinstance(sim, ClusterView):
        return sim.batch_view()
    return BatchView(sim)
