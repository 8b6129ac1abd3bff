"""Many copies of one scenario stepped as one array program (the batched array path).

A step of :class:`~edgesched.envs.core.EdgeClusterSim` costs a fixed ~0.1 ms of numpy call
overhead plus about 1 µs per agent, so small clusters (TapFinger's 6 agents) spend most of a
step on the fixed part. :class:`BatchedSim` holds ``B`` independent copies of a scenario as
one simulator over the disjoint union of their clusters: copy ``b`` owns agents
``b*N .. b*N+N-1`` and a block of ``job_capacity`` job ids, so the observation, mask,
placement and progress code of the single simulator runs once for all copies. What differs
per copy is handled here: each copy has its own clock (``advance='when_idle'`` moves a copy's
clock only when none of *its* agents placed), its own episode end, its own generator and its
own counters.

Copy ``b`` reset with seed ``s`` follows exactly the trajectory of a single
``EdgeClusterSim`` reset with ``s`` and given the same actions: the same observations, masks,
rewards and episode metrics, bit for bit (tests/test_batched.py). Each copy keeps a single
simulator (``copy_sim(b)``) that draws its workloads, owns its generator and computes its
episode metrics.

Not supported (``ConfigError``): ``obs_delay > 0``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .config import ConfigError, SimConfig
from .core import RUNNING, Counters, EdgeClusterSim, InvalidActionError
from .topology import Cluster, build_cluster

_NO_ARRIVAL = np.iinfo(np.int64).max // 4
"""Arrival slot of the unused job ids of a copy's block (they never arrive)."""


def tile_cluster(cluster: Cluster, copies: int) -> Cluster:
    """The disjoint union of ``copies`` copies of ``cluster`` (node ``b*N + n``).

    No link joins two copies: their pairwise bandwidth is 0 and latency infinite, and every
    agent's placement targets stay inside its copy.

    Args:
        cluster: the static cluster of one copy.
        copies: number of copies.

    Returns:
        The union's arrays; regions are numbered per copy (``b * num_regions + r``).
    """
    n = len(cluster.speed)
    off = (np.arange(copies) * n)[:, None]
    nbr = np.tile(cluster.neighbors, (copies, 1))
    nbr = np.where(nbr >= 0, nbr + np.repeat(off[:, 0], n)[:, None], -1)
    pair_bw = np.zeros((copies * n, copies * n))
    pair_lat = np.full((copies * n, copies * n), np.inf)
    for b in range(copies):
        s = slice(b * n, (b + 1) * n)
        pair_bw[s, s] = cluster.pair_bw
        pair_lat[s, s] = cluster.pair_lat
    return Cluster(
        capacity=np.tile(cluster.capacity, (copies, 1)),
        speed=np.tile(cluster.speed, copies),
        tier=np.tile(cluster.tier, copies),
        tier_names=cluster.tier_names,
        pos=np.tile(cluster.pos, (copies, 1)),
        edges=(cluster.edges[None] + off[:, :, None]).reshape(-1, 2),
        link_bw=np.tile(cluster.link_bw, copies),
        link_lat=np.tile(cluster.link_lat, copies),
        pair_bw=pair_bw,
        pair_lat=pair_lat,
        neighbors=nbr,
        region=np.tile(cluster.region, copies)
        + np.repeat(np.arange(copies) * cluster.num_regions, n),
        boundary=np.tile(cluster.boundary, copies),
    )


# Per-job arrays of a workload (as EdgeClusterSim._draw_workload sets them) with the value of
# the unused ids of a block. Job- and agent-valued ones are offset separately.
_JOB_STATIC = {
    "j_arrival": _NO_ARRIVAL,
    "j_model": 0,
    "j_workers": 1,
    "j_prio": 0,
    "j_sync": 0,
    "j_min": 0.0,
    "j_target": 1.0,
    "j_tau": 1.0,
    "j_max_samples": np.inf,
    "j_x90": 1.0,
    "j_eff": 1.0,
    "j_alloc": 0.0,
    "j_alloc_ok": False,
}
_JOB_STATIC_TAPFINGER = {"_j_is_lm": False}
_JOB_STATIC_PROFILE = {
    "_j_tput_at_speed1": 0.0,
    "_j_iter_at_speed1": np.inf,
    "j_k": 1.0,
    "j_samples_per_iter": 0.0,
}
# dynamic per-job state; w_* have a worker axis padded to the widest copy
_JOB_DYNAMIC = {
    "status": 0,
    "progress": 0.0,
    "quality": 0.0,
    "sync_time": 0.0,
    "start_slot": -1,
    "finish_slot": -1,
}
_WORKER = {"w_alloc": 0.0, "w_level": 0, "w_iter0": 0.0}
_COUNTERS = (
    "steps",
    "collisions_proposed",
    "collisions_executed",
    "collision_agents",
    "rejected",
    "task_conflicts",
    "overload_node_slots",
    "invalid_actions",
    "placements",
    "resized_up",
    "resized_down",
)


class BatchedSim(EdgeClusterSim):
    """``copies`` independent copies of one scenario, stepped together (the batched array path).

    Observations and masks are those of the union: ``obs`` is ``(B*N, D)`` and ``mask``
    ``(B*N, A)``, rows ``b*N .. b*N+N-1`` for copy ``b`` (``obs_batched``/``mask_batched``
    give ``(B, N, ...)`` views). :meth:`step` takes ``(B, N)`` actions and returns ``(B, N)``
    rewards. ``terminated``/``truncated`` are ``(B,)`` arrays; a finished copy must be reset
    with :meth:`reset_copy` before the next step. Other inherited views (``graph()``,
    ``job_counts()``) describe the whole union.

    Memory: the union's pairwise bandwidth and latency matrices hold ``(B*N)**2`` entries
    each, so batch small clusters (the benchmark keeps ``B*N <= 256``).

    Args:
        config: validated scenario parameters (as for :class:`EdgeClusterSim`).
        copies: number of copies ``B`` (>= 1).
        cluster: optional pre-built static cluster of one copy.
        scenario_id: versioned scenario id for records.

    Raises:
        ConfigError: ``copies`` < 1, or ``obs_delay`` > 0 (not supported here).
    """

    def __init__(
        self,
        config: SimConfig,
        copies: int,
        cluster: Cluster | None = None,
        scenario_id: str = "",
    ) -> None:
        if not isinstance(copies, int | np.integer) or copies < 1:
            raise ConfigError(f"copies={copies!r}: need an integer >= 1")
        if config.obs_delay:
            raise ConfigError(
                f"obs_delay={config.obs_delay}: BatchedSim supports only obs_delay=0 "
                "(use EdgeClusterSim for stale observations)"
            )
        one = cluster if cluster is not None else build_cluster(config)
        self.copies = int(copies)
        self.agents_per_copy = config.num_nodes
        self._sims = [EdgeClusterSim(config, one, scenario_id) for _ in range(self.copies)]
        union = dataclasses.replace(config, num_nodes=self.copies * config.num_nodes)
        super().__init__(union, tile_cluster(one, self.copies), scenario_id)
        self._trace_wl = None  # each copy's own simulator draws its workload
        self.rng = None  # every draw goes through the copy's generator
        # the row memo loops over agents in Python; one vectorized mask is cheaper for B*N
        # agents (tapfinger-hetero6, 32 copies: 754 vs 697 steps/s)
        self._mask_rows = None
        # the per-job workload arrays of this progress model, with their padding values
        extra = _JOB_STATIC_TAPFINGER if self._tapfinger else _JOB_STATIC_PROFILE
        self._job_static = {**_JOB_STATIC, **extra}
        n = self.agents_per_copy
        self._agent_copy = np.repeat(np.arange(self.copies), n)
        self._job_capacity = 0
        self._pending_q: list[tuple[np.ndarray, np.ndarray]] = []  # see _install
        self.tc = np.zeros(self.copies, dtype=np.int64)
        self.terminated = np.zeros(self.copies, dtype=bool)
        self.truncated = np.zeros(self.copies, dtype=bool)

    # ------------------------------------------------------------------ copies
    @property
    def job_capacity(self) -> int:
        """Job ids per copy (the largest workload drawn so far)."""
        return self._job_capacity

    def copy_sim(self, b: int) -> EdgeClusterSim:
        """Copy ``b`` as a single simulator, its state brought up to date.

        Its job-, node- and queue-state arrays, clock, counters, return and end flags are
        those of copy ``b`` (local ids); its ``obs``/``mask`` are not refreshed.
        """
        self._sync_out(b)
        return self._sims[b]

    def episode_metrics_of(self, b: int) -> dict[str, Any]:
        """:meth:`EdgeClusterSim.episode_metrics` of copy ``b``."""
        return self.copy_sim(b).episode_metrics()

    def episode_metrics(self) -> dict[str, Any]:
        """Not defined for the union; use :meth:`episode_metrics_of` per copy."""
        raise TypeError("BatchedSim has one episode per copy: use episode_metrics_of(b)")

    @property
    def t(self) -> int:  # type: ignore[override]
        """Not defined for the union (each copy has its clock, ``tc``)."""
        raise TypeError("BatchedSim has one clock per copy: read tc[b]")

    @property
    def obs_batched(self) -> np.ndarray:
        """(B, N, D) view of ``obs``."""
        return self.obs.reshape(self.copies, self.agents_per_copy, -1)

    @property
    def mask_batched(self) -> np.ndarray:
        """(B, N, A) view of ``mask``."""
        return self.mask.reshape(self.copies, self.agents_per_copy, -1)

    def state(self) -> np.ndarray:
        """(B, S) global state of each copy (as :meth:`EdgeClusterSim.state`)."""
        b = self.copies
        return np.concatenate(
            [
                self._node_feat.reshape(b, -1),
                self._head_feat.reshape(b, -1),
                self._time_feat[self.tc % len(self._time_feat)],
            ],
            axis=1,
        )

    # ------------------------------------------------------------------ reset
    def reset(self, seed: int | None = None, *, seeds: Any = None) -> None:
        """Reset every copy: copy ``b`` with ``seeds[b]`` (default ``seed + b``)."""
        if seeds is None:
            base = 0 if seed is None else int(seed)
            seeds = [base + b for b in range(self.copies)]
        if len(seeds) != self.copies:
            raise ValueError(f"seeds has {len(seeds)} entries; need copies={self.copies}")
        for sim, s in zip(self._sims, seeds, strict=True):
            sim.reset(s)
        self._layout(max(s.num_jobs for s in self._sims), max(s.max_workers for s in self._sims))
        for b in range(self.copies):
            self._install(b)
        self._rebuild_schedule()
        self._merge_queues()
        self._refresh()

    def reset_copy(self, b: int, seed: int | None) -> None:
        """Start a new episode in copy ``b`` only (the others keep running)."""
        self.reset_copies([b], [seed])

    def reset_copies(self, copies: Any, seeds: Any) -> None:
        """Start a new episode in each of ``copies`` (with ``seeds``); one refresh for all.

        Raises:
            ValueError: a copy index out of range or repeated, or ``seeds`` of another length.
        """
        copies = [int(b) for b in copies]
        seeds = list(seeds)
        bad = [b for b in copies if not 0 <= b < self.copies]
        if bad or len(set(copies)) != len(copies):
            raise ValueError(
                f"copies={copies}: need distinct indices 0 <= b < copies={self.copies}"
            )
        if len(seeds) != len(copies):
            raise ValueError(f"seeds has {len(seeds)} entries; need one per copy ({len(copies)})")
        if not copies:
            return
        for b, seed in zip(copies, seeds, strict=True):
            self._sims[b].reset(seed)
        if (
            max(self._sims[b].num_jobs for b in copies) > self._job_capacity
            or max(self._sims[b].max_workers for b in copies) > self.max_workers
        ):
            # a larger workload than any before: lay every copy out again
            fresh = set(copies)
            for other in range(self.copies):
                if other not in fresh:
                    self._sync_out(other)
            self._layout(
                max(max(s.num_jobs for s in self._sims), self._job_capacity),
                max(max(s.max_workers for s in self._sims), self.max_workers),
            )
            copies = list(range(self.copies))
        for b in copies:
            self._install(b)
        self._rebuild_schedule()
        self._merge_queues()
        self._refresh()

    def _layout(self, capacity: int, max_workers: int) -> None:
        """Allocate the union's per-job arrays for ``capacity`` job ids per copy."""
        s0 = self._sims[0]
        self._job_capacity = jc = max(int(capacity), 1)
        self.num_jobs = nj = self.copies * jc
        self.max_workers = mw = int(max_workers)
        for name, fill in self._job_static.items():
            ref = getattr(s0, name)
            setattr(self, name, np.full((nj, *ref.shape[1:]), fill, dtype=ref.dtype))
        self.j_home = np.zeros(nj, dtype=np.int64)
        for name, fill in _JOB_DYNAMIC.items():
            ref = getattr(s0, name)
            setattr(self, name, np.full(nj, fill, dtype=ref.dtype))
        self.owner = np.zeros(nj, dtype=np.int64)
        self.placed = np.zeros(nj + 1, dtype=np.int64)
        self.w_node = np.full((nj, mw), -1, dtype=np.int64)
        for name, fill in _WORKER.items():
            ref = getattr(s0, name)
            setattr(self, name, np.full((nj, mw, *ref.shape[2:]), fill, dtype=ref.dtype))
        f = self.job_features
        self.j_static = np.zeros((nj + 1, f), np.float32)
        self._key_span = self.num_priorities * (nj + 1)
        self.j_key = self.j_prio.astype(np.int64) * (nj + 1) + np.arange(nj)
        self._agent_bounds = np.arange(self.num_agents + 1, dtype=np.int64) * self._key_span
        n = self.num_agents
        self.used = np.zeros((n, 3))
        self.node_workers = np.zeros(n)
        self.return_sum = np.zeros(n)
        self.counters = Counters(util_sum=np.zeros(n))
        self._n_done = 0
        self._cnt = {k: np.zeros(self.copies, dtype=np.int64) for k in _COUNTERS}
        self._occupied_sum = np.zeros(self.copies)
        self._n_done_c = np.zeros(self.copies, dtype=np.int64)
        self._num_jobs_c = np.zeros(self.copies, dtype=np.int64)
        self._last_arrival_c = np.zeros(self.copies, dtype=np.int64)
        self.q_ck = np.zeros(0, dtype=np.int64)
        self.q_job = np.zeros(0, dtype=np.int64)
        self.running = np.zeros(0, dtype=np.int64)
        self._queue_dirty = True
        self._strag_rows: np.ndarray | None = None
        self._j_min_ext = np.full((nj + 1, 3), np.inf)  # sentinel: never fits
        self._inv_need_ext = np.zeros((nj + 1, 3))
        self._j_alloc_ok_ext = np.zeros((nj + 1, self.j_alloc.shape[1]), dtype=bool)
        self._j_arrival_ext = np.full(nj + 1, np.inf)
        self._sched: list = [None] * self.copies
        self._last_collision = None

    def _install(self, b: int) -> None:
        """Write copy ``b``'s single simulator state into its block of the union."""
        sim = self._sims[b]
        n, jc, jn, mw = self.agents_per_copy, self._job_capacity, sim.num_jobs, sim.max_workers
        js = slice(b * jc, b * jc + jn)
        blk = slice(b * jc, (b + 1) * jc)
        ag = slice(b * n, (b + 1) * n)
        a0, j0 = b * n, b * jc
        for name, fill in {**self._job_static, **_JOB_DYNAMIC}.items():
            arr = getattr(self, name)
            arr[blk] = fill
            arr[js] = getattr(sim, name)
        self.j_home[blk] = a0
        self.j_home[js] = sim.j_home + a0
        self.owner[blk] = a0
        self.owner[js] = sim.owner + a0
        self.placed[blk] = 0
        self.placed[js] = sim.placed[:jn]
        self.w_node[blk] = -1
        self.w_node[js, :mw] = np.where(sim.w_node >= 0, sim.w_node + a0, -1)
        for name, fill in _WORKER.items():
            arr = getattr(self, name)
            arr[blk] = fill
            arr[js, :mw] = getattr(sim, name)
        self.j_static[blk] = 0.0
        self.j_static[js] = sim.j_static[:jn]
        self.j_key[blk] = self.j_prio[blk].astype(np.int64) * (self.num_jobs + 1) + np.arange(
            j0, j0 + jc
        )
        self.used[ag] = sim.used
        self.node_workers[ag] = sim.node_workers
        self.return_sum[ag] = sim.return_sum
        self.counters.util_sum[ag] = sim.counters.util_sum
        for k in _COUNTERS:
            self._cnt[k][b] = getattr(sim.counters, k)
        self._occupied_sum[b] = sim.counters.occupied_share_sum
        self._n_done_c[b] = sim._n_done
        self._num_jobs_c[b] = jn
        self._last_arrival_c[b] = sim.j_arrival[-1] if jn else -1
        self.tc[b] = sim.t
        self.terminated[b] = sim.terminated
        self.truncated[b] = sim.truncated
        keep_r = self.running // jc != b
        self.running = np.concatenate([self.running[keep_r], sim.running + j0])
        keep_q = self.q_job // jc != b
        self.q_job = self.q_job[keep_q]
        self.q_ck = self.q_ck[keep_q]
        # merged (and keyed) once for all installed copies by _merge_queues
        q_agent, q_job = sim.queued_pairs()
        self._pending_q.append((q_agent + a0, q_job + j0))
        # hot-path copies with the sentinel row (see EdgeClusterSim._draw_workload)
        self._j_min_ext[blk] = self.j_min[blk]
        self._inv_need_ext[blk] = 1.0 / np.maximum(self.j_min[blk], 1e-12)
        self._j_alloc_ok_ext[blk] = self.j_alloc_ok[blk]
        arr = self.j_arrival[blk]
        self._j_arrival_ext[blk] = np.where(arr == _NO_ARRIVAL, np.inf, arr)
        # this copy's arrival pairs with global ids (_rebuild_schedule joins the copies')
        vj = sim._vis_job + j0
        self._sched[b] = (
            vj,
            (sim._vis_agent + a0) * self._key_span + self.j_key[vj],
            sim._vis_slot_ptr,
        )

    def _merge_queues(self) -> None:
        """Add the queue entries collected by ``_install`` and re-derive every key."""
        jobs = [self.q_job] + [j for _, j in self._pending_q]
        agents = [self.q_ck // self._key_span] + [a for a, _ in self._pending_q]
        self._pending_q = []
        q_job = np.concatenate(jobs)
        ck = np.concatenate(agents) * self._key_span + self.j_key[q_job]
        if self.cfg.priority_aging_slots and len(q_job):
            # aged ranks (EdgeClusterSim._age_queues) are recomputed from the clocks
            self.q_ck, self.q_job = ck, q_job
            self._age_queues(self.cfg.priority_aging_slots)
        else:
            order = np.argsort(ck, kind="stable")
            self.q_ck, self.q_job = ck[order], q_job[order]
        self._queue_dirty = True

    def _rebuild_schedule(self) -> None:
        """Every copy's (agent, job) arrival pairs, by copy then slot, with global ids."""
        sizes = np.array([len(vj) for vj, _, _ in self._sched])
        off = np.cumsum(sizes) - sizes
        self._vis_job = np.concatenate([vj for vj, _, _ in self._sched])
        self._vis_ck = np.concatenate([ck for _, ck, _ in self._sched])
        self._vis_ptr = np.stack([p for _, _, p in self._sched]) + off[:, None]  # (B, S)

    def _sync_out(self, b: int) -> None:
        """Write copy ``b``'s block back into its single simulator (local ids)."""
        sim = self._sims[b]
        n, jc, jn, mw = self.agents_per_copy, self._job_capacity, sim.num_jobs, sim.max_workers
        js = slice(b * jc, b * jc + jn)
        ag = slice(b * n, (b + 1) * n)
        a0, j0 = b * n, b * jc
        for name in _JOB_DYNAMIC:
            setattr(sim, name, getattr(self, name)[js].copy())
        sim.owner = self.owner[js] - a0
        sim.placed = np.concatenate([self.placed[js], [0]])
        wn = self.w_node[js, :mw]
        sim.w_node = np.where(wn >= 0, wn - a0, -1)
        for name in _WORKER:
            setattr(sim, name, getattr(self, name)[js, :mw].copy())
        sim.j_static = np.concatenate(
            [self.j_static[js], np.zeros((1, self.job_features), np.float32)]
        )
        sim.used = self.used[ag].copy()
        sim.node_workers = self.node_workers[ag].copy()
        sim.return_sum = self.return_sum[ag].copy()
        sim.counters.util_sum = self.counters.util_sum[ag].copy()
        for k in _COUNTERS:
            setattr(sim.counters, k, int(self._cnt[k][b]))
        sim.counters.occupied_share_sum = float(self._occupied_sum[b])
        sim._n_done = int(self._n_done_c[b])
        sim.t = int(self.tc[b])
        sim.terminated = bool(self.terminated[b])
        sim.truncated = bool(self.truncated[b])
        run = self.running[self.running // jc == b]
        sim.running = run - j0
        mine = self.q_job // jc == b
        q_job = self.q_job[mine] - j0
        q_agent = self.q_ck[mine] // self._key_span - a0
        sim.q_job = q_job
        sim.q_ck = q_agent * sim._key_span + sim.j_key[q_job]
        if self.cfg.priority_aging_slots and len(q_job):
            sim._age_queues(self.cfg.priority_aging_slots)
        sim._queue_dirty = True
        sim._update_qlen()

    # ------------------------------------------------------------------ hooks
    def _slot_of(self, jobs: np.ndarray) -> np.ndarray:
        # -1 (empty pending slot) reads the last copy's clock; its arrival is +inf anyway
        return self.tc[jobs // self._job_capacity]

    def _time_features(self) -> np.ndarray:
        return self._time_feat[self.tc % len(self._time_feat)][self._agent_copy]

    def _note_invalid(self, bad: np.ndarray) -> None:
        np.add.at(self._cnt["invalid_actions"], self._agent_copy[bad], 1)

    def _note_placed(self, jobs: np.ndarray) -> None:
        self._cnt["placements"] += np.bincount(jobs // self._job_capacity, minlength=self.copies)

    def _gumbel(self, jobs: np.ndarray) -> np.ndarray:
        # A single simulator draws one Gumbel per proposal of a round with a contested job.
        # Each copy with a contested job does so from its own generator, in proposal order.
        jc = self._job_capacity
        srt = np.sort(jobs)
        contested = np.zeros(self.copies, dtype=bool)
        contested[srt[1:][srt[1:] == srt[:-1]] // jc] = True
        cp = jobs // jc
        counts = np.bincount(cp, minlength=self.copies)
        draws = [self._sims[b].rng.gumbel(size=int(counts[b])) for b in np.flatnonzero(contested)]
        order = np.argsort(cp, kind="stable")  # by copy, each copy's in proposal order
        g = np.zeros(len(jobs))
        g[order[contested[cp[order]]]] = np.concatenate(draws)
        return g

    def _resolve_conflicts(self, agents, jobs, targets, alloc) -> np.ndarray:
        keep = super()._resolve_conflicts(agents, jobs, targets, alloc)
        self._cnt["task_conflicts"] += np.bincount(
            jobs[~keep] // self._job_capacity, minlength=self.copies
        )
        return keep

    def _rng_of_node(self, node: int) -> np.random.Generator:
        return self._sims[node // self.agents_per_copy].rng

    def place(self, agents, jobs, targets, level, *, distinct_agents=False) -> dict[str, Any]:
        """:meth:`EdgeClusterSim.place` on the union, with counters kept per copy."""
        self._last_collision = None
        info = super().place(agents, jobs, targets, level, distinct_agents=distinct_agents)
        if self._last_collision is not None:
            colliding, coll_agents, rejected_targets = self._last_collision
            n, b = self.agents_per_copy, self.copies
            per_copy = np.bincount(np.flatnonzero(colliding) // n, minlength=b)
            self._cnt["collisions_proposed"] += per_copy
            self._cnt["collision_agents"] += np.bincount(coll_agents // n, minlength=b)
            if rejected_targets is not None:
                self._cnt["rejected"] += np.bincount(rejected_targets // n, minlength=b)
            else:
                self._cnt["collisions_executed"] += per_copy
        return info

    def draw_stragglers(self, shape: tuple[int, ...]) -> np.ndarray:
        """Each running job's slowdowns from its copy's generator, as that copy would draw."""
        rows = self._strag_rows
        out = np.ones(shape)
        for b in np.unique(rows).tolist():
            sel = rows == b
            mw = self._sims[b].max_workers
            out[sel, :mw] = self._sims[b].draw_stragglers((int(np.count_nonzero(sel)), mw))
        return out

    def resize(self, jobs: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """Not supported on the batched path (RLPTO uses single simulators)."""
        raise NotImplementedError("BatchedSim does not support resize(); use EdgeClusterSim")

    # ------------------------------------------------------------------ step
    def step(self, actions: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        """One decision round of every agent of every copy.

        Args:
            actions: int array of shape (B, N).

        Returns:
            ``(rewards, info)``: rewards (B, N); ``info`` holds the union's counters of this
            round plus ``advanced`` (B,) and ``slot`` (B,) per copy.

        Raises:
            RuntimeError: a finished copy was not reset.
            InvalidActionError: as :meth:`EdgeClusterSim.step`.
        """
        fin = self.terminated | self.truncated
        if np.count_nonzero(fin):
            raise RuntimeError(
                f"copies {np.flatnonzero(fin).tolist()} have finished their episode; call "
                "reset_copy(b, seed) for each first"
            )
        a = np.asarray(actions)
        shape = (self.copies, self.agents_per_copy)
        # checked here, not only per agent after the reshape, so the message shows what the
        # caller passed rather than the flattened (B*N,) array
        if a.shape != shape or a.dtype.kind not in "iu":
            raise InvalidActionError(
                f"actions must be an integer array of shape {shape}; got shape {a.shape} "
                f"dtype {a.dtype} (one int action per agent: rows are the copies={self.copies}, "
                f"columns the {self.agents_per_copy} agents of each copy)"
            )
        rewards, info, agents = self._place_actions(self._checked_actions(a.reshape(-1)))
        if self.cfg.advance == "every_step":
            adv = np.ones(self.copies, dtype=bool)
        else:
            adv = np.bincount(agents // self.agents_per_copy, minlength=self.copies) == 0
        rewards += self.advance_clock(adv)
        info["advanced"] = adv
        self._cnt["steps"] += 1
        self._check_end()
        self._refresh()
        self.return_sum += rewards
        info["slot"] = self.tc.copy()
        return rewards.reshape(shape), info

    def advance_clock(self, adv: np.ndarray | None = None) -> np.ndarray:  # type: ignore[override]
        """Run one slot in the copies where ``adv`` (B,) is True; rewards (B*N,)."""
        cfg = self.cfg
        n, nb, jc = self.agents_per_copy, self.copies, self._job_capacity
        if adv is None:
            adv = np.ones(nb, dtype=bool)
        adv_a = adv[self._agent_copy]
        na = self.num_agents
        running = self.running
        in_sys = self._in_system()
        team = cfg.reward_mode == "team"
        rewards = np.where(adv_a, -(self._copy_mean(in_sys) if team else in_sys.astype(float)), 0.0)
        ratio = self.used * self._inv_cap
        cont = self.contention(ratio)
        over = (cont > 1.0) & adv_a
        self._cnt["overload_node_slots"] += np.count_nonzero(over.reshape(nb, n), axis=1)
        util = np.minimum(ratio[:, :2], 1.0)
        np.add(
            self.counters.util_sum,
            np.add.reduce(util, axis=1) * 0.5,
            out=self.counters.util_sum,
            where=adv_a,
        )
        held = np.minimum(self.used[:, :2], self._cap2).reshape(nb, n, 2)
        held = np.add.reduce(held, axis=1) / self._sims[0]._cap2_total
        share = (held[:, 0] + held[:, 1]) / 2.0
        np.add(self._occupied_sum, share, out=self._occupied_sum, where=adv)
        if len(running):
            sub = running[adv[running // jc]]
            if len(sub):
                self._strag_rows = sub // jc
                any_over = bool(np.count_nonzero(over))
                gain = self._progress(sub, cont if any_over else None)
                left = self.status[running] == RUNNING
                fin = running[~left]
                if len(fin):
                    self._n_done_c += np.bincount(fin // jc, minlength=nb)
                self.running = running[left]
                if cfg.accuracy_gain_weight:
                    acc = np.zeros(na)
                    np.add.at(acc, self.owner[sub], gain)
                    if cfg.reward_mode == "team":
                        acc = self._copy_mean(acc)
                    rewards += cfg.accuracy_gain_weight * np.where(adv_a, acc, 0.0)
        if cfg.resource_cost_weight:
            share_a = np.zeros(na)
            # the jobs that ran this slot, finished ones included (as a single simulator)
            run = running[adv[running // jc]]
            if len(run):
                res = (self.w_alloc[run, :, :2] / self._cap_max[:2]).sum(axis=(1, 2))
                np.add.at(share_a, self.owner[run], res)
            if cfg.reward_mode == "team":
                share_a = self._copy_mean(share_a)
            rewards -= cfg.resource_cost_weight * np.where(adv_a, share_a, 0.0)
        self.tc += adv
        if cfg.priority_aging_slots and len(self.q_job):
            self._age_queues(cfg.priority_aging_slots)
        arriving = adv & (self.tc < cfg.arrival_slots)
        if np.count_nonzero(arriving):
            self._enqueue_copies(np.flatnonzero(arriving))
        return rewards

    def _copy_mean(self, x: np.ndarray) -> np.ndarray:
        """Each agent gets its copy's per-agent mean of ``x`` (the team reward, per copy)."""
        n = self.agents_per_copy
        return (x.reshape(self.copies, n).sum(axis=1) / n)[self._agent_copy]

    def _enqueue_copies(self, copies: np.ndarray) -> None:
        t = self.tc[copies]
        lo = self._vis_ptr[copies, t]
        hi = self._vis_ptr[copies, t + 1]
        cnt = hi - lo
        total = int(cnt.sum())
        if total == 0:
            return
        # the ranges lo..hi of every arriving copy, concatenated
        idx = np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(total)
        self._enqueue(self._vis_job[idx], self._vis_ck[idx])

    def _check_end(self) -> None:
        cfg = self.cfg
        tc = self.tc
        all_arrived = (
            (tc >= cfg.arrival_slots) | (self._num_jobs_c == 0) | (tc > self._last_arrival_c)
        )
        self.terminated = all_arrived & (self._n_done_c == self._num_jobs_c)
        self.truncated = ~self.terminated & (
            (tc >= cfg.max_slots) | (self._cnt["steps"] >= cfg.max_steps)
        )


def make_batched(name: str, copies: int, **overrides: Any) -> BatchedSim:
    """``copies`` copies of scenario ``name`` (with ``overrides``) as one :class:`BatchedSim`.

    Raises:
        KeyError: unknown scenario.
        ConfigError: unknown or out-of-range parameter, ``copies`` < 1, ``obs_delay`` > 0.
    """
    from .scenarios import get_scenario

    sc = get_scenario(name)
    return BatchedSim(sc.config(**overrides), copies, scenario_id=sc.id)


__all__ = ["BatchedSim", "make_batched", "tile_cluster"]
