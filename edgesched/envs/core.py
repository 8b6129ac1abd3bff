"""The edge-cluster simulator core: numpy arrays only, vectorized over nodes, jobs and workers.

This module holds the dynamics of DESIGN §3. The API views (PettingZoo, Gymnasium central
view, graph view) are thin layers over :class:`EdgeClusterSim`; trainers may use its array
fast path (:meth:`EdgeClusterSim.step`) directly.

Time is discrete in slots of ``slot_seconds``. One call to :meth:`EdgeClusterSim.step` is one
decision round of all agents; the clock advances per the ``advance`` mode.

Randomness: the whole workload of an episode (arrival times, models, sizes, priorities,
sync schemes, visibility) is drawn at :meth:`reset` from ``np.random.default_rng(seed)``; the
same generator then draws stragglers, reject-order and conflict winners. The static cluster
comes from ``topology_seed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .catalog import model_catalog, straggler_model
from .config import ConfigError, SimConfig
from .sync import get_sync_scheme
from .topology import Cluster, build_cluster
from .workloads import TraceWorkload

_STRAGGLER_BATCH = 1 << 14

# job status codes
NOT_ARRIVED, QUEUED, RUNNING, DONE = 0, 1, 2, 3

# TapFinger job types (DESIGN §4.4); only used with progress_model="tapfinger"
TAPFINGER_MODELS = ("IMG", "LM")
TAPFINGER_MIN_DEMAND = (2.0, 1.0, 0.0)

OBS_BOUND = 1e4
"""Every observation feature lies in [-OBS_BOUND, OBS_BOUND] (finite Box bounds)."""

NODE_FEATURES = 9
"""Per-node features: free fraction (3), capacity / max capacity (3), speed / max speed,
running workers / 8, queue length / 10."""


class InvalidActionError(ValueError):
    """An action is out of range, has the wrong shape, or is masked."""


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


@dataclass
class Counters:
    """Episode-long counters (all plain ints/floats so they serialize)."""

    steps: int = 0
    collisions_proposed: int = 0
    collisions_executed: int = 0
    collision_agents: int = 0
    rejected: int = 0
    task_conflicts: int = 0
    overload_node_slots: int = 0
    invalid_actions: int = 0
    placements: int = 0
    resized_up: int = 0
    resized_down: int = 0
    occupied_share_sum: float = 0.0
    util_sum: np.ndarray = field(default_factory=lambda: np.zeros(0))


class EdgeClusterSim:
    """Vectorized simulator of DL training jobs on an edge cluster (DESIGN §3).

    Agents are nodes ``0..N-1``. Agent ``n`` decides for the tasks in its queue and may place
    them on ``cluster.neighbors[n]`` (itself first). Per agent the action is an integer:

    * ``0``: defer;
    * ``1 + ((slot * (K+1)) + k) * L + l``: place the next unplaced worker of the job in
      pending ``slot`` (0 = head of the queue) on neighbour ``k`` with allocation level ``l``.

    Allocation level ``l`` gives the task ``min_demand * scale[l] + grid[l]`` (see
    ``alloc_mode``). The mask marks exactly the feasible actions: an existing task, an
    existing target, an allocation at least the minimum demand and at most the target's
    current free capacity. Collisions arise when several agents' individually feasible
    placements on one node together exceed it.

    Args:
        config: validated scenario parameters.
        cluster: optional pre-built static cluster (shared by vectorized copies).
        scenario_id: versioned scenario id for records (e.g. ``edge50-v0``).
    """

    def __init__(
        self, config: SimConfig, cluster: Cluster | None = None, scenario_id: str = ""
    ) -> None:
        self.cfg = config
        self.scenario_id = scenario_id
        self.cluster = cluster if cluster is not None else build_cluster(config)
        c = self.cluster
        self.num_agents = config.num_nodes
        self.k1 = c.neighbors.shape[1]
        self.capacity = c.capacity
        self._cap_max = c.capacity.max(axis=0)
        self._speed_max = float(c.speed.max())
        self._tapfinger = config.progress_model == "tapfinger"
        self._init_models()
        self._trace_wl = (
            TraceWorkload.from_config(config, self.model_names) if config.trace_path else None
        )
        self.trace_window_start = float("nan")
        self._init_alloc_table()
        self.num_levels = len(self._alloc_scale)
        self._grid = config.alloc_mode == "grid"
        self._grid_r = [self._alloc_add[:, r] for r in range(3)]  # grid mode: absolute levels
        # grid mode checks memory (the job's minimum at every level) only if a model needs any
        self._grid_mem = bool((self._min_demand_m[:, 2] > 0).any())
        m_ok = self._model_alloc_tables()[1]
        self._grid_ok_common = m_ok[0] if self._grid and (m_ok == m_ok[0]).all() else None
        self._scales_eps = self._alloc_scale[:, 0] - 1e-9  # scale mode: level multipliers
        self.pending_slots = config.pending_slots
        self.num_actions = 1 + self.pending_slots * self.k1 * self.num_levels
        self.num_priorities = len(config.priority_probs)
        self._sync_names = tuple(name for name, _ in config.sync_mix)
        self._sync = [get_sync_scheme(n) for n in self._sync_names]
        self._sync = [s.bind(config) if s.bind is not None else s for s in self._sync]
        self._balance = np.array([s.balance_load for s in self._sync])
        self._acc_stop = np.array([s.accuracy_stop for s in self._sync])
        self._any_balance = bool(self._balance.any())
        self._single_compute_rule = len({s.compute_time for s in self._sync}) == 1
        self._shared = config.visibility == "shared"
        self._sync_cache: dict[tuple[int, ...], float] = {}
        self._straggler = straggler_model()
        self.job_features = 8 + self.num_priorities + self.num_models
        self.obs_dim = (
            NODE_FEATURES
            + 3
            + self.pending_slots * self.job_features
            + self.k1 * (NODE_FEATURES + 3)
        )
        self.state_dim = (
            self.num_agents * (NODE_FEATURES + self.pending_slots * self.job_features) + 2
        )
        # neighbour link features are static: validity, bandwidth, latency to each target
        nb = np.where(c.neighbors >= 0, c.neighbors, 0)
        rows = np.arange(self.num_agents)[:, None]
        valid = (c.neighbors >= 0).astype(np.float32)
        self._nbr_safe = nb
        self._nbr_link = np.stack(
            [
                valid,
                valid * np.log10(c.pair_bw[rows, nb] + 1.0) / 2.0,
                valid * np.minimum(c.pair_lat[rows, nb], 1e3) / 100.0,
            ],
            axis=-1,
        ).astype(np.float32)
        self._nbr_valid = c.neighbors >= 0
        # observation template: zeros, and the static link features of every neighbour
        self._obs_template = np.zeros((self.num_agents, self.obs_dim), np.float32)
        tail = self._obs_template[:, self.obs_dim - self.k1 * (NODE_FEATURES + 3) :]
        tail.reshape(self.num_agents, self.k1, NODE_FEATURES + 3)[..., NODE_FEATURES:] = (
            self._nbr_link
        )
        self._all_nbr_valid = bool(self._nbr_valid.all())
        self._cap2 = np.ascontiguousarray(c.capacity[:, :2])
        self._cap2_total = np.maximum(c.capacity[:, :2].sum(0), 1e-12)  # cluster CPUs, GPUs
        self._inv_cap = np.divide(
            1.0, c.capacity, out=np.zeros_like(c.capacity), where=c.capacity > 0
        )
        self._node_static = np.zeros((self.num_agents, NODE_FEATURES), np.float32)
        self._node_static[:, 3:6] = c.capacity / self._cap_max
        self._node_static[:, 6] = c.speed / self._speed_max
        self.rng = np.random.default_rng()
        self._slot_range = np.arange(self.pending_slots)[None, :]
        phase = 2 * np.pi * np.arange(config.diurnal_period_slots) / config.diurnal_period_slots
        self._time_feat = np.stack([np.sin(phase), np.cos(phase)], axis=1).astype(np.float32)
        self._agent_idx = np.arange(self.num_agents)
        # (3, A): slot, neighbour and level of each action; column 0 (defer) is never read
        self._dec_table = np.stack(self.decode(np.arange(self.num_actions))).astype(np.int64)
        self._small = self.num_agents <= 32
        self.invalid_mask: np.ndarray | None = None
        """Bool (N,): the agents whose action in the last step was invalid and deferred;
        ``None`` when every action was valid (``invalid_action='defer'`` only)."""
        # memoized mask rows (_cached_mask): valid when a row depends only on the targets'
        # free CPU/GPU and the number of filled slots; bounded to about 16 MB
        cacheable = self._grid_ok_common is not None and not self._grid_mem
        self._mask_rows: dict[tuple[float, ...], np.ndarray] | None = (
            {} if cacheable and self._all_nbr_valid else None
        )
        self._mask_rows_max = max(256, (16 << 20) // self.num_actions)
        # when every agent can only target itself, two placements never share a node
        self._targets_distinct = bool(
            self.k1 == 1 and (c.neighbors[:, 0] == np.arange(self.num_agents)).all()
        )

    # ------------------------------------------------------------------ catalog / tables
    def _init_models(self) -> None:
        cfg = self.cfg
        names = tuple(n for n, _ in cfg.models)
        if self._tapfinger:
            bad = [n for n in names if n not in TAPFINGER_MODELS]
            if bad:
                raise ConfigError(
                    f"models={names!r}: progress_model='tapfinger' allows only "
                    f"{list(TAPFINGER_MODELS)}"
                )
            self.model_names = names
            self._min_demand_m = np.tile(np.array(TAPFINGER_MIN_DEMAND), (len(names), 1))
            self._is_lm = np.array([n == "LM" for n in names])
        else:
            cat = model_catalog()
            bad = [n for n in names if n not in cat.names]
            if bad:
                raise ConfigError(
                    f"models names unknown model(s) {bad}; catalog: {list(cat.names)}"
                )
            self.model_names = names
            idx = np.array([cat.index(n) for n in names])
            self._cat_idx = idx
            self._base = cat.base_tput[idx]
            self._bsz = cat.local_bsz[idx]
            self._alpha = cat.gpu_alpha[idx]
            self._kappa = cat.cpu_per_gpu[idx]
            self._gamma = cat.cpu_gamma[idx]
            self._mb = cat.model_mb[idx]
            self._convk = cat.conv_k[idx]
            self._q90f = cat.q90_factor[idx]
            self._min_demand_m = cat.min_demand[idx]
        self.num_models = len(names)
        self._model_p = _probs(cfg.models)
        too_big = (self._min_demand_m[:, None, :] > self.capacity[None, :, :]).any(-1).all(1)
        if too_big.any():
            raise ConfigError(
                f"models {[names[i] for i in np.flatnonzero(too_big)]} need more than any "
                "node's capacity; remove them or add larger tiers"
            )

    def _init_alloc_table(self) -> None:
        cfg = self.cfg
        if cfg.alloc_mode == "scale":
            s = np.array(cfg.alloc_scales, dtype=np.float64)
            self._alloc_scale = np.stack([s, s, np.ones_like(s)], axis=1)
            self._alloc_add = np.zeros_like(self._alloc_scale)
        else:
            cmax, gmax = cfg.alloc_grid_max
            cc, gg = np.meshgrid(np.arange(cmax + 1), np.arange(gmax + 1), indexing="ij")
            grid = np.stack([cc.ravel(), gg.ravel()], axis=1).astype(np.float64)
            grid = grid[(grid > 0).any(axis=1)]  # (0, 0) is "skip", i.e. the defer action
            self._alloc_add = np.concatenate([grid, np.zeros((len(grid), 1))], axis=1)
            self._alloc_scale = np.tile([0.0, 0.0, 1.0], (len(grid), 1))

    def _model_alloc_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Per-model allocation tables, computed once.

        Returns:
            (M, L, 3) allocations; (M, L) whether each meets the model's minimum demand;
            (M, L) samples/s of one worker at speed 1 (None under
            ``progress_model='tapfinger'``).
        """
        cached = getattr(self, "_m_alloc_cache", None)
        if cached is not None:
            return cached
        dmin = self._min_demand_m
        alloc = dmin[:, None, :] * self._alloc_scale[None] + self._alloc_add[None]
        ok = (alloc >= dmin[:, None, :] - 1e-9).all(-1)
        tput = None
        if not self._tapfinger:
            m = np.arange(self.num_models)[:, None]
            c, g = alloc[..., 0], alloc[..., 1]
            # grid levels without a GPU: c / 0 = inf, so cpu_ok = 1 and the throughput is 0
            # (those levels are below every model's minimum demand and masked anyway)
            with np.errstate(divide="ignore", invalid="ignore"):
                cpu_ok = np.minimum(1.0, c / (self._kappa[m] * g))
                tput = self._base[m] * g ** self._alpha[m] * cpu_ok ** self._gamma[m]
        self._m_alloc_cache = (alloc, ok, tput)
        return self._m_alloc_cache

    # ------------------------------------------------------------------ workload
    def _arrival_modulation(self, rng: np.random.Generator) -> np.ndarray:
        cfg = self.cfg
        t = np.arange(cfg.arrival_slots)
        diurnal = 1.0 + cfg.diurnal_amplitude * np.sin(2 * np.pi * t / cfg.diurnal_period_slots)
        # cluster-wide bursts: a two-state Markov chain (start prob, geometric duration)
        starts = rng.random(cfg.arrival_slots) < cfg.burst_prob
        lengths = rng.geometric(1.0 / cfg.burst_mean_slots, size=cfg.arrival_slots)
        burst = np.zeros(cfg.arrival_slots + 1)
        s_idx = np.flatnonzero(starts)
        np.add.at(burst, s_idx, 1.0)
        np.add.at(burst, np.minimum(s_idx + lengths[s_idx], cfg.arrival_slots), -1.0)
        in_burst = np.cumsum(burst)[:-1] > 0
        return diurnal * np.where(in_burst, cfg.burst_multiplier, 1.0)

    def _draw_workload(self, rng: np.random.Generator) -> None:
        cfg = self.cfg
        n = self.num_agents
        tw = self._trace_wl
        tj = None  # indices of this episode's jobs in the prepared trace
        if tw is not None:
            slot, tj, self.trace_window_start = tw.window(
                rng, cfg.arrival_slots, cfg.trace_window_start_hours
            )
            home = rng.integers(n, size=len(slot))
        elif cfg.arrival_scope == "node":
            rate = cfg.arrival_rate * self._arrival_modulation(rng)
            counts = rng.poisson(rate[:, None] * np.ones((1, n)))
            slot = np.repeat(np.repeat(np.arange(cfg.arrival_slots), n), counts.ravel())
            home = np.repeat(np.tile(np.arange(n), cfg.arrival_slots), counts.ravel())
        else:
            rate = cfg.arrival_rate * self._arrival_modulation(rng)
            counts = rng.poisson(rate)
            slot = np.repeat(np.arange(cfg.arrival_slots), counts)
            home = rng.integers(n, size=len(slot))
        if cfg.max_jobs:
            slot, home = slot[: cfg.max_jobs], home[: cfg.max_jobs]
            tj = tj[: cfg.max_jobs] if tj is not None else None
        jn = len(slot)
        self.num_jobs = jn
        self.j_arrival = slot.astype(np.int64)
        self.j_home = home.astype(np.int64)
        self.j_model = rng.choice(self.num_models, size=jn, p=self._model_p)
        if tj is not None:
            named = tw.model[tj]
            self.j_model = np.where(named >= 0, named, self.j_model)
        wvals = np.array([w for w, _ in cfg.workers_dist], dtype=np.int64)
        if self._tapfinger:
            self.j_workers = np.ones(jn, dtype=np.int64)
        elif tj is not None:
            self.j_workers = tw.workers[tj]
        else:
            self.j_workers = wvals[rng.choice(len(wvals), size=jn, p=_probs(cfg.workers_dist))]
        self.max_workers = int(self.j_workers.max(initial=1))
        pp = np.array(cfg.priority_probs) / np.sum(cfg.priority_probs)
        self.j_prio = rng.choice(len(pp), size=jn, p=pp)
        self.j_sync = rng.choice(len(self._sync_names), size=jn, p=_probs(cfg.sync_mix))
        self.j_min = self._min_demand_m[self.j_model]
        self.j_target = rng.uniform(*cfg.target_quality, size=jn)
        if tj is not None:
            size_factor = tw.size_factor[tj]
        else:
            size_factor = np.exp(cfg.job_size_sigma * rng.standard_normal(jn))
        if self._tapfinger:
            self._j_is_lm = self._is_lm[self.j_model]
            self.j_tau = np.ones(jn)
            self.j_max_samples = np.full(jn, np.inf)
            self.j_x90 = np.ones(jn)
        else:
            m = self.j_model
            # one reference worker: one T4 GPU, minimum CPUs of the model
            ref_cpu = np.minimum(1.0, self._min_demand_m[m, 0] / self._kappa[m]) ** self._gamma[m]
            ref_tput = self._base[m] * ref_cpu
            x90 = cfg.job_size_median_slots * size_factor * cfg.slot_seconds * ref_tput
            self.j_x90 = x90
            self.j_tau = x90 / self._q90f[m]
            # an epoch is a tenth of the samples to 90% quality (DESIGN leaves the dataset
            # size free; this keeps the epoch limit meaningful for every model)
            self.j_max_samples = cfg.max_epochs * x90 / 10.0
        self.j_eff = np.array([s.efficiency for s in self._sync])[self.j_sync]
        # allocation options per job and level: (J, L, 3). A job's minimum demand is its
        # model's, so the tables are per model and gathered: computing them per job costs
        # ~5 ms per reset on the 288-level TapFinger grid (broadcasts over a length-3 axis).
        m_alloc, m_ok, m_tput = self._model_alloc_tables()
        self.j_alloc = m_alloc[self.j_model]
        self.j_alloc_ok = m_ok[self.j_model]
        if not self._tapfinger:
            # (J, L) one worker's samples/s at speed 1 for each allocation level
            self._j_tput_at_speed1 = m_tput[self.j_model]
            with np.errstate(divide="ignore"):  # zero-GPU grid levels: infinite time
                self._j_iter_at_speed1 = self._bsz[self.j_model][:, None] / self._j_tput_at_speed1
        # Hot-path copies with one sentinel row at index -1 (= empty pending slot): an
        # allocation that never fits, so gathers need no validity masking.
        self._j_min_ext = np.concatenate([self.j_min, np.full((1, 3), np.inf)])
        # zero need (e.g. a CPU-only model's GPU) must never limit; a large finite inverse
        # avoids 0 * inf = nan. The sentinel's +inf need gives inverse 0: nothing fits.
        self._inv_need_ext = 1.0 / np.maximum(self._j_min_ext, 1e-12)
        self._j_alloc_ok_ext = np.concatenate(
            [self.j_alloc_ok, np.zeros((1, self.j_alloc.shape[1]), bool)]
        )
        # visibility: (agent, job) pairs
        if cfg.visibility == "home":
            self._vis_agent, self._vis_job = home.astype(np.int64), np.arange(jn)
        else:
            k = rng.integers(1, n + 1, size=jn)
            perm = np.argsort(rng.random((jn, n)), axis=1)
            take = np.arange(n)[None, :] < k[:, None]
            self._vis_agent = perm[take]
            self._vis_job = np.repeat(np.arange(jn), k)
            # the job's home (its reward owner while queued) is the first agent that sees it
            self.j_home = perm[:, 0].astype(np.int64)
        # pairs sorted by arrival slot so each slot's arrivals are a contiguous range
        order = np.argsort(self.j_arrival[self._vis_job], kind="stable")
        self._vis_agent, self._vis_job = self._vis_agent[order], self._vis_job[order]
        self._vis_slot_ptr = np.searchsorted(
            self.j_arrival[self._vis_job],
            np.arange(max(cfg.arrival_slots, cfg.max_slots) + 2),
            side="left",
        )
        # queue key: priority class first, then arrival order (job ids are in arrival order)
        self.j_key = self.j_prio.astype(np.int64) * (jn + 1) + np.arange(jn)
        self._key_span = self.num_priorities * (jn + 1)
        # each visibility pair's queue key, so enqueueing only slices
        self._vis_ck = self._vis_agent * self._key_span + self.j_key[self._vis_job]
        # static per-job quantities, so the hot path only gathers
        if not self._tapfinger:
            m = self.j_model
            self.j_k = self._convk[m]
            self.j_samples_per_iter = self.j_workers * self._bsz[m] * self.j_eff
        prio = np.eye(self.num_priorities, dtype=np.float32)[self.j_prio]
        model = np.eye(self.num_models, dtype=np.float32)[self.j_model]
        self.j_static = np.concatenate(
            [
                np.ones((jn, 1), np.float32),
                (self.j_min / self._cap_max).astype(np.float32),
                (self.j_workers / 4.0)[:, None].astype(np.float32),
                (np.log1p(self.j_x90) / 20.0)[:, None].astype(np.float32),
                prio,
                model,
            ],
            axis=1,
        )
        # two dynamic columns (placed workers, waiting time) filled per step, and a sentinel
        # row at index -1 for empty pending slots (features all zero)
        self.j_static = np.concatenate([self.j_static, np.zeros((jn, 2), np.float32)], axis=1)
        self.j_static = np.concatenate(
            [self.j_static, np.zeros((1, self.job_features), np.float32)]
        )
        self._j_arrival_ext = np.concatenate([self.j_arrival, [np.inf]])

    # ------------------------------------------------------------------ reset
    def reset(self, seed: int | None = None) -> None:
        """Start an episode; ``seed`` fixes the workload and all later randomness."""
        self.rng = np.random.default_rng(seed)
        self._draw_workload(self.rng)
        jn, n = self.num_jobs, self.num_agents
        self.t = 0
        self.invalid_mask = None
        self.used = np.zeros((n, 3))
        self.status = np.zeros(jn, dtype=np.int8)
        self._n_done = 0  # jobs with status DONE (the end check reads it every step)
        self.placed = np.zeros(jn + 1, dtype=np.int64)  # last entry: empty-slot sentinel
        self.owner = self.j_home.copy()
        self.w_node = np.full((jn, self.max_workers), -1, dtype=np.int64)
        self.w_alloc = np.zeros((jn, self.max_workers, 3))
        self.w_level = np.zeros((jn, self.max_workers), dtype=np.int64)
        self.progress = np.zeros(jn)
        self.quality = np.zeros(jn)
        self.sync_time = np.zeros(jn)
        self.start_slot = np.full(jn, -1, dtype=np.int64)
        self.finish_slot = np.full(jn, -1, dtype=np.int64)
        self.running = np.zeros(0, dtype=np.int64)
        # per-worker seconds per iteration without contention/stragglers (set at placement)
        self.w_iter0 = np.zeros((jn, self.max_workers))
        self.node_workers = np.zeros(n)
        # Queues: all (agent, job) entries in one array sorted by agent, then priority, then
        # arrival; heads are found by binary search. Cheaper than per-agent buffers in numpy.
        self.q_ck = np.zeros(0, dtype=np.int64)
        self.q_job = np.zeros(0, dtype=np.int64)
        self._agent_bounds = np.arange(n + 1, dtype=np.int64) * self._key_span
        self.qlen = np.zeros(n, dtype=np.int64)
        self._queue_dirty = True
        self.counters = Counters(util_sum=np.zeros(n))
        self._strag_buf = np.zeros(0)
        self._strag_pos = 0
        self.return_sum = np.zeros(n)
        self.terminated = False
        self.truncated = False
        self._enqueue_arrivals(0)
        self._node_feat_hist: list[np.ndarray] = []
        # obs_delay history: a new snapshot per slot, the latest one updated within a slot
        self._advanced_since_snapshot = False
        self._refresh()

    # ------------------------------------------------------------------ queues
    def _enqueue_arrivals(self, slot: int) -> None:
        lo, hi = self._vis_slot_ptr[slot], self._vis_slot_ptr[slot + 1]
        if hi > lo:
            self._enqueue(self._vis_job[lo:hi], self._vis_ck[lo:hi])

    def _enqueue(self, jobs: np.ndarray, keys: np.ndarray) -> None:
        """Queue the (agent, job) pairs of arriving ``jobs`` under their queue ``keys``."""
        self.status[jobs] = QUEUED
        ck = np.concatenate([self.q_ck, keys])
        order = np.argsort(ck, kind="stable")
        self.q_ck = ck[order]
        self.q_job = np.concatenate([self.q_job, jobs])[order]
        self._queue_dirty = True

    def _drop_from_queues(self) -> None:
        """Remove fully placed jobs from every queue that holds them."""
        keep = self.status[self.q_job] == QUEUED
        self.q_ck, self.q_job = self.q_ck[keep], self.q_job[keep]
        self._queue_dirty = True

    def queued_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """All queue entries as (agent, job) arrays, each agent's in priority order."""
        return self.q_ck // self._key_span, self.q_job

    # ------------------------------------------------------------------ observations
    def _node_features(self, free: np.ndarray | None = None) -> np.ndarray:
        nf = self._node_static.copy()
        if free is None:
            free = self.capacity - self.used
        np.multiply(free, self._inv_cap, out=nf[:, :3])
        nf[:, 7] = self.node_workers / 8.0
        nf[:, 8] = np.minimum(self.qlen, 1e4) / 10.0
        return nf

    def _job_features(self, jobs: np.ndarray) -> np.ndarray:
        """Features of queued jobs (any shape of ids, -1 = empty slot) -> (..., F).

        Layout: present, minimum demand / max capacity (3), workers / 4, log size / 20,
        priority one-hot, model one-hot, placed workers / 4, waiting slots / 100.
        """
        # a fresh array; -1 hits the all-zero sentinel row. The placed-workers column is
        # kept current in j_static by place(), so only the waiting time is computed here.
        f = self.j_static[jobs]
        # the sentinel's arrival is +inf, so its waiting time clips to 0
        wait = np.maximum(self._slot_of(jobs) - self._j_arrival_ext[jobs], 0.0)
        f[..., self.job_features - 1] = np.minimum(wait, 1000.0) * 0.01
        return f

    def _slot_of(self, jobs: np.ndarray) -> int | np.ndarray:
        """Current slot of each job's simulator copy (one copy here: the clock)."""
        return self.t

    def _time_features(self) -> np.ndarray:
        return self._time_feat[self.t % len(self._time_feat)]

    def _update_qlen(self) -> None:
        if not self._queue_dirty:
            return
        bounds = self.q_ck.searchsorted(self._agent_bounds)
        self._q_start = bounds[:-1]
        self.qlen = bounds[1:] - bounds[:-1]
        self._queue_dirty = False

    def _refresh(self) -> None:
        """Recompute node features, pending tasks, observations and masks after a change."""
        self._update_qlen()
        free = self.capacity - self.used  # may be negative under overload
        nf = self._node_features(free)
        self._node_feat = nf
        if self.cfg.obs_delay:
            hist = self._node_feat_hist
            if not hist or self._advanced_since_snapshot:
                hist.append(nf)
                if len(hist) > self.cfg.obs_delay + 1:
                    hist.pop(0)
            else:
                hist[-1] = nf
            self._advanced_since_snapshot = False
            stale = hist[0]  # obs_delay slots old (or as old as the episode allows)
        else:
            stale = nf
        has = self._slot_range < self.qlen[:, None]
        if len(self.q_job):
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
        obs[:, o + 2] = nf[:, 8]
        o += 3
        obs[:, o : o + jf[0].size] = jf.reshape(n, -1)
        nbr = obs[:, o + jf[0].size :].reshape(n, self.k1, NODE_FEATURES + 3)
        nbr[..., :NODE_FEATURES] = stale[self._nbr_safe]
        if not self._all_nbr_valid:
            nbr *= self._nbr_valid[..., None]
        self.obs = obs
        self._head_feat = jf
        self.mask = self._compute_mask(free)

    def _compute_mask(self, free: np.ndarray) -> np.ndarray:
        """Feasible-action mask from the free capacity and the pending slots' jobs."""
        # Written per resource on purpose: numpy reductions over a length-3 last axis cost
        # more than the comparisons themselves at these sizes.
        # Must equal: slot holds a job, target exists, min demand <= alloc <= free (DESIGN).
        j = self.head  # -1 (empty slot) hits the never-fitting sentinel allocation
        free = free + 1e-9
        ft = free[self._nbr_safe]  # (N, K1, 3)
        n = self.num_agents
        if self._mask_rows is not None:
            return self._cached_mask(ft)
        mask = np.empty((n, self.num_actions), dtype=bool)
        mask[:, 0] = True
        # a view (split of the contiguous last axis): the result is written in place
        out = mask[:, 1:].reshape(n, self.pending_slots, self.k1, self.num_levels)
        if self._grid:
            # grid levels are absolute (cpu, gpu) amounts, the same for every job: fit per
            # (agent, target, level), then the job's minimum demand (False for the sentinel)
            fit = np.less_equal(self._grid_r[0], ft[..., 0:1])
            fit &= np.less_equal(self._grid_r[1], ft[..., 1:2])  # (N, K1, L)
            if self._grid_ok_common is not None:
                # every model admits the same levels: no (N, P, L) gather of per-job rows
                fit &= self._grid_ok_common
                np.logical_and(fit[:, None], (j >= 0)[:, :, None, None], out=out)
            else:
                np.logical_and(fit[:, None], self._j_alloc_ok_ext[j][:, :, None, :], out=out)
            if self._grid_mem:
                # memory is the job's minimum at every grid level
                mem = self._j_min_ext[j][:, :, 2:3] <= ft[:, None, :, 2]  # (N, P, K1)
                out &= mem[..., None]
        else:
            # scale levels are multiples s of the minimum (cpu, gpu) with memory at the
            # minimum: level fits iff s <= min(free_cpu / need_cpu, free_gpu / need_gpu)
            # and the memory fits. One 4-D comparison instead of three.
            need = self._j_min_ext[j]  # (N, P, 3); the empty-slot sentinel needs +inf
            fc, fg, fm = ft[:, None, :, 0], ft[:, None, :, 1], ft[:, None, :, 2]  # (N, 1, K1)
            inv = self._inv_need_ext[j]  # (N, P, 3)
            ratio = np.minimum(fc * inv[:, :, 0:1], fg * inv[:, :, 1:2])  # (N, P, K1)
            ratio[need[:, :, 2:3] > fm] = -1.0
            np.less_equal(self._scales_eps, ratio[..., None], out=out)
        if not self._all_nbr_valid:
            out &= self._nbr_valid[:, None, :, None]
        return mask

    def _cached_mask(self, ft: np.ndarray) -> np.ndarray:
        """Grid-mode mask from memoized agent rows (see ``_mask_rows`` in ``__init__``).

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

    @property
    def level_scale(self) -> np.ndarray:
        """(L, 3) multiplier of the minimum demand per allocation level."""
        return self._alloc_scale

    @property
    def level_add(self) -> np.ndarray:
        """(L, 3) absolute amount added per allocation level (grid mode)."""
        return self._alloc_add

    def decode(self, actions: np.ndarray) -> tuple[np.ndarray, ...]:
        """Split placement actions into (pending slot, neighbour index, level)."""
        idx = np.asarray(actions) - 1
        per_slot = self.k1 * self.num_levels
        return idx // per_slot, (idx % per_slot) // self.num_levels, idx % self.num_levels

    def encode(self, slot: np.ndarray, k: np.ndarray, level: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`decode`."""
        return 1 + (slot * self.k1 + k) * self.num_levels + level

    def state(self) -> np.ndarray:
        """Global state for centralized critics (flat float32).

        All nodes' current features, every agent's pending-task features, the time of day.
        """
        return np.concatenate(
            [self._node_feat.ravel(), self._head_feat.ravel(), self._time_features()]
        )

    # ------------------------------------------------------------------ step
    def step(self, actions: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        """Apply one decision round of all agents (the array fast path).

        Args:
            actions: int array of shape (N,), one action per agent.

        Returns:
            ``(rewards, info)``: rewards of shape (N,), and this step's counters
            (:data:`STEP_INFO_KEYS`: ``proposals``, ``task_conflicts``, ``collisions``,
            ``rejected``, ``placements``, ``advanced``, ``invalid_actions``, ``slot``).
            Observations, masks and the end flags are then in ``obs``, ``mask``,
            ``terminated``, ``truncated``.

        Raises:
            InvalidActionError: wrong shape or dtype; or an out-of-range or masked action
                while ``invalid_action='raise'`` (the simulator is then left unchanged).
                Under ``'defer'`` such actions defer and are counted instead.
        """
        if self.terminated or self.truncated:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        self.invalid_mask = None
        rewards, info, agents = self._place_actions(self._checked_actions(actions))
        advance = self.cfg.advance == "every_step" or len(agents) == 0
        if advance:
            rewards += self.advance_clock()
        info["advanced"] = advance
        bad = self.invalid_mask
        info["invalid_actions"] = 0 if bad is None else int(np.count_nonzero(bad))
        self.counters.steps += 1
        self._check_end()
        self._refresh()
        self.return_sum += rewards
        info["slot"] = self.t
        return rewards, info

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
                raise InvalidActionError(
                    f"action {int(a[ag])} of agent node_{ag} is {why}; allowed actions now: "
                    f"{allowed[:20]}{' ...' if len(allowed) > 20 else ''} (action space "
                    f"0..{self.num_actions - 1}; invalid_action='defer' would defer it instead)"
                )
            self._note_invalid(bad)
            self.invalid_mask = bad
            a = np.where(bad, 0, a)
        return a

    def _place_actions(self, a: np.ndarray) -> tuple[np.ndarray, dict[str, Any], np.ndarray]:
        """Place the valid actions ``a``; return rewards so far, counters, placing agents."""
        agents = a.nonzero()[0]  # actions are >= 0 here; 0 is defer
        # one table lookup instead of decode's five arithmetic passes
        slot, k, level = self._dec_table.take(a[agents], axis=1)
        jobs = self.head[agents, slot]
        targets = self.cluster.neighbors[agents, k]
        info = self.place(agents, jobs, targets, level, distinct_agents=True)
        rewards = np.zeros(self.num_agents)
        if info["collision_agent_mask"] is not None:
            rewards -= self.cfg.collision_penalty * info.pop("collision_agent_mask")
        else:
            info.pop("collision_agent_mask")
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
            Per-step counters, including ``collision_agent_mask`` (N,) or ``None``.
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
        alloc = self.j_alloc[jobs, level]
        # task conflicts (only possible under shared visibility): one winner per job
        if self._shared and _has_duplicates(jobs):
            keep = self._resolve_conflicts(agents, jobs, targets, alloc)
            info["task_conflicts"] = int(len(agents) - keep.sum())
            self.counters.task_conflicts += info["task_conflicts"]
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
        if not (distinct_agents and self._targets_distinct) and _has_duplicates(targets):
            demand = np.zeros((n, 3))
            np.add.at(demand, targets, alloc)
            count = np.bincount(targets, minlength=n)
            free = self.capacity - self.used
            colliding = (count >= 2) & (demand > free + 1e-9).any(axis=1)
        if colliding is not None and colliding.any():
            in_coll = colliding[targets]
            cmask = np.zeros(n)
            cmask[agents[in_coll]] = 1.0
            info["collision_agent_mask"] = cmask
            info["collisions"] = int(colliding.sum())
            self.counters.collisions_proposed += info["collisions"]
            self.counters.collision_agents += int(in_coll.sum())
            # what collided and what was rejected: BatchedSim attributes the counts per copy
            self._last_collision = (colliding, agents[in_coll], None)
            if self.cfg.collision_mode == "reject":
                admitted = self._admit_in_random_order(targets, alloc, colliding, free)
                info["rejected"] = int((~admitted).sum())
                self.counters.rejected += info["rejected"]
                self._last_collision = (colliding, agents[in_coll], targets[~admitted])
                agents, jobs, targets, level, alloc = (
                    agents[admitted],
                    jobs[admitted],
                    targets[admitted],
                    level[admitted],
                    alloc[admitted],
                )
            else:
                self.counters.collisions_executed += info["collisions"]
        # two agents can place workers of one job only under shared visibility, and conflicts
        # were resolved above; so each job gets at most one worker per round
        widx = self.placed[jobs]
        self.w_node[jobs, widx] = targets
        self.w_alloc[jobs, widx] = alloc
        self.w_level[jobs, widx] = level
        self.w_iter0[jobs, widx] = self._iteration_seconds(jobs, level, targets)
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
        self._note_placed(jobs)
        return info

    def _note_invalid(self, bad: np.ndarray) -> None:
        self.counters.invalid_actions += int(np.count_nonzero(bad))

    def _note_placed(self, jobs: np.ndarray) -> None:
        self.counters.placements += len(jobs)

    def _gumbel(self, jobs: np.ndarray) -> np.ndarray:
        """Gumbel noise of contested proposals (the batched simulator draws per copy)."""
        return self.rng.gumbel(size=len(jobs))

    def _rng_of_node(self, node: int) -> np.random.Generator:
        return self.rng

    def _iteration_seconds(
        self, jobs: np.ndarray, level: np.ndarray, nodes: np.ndarray
    ) -> np.ndarray:
        """Seconds per iteration of one worker alone on its node.

        No contention, no straggling: ``local_bsz / throughput`` with the measured, concave
        throughput ``base * speed * g ** alpha * min(1, c / (kappa g)) ** gamma`` (catalog
        module); the speed-free part is tabulated per (job, level) at reset. Under
        ``progress_model='tapfinger'`` it stores the GPU count instead.
        """
        if self._tapfinger:
            return self.j_alloc[jobs, level, 1]
        return self._j_iter_at_speed1[jobs, level] / self.cluster.speed[nodes]

    def _resolve_conflicts(self, agents, jobs, targets, alloc) -> np.ndarray:
        """Pick one winner per contested job; return a keep-mask over proposals.

        ``random``: uniform among the competitors. ``fit``: proportional to the softmax, over
        the competitors, of min over resources of free / minimum demand on the proposer's
        target (TapFinger's fit term, DESIGN §4.4; the policy's pointer probability is the
        learner's part and multiplies in at the algorithm level).
        """
        if self.cfg.conflict_rule == "fit":
            free = (self.capacity - self.used)[targets]
            need = np.maximum(self.j_min[jobs], 1e-9)
            score = np.where(self.j_min[jobs] > 0, free / need, np.inf).min(axis=1)
        else:
            score = np.zeros(len(jobs))
        # Gumbel-max per job draws a winner proportional to softmax(score)
        g = score + self._gumbel(jobs)
        order = np.lexsort((-g, jobs))
        first = np.ones(len(jobs), dtype=bool)
        first[1:] = jobs[order][1:] != jobs[order][:-1]
        keep = np.zeros(len(jobs), dtype=bool)
        keep[order[first]] = True
        return keep

    def _admit_in_random_order(self, targets, alloc, colliding, free) -> np.ndarray:
        admitted = np.ones(len(targets), dtype=bool)
        for node in np.flatnonzero(colliding):
            idx = np.flatnonzero(targets == node)
            room = free[node].copy()
            for i in self._rng_of_node(node).permutation(idx):
                if (alloc[i] <= room + 1e-9).all():
                    room -= alloc[i]
                else:
                    admitted[i] = False
        return admitted

    def _start(self, jobs: np.ndarray) -> None:
        self.status[jobs] = RUNNING
        self.start_slot[jobs] = self._slot_of(jobs)
        if self._any_balance and not self._tapfinger:
            bal = jobs[self._balance[self.j_sync[jobs]] & (self.j_workers[jobs] > 1)]
            for j in bal.tolist():
                # EdgeGossip: data shares proportional to speed even out iteration times
                w = int(self.j_workers[j])
                t = self.w_iter0[j, :w]
                self.w_iter0[j, :w] = w / np.sum(1.0 / t)
        self.running = np.concatenate([self.running, jobs])
        # TapFinger jobs have one worker each: no sync time
        multi = jobs[self.j_workers[jobs] > 1] if not self._tapfinger else jobs[:0]
        if len(multi):
            # Sync time depends only on (scheme, model, worker nodes) on a static topology,
            # and placements repeat, so a memo saves the vectorized call for one job.
            cache = self._sync_cache
            for j, sid, m, row in zip(
                multi.tolist(),
                self.j_sync[multi].tolist(),
                self.j_model[multi].tolist(),
                self.w_node[multi].tolist(),
                strict=True,
            ):
                key = (sid, m, *row)
                t = cache.get(key)
                if t is None:
                    nodes = np.array([row])
                    t = cache[key] = float(
                        self._sync[sid].sync_time(
                            nodes,
                            nodes >= 0,
                            self._mb[m : m + 1],
                            self.cluster.pair_bw,
                            self.cluster.pair_lat,
                        )[0]
                    )
                self.sync_time[j] = t
        self._drop_from_queues()

    def occupied_share(self) -> float:
        """Allocated share of the cluster's CPUs and GPUs (mean of the two; overload capped).

        RLPTO's "resources occupied": ``sum_n min(used, capacity) / sum_n capacity``.
        """
        held = np.add.reduce(np.minimum(self.used[:, :2], self._cap2), axis=0) / self._cap2_total
        return float(held[0] + held[1]) / 2.0  # == .mean() of the two, without its overhead

    # ------------------------------------------------------------------ resizing
    def resize(self, jobs: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """Move every worker of running jobs one allocation level down or up, in place.

        The elastic-resource operation of RLPTO (DESIGN §4.1): a converging job's workers
        shrink to the next lower level of ``alloc_scales`` and free resources for others; a
        job may grow to the next higher level if every one of its nodes has the free
        capacity. A worker already at the lowest (highest) level does not move. Iteration
        times are recomputed from the new allocation; the job's progress is kept.
        ``alloc_mode='grid'`` has no ordered levels: nothing is resized there.

        Args:
            jobs: running job ids (each at most once).
            delta: -1 (shrink), 0 or +1 (grow) per job.

        Returns:
            (len(jobs),) bool, whether the job's allocation changed.

        Raises:
            ValueError: a job is not running, appears twice, or a delta is not -1, 0, 1.
        """
        jobs = np.asarray(jobs, dtype=np.int64)
        delta = np.asarray(delta, dtype=np.int64)
        changed = np.zeros(len(jobs), dtype=bool)
        if len(jobs) == 0 or self._grid:
            return changed
        if jobs.shape != delta.shape or not np.isin(delta, (-1, 0, 1)).all():
            raise ValueError(f"delta={delta.tolist()}: need one of -1, 0, 1 per job")
        if (self.status[jobs] != RUNNING).any() or _has_duplicates(jobs):
            raise ValueError(f"jobs={jobs.tolist()}: need distinct running jobs")
        top = self.num_levels - 1
        for i, (j, d) in enumerate(zip(jobs.tolist(), delta.tolist(), strict=True)):
            if d == 0:
                continue
            w = int(self.j_workers[j])
            nodes = self.w_node[j, :w]
            new = np.clip(self.w_level[j, :w] + d, 0, top)
            if (new == self.w_level[j, :w]).all():
                continue
            alloc = self.j_alloc[j, new]
            diff = alloc - self.w_alloc[j, :w]
            if d > 0:
                need = np.zeros((self.num_agents, 3))
                np.add.at(need, nodes, diff)
                if (need > self.capacity - self.used + 1e-9).any():
                    continue  # some node cannot host the larger allocation
            np.add.at(self.used, nodes, diff)
            self.w_alloc[j, :w] = alloc
            self.w_level[j, :w] = new
            t = self._iteration_seconds(np.full(w, j), new, nodes)
            if self._balance[self.j_sync[j]] and w > 1:
                t = np.full(w, w / np.sum(1.0 / t))  # EdgeGossip keeps shares balanced
            self.w_iter0[j, :w] = t
            changed[i] = True
            if d > 0:
                self.counters.resized_up += 1
            else:
                self.counters.resized_down += 1
        if changed.any():
            self._refresh()
        return changed

    # ------------------------------------------------------------------ clock
    def contention(self, ratio: np.ndarray | None = None) -> np.ndarray:
        """Per-node slowdown: oversubscription ** contention_exponent (1 when within capacity).

        Oversubscription is the largest ratio of used to capacity over the resources; a node
        at 150% of its GPUs time-shares them, so each task runs 1.5x slower (exponent 1).

        Args:
            ratio: ``used / capacity`` per node and resource, if the caller has it already.
        """
        if ratio is None:
            ratio = self.used * self._inv_cap
        ratio = np.maximum(np.maximum.reduce(ratio, axis=1), 1.0)
        if self.cfg.contention_exponent != 1.0:
            ratio **= self.cfg.contention_exponent
        return ratio

    def _in_system(self) -> np.ndarray:
        """Jobs in the system per agent (Little's law: their sum over slots is the total JCT).

        A queued job counts once, for its home agent, even when several agents see it (shared
        visibility); a running job counts for the agent that placed it.
        """
        self._update_qlen()
        n = self.num_agents
        if not self._shared:
            queued = self.qlen
        else:
            queued = np.bincount(self.j_home[self.status == QUEUED], minlength=n)
        return queued + np.bincount(self.owner[self.running], minlength=n)

    def advance_clock(self) -> np.ndarray:
        """Run one slot: progress, completions, arrivals. Returns the slot's rewards (N,)."""
        cfg = self.cfg
        n = self.num_agents
        running = self.running
        in_sys = self._in_system()
        if cfg.reward_mode == "team":
            rewards = -np.full(n, in_sys.sum() / n)
        else:
            rewards = -in_sys.astype(np.float64)
        ratio = self.used * self._inv_cap  # shared by the contention and utilization terms
        cont = self.contention(ratio)
        n_over = int(np.count_nonzero(cont > 1.0))
        self.counters.overload_node_slots += n_over
        # ufunc reductions called directly: .sum()/.max() add a Python wrapper per call
        util = np.minimum(ratio[:, :2], 1.0)
        self.counters.util_sum += np.add.reduce(util, axis=1) * 0.5  # mean of CPU and GPU
        self.counters.occupied_share_sum += self.occupied_share()
        if len(running):
            gain = self._progress(running, cont if n_over else None)
            if cfg.accuracy_gain_weight:
                acc = np.zeros(n)
                np.add.at(acc, self.owner[running], gain)
                rewards += cfg.accuracy_gain_weight * (
                    np.full(n, acc.sum() / n) if cfg.reward_mode == "team" else acc
                )
        if cfg.resource_cost_weight:
            share = np.zeros(n)
            if len(running):
                res = (self.w_alloc[running, :, :2] / self._cap_max[:2]).sum(axis=(1, 2))
                np.add.at(share, self.owner[running], res)
            total = share.sum() / n
            rewards -= cfg.resource_cost_weight * (
                np.full(n, total) if cfg.reward_mode == "team" else share
            )
        self.t += 1
        self._advanced_since_snapshot = True
        if cfg.priority_aging_slots and len(self.q_job):
            self._age_queues(cfg.priority_aging_slots)
        if self.t < cfg.arrival_slots:
            self._enqueue_arrivals(self.t)
        return rewards

    def _age_queues(self, every: int) -> None:
        """Re-rank queued jobs by their aged class ``max(class - wait // every, 0)``."""
        jobs = self.q_job
        wait = self._slot_of(jobs) - self.j_arrival[jobs]
        eff = np.maximum(self.j_prio[jobs] - wait // every, 0)
        agent = self.q_ck // self._key_span
        ck = agent * self._key_span + eff * (self.num_jobs + 1) + jobs
        order = np.argsort(ck, kind="stable")
        self.q_ck, self.q_job = ck[order], jobs[order]
        self._queue_dirty = True

    def _progress(self, running: np.ndarray, cont: np.ndarray | None) -> np.ndarray | None:
        """Advance running jobs by one slot; complete and release finished ones.

        Args:
            running: ids of the running jobs.
            cont: per-node contention factors, or ``None`` when no node is overloaded.

        Returns:
            The gain in normalized quality of each running job when the accuracy-gain reward
            is on, else ``None`` (saves work on the hot path).
        """
        nodes = self.w_node[running]
        overloaded = cont is not None
        if overloaded:
            nsafe = np.maximum(nodes, 0)  # padding workers have 0 compute time anyway
        q0 = self.quality[running] if self.cfg.accuracy_gain_weight else None
        if self._tapfinger:
            # DESIGN §4.4: IMG 0.25 per slot; LM tanh(g/16) * sqrt(1.2 - p); p in [0, 1]
            g = self.w_iter0[running, 0]
            p = self.progress[running]
            step = _tapfinger_step(self._j_is_lm[running], g, p)
            if overloaded:
                step = step / cont[nsafe[:, 0]]
            p = p + step
            self.progress[running] = p
            q = np.minimum(p, 1.0)
            done = p >= 1.0 - 1e-12
        else:
            compute = self.w_iter0[running] * self.draw_stragglers(nodes.shape)
            if overloaded:
                compute *= cont[nsafe]
            if self._single_compute_rule:
                it = self._sync[0].compute_time(compute, nodes >= 0)
            else:
                valid = nodes >= 0
                sync_idx = self.j_sync[running]
                it = np.empty(len(running))
                for s in np.unique(sync_idx):
                    sel = sync_idx == s
                    it[sel] = self._sync[s].compute_time(compute[sel], valid[sel])
            it += self.sync_time[running]
            x = self.progress[running] + (
                self.cfg.slot_seconds / it * self.j_samples_per_iter[running]
            )
            self.progress[running] = x
            u = (x / self.j_tau[running]) ** self.j_k[running]
            q = -np.expm1(-u)
            done = (q >= self.j_target[running]) | (x >= self.j_max_samples[running])
            if self._acc_stop.any():
                # EdgeGossip's accuracy-aware stop. On q = 1 - exp(-u), u = (x / tau)^k, the
                # gain per sample is k u (1 - q) / x; per epoch it is that times the epoch's
                # samples. Early on (before the inflection, u < (k-1)/k) gains still grow.
                k = self.j_k[running]
                stop = self._acc_stop[self.j_sync[running]] & (u > (k - 1.0) / k)
                gain = k * u * (1.0 - q) / np.maximum(x, 1e-12) * (0.1 * self.j_x90[running])
                done |= stop & (gain < self.cfg.edgegossip_min_gain)
        self.quality[running] = q
        if np.count_nonzero(done):
            fin = running[done]
            self.status[fin] = DONE
            self._n_done += len(fin)
            self.finish_slot[fin] = self._slot_of(fin) + 1
            fnodes = nodes[done]
            fv = fnodes >= 0
            fnodes = fnodes[fv]
            np.subtract.at(self.used, fnodes, self.w_alloc[fin][fv])
            np.subtract.at(self.node_workers, fnodes, 1.0)
            self.running = running[~done]
        return None if q0 is None else q - q0

    def draw_stragglers(self, shape: tuple[int, ...]) -> np.ndarray:
        """Per-worker slowdown factors (>= 1) for one slot.

        One draw per worker and slot stands for the slot's persistent slowdown of that worker.
        Draws come from a buffer refilled in large batches from the episode's generator:
        every draw is used once, in order, so this is the same i.i.d. sequence as drawing per
        slot, at a fraction of numpy's per-call cost.
        """
        n = shape[0] * shape[1] if len(shape) == 2 else int(np.prod(shape))
        if self._strag_pos + n > len(self._strag_buf):
            fresh = self._straggler.sample(
                self.rng,
                max(_STRAGGLER_BATCH, n),
                self.cfg.straggler_scale,
                self.cfg.straggler_prob_scale,
            )
            self._strag_buf = np.concatenate([self._strag_buf[self._strag_pos :], fresh])
            self._strag_pos = 0
        out = self._strag_buf[self._strag_pos : self._strag_pos + n]
        self._strag_pos += n
        return out.reshape(shape)

    def _check_end(self) -> None:
        cfg = self.cfg
        all_arrived = self.t >= cfg.arrival_slots or (
            self.num_jobs == 0 or self.t > self.j_arrival[-1]
        )
        if all_arrived and self._n_done == self.num_jobs:
            self.terminated = True
        elif self.t >= cfg.max_slots or self.counters.steps >= cfg.max_steps:
            self.truncated = True

    # ------------------------------------------------------------------ bookkeeping
    def job_counts(self) -> dict[str, int]:
        """Arrived, queued, running and done jobs (conservation: arrived = sum of the rest)."""
        st = self.status
        return {
            "arrived": int((st != NOT_ARRIVED).sum()),
            "queued": int((st == QUEUED).sum()),
            "running": int((st == RUNNING).sum()),
            "done": int((st == DONE).sum()),
        }

    def lower_bound_slots(self) -> np.ndarray:
        """Per-job JCT lower bound in slots (DESIGN §6).

        The job alone, at its best allocation on the best node for it, no queueing, no sync
        cost, no stragglers, no contention; trained to its target, or only up to where an
        accuracy-aware stop (``edgegossip``) could first end it, if that comes sooner.
        """
        jn = self.num_jobs
        if jn == 0:
            return np.zeros(0)
        # per model (the allocation tables are), then gathered per job: the per-job
        # (J, L, N, 3) comparison took ~18 ms per episode on tapfinger-hetero6
        m_alloc, m_ok, m_tput = self._model_alloc_tables()
        fits = (m_alloc[:, :, None, :] <= self.capacity[None, None, :, :] + 1e-9).all(-1)
        fits &= m_ok[:, :, None]  # (M, L, N)
        if self._tapfinger:
            gmax = np.where(fits, m_alloc[:, :, None, 1], 0.0).max(axis=(1, 2))[self.j_model]
            lm = self._is_lm[self.j_model]
            p = np.zeros(jn)
            slots = np.zeros(jn)
            for _ in range(10_000):
                todo = p < 1.0 - 1e-12
                if not todo.any():
                    break
                p = np.where(todo, p + _tapfinger_step(lm, gmax, p), p)
                slots += todo
            return slots
        m = self.j_model
        tput = m_tput[:, :, None] * self.cluster.speed[None, None, :]
        best = np.where(fits, tput, 0.0).max(axis=(1, 2))[m]
        samples_per_slot = self.cfg.slot_seconds * self.j_workers * best
        need_q = np.minimum(self.j_target, 1 - 1e-12)
        x_target = self.j_tau * (-np.log1p(-need_q)) ** (1.0 / self._convk[m])
        need = np.minimum(x_target, self.j_max_samples)
        if self.cfg.edgegossip_min_gain > 0 and self._acc_stop.any():
            # an accuracy-aware stop may end a job before its target: bound that point too
            u = _accuracy_stop_u(self._convk, self._q90f, self.cfg.edgegossip_min_gain)[m]
            stops = self._acc_stop[self.j_sync]
            need = np.where(stops, np.minimum(need, self.j_tau * u ** (1.0 / self._convk[m])), need)
        return np.maximum(np.ceil(need / samples_per_slot - 1e-9), 1.0)

    def episode_metrics(self) -> dict[str, Any]:
        """Summary of the episode so far (DESIGN §6); JCTs in slots unless named seconds.

        JCT statistics cover every arrived job. A job still unfinished when the episode is
        truncated counts with its time so far (right-censored), so a scheduler cannot look
        good by leaving hard jobs unfinished; ``jobs_unfinished`` says how many there are,
        and ``jct_mean_completed`` is the mean over completed jobs only. With the default
        reward, ``jct_mean * jobs_arrived == -sum of all agents' returns`` (Little's law).
        """
        done = self.status == DONE
        arrived = self.status != NOT_ARRIVED
        end = np.where(done, self.finish_slot, self.t)
        jct = (end - self.j_arrival)[arrived].astype(np.float64)
        jct_done = (self.finish_slot - self.j_arrival)[done].astype(np.float64)
        sec = self.cfg.slot_seconds
        lb = self.lower_bound_slots()
        util = self.counters.util_sum / max(self.t, 1)
        prio = self.j_prio[arrived]
        prio_jct = [
            float(jct[prio == p].mean()) if (prio == p).any() else None
            for p in range(self.num_priorities)
        ]
        first = self.j_arrival[arrived].min() if arrived.any() else 0
        nan = float("nan")
        m: dict[str, Any] = {
            "slots": int(self.t),
            "steps": int(self.counters.steps),
            "jobs_arrived": int(arrived.sum()),
            "jobs_done": int(done.sum()),
            "jobs_unfinished": int(arrived.sum() - done.sum()),
            "jct_mean": float(jct.mean()) if len(jct) else nan,
            "jct_p95": float(np.percentile(jct, 95)) if len(jct) else nan,
            "jct_mean_seconds": float(jct.mean() * sec) if len(jct) else nan,
            "jct_mean_completed": float(jct_done.mean()) if len(jct_done) else nan,
            "jct_lower_bound_mean": float(lb[arrived].mean()) if arrived.any() else nan,
            "jct_lower_bound": lb[done],
            "makespan": int(end[arrived].max() - first) if arrived.any() else 0,
            "median_node_utilization": float(np.median(util)),
            "collisions_proposed": self.counters.collisions_proposed,
            "collisions_executed": self.counters.collisions_executed,
            "collision_agents": self.counters.collision_agents,
            "rejected_placements": self.counters.rejected,
            "task_conflicts": self.counters.task_conflicts,
            "overload_node_slots": self.counters.overload_node_slots,
            "invalid_actions": self.counters.invalid_actions,
            "placements": self.counters.placements,
            "resized_up": self.counters.resized_up,
            "resized_down": self.counters.resized_down,
            "occupied_share_mean": self.counters.occupied_share_sum / max(self.t, 1),
            "quality_total": float(self.quality[arrived].sum()),
            "jct_by_priority": prio_jct,
            "final_quality": self.quality[done].copy(),
            "final_quality_mean": float(self.quality[done].mean()) if done.any() else float("nan"),
            "episode_return_mean": float(self.return_sum.mean()),
        }
        if not self._tapfinger:
            cat = model_catalog()
            m["final_metric"] = cat.metric_at(self._cat_idx[self.j_model[done]], self.quality[done])
        return m

    # ------------------------------------------------------------------ graph view
    def graph(self) -> dict[str, Any]:
        """Heterogeneous graph of the current state, as numpy arrays.

        Returns:
            ``{"nodes": {type: features}, "edges": {(src, rel, dst): (2, E) index array},
            "edge_attr": {(src, rel, dst): (E, F)}, "ids": {type: ids}}`` with node types
            ``node`` (cluster nodes), ``pending`` (queued jobs) and ``running`` (running jobs).
            Edge types: ``(node, link, node)`` topology links both ways with (log bandwidth,
            latency); ``(pending, queued_at, node)`` each queued job to the agents that see it;
            ``(running, runs_on, node)`` one edge per worker with its allocation; and the
            reverse relations ``(node, rev_queued_at, pending)``, ``(node, hosts, running)``.
            ``ids`` also maps each agent's pending slots (``slots``, (N, P)) and placement
            targets (``targets``, (N, K+1)) to rows of the ``pending`` and ``node`` types.
        """
        c = self.cluster
        q_agent, q_jobs = self.queued_pairs()
        pend_ids, pend_idx = np.unique(q_jobs, return_inverse=True)
        run_ids = self.running
        nodes = self.w_node[run_ids]
        r_idx, w_idx = np.nonzero(nodes >= 0)
        link = np.concatenate([c.edges, c.edges[:, ::-1]], axis=0).T
        link_attr = np.tile(
            np.stack([np.log10(c.link_bw + 1.0), c.link_lat / 100.0], axis=1), (2, 1)
        ).astype(np.float32)
        run_feat = np.concatenate(
            [
                self._job_features(run_ids),
                self.quality[run_ids, None].astype(np.float32),
                (self.sync_time[run_ids, None] / 10.0).astype(np.float32),
            ],
            axis=1,
        )
        queued_at = np.stack([pend_idx, q_agent])
        runs_on = np.stack([r_idx, nodes[r_idx, w_idx]])
        return {
            "nodes": {
                "node": self._node_feat,
                "pending": self._job_features(pend_ids),
                "running": run_feat,
            },
            "ids": {
                "node": np.arange(self.num_agents),
                "pending": pend_ids,
                "running": run_ids,
                # (N, P) each agent's pending slot -> row of the pending type (-1: empty)
                "slots": np.where(self.head >= 0, np.searchsorted(pend_ids, self.head), -1),
                # (N, K+1) each agent's placement targets -> row of the node type (-1: none)
                "targets": c.neighbors,
            },
            "edges": {
                ("node", "link", "node"): link,
                ("pending", "queued_at", "node"): queued_at,
                ("node", "rev_queued_at", "pending"): queued_at[::-1].copy(),
                ("running", "runs_on", "node"): runs_on,
                ("node", "hosts", "running"): runs_on[::-1].copy(),
            },
            "edge_attr": {
                ("node", "link", "node"): link_attr,
                ("running", "runs_on", "node"): (
                    self.w_alloc[run_ids[r_idx], w_idx] / self._cap_max
                ).astype(np.float32),
            },
        }


def _tapfinger_step(is_lm: np.ndarray, gpus: np.ndarray, p: np.ndarray) -> np.ndarray:
    """TapFinger's per-slot progress (DESIGN §4.4): IMG 0.25, LM tanh(g/16) sqrt(1.2 - p)."""
    return np.where(is_lm, np.tanh(gpus / 16.0) * np.sqrt(np.maximum(1.2 - p, 0.0)), 0.25)


def _accuracy_stop_u(k: np.ndarray, q90f: np.ndarray, min_gain: float) -> np.ndarray:
    """Per model, the least ``u = (x / tau) ** k`` at which EdgeGossip's stop can fire.

    The stop (:meth:`EdgeClusterSim.advance_clock`) fires once ``u > (k - 1) / k`` and the
    gain per epoch ``0.1 k q90f u ** (1 - 1/k) exp(-u)`` is below ``min_gain``; past
    ``(k - 1) / k`` (the gain's peak) the gain only falls, so bisection finds the crossing.
    The lower end of the bracket is returned: a bound from it never exceeds the true point.
    """
    a = 1.0 - 1.0 / k

    def gain(u: np.ndarray) -> np.ndarray:
        return 0.1 * k * q90f * u**a * np.exp(-u)

    lo = np.maximum(a, 1e-12)
    hi = np.full_like(lo, 800.0)  # exp(-800) is 0.0: below any positive threshold
    below = gain(lo) < min_gain  # already past the crossing where the stop may first fire
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        up = gain(mid) >= min_gain
        lo = np.where(up, mid, lo)
        hi = np.where(up, hi, mid)
    return np.where(below, np.maximum(a, 1e-12), lo)


def _has_duplicates(a: np.ndarray) -> bool:
    """Whether an int array holds a repeated value."""
    n = len(a)
    if n < 2:
        return False
    if n <= 64:  # a Python set beats sort + compare + any (three numpy calls) at this size
        return len(set(a.tolist())) < n
    s = np.sort(a)
    return bool((s[1:] == s[:-1]).any())


def _probs(pairs: tuple[tuple[Any, float], ...]) -> np.ndarray:
    w = np.array([p for _, p in pairs], dtype=np.float64)
    return w / w.sum()
