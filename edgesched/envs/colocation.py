"""What an overloaded node does under ``collision_mode="measured"``: measured co-location costs.

Every figure comes from ``data/colocation.json``, which ``scripts/derive_colocation.py``
derives from public measurements (see that script for sources, licenses and the declared
mapping of the catalog's models to the measured jobs):

* **Shared GPUs** (Gavel, OSDI'20, physical-cluster profiles of two single-GPU jobs sharing one
  GPU). A node packs its running workers onto its GPUs in placement order: worker ``i``
  requesting ``g_i`` GPUs takes the GPU interval ``[o_i, o_i + g_i)`` with ``o_i`` the sum of
  the earlier workers' requests, wrapped modulo the node's GPU count, so workers share GPUs
  when their requests exceed the GPUs (or are fractional). On a GPU held by two workers each
  runs at its measured throughput relative to running alone with that partner on the
  node's GPU class; if that pair's shared run failed in the measurements (out of memory), the
  newer worker's job crashes. On a GPU held by ``k >= 3`` workers each runs at
  ``1 / (k * m_k)`` of its speed alone, ``m_k`` Muri's measured iteration-time multiplier of
  ``k`` interleaved jobs (SIGCOMM'22; ``m_k`` of 4 for more than 4: assumed), and any failing
  pair among them crashes the newest job. A worker spanning several GPUs runs at its worst
  GPU's rate.
* **CPU oversubscription** (Synergy, OSDI'22): when a node's workers hold more cores than it
  has, each gets its proportional share (assumed: fair sharing by the OS) and runs at its
  model's measured throughput at that many cores per GPU over that at its allocation
  (linear between measured points and through 0 below one core: assumed).
* **Host memory over capacity** crashes the newest workers' jobs until the rest fit
  (assumed: the kernel's OOM killer picks the newest process).
* **Crashes and restarts** (Muri's profiled start-up overheads): a crashed job loses the
  progress since its last checkpoint (every ``checkpoint_interval`` slots of running;
  assumed, a scenario parameter), releases all its workers, returns to its queues at its
  priority and, when it next starts, spends the measured restart seconds of its model and
  GPU count before progressing.
* A synchronous job already runs at its slowest worker (``sync.slowest_worker``), so one
  badly placed worker slows the whole job.

Hardware tiers map to measured GPU classes by :data:`TIER_GPU_CLASS`. Jetson-class boards
(and custom capacities) have no measurements and no native concurrent GPU sharing: workers
sharing one of their GPUs time-slice at ``unmeasured_gpu_share / (k * m_k)`` each and never
fail as a pair (assumed; ``benchmarks/colocation_sensitivity.py`` sweeps the factor). Gavel's
rates are of each job's steps/s; shared-GPU and CPU factors multiply (assumed independent).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from .errors import ConfigError
from .node_eval import NodeEvaluationMixin
from .sharing import GPU_EPS

#: Catalog hardware tier -> measured GPU class (``None``: unmeasured). The T4 of the
#: ``gpu_server`` tier is equated with the P100, as the catalog's speed factors do.
TIER_GPU_CLASS: dict[str, str | None] = {
    "small_server": "k80",
    "gpu_server": "p100",
    "v100_server": "v100",
    "jetson": None,
}


#: Up to this many dirty nodes per slot, nodes are evaluated one at a time (memoized, workers
#: grouped in Python); beyond it the vectorized plan takes over. Measured on edge500 (one
#: copy) and edge50 (32 copies): the two paths cost within 5% of each other at any count,
#: the grouped one a little less up to about 64 (see ``NodeEvaluationMixin._grouped_nodes``).
_FEW_NODES = 64


@dataclass(frozen=True)
class ColocationTable:
    """The measured co-location figures for one simulator's models, as arrays.

    Attributes:
        classes: measured GPU class names, in index order.
        pair: (C, M, M) rate of model ``a`` sharing a GPU of class ``c`` with model ``b``
            (relative to running alone); 0 where the pair failed.
        fail: (C, M, M) whether that pair's shared run failed.
        interleave: (K,) iteration-time multiplier of 1..K jobs interleaved on one GPU.
        restart_gpus: (G,) GPU counts of the restart table.
        restart_s: (M, G) seconds of a (re)start of each model at each GPU count.
        cpu_x: per model, 0 and the measured core counts (per GPU) of its CPU curve.
        cpu_y: per model, throughput at those cores relative to 3 cores per GPU (0 at 0:
            linear below the first measured point, assumed).
    """

    classes: tuple[str, ...]
    pair: np.ndarray
    fail: np.ndarray
    interleave: np.ndarray
    restart_gpus: np.ndarray
    restart_s: np.ndarray
    cpu_x: tuple[np.ndarray, ...]
    cpu_y: tuple[np.ndarray, ...]

    def cpu_rate(self, model: int, cores_per_gpu: np.ndarray) -> np.ndarray:
        """Throughput of ``model`` at ``cores_per_gpu`` relative to 3 cores per GPU."""
        return np.interp(cores_per_gpu, self.cpu_x[model], self.cpu_y[model])

    def restart_seconds(self, model: int, gpus: float) -> float:
        """Measured (re)start seconds of ``model`` on ``gpus`` GPUs (nearest lower count)."""
        i = int(np.searchsorted(self.restart_gpus, max(gpus, 1.0), side="right")) - 1
        return float(self.restart_s[model, max(i, 0)])

    def multiplier(self, k: int) -> float:
        """Iteration-time multiplier of ``k`` jobs interleaved on one GPU (k >= 1)."""
        return float(self.interleave[min(k, len(self.interleave)) - 1])


@lru_cache(maxsize=1)
def load_colocation() -> dict[str, Any]:
    """The committed derived table ``data/colocation.json`` (see the module docstring)."""
    text = resources.files("edgesched.envs").joinpath("data/colocation.json").read_text()
    return json.loads(text)


@lru_cache(maxsize=16)
def colocation_table(model_names: tuple[str, ...]) -> ColocationTable:
    """The figures of ``model_names`` (catalog names), in that order.

    Raises:
        ConfigError: a model has no co-location figures.
    """
    raw = load_colocation()
    known = raw["models"]
    bad = [m for m in model_names if m not in known]
    if bad:
        raise ConfigError(
            f"models={list(model_names)!r}: collision_mode='measured' has co-location figures "
            f"only for {known}"
        )
    idx = [known.index(m) for m in model_names]
    classes = tuple(raw["gpu_classes"])
    pair = np.array([np.asarray(raw["pair_tput"][c])[np.ix_(idx, idx)][..., 0] for c in classes])
    fail = pair <= 0.0
    rs = raw["restart_s"]
    return ColocationTable(
        classes=classes,
        pair=pair,
        fail=fail,
        interleave=np.asarray(raw["interleave_multiplier"], dtype=np.float64),
        restart_gpus=np.asarray(rs["gpus"], dtype=np.float64),
        restart_s=np.array([rs[m] for m in model_names], dtype=np.float64),
        cpu_x=tuple(np.array([0.0] + [p[0] for p in raw["cpu_curve"][m]]) for m in model_names),
        cpu_y=tuple(np.array([0.0] + [p[1] for p in raw["cpu_curve"][m]]) for m in model_names),
    )


def node_gpu_class(tier_names: tuple[str, ...], tier: np.ndarray, classes: tuple[str, ...]):
    """(N,) index into ``classes`` of each node's GPU class; -1 where unmeasured."""
    per_tier = np.array(
        [
            classes.index(c) if (c := TIER_GPU_CLASS.get(t)) is not None and c in classes else -1
            for t in tier_names
        ],
        dtype=np.int64,
    )
    return per_tier[tier]


class ColocationMixin(NodeEvaluationMixin):
    """``collision_mode='measured'`` for :class:`~edgesched.envs.core.EdgeClusterSim`.

    State written: per-worker ``w_seq`` (placement order, set by ``place``), per-job
    ``ckpt_progress``, ``run_slots`` and ``startup_s``; counters ``crashes``,
    ``crash_slots_lost``, ``restart_seconds``, ``shared_gpu_slots``, ``cpu_starved_slots``.
    """

    def _init_colocation(self) -> None:
        self._measured = self.cfg.collision_mode == "measured"
        # some job owes restart seconds (set by a crash, cleared by the progress model)
        self._restarting = False
        # _slowdown's last result, valid while the running set (the same array object: it is
        # replaced, never changed in place) and the stored rates (generation) are unchanged
        self._rates_gen = 0
        self._slow_cache: tuple | None = None
        if not self._measured:
            self._coloc = None
            return
        if self.progress_model.name != "profile":
            raise ConfigError(
                f"collision_mode='measured' with progress_model={self.progress_model.name!r}: "
                "the measured co-location costs need the profiled models (progress_model="
                "'profile')"
            )
        self._coloc = colocation_table(self.model_names)
        self._coloc_memo: dict[tuple[float, ...], tuple] = {}
        self._pair_l = self._coloc.pair.tolist()
        self._fail_l = self._coloc.fail.tolist()
        # one more entry than nodes, always False: indexed by a worker's node, padding (-1)
        # reads it, which saves masking the padding out on the hot path
        self._dirty_ext = np.zeros(self.num_agents + 1, dtype=bool)
        # per node: whether a running worker there may hold a rate or flag other than the
        # defaults (rate 1, not shared, not starved). False is a promise (a calm dirty node
        # that is not slowed needs no write), True only a possibility.
        self._node_slowed = np.zeros(self.num_agents, dtype=bool)
        self._pick_ext = np.zeros(self.num_agents + 1, dtype=bool)  # scratch, all False
        # whether some allocation level requests a fractional GPU (then any node may share)
        g = self._m_alloc[..., 1]
        self._frac_levels = bool((np.abs(g - np.round(g)) > GPU_EPS).any())
        self._frac_levels |= bool(self.cfg.trace_fractional_gpus)  # part-GPU trace jobs
        c = self.cluster
        if self.cfg.custom_capacities:
            classes = self._coloc.classes
            names = self.cfg.custom_gpu_classes or ("",) * self.agents_per_copy
            per_node = np.array([classes.index(x) if x else -1 for x in names], dtype=np.int64)
        else:
            per_node = node_gpu_class(c.tier_names, c.tier, self._coloc.classes)
        # per agent of every copy (node ids are global in a batched simulator)
        self._node_class = np.tile(per_node, self.copies)

    @property
    def _dirty_nodes(self) -> np.ndarray:
        """(N,) whether each node's running workers changed (a view; pickling keeps one array)."""
        return self._dirty_ext[:-1]

    def _measured_slowdown(
        self, running: np.ndarray, adv_a: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Crash what must crash; the surviving ``running`` jobs and their (R, W) slowdowns.

        Rates change only when a node's set of running workers changes (a start, a finish,
        a crash, a resize marks the node dirty), so only dirty nodes of the
        advancing copies (``adv_a``: per agent, ``None`` for all) are evaluated; the others
        keep their workers' stored rates. Crashes are decided on the placements as they
        stand; the survivors' rates are then computed without the crashed workers. Crashed
        jobs are released and re-queued. The slowdowns are ``None`` when nothing is slowed.
        Up to ``_FEW_NODES`` dirty nodes go one at a time through the memo
        (:meth:`_grouped_nodes`), more through the vectorized plan (:meth:`_sharing_plan`): one
        rule in two forms, which ``tests/test_colocation.py`` checks give the same trajectory.
        """
        dirty = self._dirty_nodes if adv_a is None else self._dirty_nodes & adv_a
        if dirty.any():
            self._rates_gen += 1  # every write of rates (and every crash) happens below
            nodes = self.w_node[running]
            if np.count_nonzero(dirty) <= _FEW_NODES:
                running, recheck = self._grouped_nodes(running, nodes, adv_a)
            else:
                if not self._frac_levels:
                    # a node within capacity (and whole-GPU requests) shares nothing: its
                    # workers run at rate 1 and nothing crashes there (the plan would agree)
                    calm = dirty & ~(self.used > self.capacity + GPU_EPS).any(axis=1)
                    if calm.any():
                        r, w = np.nonzero(calm[np.maximum(nodes, 0)] & (nodes >= 0))
                        j = running[r]
                        self.w_rate[j, w] = 1.0
                        self.w_gshared[j, w] = False
                        self.w_starved[j, w] = False
                        self._node_slowed[calm] = False
                        self._dirty_nodes[calm] = False
                        dirty = dirty & ~calm
                if dirty.any():
                    running, recheck = self._planned_nodes(running, nodes, dirty, adv_a)
                else:
                    recheck = []
            # crashes mark their jobs' other nodes dirty; those were evaluated too
            if adv_a is None:
                self._dirty_nodes.fill(False)
            else:
                self._dirty_nodes[adv_a] = False
            # a failing pair that only the survivors' re-packing revealed: decided next slot
            if recheck:
                self._dirty_nodes[recheck] = True
        return self._slowdown(running)

    def _slowdown(self, running: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Count shared and starved worker-slots of ``running``; their (R, W) slowdowns.

        The slowdowns change only with the running set or the stored rates, so a slot with
        neither (about a third of edge50's) reuses the last slot's.
        """
        c = self._slow_cache
        if c is not None and c[0] is running and c[1] == self._rates_gen:
            shared, starved, slow = c[2], c[3], c[4]
        else:
            shared = running[np.nonzero(self.w_gshared[running])[0]]
            starved = running[np.nonzero(self.w_starved[running])[0]]
            rate = self.w_rate[running]
            slow = None if (rate == 1.0).all() else 1.0 / rate
            self._slow_cache = (running, self._rates_gen, shared, starved, slow)
        jc = self._job_capacity
        if len(shared):
            self._count("shared_gpu_slots", shared, jc)
        if len(starved):
            self._count("cpu_starved_slots", starved, jc)
        return running, slow

    def _mark_dirty(self, nodes: np.ndarray) -> None:
        """Nodes (-1 = padding, ignored) whose running workers changed: re-evaluate them."""
        if self._measured:
            self._dirty_ext[nodes] = True
            self._dirty_ext[-1] = False  # padding wrote the sentinel

    def _crash(self, jobs: np.ndarray) -> None:
        """Crash running ``jobs``: back to their last checkpoint, released and re-queued."""
        interval = self.cfg.checkpoint_interval
        lost = self.run_slots[jobs] % interval if interval else self.run_slots[jobs]
        self._count("crashes", jobs, self._job_capacity)
        self._tally(self._cnt["crash_slots_lost"], jobs, self._job_capacity, lost)
        self.progress[jobs] = self.ckpt_progress[jobs]
        self.quality[jobs] = self.progress_model.quality_of(self, jobs)
        self.run_slots[jobs] = 0
        tab = self._coloc
        for j in jobs.tolist():
            w = int(self.placed[j])
            nodes = self.w_node[j, :w]
            np.subtract.at(self.used, nodes, self.w_alloc[j, :w])
            np.subtract.at(self.node_workers, nodes, 1.0)
            gpus = float(self.w_alloc[j, :w, 1].sum())
            self.startup_s[j] = tab.restart_seconds(int(self.j_model[j]), gpus)
        self._restarting = True
        restart = np.round(self.startup_s[jobs]).astype(np.int64)
        self._tally(self._cnt["restart_seconds"], jobs, self._job_capacity, restart)
        self._mark_dirty(self.w_node[jobs].ravel())
        self.w_node[jobs] = -1
        self.w_alloc[jobs] = 0.0
        self.w_level[jobs] = 0
        self.w_iter0[jobs] = 0.0
        self.w_seq[jobs] = -1
        self.w_rate[jobs] = 1.0
        self.w_gshared[jobs] = False
        self.w_starved[jobs] = False
        self.placed[jobs] = 0
        self.j_static[jobs, self.job_features - 2] = 0.0
        self.running = self.running[~np.isin(self.running, jobs)]
        self._requeue(jobs)

    def _checkpoint(self, running: np.ndarray) -> None:
        """Count a slot of running for each of ``running`` and checkpoint on the interval."""
        slots = self.run_slots[running] + 1
        self.run_slots[running] = slots
        interval = self.cfg.checkpoint_interval
        if interval:
            due = running[slots % interval == 0]
            if len(due):
                self.ckpt_progress[due] = self.progress[due]
