"""Placement and collision resolution: from one decision round's actions to placed workers.

A round's valid placement actions become proposals (agent, job, target node, level). Under
shared visibility several agents may propose the same job: one winner per job (a *task
conflict*, ``conflict_rule``). Then an *action collision* is a node with two or more
proposals whose allocations together exceed its free capacity (:func:`colliding_nodes`, the
one collision test, which the shields use too). ``collision_mode='overload'`` executes
them anyway (the node is overloaded and slows down, see ``execution``); ``'reject'`` admits
a node's proposals in random order while they fit and rejects the rest. Admitted workers
are placed; a job whose last worker is placed starts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

CAPACITY_EPS = 1e-9
"""Capacity tolerance of the masks, the collision test and the shields."""

STEP_INFO_KEYS = (
    "slot",
    "advanced",
    "proposals",
    "placements",
    "collisions",
    "rejected",
    "task_conflicts",
    "invalid_actions",
)
"""The per-step counters that :meth:`EdgeClusterSim.step` reports (all ints or bools)."""


class InvalidActionError(ValueError):
    """An action is out of range, has the wrong shape, or is masked."""


def colliding_nodes(targets: np.ndarray, alloc: np.ndarray, free: np.ndarray) -> np.ndarray:
    """The collision test: nodes with >= 2 placements whose joint allocation exceeds ``free``.

    Args:
        targets: (M,) node of each placement.
        alloc: (M, 3) allocation of each placement.
        free: (N, 3) free capacity per node.

    Returns:
        (N,) bool.
    """
    n = len(free)
    demand = np.zeros((n, 3))
    np.add.at(demand, targets, alloc)
    count = np.bincount(targets, minlength=n)
    return (count >= 2) & (demand > free + CAPACITY_EPS).any(axis=1)


def has_duplicates(a: np.ndarray) -> bool:
    """Whether an int array holds a repeated value."""
    n = len(a)
    if n < 2:
        return False
    if n <= 64:  # a Python set beats sort + compare + any (three numpy calls) at this size
        return len(set(a.tolist())) < n
    s = np.sort(a)
    return bool((s[1:] == s[:-1]).any())


class PlacementMixin:
    """Action checks and placement of :class:`~edgesched.envs.core.EdgeClusterSim`.

    State written: the placed workers (``w_node``, ``w_alloc``, ``w_level``, ``w_iter0``,
    ``placed``), ``used``, ``node_workers``, ``owner``; per-copy counters of proposals,
    conflicts, collisions, rejections, invalid actions and placements.
    """

    _conflict_w: np.ndarray | None = None
    """This decision round's per-agent conflict weights (``fit_argmax``), else ``None``."""

    def _init_actions(self) -> None:
        cfg = self.cfg
        self._grid = cfg.alloc_mode == "grid"
        self._grid_r = [self._alloc_add[:, r] for r in range(3)]  # grid mode: absolute levels
        # grid mode checks memory (the job's minimum at every level) only if a model needs any
        self._grid_mem = bool((self._min_demand_m[:, 2] > 0).any())
        m_ok = self._m_ok
        self._grid_ok_common = m_ok[0] if self._grid and (m_ok == m_ok[0]).all() else None
        self._scales_eps = self._alloc_scale[:, 0] - 1e-9  # scale mode: level multipliers
        # (3, A): slot, neighbour and level of each action; column 0 (defer) is never read
        self._dec_table = np.stack(self.decode(np.arange(self.num_actions))).astype(np.int64)
        # memoized mask rows (_cached_mask): valid when a row depends only on the targets'
        # free CPU/GPU and the number of filled slots; bounded to about 16 MB. The memo
        # loops over agents in Python: for many agents one vectorized mask is cheaper
        # (tapfinger-hetero6 at 32 copies: 754 vs 697 steps/s).
        cacheable = self._grid_ok_common is not None and not self._grid_mem
        self._mask_rows: dict[tuple[float, ...], np.ndarray] | None = (
            {}
            if cacheable
            and self._all_nbr_valid
            and self.num_agents <= 32
            # memo rows assume the filled slots are a prefix as long as the queue
            and cfg.pending_refill == "immediate"
            else None
        )
        self._mask_rows_max = max(256, (16 << 20) // self.num_actions)
        self._fit_table = self._grid_fit_table() if cacheable else None
        # when every agent can only target itself, two placements never share a node
        self._targets_distinct = bool(
            self.k1 == 1 and (self.neighbors[:, 0] == self._agent_idx).all()
        )

    def _grid_fit_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Every possible grid fit row, indexed by how many CPU and GPU thresholds fit.

        A grid level fits a target iff its CPU amount is at most the free CPU and its GPU
        amount at most the free GPU (and the level is admitted). With the levels' distinct
        CPU amounts ``u0`` sorted, ``cpu[l] <= free`` iff the rank of ``cpu[l]`` in ``u0``
        is below ``searchsorted(u0, free, 'right')``, so the row is a function of the two
        counts: the same comparisons as the direct mask, looked up instead of recomputed
        (the many-agent batched path). ``None`` if the table would exceed about 8 MB.

        Returns:
            (u0, u1, table): the distinct CPU and GPU amounts and the (|u0|+1)·(|u1|+1) x L
            table of rows.
        """
        u0, u1 = np.unique(self._grid_r[0]), np.unique(self._grid_r[1])
        rows = (len(u0) + 1) * (len(u1) + 1)
        if rows * self.num_levels > (8 << 20):
            return None
        r0 = np.searchsorted(u0, self._grid_r[0])
        r1 = np.searchsorted(u1, self._grid_r[1])
        n0 = np.arange(len(u0) + 1)[:, None, None]
        n1 = np.arange(len(u1) + 1)[None, :, None]
        table = (r0 < n0) & (r1 < n1) & self._grid_ok_common
        return u0, u1, table.reshape(rows, self.num_levels)

    def decode(self, actions: np.ndarray) -> tuple[np.ndarray, ...]:
        """Split placement actions into (pending slot, neighbour index, level)."""
        idx = np.asarray(actions) - 1
        per_slot = self.k1 * self.num_levels
        return idx // per_slot, (idx % per_slot) // self.num_levels, idx % self.num_levels

    def encode(self, slot: np.ndarray, k: np.ndarray, level: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`decode`."""
        return 1 + (slot * self.k1 + k) * self.num_levels + level

    def _count(self, key: str, ids: np.ndarray, per: int) -> None:
        """Add one to counter ``key`` of the copy of each of ``ids`` (``per`` ids a copy)."""
        self._tally(self._cnt[key], ids, per)

    def _count_where(self, key: str, flags: np.ndarray, per: int) -> None:
        """Add one to counter ``key`` of the copy of each True entry of ``flags``."""
        if self.copies == 1:  # a count: no ids to gather for one copy
            self._cnt[key][0] += int(np.count_nonzero(flags))
        else:
            self._tally(self._cnt[key], np.flatnonzero(flags), per)

    def _tally(
        self, arr: np.ndarray, ids: np.ndarray, per: int, amounts: np.ndarray | None = None
    ) -> None:
        """Add one (or ``amounts``, one per id) to the (B,) ``arr`` entry of each id's copy."""
        if self.copies == 1:  # item update: cheaper than an in-place ufunc on (1,)
            arr[0] += len(ids) if amounts is None else int(np.sum(amounts))
        elif amounts is None:
            arr += np.bincount(ids // per, minlength=self.copies)
        else:
            arr += np.bincount(ids // per, weights=amounts, minlength=self.copies).astype(arr.dtype)

    def count_invalid(self, agents: np.ndarray) -> None:
        """Count invalid (deferred) actions of ``agents`` (for views that check actions)."""
        self._count("invalid_actions", np.asarray(agents), self.agents_per_copy)

    def _checked_actions(self, actions: np.ndarray) -> np.ndarray:
        """Validate one action per agent; masked ones raise or become defer (step's rules).

        Under ``invalid_action='defer'`` the invalid ones are counted and marked in
        :attr:`invalid_mask`; under ``'raise'`` nothing is counted or changed before the error.
        """
        a = np.asarray(actions)
        if a.shape != (self.num_agents,) or a.dtype.kind not in "iu":
            raise InvalidActionError(
                f"actions must be an integer array of shape ({self.num_agents},); got "
                f"shape {a.shape} dtype {a.dtype}"
            )
        if self._small:
            # Python's min/max over a short list beat two numpy reductions
            al = a.tolist()
            in_range = min(al) >= 0 and max(al) < self.num_actions
        else:
            in_range = a.min() >= 0 and a.max() < self.num_actions
        # np.count_nonzero, not .any()/.all(): those go through a Python wrapper that costs
        # more than the test itself on arrays this small (here and below on the hot path)
        if not in_range or np.count_nonzero(self.mask[self._agent_idx, a]) < len(a):
            bad = ~self.mask[self._agent_idx, np.clip(a, 0, self.num_actions - 1)]
            bad |= (a < 0) | (a >= self.num_actions)
            if self.cfg.invalid_action == "raise":
                # refuse before counting anything: a refused step leaves the simulator as it was
                ag = int(np.flatnonzero(bad)[0])
                allowed = np.flatnonzero(self.mask[ag]).tolist()
                why = "out of range" if not 0 <= a[ag] < self.num_actions else "masked"
                name = f"node_{ag % self.agents_per_copy}"
                if not self.lone:
                    name += f" of copy {ag // self.agents_per_copy}"
                raise InvalidActionError(
                    f"action {int(a[ag])} of agent {name} is {why}; allowed actions now: "
                    f"{allowed[:20]}{' ...' if len(allowed) > 20 else ''} (action space "
                    f"0..{self.num_actions - 1}; invalid_action='defer' would defer it instead)"
                )
            self.count_invalid(np.flatnonzero(bad))
            self.invalid_mask = bad
            a = np.where(bad, 0, a)
        return a

    def _place_actions(self, a: np.ndarray) -> tuple[np.ndarray, dict[str, Any], np.ndarray]:
        """Place the valid actions ``a``; return rewards so far, counters, placing agents."""
        agents = a.nonzero()[0]  # actions are >= 0 here; 0 is defer
        if len(agents):
            # one table lookup instead of decode's five arithmetic passes
            slot, k, level = self._dec_table.take(a[agents], axis=1)
            jobs = self.head[agents, slot]
            targets = self.neighbors[agents, k]
        else:  # every agent deferred (78% of random play's steps on edge10-v0): nothing to decode
            jobs = targets = level = agents
        info = self.place(agents, jobs, targets, level, distinct_agents=True)
        rewards = np.zeros(self.num_agents)
        cmask = info.pop("collision_agent_mask")
        if cmask is not None:
            rewards -= self.cfg.collision_penalty * cmask
        return rewards, info, agents

    def place(
        self,
        agents: np.ndarray,
        jobs: np.ndarray,
        targets: np.ndarray,
        level: np.ndarray,
        *,
        distinct_agents: bool = False,
    ) -> dict[str, Any]:
        """Resolve task conflicts and collisions, then place the admitted tasks.

        Args:
            agents: deciding agent of each proposal.
            jobs: job whose next worker is proposed.
            targets: node of each proposal.
            level: allocation level of each proposal.
            distinct_agents: the caller guarantees one proposal per agent (as ``step``
                does); with self-only targets no two proposals can then share a node.

        Returns:
            Per-step counters (summed over copies), including ``collision_agent_mask``
            (agents,) or ``None``.
        """
        info: dict[str, Any] = {
            "proposals": len(agents),
            "task_conflicts": 0,
            "collisions": 0,
            "rejected": 0,
            "placements": 0,
            "collision_agent_mask": None,
        }
        if len(agents) == 0:
            return info
        alloc = self.alloc_of(jobs, level)
        # task conflicts (only possible under shared visibility): one winner per job
        if self._shared and has_duplicates(jobs):
            keep = self._resolve_conflicts(agents, jobs, targets, alloc)
            info["task_conflicts"] = int(len(agents) - keep.sum())
            self._count("task_conflicts", jobs[~keep], self._job_capacity)
            agents, jobs, targets, level, alloc = (
                agents[keep],
                jobs[keep],
                targets[keep],
                level[keep],
                alloc[keep],
            )
        # collisions: jointly over the free capacity of a node with >= 2 placements; each
        # placement fits alone (mask), so without a shared target there is none to check
        n = self.num_agents
        colliding = None
        if not (distinct_agents and self._targets_distinct) and has_duplicates(targets):
            free = self.capacity - self.used
            colliding = colliding_nodes(targets, alloc, free)
        if colliding is not None and colliding.any():
            in_coll = colliding[targets]
            cmask = np.zeros(n)
            cmask[agents[in_coll]] = 1.0
            info["collision_agent_mask"] = cmask
            info["collisions"] = int(colliding.sum())
            per = self.agents_per_copy
            self._count_where("collisions_proposed", colliding, per)
            self._count("collision_agents", agents[in_coll], per)
            if self.cfg.collision_mode == "reject":
                admitted = self._admit_in_random_order(targets, alloc, colliding, free)
                info["rejected"] = int((~admitted).sum())
                self._count("rejected", targets[~admitted], per)
                agents, jobs, targets, level, alloc = (
                    agents[admitted],
                    jobs[admitted],
                    targets[admitted],
                    level[admitted],
                    alloc[admitted],
                )
            else:
                self._count_where("collisions_executed", colliding, per)
        # two agents can place workers of one job only under shared visibility, and conflicts
        # were resolved above; so each job gets at most one worker per round
        widx = self.placed[jobs]
        self.w_node[jobs, widx] = targets
        self.w_alloc[jobs, widx] = alloc
        self.w_level[jobs, widx] = level
        if self._measured:
            # no node is marked dirty here: a node's outcome depends on its running workers
            # only, and these join them when their job starts (``_start`` marks the nodes)
            if self.cfg.crash_order == "random" and len(jobs) > 1:
                self.w_seq[jobs, widx] = self._seq + self._random_round_order(agents)
            else:
                self.w_seq[jobs, widx] = np.arange(self._seq, self._seq + len(jobs))
            self._seq += len(jobs)
        self.w_iter0[jobs, widx] = self.progress_model.iteration_seconds(self, jobs, level, targets)
        np.add.at(self.used, targets, alloc)
        np.add.at(self.node_workers, targets, 1.0)
        self.placed[jobs] += 1
        self.j_static[jobs, self.job_features - 2] = self.placed[jobs] * 0.25
        if self._shared:
            self.owner[jobs] = agents
        # single-worker jobs (e.g. TapFinger's) start with their one placement
        started = jobs if self.max_workers == 1 else jobs[self.placed[jobs] == self.j_workers[jobs]]
        if len(started):
            self._start(started)
        info["placements"] = len(jobs)
        self._count("placements", jobs, self._job_capacity)
        return info

    def _gumbel(self, jobs: np.ndarray) -> np.ndarray:
        """Gumbel noise per proposal of a round with a contested job, from each copy's rng.

        A lone simulator draws one per proposal; batched, each copy with a contested job
        does so from its own generator, in proposal order (so a copy draws what it would
        draw alone).
        """
        if self.copies == 1:
            return self.rngs[0].gumbel(size=len(jobs))
        jc = self._job_capacity
        srt = np.sort(jobs)
        contested = np.zeros(self.copies, dtype=bool)
        contested[srt[1:][srt[1:] == srt[:-1]] // jc] = True
        cp = jobs // jc
        counts = np.bincount(cp, minlength=self.copies)
        draws = [self.rngs[b].gumbel(size=int(counts[b])) for b in np.flatnonzero(contested)]
        order = np.argsort(cp, kind="stable")  # by copy, each copy's in proposal order
        g = np.zeros(len(jobs))
        g[order[contested[cp[order]]]] = np.concatenate(draws)
        return g

    def _checked_conflict_weights(
        self, weights: np.ndarray | None, shape: tuple[int, ...]
    ) -> np.ndarray | None:
        """``step``'s ``conflict_weights`` as a flat float array, or ``None``.

        Raises:
            ValueError: wrong shape, or a weight that is negative or not finite.
        """
        if weights is None:
            return None
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != shape:
            raise ValueError(
                f"conflict_weights must have the actions' shape {shape}; got shape {w.shape}"
            )
        if not np.isfinite(w).all() or (w < 0).any():
            bad = w[~(np.isfinite(w) & (w >= 0))][:3].tolist()
            raise ValueError(f"conflict_weights must be finite and >= 0; got {bad}")
        return w.reshape(-1)

    def _resolve_conflicts(self, agents, jobs, targets, alloc) -> np.ndarray:
        """Pick one winner per contested job; return a keep-mask over proposals.

        ``random``: uniform among the competitors. ``fit``: proportional to the softmax, over
        the competitors, of min over resources of free / minimum demand on the proposer's
        target (TapFinger's fit term; the policy's pointer probability is the
        learner's part and multiplies in at the algorithm level). ``fit_argmax`` (the
        original TapFinger code's rule): the largest weight x fit wins, the weight being
        the agent's ``conflict_weights`` entry of this round (1 without them); ties go to
        the lowest agent, and nothing random is drawn.
        """
        rule = self.cfg.conflict_rule
        if rule in ("fit", "fit_argmax"):
            free = (self.capacity - self.used)[targets]
            need = np.maximum(self.j_min[jobs], 1e-9)
            score = np.where(self.j_min[jobs] > 0, free / need, np.inf).min(axis=1)
        else:
            score = np.zeros(len(jobs))
        if rule == "fit_argmax":
            if self._conflict_w is not None:
                w = self._conflict_w[agents]
                # 0 x inf (no demand) is a zero weight's proposal: it loses
                score = np.where(w > 0, w * score, -1.0)
            order = np.lexsort((agents, -score, jobs))
        else:
            # Gumbel-max per job draws a winner proportional to softmax(score)
            g = score + self._gumbel(jobs)
            order = np.lexsort((-g, jobs))
        first = np.ones(len(jobs), dtype=bool)
        first[1:] = jobs[order][1:] != jobs[order][:-1]
        keep = np.zeros(len(jobs), dtype=bool)
        keep[order[first]] = True
        return keep

    def _random_round_order(self, agents: np.ndarray) -> np.ndarray:
        """``crash_order='random'``: each placement's rank in this round.

        By copy, then in a random order within the copy drawn from its own order generator (a
        copy with one placement draws nothing, as a lone simulator with that placement alone).
        """
        cp = agents // self.agents_per_copy
        key = np.zeros(len(agents))
        copies, counts = np.unique(cp, return_counts=True)
        for b, c in zip(copies[counts > 1], counts[counts > 1], strict=True):
            key[cp == b] = self._order_rngs[b].random(int(c))
        rank = np.empty(len(agents), dtype=np.int64)
        rank[np.lexsort((key, cp))] = np.arange(len(agents))
        return rank

    def _admit_in_random_order(self, targets, alloc, colliding, free) -> np.ndarray:
        """``collision_mode='reject'``: per colliding node, admit in random order while fitting."""
        admitted = np.ones(len(targets), dtype=bool)
        for node in np.flatnonzero(colliding):
            idx = np.flatnonzero(targets == node)
            room = free[node].copy()
            for i in self.rngs[node // self.agents_per_copy].permutation(idx):
                if (alloc[i] <= room + 1e-9).all():
                    room -= alloc[i]
                else:
                    admitted[i] = False
        return admitted
