"""The edge-cluster simulator: numpy arrays with a leading copy axis, batched first.

:class:`EdgeClusterSim` holds ``B`` independent copies of one scenario (``copies``; a lone
simulator is ``B = 1``). Every dynamic is written once, for all copies: the state is laid
out as the disjoint union of the copies' clusters (copy ``b`` owns agents ``b*N .. b*N+N-1``
and a block of ``job_capacity`` job ids), so a per-node or per-job array is the flattened
``(B, N, ...)`` or ``(B, J, ...)`` array, and every copy has its own clock, end flags,
counters and random generator. Copy ``b`` reset with seed ``s`` follows, bit for bit, the
trajectory of a lone simulator reset with ``s`` and given the same actions.

The dynamics live in one module per phase, each a mixin of this class that owns
one part of the state:

=====================  ==========================================================
``workload``           drawing each copy's jobs and arrivals at reset
``episodes``           reset: starting episodes in all copies or in some
``layout``             the per-job state and each copy's block of job ids
``queues``             per-agent job queues (enqueue, drop, priority aging)
``observe``            node and job features, observations, masks, global state
``graph_view``         the heterogeneous graph view
``placement``          action checks, task conflicts, collisions, placing workers
``execution``          the clock: progress (``progress`` registry), completions, resize
``metrics``            counters and episode metrics
=====================  ==========================================================

This module holds the state layout and the step loop. Time is discrete in slots of
``slot_seconds``; one :meth:`EdgeClusterSim.step` is one decision round of all agents, and
the clock of a copy advances per the ``advance`` mode.

Randomness: the whole workload of a copy's episode is drawn at reset from
``np.random.default_rng(seed)``; the same generator then draws stragglers, reject-order and
conflict winners. The static cluster comes from ``topology_seed``.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from . import sync_coded  # noqa: F401  (importing it registers the coded sync schemes)
from .batch_view import BatchView
from .colocation import ColocationMixin
from .config import ConfigError, SimConfig
from .episodes import EpisodeMixin
from .execution import ExecutionMixin
from .graph_view import GraphMixin
from .layout import LayoutMixin
from .metrics import Counters, MetricsMixin
from .observe import NODE_FEATURES, OBS_BOUND, ObservationMixin
from .pickles import upgrade_state
from .placement import STEP_INFO_KEYS, InvalidActionError, PlacementMixin
from .progress import get_progress_model
from .queues import QueueMixin
from .sync import get_sync_scheme
from .topology import Cluster, build_cluster
from .view import ClusterView
from .workload import Workload, probs
from .workloads import TraceWorkload

# job status codes
NOT_ARRIVED, QUEUED, RUNNING, DONE = 0, 1, 2, 3

_SIM_UIDS = itertools.count()
"""Simulator uids, unique among the simulators made in this process."""

_PER_COPY_INFO = {
    "collisions": "collisions_proposed",
    "rejected": "rejected",
    "task_conflicts": "task_conflicts",
    "placements": "placements",
    "invalid_actions": "invalid_actions",
}
"""Batched step infos: key -> the per-copy counter whose growth in the step it reports."""


class EdgeClusterSim(
    EpisodeMixin,
    LayoutMixin,
    QueueMixin,
    ObservationMixin,
    GraphMixin,
    PlacementMixin,
    ExecutionMixin,
    ColocationMixin,
    MetricsMixin,
):
    """Vectorized simulator of DL training jobs on an edge cluster.

    Agents are nodes. Agent ``n`` decides for the tasks in its queue and may place them on
    ``cluster.neighbors[n]`` (itself first). Per agent the action is an integer:

    * ``0``: defer;
    * ``1 + ((slot * (K+1)) + k) * L + l``: place the next unplaced worker of the job in
      pending ``slot`` (0 = head of the queue) on neighbour ``k`` with allocation level ``l``.

    Allocation level ``l`` gives the task ``min_demand * scale[l] + grid[l]`` (see
    ``alloc_mode``). The mask marks exactly the feasible actions: an existing task, an
    existing target, an allocation at least the minimum demand and at most the target's
    current free capacity. Collisions arise when several agents' individually feasible
    placements on one node together exceed it.

    A lone simulator (``copies=None``, the default) takes ``(N,)`` actions and returns
    ``(N,)`` rewards; ``terminated``/``truncated`` are bools and ``t`` is its clock. With
    ``copies=B`` it is batched: ``(B, N)`` actions and rewards, ``(B,)`` end flags, clocks
    ``tc``, ``obs``/``mask`` rows ``b*N .. b*N+N-1`` for copy ``b`` (``obs_batched`` and
    ``mask_batched`` give ``(B, N, ...)`` views); a finished copy must be restarted with
    :meth:`reset_copy` before the next step. Memory grows as ``B * N`` per node array and
    ``N**2`` for the (shared, static) link matrices.

    Args:
        config: validated scenario parameters.
        cluster: optional pre-built static cluster of one copy.
        scenario_id: versioned scenario id for records (e.g. ``edge50-v0``).
        copies: ``None`` for a lone simulator, else the number of copies ``B >= 1``.

    Raises:
        ConfigError: ``copies`` is not an integer >= 1, or the models do not fit the cluster.
    """

    def __init__(
        self,
        config: SimConfig,
        cluster: Cluster | None = None,
        scenario_id: str = "",
        copies: int | None = None,
    ) -> None:
        if copies is not None and (
            isinstance(copies, bool) or not isinstance(copies, int | np.integer) or copies < 1
        ):
            raise ConfigError(f"copies={copies!r}: need an integer >= 1 (or None: one lone copy)")
        self.cfg = config
        self.scenario_id = scenario_id
        self.cluster = c = cluster if cluster is not None else build_cluster(config)
        self.lone = copies is None
        self.copies = b = 1 if copies is None else int(copies)
        self.agents_per_copy = n = config.num_nodes
        self.num_agents = b * n
        self.k1 = c.neighbors.shape[1]
        self._init_models()
        self._trace_wl = (
            TraceWorkload.from_config(config, self.model_names) if config.trace_path else None
        )
        self._sync_names = tuple(name for name, _ in config.sync_mix)
        self._sync = [get_sync_scheme(s) for s in self._sync_names]
        self._sync = [s.bind(config) if s.bind is not None else s for s in self._sync]
        self._sync_eff = np.array([s.efficiency for s in self._sync])
        self._balance = np.array([s.balance_load for s in self._sync])
        self._acc_stop = np.array([s.accuracy_stop for s in self._sync])
        self._any_balance = bool(self._balance.any()) and not self.progress_model.single_worker
        self._single_compute_rule = len({s.compute_time for s in self._sync}) == 1
        self._shared = config.visibility == "shared"
        self._sync_cache: dict[tuple[int, ...], float] = {}
        self.pending_slots = config.pending_slots
        self.num_actions = 1 + self.pending_slots * self.k1 * self.num_levels
        self.num_priorities = len(config.priority_probs)
        # the union of the copies' clusters: node b*N + n is node n of copy b
        self.capacity = np.tile(c.capacity, (b, 1))
        self.speed = np.tile(c.speed, b)
        off = np.repeat(np.arange(b) * n, n)[:, None]
        self.neighbors = np.where(
            np.tile(c.neighbors, (b, 1)) >= 0, np.tile(c.neighbors, (b, 1)) + off, -1
        )
        self._agent_copy = np.repeat(np.arange(b), n)
        self._agent_idx = np.arange(b * n)
        self._small = self.num_agents <= 32
        self._init_observations()
        self._init_actions()
        self._init_colocation()
        self._refill_on_advance = self.cfg.pending_refill == "on_advance"
        self._seq = 0  # placements so far (w_seq): which of two workers on a GPU is newer
        self.rngs: list[np.random.Generator] = [np.random.default_rng() for _ in range(b)]
        self._order_rngs: list[np.random.Generator | None] = [None] * b  # crash_order
        self._wl: list[Workload | None] = [None] * b
        self._gpu_shared = False  # whether any job so far held part of a GPU (alloc_of)
        # The episode key (ClusterView.episode_key) is this simulator's uid and the number
        # of the copy's episode among all episodes the simulator has begun. Both travel
        # with a pickled simulator, so a resumed run sees the keys the uninterrupted one
        # saw; ids of workload objects did not (a freed workload's address is reused),
        # which made resumed RLPTO runs depend on the heap's layout.
        self.uid = next(_SIM_UIDS)
        self._episode_no = np.zeros(b, dtype=np.int64)
        self._adv_one, self._adv_none = np.ones(1, dtype=bool), np.zeros(1, dtype=bool)
        self._job_capacity = 0
        self.invalid_mask: np.ndarray | None = None
        """Bool (agents,): the agents whose action in the last step was invalid and
        deferred; ``None`` when every action was valid (``invalid_action='defer'`` only)."""

    # ------------------------------------------------------------------ models
    def __getstate__(self) -> dict[str, Any]:
        """The simulator's state for pickling, without the measured model's call buffers.

        They are scratch of one layout (the slowdown buffer alone is jobs x workers floats)
        and are rebuilt on the next slot; the reuse of the last slowdowns goes with them,
        which changes no result (they are recomputed from the stored rates).
        """
        state = self.__dict__.copy()
        if state.get("_kstate") is not None:
            state["_kstate"] = None
            state["_slow_cache"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a pickled simulator, including one pickled by an earlier version.

        A resumed training run unpickles its simulators from the checkpoint; state arrays
        renamed or added since are rebuilt from what the old state holds, so the run
        continues exactly as it would have.
        """
        upgrade_state(state)
        if "_episode_no" not in state:  # pickled before episode keys were counters
            state["_episode_no"] = -1 - np.arange(len(state["_wl"]), dtype=np.int64)
            state["uid"] = next(_SIM_UIDS)
        self.__dict__.update(state)

    def _init_models(self) -> None:
        cfg = self.cfg
        self.model_names = tuple(name for name, _ in cfg.models)
        self.num_models = len(self.model_names)
        self.progress_model = get_progress_model(cfg.progress_model)(
            self.model_names, self.cluster.capacity, cfg
        )
        self._min_demand_m = self.progress_model.min_demand
        self._model_p = probs(cfg.models)
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
        self.num_levels = len(self._alloc_scale)
        # per-model tables, computed once and gathered per job at reset
        dmin = self._min_demand_m
        self._m_alloc = dmin[:, None, :] * self._alloc_scale[None] + self._alloc_add[None]
        self._m_ok = (self._m_alloc >= dmin[:, None, :] - 1e-9).all(-1)
        self._m_tput = self.progress_model.throughput_table(self._m_alloc)

    @property
    def level_scale(self) -> np.ndarray:
        """(L, 3) multiplier of the minimum demand per allocation level."""
        return self._alloc_scale

    @property
    def level_add(self) -> np.ndarray:
        """(L, 3) absolute amount added per allocation level (grid mode)."""
        return self._alloc_add

    # ------------------------------------------------------------------ per-copy state
    @property
    def t(self) -> int:
        """The clock (slots) of a lone simulator; a batched one has ``tc`` per copy."""
        if not self.lone:
            raise TypeError("a batched simulator has one clock per copy: read tc[b]")
        return int(self.tc[0])

    @property
    def terminated(self) -> Any:
        """Lone: whether the episode ended (all jobs done). Batched: (B,) bool."""
        return bool(self._term[0]) if self.lone else self._term

    @property
    def truncated(self) -> Any:
        """Lone: whether the episode was cut (``max_slots``/``max_steps``). Batched: (B,)."""
        return bool(self._trunc[0]) if self.lone else self._trunc

    @property
    def job_capacity(self) -> int:
        """Job ids per copy (the largest workload of any copy since the last layout)."""
        return self._job_capacity

    @property
    def counters(self) -> Counters:
        """A lone simulator's episode counters (a snapshot; batched: :meth:`counters_of`)."""
        if not self.lone:
            raise TypeError("a batched simulator counts per copy: use counters_of(b)")
        return self.counters_of(0)

    def view(self, b: int | None = None) -> ClusterView:
        """The read-only :class:`~edgesched.envs.view.ClusterView` of copy ``b``."""
        return ClusterView(self, b)

    def batch_view(self) -> BatchView:
        """The read-only :class:`~edgesched.envs.batch_view.BatchView` of every copy."""
        return BatchView(self)

    def workload(self, b: int = 0) -> Workload:
        """The workload of copy ``b``'s current episode (local job ids)."""
        wl = self._wl[b]
        if wl is None:
            raise RuntimeError("reset() has not been called")
        return wl

    # ------------------------------------------------------------------ step
    def step(
        self, actions: np.ndarray, conflict_weights: np.ndarray | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Apply one decision round of every agent of every copy (the array fast path).

        Args:
            actions: int array of shape (N,) (lone) or (B, N) (batched), one action per agent.
            conflict_weights: optional non-negative weight per agent, same shape, for
                ``conflict_rule='fit_argmax'``: a contested task goes to the proposer with
                the largest weight x fit (TapFinger's pointer probability x fit); ignored by
                the other rules.

        Returns:
            ``(rewards, info)``: rewards of the actions' shape, and this step's counters
            (:data:`STEP_INFO_KEYS`: ints and bools for a lone simulator, (B,) arrays of
            each copy's when batched). Observations, masks and the end flags are
            then in ``obs``, ``mask``, ``terminated``, ``truncated``.

        Raises:
            RuntimeError: the episode (of some copy) has ended and was not reset.
            InvalidActionError: wrong shape or dtype; or an out-of-range or masked action
                while ``invalid_action='raise'`` (the simulator is then left unchanged).
                Under ``'defer'`` such actions defer and are counted instead.
        """
        b = self.copies
        if (
            (self._term[0] or self._trunc[0])
            if b == 1
            else np.count_nonzero(self._term | self._trunc)
        ):
            fin = self._term | self._trunc
            if self.lone:
                raise RuntimeError("step() called on a finished episode; call reset() first")
            raise RuntimeError(
                f"copies {np.flatnonzero(fin).tolist()} have finished their episode; call "
                "reset_copy(b, seed) for each first"
            )
        a = np.asarray(actions)
        shape = (self.agents_per_copy,) if self.lone else (self.copies, self.agents_per_copy)
        # checked here, not only per agent after the reshape, so the message shows what the
        # caller passed rather than the flattened array
        if a.shape != shape or a.dtype.kind not in "iu":
            extra = (
                ""
                if self.lone
                else f" (one int action per agent: rows are the copies={self.copies}, "
                f"columns the {self.agents_per_copy} agents of each copy)"
            )
            raise InvalidActionError(
                f"actions must be an integer array of shape {shape}; got shape {a.shape} "
                f"dtype {a.dtype}{extra}"
            )
        self.invalid_mask = None
        if not self.lone:
            before = {k: self._cnt[k].copy() for k in _PER_COPY_INFO.values()}
        self._conflict_w = self._checked_conflict_weights(conflict_weights, shape)
        try:
            rewards, info, agents = self._place_actions(self._checked_actions(a.reshape(-1)))
        finally:
            self._conflict_w = None  # the weights are this round's only
        if b == 1:
            # one copy: a Python bool instead of (1,) array arithmetic (hot path)
            one = self.cfg.advance == "every_step" or len(agents) == 0
            adv = self._adv_one if one else self._adv_none
            if one:
                rewards += self.advance_clock(adv)
        else:
            if self.cfg.advance == "every_step":
                adv = np.ones(b, dtype=bool)
            else:
                adv = np.bincount(agents // self.agents_per_copy, minlength=b) == 0
            if np.count_nonzero(adv):
                rewards += self.advance_clock(adv)
        bad = self.invalid_mask
        info["invalid_actions"] = 0 if bad is None else int(np.count_nonzero(bad))
        if b == 1:
            self._cnt["steps"][0] += 1
        else:
            self._cnt["steps"] += 1
        self._check_end()
        self._refresh()
        self.return_sum += rewards
        if self.lone:
            info["advanced"] = bool(adv[0])
            info["slot"] = int(self.tc[0])
            return rewards, info
        # batched: every counter per copy, from the copies' counters' growth in this step
        for key, counter in _PER_COPY_INFO.items():
            info[key] = self._cnt[counter] - before[counter]
        info["proposals"] = np.bincount(agents // self.agents_per_copy, minlength=b)
        info["advanced"] = adv
        info["slot"] = self.tc.copy()
        return rewards.reshape(shape), info

    def advance(self) -> float:
        """Run one slot of every copy without decisions; return the summed reward.

        For views that drive placements themselves (the central view), then call
        :meth:`refresh` once their round is over.
        """
        return float(self.advance_copies(np.ones(self.copies, dtype=bool)).sum())

    def refresh(self) -> None:
        """Recompute observations and masks after :meth:`place` or :meth:`advance` calls."""
        self._refresh()

    def _check_end(self) -> None:
        cfg = self.cfg
        tc, n_done, n_jobs, last = self.tc, self._n_done_c, self._num_jobs_c, self._last_arrival_c
        steps = self._cnt["steps"]
        if self.copies == 1:
            # the same rule on Python scalars, short-circuited: (1,) array arithmetic costs
            # ~8 us per step, and most steps are neither the end nor past the arrivals
            t, done, n = int(tc[0]), int(n_done[0]), int(n_jobs[0])
            term = done == n and (t >= cfg.arrival_slots or n == 0 or t > int(last[0]))
            cut = t >= cfg.max_slots or int(steps[0]) >= cfg.max_steps
            self._term[0], self._trunc[0] = term, cut and not term
            return
        all_arrived = (tc >= cfg.arrival_slots) | (n_jobs == 0) | (tc > last)
        term = all_arrived & (n_done == n_jobs)
        cut = (tc >= cfg.max_slots) | (steps >= cfg.max_steps)
        self._term, self._trunc = term, ~term & cut


class BatchedSim(EdgeClusterSim):
    """``copies`` copies of one scenario stepped together (``EdgeClusterSim(copies=B)``).

    Kept as a name for the batched array path; it adds nothing to :class:`EdgeClusterSim`.

    Args:
        config: validated scenario parameters.
        copies: number of copies ``B`` (>= 1).
        cluster: optional pre-built static cluster of one copy.
        scenario_id: versioned scenario id for records.
    """

    def __init__(
        self,
        config: SimConfig,
        copies: int,
        cluster: Cluster | None = None,
        scenario_id: str = "",
    ) -> None:
        if isinstance(copies, bool) or not isinstance(copies, int | np.integer) or copies < 1:
            raise ConfigError(f"copies={copies!r}: need an integer >= 1")
        super().__init__(config, cluster, scenario_id, copies=int(copies))


def make_batched(name: str, copies: int, **overrides: Any) -> BatchedSim:
    """``copies`` copies of scenario ``name`` (with ``overrides``) as one batched simulator.

    Raises:
        KeyError: unknown scenario.
        ConfigError: unknown or out-of-range parameter, or ``copies`` < 1.
    """
    from .scenarios import get_scenario

    sc = get_scenario(name)
    return BatchedSim(sc.config(**overrides), copies, scenario_id=sc.id)


__all__ = [
    "DONE",
    "NODE_FEATURES",
    "NOT_ARRIVED",
    "OBS_BOUND",
    "QUEUED",
    "RUNNING",
    "STEP_INFO_KEYS",
    "BatchedSim",
    "EdgeClusterSim",
    "InvalidActionError",
    "make_batched",
]
