"""Regional (decentralized) shields: one per region, coordinating over boundary nodes.

SROLE's decentralized shielding (Sen & Shen, ICDCS'22) gives each shield one region of the
cluster; the paper leaves the coordination protocol unspecified, so this module defines one
and measures what it lets through.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from edgesched.envs.view import colliding_nodes

from .base import Shield, ShieldResult, arbitrate

BOUNDARY_MODES = ("optimistic", "conservative")


class RegionalShield(Shield):
    """One shield per region (``cluster.region``); explicit, bounded message protocol.

    Ownership: the shield of region ``r`` owns the capacity of the nodes of ``r`` and serves
    the agents of ``r``. Agents place only within their neighbourhood, so a claim on a
    foreign node is always a claim on a *boundary* node (targetable from two regions).

    Protocol, in synchronous rounds:

    1. Each agent sends its proposal to its region's shield (one message, one reply).
    2. Arbitration: each shield arbitrates every pending claim on the nodes it owns, its own
       agents' and those other shields forwarded to it (one *request* message per pair of
       shields per round), in preference order while they fit (the rule of
       :func:`~edgesched.shields.base.arbitrate`); it answers each requesting shield with one
       *reply* carrying the grants and the remaining room of the requested nodes.
    3. Re-planning: each shield gives each denied agent of its own its next preferred
       action that fits the room it knows of (exact for its own nodes, the last reply for
       foreign ones), or defers.
    4. Claims that stay inside a region are re-arbitrated at once without messages; a round
       with a claim on a foreign node costs one more coordination round, up to ``rounds``.

    When the rounds are used up, claims on foreign nodes that are still unconfirmed are
    either executed if they fit the shield's (possibly stale) view of the node
    (``boundary='optimistic'``, the default: no extra latency, rare overloads at boundary
    nodes, measured as ``residual_collisions``) or replaced by the best action inside the
    region (``boundary='conservative'``: never a collision, more interventions). Either way
    a collision among a region's own agents on its own nodes is impossible, because the
    owner arbitrates all of them exactly.

    Latency: each shield's work per phase is timed separately; shields run concurrently, so
    ``compute_s`` sums over phases the slowest shield's time (``compute_total_s`` sums all
    shields). Network latency: the longest agent-to-shield round trip plus, per coordination
    round, the longest shield-to-shield round trip among the shields that exchanged
    messages, from the topology's fastest-path latencies; each shield runs on its region's
    center node.

    Args:
        sim: the simulator whose decisions it shields.
        rounds: coordination rounds per decision (>= 1).
        boundary: ``optimistic`` or ``conservative`` (see above).
    """

    name = "regional"

    def __init__(self, sim: Any, rounds: int = 2, boundary: str = "optimistic") -> None:
        super().__init__(sim)
        if not isinstance(rounds, int | np.integer) or rounds < 1:
            raise ValueError(f"rounds must be an integer >= 1; got {rounds!r}")
        if boundary not in BOUNDARY_MODES:
            raise ValueError(f"boundary must be one of {BOUNDARY_MODES}; got {boundary!r}")
        self.rounds = int(rounds)
        self.boundary = boundary
        region = self.view.regions
        self.region = region
        self.num_regions = self.view.num_regions
        members = [np.flatnonzero(region == r) for r in range(self.num_regions)]
        self.host = np.array(
            [m[np.argmin(self._lat[np.ix_(m, m)].max(axis=1))] for m in members], dtype=np.int64
        )
        self._own = [region == r for r in range(self.num_regions)]
        self._rtt_agent = 2.0 * self._lat[np.arange(self.view.num_agents), self.host[region]]
        self._rtt_shield = 2.0 * self._lat[np.ix_(self.host, self.host)]

    # ------------------------------------------------------------------ protocol
    def shield(self, actions: np.ndarray, prefs: np.ndarray | None = None) -> ShieldResult:
        """See :meth:`Shield.shield` and the class docstring."""
        n_reg = self.num_regions
        proposed, prefs, invalid = self._prepare(actions, prefs)
        act = proposed.copy()
        free = self.view.free
        room = free.copy()  # row v is only ever written by the shield owning v
        view: dict[int, np.ndarray] = {}  # region -> its view of foreign nodes (lazy copy)
        tried = np.zeros(prefs.shape, bool)
        crit = 0.0
        total = 0.0
        net = 0.0
        rounds = 0
        inter = 0
        per_shield = np.zeros(n_reg, np.int64)
        agent_region = self.region

        proposers = np.flatnonzero(act > 0)
        np.add.at(per_shield, agent_region[proposers], 2)  # proposal in, decision out
        if len(proposers):
            net += float(self._rtt_agent[proposers].max())
        pending = proposers
        while len(pending):
            targets, alloc = self.proposals(pending, act[pending])
            owner = agent_region[targets]
            claimant = agent_region[pending]
            remote = owner != claimant
            if remote.any():
                if rounds == self.rounds:
                    break
                rounds += 1
                pairs = np.unique(claimant[remote] * n_reg + owner[remote])
                src, dst = pairs // n_reg, pairs % n_reg
                inter += 2 * len(pairs)  # request and reply per pair of shields
                np.add.at(per_shield, src, 2)
                np.add.at(per_shield, dst, 2)
                net += float(self._rtt_shield[src, dst].max())
            # arbitration phase: each owner on the claims routed to it
            admitted = np.zeros(len(pending), bool)
            times = []
            for _owner, idx in _groups(owner, n_reg):
                t0 = time.perf_counter()
                ok = arbitrate(
                    targets[idx], alloc[idx], prefs[pending[idx], act[pending[idx]]], room
                )
                np.subtract.at(room, targets[idx[ok]], alloc[idx[ok]])
                admitted[idx] = ok
                times.append(time.perf_counter() - t0)
            crit += max(times)
            total += sum(times)
            # re-planning phase: each claimant shield for its denied agents
            den = np.flatnonzero(~admitted)
            if not len(den):
                pending = pending[:0]
                break
            times = []
            for r, idx in _groups(claimant[den], n_reg):
                t0 = time.perf_counter()
                agents = pending[den[idx]]
                v = self._view(view, r, free)
                # the owners' replies carry the remaining room of the requested nodes
                asked = targets[den[idx]]
                v[asked] = room[asked]
                own = self._own[r]
                v[own] = room[own]
                tried[agents, act[agents]] = True
                act[agents] = self.alternatives(agents, prefs, tried, v)
                times.append(time.perf_counter() - t0)
            crit += max(times)
            total += sum(times)
            den_agents = pending[den]
            pending = den_agents[act[den_agents] > 0]
        if len(pending):
            c, t = self._final_pass(pending, act, prefs, tried, room, view, free)
            crit += c
            total += t

        out_agents = np.flatnonzero(act > 0)
        out_t, out_a = self.proposals(out_agents, act[out_agents])
        residual = int(colliding_nodes(out_t, out_a, free).sum())
        p_t, p_a = self.proposals(proposers, proposed[proposers])
        coll = colliding_nodes(p_t, p_a, free)
        cagents = np.zeros(self.view.num_agents, bool)
        cagents[proposers[coll[p_t]]] = True
        return ShieldResult(
            actions=act,
            proposed_collisions=int(coll.sum()),
            collision_agents=cagents,
            interventions=int((act != proposed).sum()),
            residual_collisions=residual,
            compute_s=crit,
            compute_total_s=total,
            network_ms=net,
            messages=2 * len(proposers) + inter,
            shield_messages=inter,
            max_messages_per_shield=int(per_shield.max()) if n_reg else 0,
            rounds=rounds,
            invalid=invalid,
        )

    def _view(self, view: dict[int, np.ndarray], r: int, free: np.ndarray) -> np.ndarray:
        if r not in view:
            view[r] = free.copy()  # loads at the start of the step, shared with the obs
        return view[r]

    def _final_pass(self, pending, act, prefs, tried, room, view, free) -> tuple[float, float]:
        """No rounds left: each shield settles its agents' claims without messages."""
        times = []
        for r, idx in _groups(self.region[pending], self.num_regions):
            t0 = time.perf_counter()
            own = self._own[r]
            v = self._view(view, r, free)
            agents = pending[idx]
            targets, alloc = self.proposals(agents, act[agents])
            remote = ~own[targets]
            if remote.any():
                ra = agents[remote]
                if self.boundary == "optimistic":
                    ok = arbitrate(targets[remote], alloc[remote], prefs[ra, act[ra]], v)
                    np.subtract.at(v, targets[remote][ok], alloc[remote][ok])
                    denied = ra[~ok]
                else:
                    denied = ra
                tried[denied, act[denied]] = True
                v[own] = room[own]
                act[denied] = self.alternatives(denied, prefs, tried, v, node_ok=own)
                local = np.concatenate([agents[~remote], denied[act[denied] > 0]])
            else:
                local = agents
            # claims inside the region: arbitrated exactly until settled
            for _ in range(self.view.num_actions + 1):
                if not len(local):
                    break
                t_l, a_l = self.proposals(local, act[local])
                ok = arbitrate(t_l, a_l, prefs[local, act[local]], room)
                np.subtract.at(room, t_l[ok], a_l[ok])
                denied = local[~ok]
                tried[denied, act[denied]] = True
                act[denied] = self.alternatives(denied, prefs, tried, room, node_ok=own)
                local = denied[act[denied] > 0]
            else:  # pragma: no cover - each pass removes an action per denied agent
                act[local] = 0
            times.append(time.perf_counter() - t0)
        return max(times), sum(times)


def _groups(keys: np.ndarray, n: int):
    """Yield ``(key, indices)`` per distinct key (the routing of messages, not timed)."""
    order = np.argsort(keys, kind="stable")
    bounds = np.searchsorted(keys[order], np.arange(n + 1))
    for k in range(n):
        if bounds[k + 1] > bounds[k]:
            yield k, order[bounds[k] : bounds[k + 1]]
