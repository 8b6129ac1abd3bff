"""Regional (decentralized) shields: one per region, coordinating over boundary nodes.

SROLE's decentralized shielding (Sen & Shen, ICDCS'22) gives each shield one region of the
cluster; the paper leaves the coordination protocol unspecified, so this module defines one
and measures what it lets through.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from edgesched.envs.view import colliding_nodes

from .base import BatchShieldResult, Frame, Shield, arbitrate

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
        region = self.batch.regions
        self.region = region
        self.num_regions = self.batch.num_regions
        members = [np.flatnonzero(region == r) for r in range(self.num_regions)]
        self.host = np.array(
            [m[np.argmin(self._lat[np.ix_(m, m)].max(axis=1))] for m in members], dtype=np.int64
        )
        self._region = np.asarray(region, np.int64)
        # the shield of each flat agent or node: copy b's region r is shield b * R + r
        self._shield_of = self._copy * self.num_regions + self._region[self._local]
        self._rtt_agent = 2.0 * self._lat[np.arange(self.num_agents), self.host[region]]
        self._rtt_shield = 2.0 * self._lat[np.ix_(self.host, self.host)]

    # ------------------------------------------------------------------ protocol
    def shield_batch(
        self, actions: np.ndarray, prefs: np.ndarray | None = None, timed: bool | None = None
    ) -> BatchShieldResult:
        """See :meth:`Shield.shield_batch` and the class docstring.

        Every copy runs the protocol on its own (its own rounds and messages); the shields
        of all copies are one array program. Timed, each shield's work in each phase runs
        and is timed on its own; untimed, each phase is one call for every shield.
        """
        nb, n, n_reg = self.num_copies, self.num_agents, self.num_regions
        bn = nb * n
        timed = nb == 1 if timed is None else bool(timed)
        frame = self._frame()
        proposed, prefs, invalid = self._prepare(frame, actions, prefs)
        t_start = time.perf_counter()
        clock = _Clock(timed)
        act = proposed.copy()
        free = frame.free
        room = free.copy()  # row v is only ever written by the shield owning v
        # region r's knowledge of the nodes: row r * B*N + v (loads at the start of the step,
        # then the owners' replies)
        known = np.tile(free, (n_reg, 1))
        tried = np.zeros(prefs.shape, bool)
        rounds = np.zeros(nb, np.int64)
        inter = np.zeros(nb, np.int64)
        net = np.zeros(nb)
        per_shield = np.zeros(nb * n_reg, np.int64)  # messages of shield (copy b, region r)
        shield_of = self._shield_of  # flat node or agent -> its shield b * R + r

        proposers = np.flatnonzero(act > 0)
        np.add.at(per_shield, shield_of[proposers], 2)  # proposal in, decision out
        np.maximum.at(net, self._copy[proposers], self._rtt_agent[self._local[proposers]])
        pending = proposers
        settle: list[np.ndarray] = []  # agents of copies whose rounds are used up
        while len(pending):
            targets, alloc = self.proposals(frame, pending, act[pending])
            owner = shield_of[targets]
            claimant = shield_of[pending]
            remote = owner != claimant
            if remote.any():
                copy = self._copy[pending]
                spent = np.zeros(nb, bool)
                spent[copy[remote]] = rounds[copy[remote]] == self.rounds
                if spent.any():
                    out = spent[copy]
                    settle.append(pending[out])
                    keep = ~out
                    pending, targets, alloc = pending[keep], targets[keep], alloc[keep]
                    owner, claimant, remote = owner[keep], claimant[keep], remote[keep]
                    if not len(pending):
                        break
                if remote.any():
                    copy = self._copy[pending]
                    talking = np.zeros(nb, bool)
                    talking[copy[remote]] = True
                    rounds += talking
                    pairs = np.unique(claimant[remote] * (nb * n_reg) + owner[remote])
                    src, dst = pairs // (nb * n_reg), pairs % (nb * n_reg)
                    np.add.at(inter, src // n_reg, 2)  # request and reply per pair of shields
                    np.add.at(per_shield, src, 2)
                    np.add.at(per_shield, dst, 2)
                    slowest = np.zeros(nb)
                    np.maximum.at(slowest, src // n_reg, self._rtt_shield[src % n_reg, dst % n_reg])
                    net += slowest
            # arbitration phase: each owner on the claims routed to it
            admitted = np.zeros(len(pending), bool)

            clock.phase(
                owner,
                nb * n_reg,
                partial(_arbitration, pending, targets, alloc, prefs, act, room, admitted),
            )
            # re-planning phase: each claimant shield for its denied agents
            den = np.flatnonzero(~admitted)
            if not len(den):
                pending = pending[:0]
                break

            clock.phase(
                claimant[den],
                nb * n_reg,
                partial(
                    self._replan, frame, pending[den], targets[den], act, prefs, tried, room, known
                ),
            )
            den_agents = pending[den]
            pending = den_agents[act[den_agents] > 0]
        if settle:
            left = np.concatenate(settle)
            clock.phase(
                shield_of[left],
                nb * n_reg,
                lambda idx: self._final_pass(frame, left[idx], act, prefs, tried, room, known),
            )

        out_agents = np.flatnonzero(act > 0)
        out_t, out_a = self.proposals(frame, out_agents, act[out_agents])
        residual = colliding_nodes(out_t, out_a, free)
        p_t, p_a = self.proposals(frame, proposers, proposed[proposers])
        coll = colliding_nodes(p_t, p_a, free)
        cagents = np.zeros(bn, bool)
        cagents[proposers[coll[p_t]]] = True
        if not timed:
            clock.crit = clock.total = time.perf_counter() - t_start
        n_prop = np.bincount(self._copy[proposers], minlength=nb)
        return BatchShieldResult(
            actions=act.reshape(nb, n),
            collision_agents=cagents.reshape(nb, n),
            network_ms=net,
            compute_s=clock.crit,
            compute_total_s=clock.total,
            proposed_collisions=coll.reshape(nb, n).sum(axis=1),
            interventions=(act != proposed).reshape(nb, n).sum(axis=1),
            residual_collisions=residual.reshape(nb, n).sum(axis=1),
            messages=2 * n_prop + inter,
            shield_messages=inter,
            max_messages_per_shield=per_shield.reshape(nb, n_reg).max(axis=1)
            if n_reg
            else np.zeros(nb, np.int64),
            rounds=rounds,
            invalid=invalid,
        )

    def _replan(
        self,
        frame: Frame,
        denied: np.ndarray,
        asked: np.ndarray,
        act: np.ndarray,
        prefs: np.ndarray,
        tried: np.ndarray,
        room: np.ndarray,
        known: np.ndarray,
        idx: np.ndarray,
    ) -> None:
        """Claimant shields give their denied agents ``denied[idx]`` their next choices."""
        agents, asked = denied[idx], asked[idx]
        bn = len(self._copy)
        region = self._region[self._local[agents]]
        # the owners' replies carry the remaining room of the requested nodes
        known[region * bn + asked] = room[asked]
        own = np.flatnonzero(np.isin(self._shield_of, np.unique(self._shield_of[agents])))
        known[self._region[self._local[own]] * bn + own] = room[own]
        tried[agents, act[agents]] = True
        act[agents] = self.alternatives(frame, agents, prefs, tried, known, region)

    def _final_pass(
        self,
        frame: Frame,
        agents: np.ndarray,
        act: np.ndarray,
        prefs: np.ndarray,
        tried: np.ndarray,
        room: np.ndarray,
        known: np.ndarray,
    ) -> None:
        """No rounds left: each shield settles its agents' claims without messages."""
        bn = len(self._copy)
        shield_of = self._shield_of
        targets, alloc = self.proposals(frame, agents, act[agents])
        remote = shield_of[targets] != shield_of[agents]
        local = agents[~remote]
        if remote.any():
            ra = agents[remote]
            region = self._region[self._local[ra]]
            if self.boundary == "optimistic":
                # each shield against its own (possibly stale) knowledge of the foreign node
                keys = region * bn + targets[remote]
                ok = arbitrate(keys, alloc[remote], prefs[ra, act[ra]], known)
                np.subtract.at(known, keys[ok], alloc[remote][ok])
                denied = ra[~ok]
            else:
                denied = ra
            tried[denied, act[denied]] = True
            act[denied] = self.alternatives(frame, denied, prefs, tried, room, own_only=shield_of)
            local = np.concatenate([local, denied[act[denied] > 0]])
        # claims inside the region: arbitrated exactly until settled
        for _ in range(self.num_actions + 1):
            if not len(local):
                break
            t_l, a_l = self.proposals(frame, local, act[local])
            ok = arbitrate(t_l, a_l, prefs[local, act[local]], room)
            np.subtract.at(room, t_l[ok], a_l[ok])
            denied = local[~ok]
            tried[denied, act[denied]] = True
            act[denied] = self.alternatives(frame, denied, prefs, tried, room, own_only=shield_of)
            local = denied[act[denied] > 0]
        else:  # pragma: no cover - each pass removes an action per denied agent
            act[local] = 0


def _arbitration(
    pending: np.ndarray,
    targets: np.ndarray,
    alloc: np.ndarray,
    prefs: np.ndarray,
    act: np.ndarray,
    room: np.ndarray,
    admitted: np.ndarray,
    idx: np.ndarray,
) -> None:
    """Owner shields arbitrate the claims ``idx`` routed to them against ``room``."""
    agents = pending[idx]
    ok = arbitrate(targets[idx], alloc[idx], prefs[agents, act[agents]], room)
    np.subtract.at(room, targets[idx[ok]], alloc[idx[ok]])
    admitted[idx] = ok


class _Clock:
    """Runs a phase per shield, timing each (timed), or as one call (untimed)."""

    def __init__(self, timed: bool) -> None:
        self.timed = timed
        self.crit = 0.0
        self.total = 0.0

    def phase(self, keys: np.ndarray, n: int, work: Callable[[np.ndarray], None]) -> None:
        """``work(indices)`` per distinct key (shields run concurrently) or once for all."""
        if not self.timed:
            work(np.arange(len(keys)))
            return
        times = []
        for _key, idx in _groups(keys, n):
            t0 = time.perf_counter()
            work(idx)
            times.append(time.perf_counter() - t0)
        if times:
            self.crit += max(times)
            self.total += sum(times)


def _groups(keys: np.ndarray, n: int):
    """Yield ``(key, indices)`` per distinct key (the routing of messages, not timed)."""
    order = np.argsort(keys, kind="stable")
    bounds = np.searchsorted(keys[order], np.arange(n + 1))
    for k in range(n):
        if bounds[k + 1] > bounds[k]:
            yield k, order[bounds[k] : bounds[k + 1]]
