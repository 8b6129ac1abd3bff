"""Observations, action masks and the global state, for every copy at once.

Per agent the observation is: its node's features, the time of day, its queue length, the
features of its ``pending_slots`` first queued jobs, and its placement targets' node
features with the static link features (validity, bandwidth, latency) to each. With
``obs_delay`` the neighbours' node features are that many slots old (per copy).

The mask marks exactly the feasible actions: a job in the pending slot, an
existing target, an allocation at least the job's minimum demand and at most the target's
current free capacity.
"""

from __future__ import annotations

import numpy as np

from .queues import QUEUED as QUEUED_STATUS

OBS_BOUND = 1e4
"""Every observation feature lies in [-OBS_BOUND, OBS_BOUND] (finite Box bounds)."""

NODE_FEATURES = 9
"""Per-node features: free fraction (3), capacity / max capacity (3), speed / max speed,
running workers / 8, queue length / 10."""

QLEN_FEATURE = 8
"""Column of the queue length / 10 among the :data:`NODE_FEATURES`."""

SMALL_MASK_CELLS = 384
"""Largest agents x pending slots x targets of a simulator whose scale-level mask is computed
agent-axis-first (read when a simulator is built; ``benchmarks/mask_layout.py`` measures
both layouts by building simulators with this at 0 and at a large value)."""


def _scale_ratio(free: np.ndarray, need: np.ndarray) -> np.ndarray:
    """The largest multiple of a job's minimum (cpu, gpu) that fits; -1 where memory does not.

    Scale levels are multiples s of the minimum (cpu, gpu) with memory at the minimum, so a
    level fits iff s <= min(free_cpu / need_cpu, free_gpu / need_gpu) and the memory fits.
    The one rule of both mask layouts.

    Args:
        free: free capacity, resource axis first: (3, ...) cpu, gpu, memory.
        need: the jobs' ``1 / min cpu``, ``1 / min gpu``, ``min memory`` (3, ...),
            broadcastable against ``free``; the empty-slot sentinel never fits.
    """
    ratio = free[0] * need[0]
    np.minimum(ratio, free[1] * need[1], out=ratio)
    np.copyto(ratio, -1.0, where=need[2] > free[2])
    return ratio


class ObservationMixin:
    """Observation, mask and state computation of :class:`~edgesched.envs.core.EdgeClusterSim`.

    State owned: ``obs``, ``mask``, ``head`` (pending job ids per agent), ``_node_feat``,
    ``_head_feat`` and the per-copy history of node features (``obs_delay``).
    """

    def _init_observations(self) -> None:
        c, cfg = self.cluster, self.cfg
        na, k1 = self.num_agents, self.k1
        self._cap_max = c.capacity.max(axis=0)
        self._speed_max = float(c.speed.max())
        self.job_features = 8 + self.num_priorities + self.num_models
        self.obs_dim = (
            NODE_FEATURES + 3 + self.pending_slots * self.job_features + k1 * (NODE_FEATURES + 3)
        )
        self.state_dim = (
            self.agents_per_copy * (NODE_FEATURES + self.pending_slots * self.job_features) + 2
        )
        # neighbour link features are static: validity, bandwidth, latency to each target
        nb = np.where(c.neighbors >= 0, c.neighbors, 0)
        rows = np.arange(self.agents_per_copy)[:, None]
        valid = (c.neighbors >= 0).astype(np.float32)
        link = np.stack(
            [
                valid,
                valid * np.log10(c.pair_bw[rows, nb] + 1.0) / 2.0,
                valid * np.minimum(c.pair_lat[rows, nb], 1e3) / 100.0,
            ],
            axis=-1,
        ).astype(np.float32)
        self._nbr_safe = np.where(self.neighbors >= 0, self.neighbors, 0)
        self._nbr_safe_t = np.ascontiguousarray(self._nbr_safe.T)  # (K1, N), for the mask
        # Scale-level masks of at most SMALL_MASK_CELLS (agent, pending slot, target) cells
        # are computed agent-axis-first, larger ones agent-axis-last: the first needs fewer
        # numpy calls, the second has long inner loops (benchmarks/mask_layout.py times both)
        self._mask_small = na * self.pending_slots * k1 <= SMALL_MASK_CELLS
        self._nbr_valid = self.neighbors >= 0
        self._all_nbr_valid = bool(self._nbr_valid.all())
        # observation template: zeros, and the static link features of every neighbour
        self._obs_template = np.zeros((na, self.obs_dim), np.float32)
        tail = self._obs_template[:, self.obs_dim - k1 * (NODE_FEATURES + 3) :]
        tail.reshape(na, k1, NODE_FEATURES + 3)[..., NODE_FEATURES:] = np.tile(
            link, (self.copies, 1, 1)
        )
        self._cap2 = np.ascontiguousarray(self.capacity[:, :2])
        self._cap2_total = np.maximum(c.capacity[:, :2].sum(0), 1e-12)  # a copy's CPUs, GPUs
        self._inv_cap = np.divide(
            1.0, self.capacity, out=np.zeros_like(self.capacity), where=self.capacity > 0
        )
        self._node_static = np.zeros((na, NODE_FEATURES), np.float32)
        self._node_static[:, 3:6] = self.capacity / self._cap_max
        self._node_static[:, 6] = self.speed / self._speed_max
        self._slot_range = np.arange(self.pending_slots)[None, :]
        phase = 2 * np.pi * np.arange(cfg.diurnal_period_slots) / cfg.diurnal_period_slots
        self._time_feat = np.stack([np.sin(phase), np.cos(phase)], axis=1).astype(np.float32)
        # per-copy history of node features for obs_delay: (B, H, N, F), filled per copy
        h = cfg.obs_delay + 1
        self._hist = np.zeros((self.copies, h, self.agents_per_copy, NODE_FEATURES), np.float32)
        self._hist_len = np.zeros(self.copies, dtype=np.int64)
        self._adv_since_snapshot = np.zeros(self.copies, dtype=bool)

    def _reset_history(self, copies: np.ndarray) -> None:
        """Forget the node-feature history of the copies selected by bool (B,) ``copies``."""
        self._hist_len[copies] = 0
        self._adv_since_snapshot[copies] = False

    # ------------------------------------------------------------------ features
    def _node_features(self, free: np.ndarray | None = None) -> np.ndarray:
        nf = self._node_static.copy()
        if free is None:
            free = self.capacity - self.used
        np.multiply(free, self._inv_cap, out=nf[:, :3])
        nf[:, 7] = self.node_workers / 8.0
        nf[:, QLEN_FEATURE] = np.minimum(self.qlen, 1e4) / 10.0
        return nf

    def _job_features(self, jobs: np.ndarray) -> np.ndarray:
        """Features of jobs (any shape of ids, -1 = empty slot) -> (..., F).

        Layout: present, minimum demand / max capacity (3), workers / 4, log size / 20,
        priority one-hot, model one-hot, placed workers / 4, waiting slots / 100.
        """
        # a fresh array; -1 hits the all-zero sentinel row. The placed-workers column is
        # kept current in j_static by place(), so only the waiting time is computed here.
        # np.take rather than fancy indexing: the same rows, several times faster on the
        # (agents, slots) id arrays of the hot path
        f = self.j_static.take(jobs, axis=0)
        # the sentinel's arrival is +inf, so its waiting time clips to 0
        wait = np.maximum(self._slot_of(jobs) - self._j_arrival_ext.take(jobs), 0.0)
        f[..., self.job_features - 1] = np.minimum(wait, 1000.0) * 0.01
        return f

    def _time_features(self) -> np.ndarray:
        """(2,) sine and cosine of the time of day (lone), or (agents, 2) batched."""
        if self.copies == 1:
            return self._time_feat[int(self.tc[0]) % len(self._time_feat)]
        return self._time_feat[self.tc % len(self._time_feat)].take(self._agent_copy, axis=0)

    def _stale_node_features(self, nf: np.ndarray) -> np.ndarray:
        """Record this step's node features; return the ``obs_delay``-old ones per copy.

        A copy keeps one snapshot per slot (the latest one updated within a slot) and the
        oldest of at most ``obs_delay + 1`` (or as old as the episode allows).
        """
        b, h = self.copies, self.cfg.obs_delay + 1
        nfb = nf.reshape(b, self.agents_per_copy, NODE_FEATURES)
        hist, n = self._hist, self._hist_len
        new = (n == 0) | self._adv_since_snapshot
        over = new & (n == h)
        if over.any():
            hist[over, :-1] = hist[over, 1:]
            n[over] -= 1
        hist[np.flatnonzero(new), n[new]] = nfb[new]
        n[new] += 1
        old = ~new
        hist[np.flatnonzero(old), n[old] - 1] = nfb[old]
        self._adv_since_snapshot[:] = False
        return hist[:, 0].reshape(self.num_agents, NODE_FEATURES)

    def _refresh(self) -> None:
        """Recompute node features, pending tasks, observations and masks after a change."""
        self._update_qlen()
        free = self.capacity - self.used  # may be negative under overload
        nf = self._node_features(free)
        self._node_feat = nf
        stale = self._stale_node_features(nf) if self.cfg.obs_delay else nf
        has = self._slot_range < self.qlen[:, None]
        if self._refill_on_advance:
            # slots keep their jobs; a placed (or finished) one leaves an empty slot
            s = self._slots
            s[(s >= 0) & (self.status[np.maximum(s, 0)] != QUEUED_STATUS)] = -1
            self.head = s.copy()
        elif len(self.q_job):
            idx = np.minimum(self._q_start[:, None] + self._slot_range, len(self.q_job) - 1)
            self.head = np.where(has, self.q_job[idx], -1)
        else:
            self.head = np.full(has.shape, -1, dtype=np.int64)
        jf = self._job_features(self.head)
        n = self.num_agents
        # a fresh array every step (callers may keep observations, e.g. rollout buffers),
        # copied from a template that already holds the static neighbour-link features
        obs = self._obs_template.copy()
        obs[:, :NODE_FEATURES] = nf
        o = NODE_FEATURES
        obs[:, o : o + 2] = self._time_features()
        obs[:, o + 2] = nf[:, QLEN_FEATURE]
        o += 3
        obs[:, o : o + jf[0].size] = jf.reshape(n, -1)
        nbr = obs[:, o + jf[0].size :].reshape(n, self.k1, NODE_FEATURES + 3)
        nbr[..., :NODE_FEATURES] = stale.take(self._nbr_safe, axis=0)
        if not self._all_nbr_valid:
            nbr *= self._nbr_valid[..., None]
        self.obs = obs
        self._head_feat = jf
        self.mask = self._compute_mask(free)

    # ------------------------------------------------------------------ masks
    def _compute_mask(self, free: np.ndarray) -> np.ndarray:
        """Feasible-action mask from the free capacity and the pending slots' jobs."""
        # Written per resource on purpose: numpy reductions over a length-3 last axis cost
        # more than the comparisons themselves at these sizes.
        j = self.head  # -1 (empty slot) hits the never-fitting sentinel allocation
        free = free + 1e-9
        n = self.num_agents
        if self._mask_rows is not None:
            return self._cached_mask(free.take(self._nbr_safe, axis=0))
        mask = np.empty((n, self.num_actions), dtype=bool)
        mask[:, 0] = True
        # a view (split of the contiguous last axis): the result is written in place
        out = mask[:, 1:].reshape(n, self.pending_slots, self.k1, self.num_levels)
        if self._grid:
            ft = free.take(self._nbr_safe, axis=0)  # (N, K1, 3)
            # grid levels are absolute (cpu, gpu) amounts, the same for every job: fit per
            # (agent, target, level), then the job's minimum demand (False for the sentinel)
            if self._fit_table is not None:
                u0, u1, table = self._fit_table
                row = np.searchsorted(u0, ft[..., 0], side="right") * (len(u1) + 1)
                row += np.searchsorted(u1, ft[..., 1], side="right")
                fit = table.take(row, axis=0)  # (N, K1, L), common levels applied
            else:
                fit = np.less_equal(self._grid_r[0], ft[..., 0:1])
                fit &= np.less_equal(self._grid_r[1], ft[..., 1:2])  # (N, K1, L)
            if self._grid_ok_common is not None:
                # every model admits the same levels: no (N, P, L) gather of per-job rows
                if self._fit_table is None:
                    fit &= self._grid_ok_common
                # a broadcast copy, then the empty slots cleared: about twice as fast as a
                # broadcast logical_and when most slots hold a job (TapFinger's queues)
                out[...] = fit[:, None]
                out[j < 0] = False
            else:
                ok = self._j_alloc_ok_ext.take(j, axis=0)
                np.logical_and(fit[:, None], ok[:, :, None, :], out=out)
            if self._grid_mem:
                # memory is the job's minimum at every grid level
                mem = self._j_min_ext.take(j, axis=0)[:, :, 2:3] <= ft[:, None, :, 2]  # (N, P, K1)
                out &= mem[..., None]
        elif self._mask_small:
            # agent-axis-first (see _mask_small): on few cells numpy's per-call cost
            # dominates, so one 4-D comparison beats a better inner loop
            ft = free.take(self._nbr_safe, axis=0)[:, None].transpose(3, 0, 1, 2)  # (3,N,1,K1)
            need = self._scale_need_ext.take(j, axis=0)[:, :, None].transpose(3, 0, 1, 2)
            ratio = _scale_ratio(ft, need)  # (N, P, K1); need is (3, N, P, 1)
            np.less_equal(self._scales_eps, ratio[..., None], out=out)
        else:
            # agent-axis-last, (P, K1, N): broadcasting over the short pending and target
            # axes with the agent axis first runs numpy's inner loop 7 elements at a time,
            # several times slower on many agents (batched)
            ft = free.T.copy().take(self._nbr_safe_t, axis=1)  # (3, K1, N)
            need = np.ascontiguousarray(
                self._scale_need_ext.take(j.T, axis=0).transpose(2, 0, 1)
            )  # (3, P, N)
            ratio = _scale_ratio(ft[:, None], need[:, :, None])  # (P, K1, N)
            ratio = np.ascontiguousarray(ratio.transpose(2, 0, 1))  # (N, P, K1)
            for lv, s_eps in enumerate(self._scales_eps.tolist()):
                np.less_equal(s_eps, ratio, out=out[..., lv])
        if not self._all_nbr_valid:
            out &= self._nbr_valid[:, None, :, None]
        return mask

    def _cached_mask(self, ft: np.ndarray) -> np.ndarray:
        """Grid-mode mask from memoized agent rows (see ``_mask_rows`` in ``_init_actions``).

        When every model admits the same grid levels, no model needs memory and every
        neighbour exists, an agent's whole row is a function of its targets' free CPU and
        GPU and of how many of its pending slots hold a job. Those take few distinct values
        (TapFinger: integer amounts), so rows are computed once and reused.
        """
        rows_cache = self._mask_rows
        p = self.pending_slots
        if len(rows_cache) > self._mask_rows_max:
            rows_cache.clear()  # bounds memory; rows are recomputed on demand
        rows = []
        for f, h in zip(
            ft[..., :2].reshape(self.num_agents, -1).tolist(), self.qlen.tolist(), strict=True
        ):
            key = (*f, h if h < p else p)
            row = rows_cache.get(key)
            if row is None:
                row = rows_cache[key] = self._mask_row(f, key[-1])
            rows.append(row)
        return np.array(rows)  # a fresh array: callers may keep masks

    def _mask_row(self, free_cg: list[float], filled: int) -> np.ndarray:
        """One agent's grid-mode mask row (cached path).

        Args:
            free_cg: free (CPU, GPU) of each placement target, flattened (+1e-9 slack).
            filled: pending slots that hold a job.
        """
        row = np.zeros(self.num_actions, dtype=bool)
        row[0] = True
        fit = np.empty((self.k1, self.num_levels), dtype=bool)
        for k in range(self.k1):
            fit[k] = np.less_equal(self._grid_r[0], free_cg[2 * k])
            fit[k] &= np.less_equal(self._grid_r[1], free_cg[2 * k + 1])
        fit &= self._grid_ok_common
        row[1:].reshape(self.pending_slots, self.k1, self.num_levels)[:filled] = fit
        return row

    # ------------------------------------------------------------------ views
    @property
    def obs_batched(self) -> np.ndarray:
        """(B, N, D) view of ``obs``."""
        return self.obs.reshape(self.copies, self.agents_per_copy, -1)

    @property
    def mask_batched(self) -> np.ndarray:
        """(B, N, A) view of ``mask``."""
        return self.mask.reshape(self.copies, self.agents_per_copy, -1)

    def state(self) -> np.ndarray:
        """Global state for centralized critics (flat float32): (S,) lone, (B, S) batched.

        All of a copy's nodes' current features, every agent's pending-task features, the
        time of day.
        """
        b = self.copies
        if b == 1:
            s = np.concatenate(
                [self._node_feat.ravel(), self._head_feat.ravel(), self._time_features()]
            )
            return s if self.lone else s[None]
        return np.concatenate(
            [
                self._node_feat.reshape(b, -1),
                self._head_feat.reshape(b, -1),
                self._time_feat[self.tc % len(self._time_feat)],
            ],
            axis=1,
        )
