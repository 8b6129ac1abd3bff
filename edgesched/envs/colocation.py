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
  newer worker's job crashes. On a GPU held by ``k >= 3`` workers each runs at ``1 / (k *
  m_k)`` of its speed alone, ``m_k`` Muri's iteration-time multiplier of ``k`` interleaved
  jobs (SIGCOMM'22; time-slicing stretched by ``m_k``, more pessimistic than Muri's
  overlapped stages, and ``m_4`` for more than 4: assumed); any failing pair among them
  crashes the newest job, even one outside the pair (assumed; the newest in a failing pair
  with ``crash_victim='in_pair'``). A worker on several GPUs runs at its worst GPU's rate.
* **CPU oversubscription** (Synergy, OSDI'22): when a node's workers hold more cores than it
  has, each gets its proportional share (assumed: fair sharing by the OS) and runs at its
  model's measured throughput at that many cores per GPU over that at its allocation
  (linear between measured points and through 0 below one core: assumed; the factor's
  exponent ``cpu_starvation_weight``, 1 by default, is the sensitivity knob of these CPU
  assumptions, swept by ``benchmarks/colocation_study.py``).
* **Host memory over capacity** crashes the newest workers' jobs until the rest fit
  (assumed: the kernel's OOM killer picks the newest process). Most crashes are these
  (``ClusterView.crashes_by_cause``; ``benchmarks/colocation_binding.py`` counts them).
* **Crashes and restarts** (Muri's profiled start-up overheads): a crashed job loses the
  progress since its last checkpoint (every ``checkpoint_interval`` slots of running;
  assumed, a scenario parameter), releases all its workers, returns to its queues at its
  priority and, when it next starts, spends the measured restart seconds of its model and
  GPU count before progressing.
* **Newest** (assumed): a round's placements count in agent-index order (the mask stops one
  agent overcommitting a node alone), so a same-round overload crashes the higher-numbered
  agent's job (``crash_order='random'``, off in every registered scenario, shuffles them).
* One badly placed worker slows its whole synchronous job (``sync.slowest_worker``).

Hardware tiers map to measured GPU classes by :data:`TIER_GPU_CLASS`. Jetson-class boards
(and custom capacities) have no measurements and no native concurrent GPU sharing: workers
sharing one of their GPUs time-slice at ``unmeasured_gpu_share / (k * m_k)`` each and never
fail as a pair (assumed; ``benchmarks/colocation_study.py`` sweeps the factor). Gavel's
rates are of each job's steps/s; shared-GPU and CPU factors multiply (assumed independent).

Three catalog models have no matching architecture in Gavel's measurements and stand in for
the nearest one (``scripts/derive_colocation.py``'s ``MODEL_MAP``, marked assumed there):
bert as Transformer at batch 16, deepspeech2 as the LSTM language model at batch 20, yolov3
as ResNet-50 at batch 16. ``SimConfig.gavel_model_map="largest_batch"`` reads them instead at
their stand-in's largest measured batch (Transformer 256, LM 80, ResNet-50 128), whose pairs
fail far more often (on K80 19 of the 36 ordered model pairs instead of 1); the study
sweeps it as the envelope of that assumption. Under that map every K80 pair with yolov3
fails (ResNet-50 at 128 did not run on a K80 even alone), yet a lone one runs (assumed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, NamedTuple

import numpy as np

from .errors import ConfigError
from .metrics import RUNNING
from .node_kernel import checkpoint, measured_slot
from .sharing import GPU_EPS, node_outcome

#: Catalog hardware tier -> measured GPU class (``None``: unmeasured). The T4 of the
#: ``gpu_server`` tier is equated with the P100, as the catalog's speed factors do.
TIER_GPU_CLASS: dict[str, str | None] = {
    "small_server": "k80",
    "gpu_server": "p100",
    "v100_server": "v100",
    "jetson": None,
}


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
        cpu_y: per model, throughput there relative to 3 cores per GPU (linear to 0: assumed).
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

    def restart_seconds_of(self, models: np.ndarray, gpus: np.ndarray) -> np.ndarray:
        """:meth:`restart_seconds` of each (model, GPUs) pair, as an array."""
        i = np.searchsorted(self.restart_gpus, np.maximum(gpus, 1.0), side="right") - 1
        return self.restart_s[models, np.maximum(i, 0)]

    def multiplier(self, k: int) -> float:
        """Iteration-time multiplier of ``k`` jobs interleaved on one GPU (k >= 1)."""
        return float(self.interleave[min(k, len(self.interleave)) - 1])


@lru_cache(maxsize=1)
def load_colocation() -> dict[str, Any]:
    """The committed derived table ``data/colocation.json`` (see the module docstring)."""
    text = resources.files("edgesched.envs").joinpath("data/colocation.json").read_text()
    return json.loads(text)


def gavel_model_maps() -> tuple[str, ...]:
    """Names ``SimConfig.gavel_model_map`` allows: ``declared`` and the table's alternatives."""
    return ("declared", *sorted(load_colocation().get("gavel_map_alternatives", {})))


@lru_cache(maxsize=16)
def colocation_table(model_names: tuple[str, ...], gavel_map: str = "declared") -> ColocationTable:
    """The figures of ``model_names`` (catalog names), in that order.

    Args:
        model_names: catalog model names.
        gavel_map: which reading of the assumed model -> Gavel job entries sets the pair
            rates: ``declared`` (the table's ``model_map``) or an alternative of
            ``gavel_map_alternatives`` (``largest_batch``: the assumed entries at their
            stand-in architecture's largest measured batch size).

    Raises:
        ConfigError: a model has no co-location figures, or ``gavel_map`` is unknown.
    """
    raw = load_colocation()
    if gavel_map not in gavel_model_maps():
        raise ConfigError(
            f"gavel_model_map={gavel_map!r} is not allowed; use one of {list(gavel_model_maps())}"
        )
    pairs = (
        raw["pair_tput"]
        if gavel_map == "declared"
        else raw["gavel_map_alternatives"][gavel_map]["pair_tput"]
    )
    known = raw["models"]
    bad = [m for m in model_names if m not in known]
    if bad:
        raise ConfigError(
            f"models={list(model_names)!r}: collision_mode='measured' has co-location figures "
            f"only for {known}"
        )
    idx = [known.index(m) for m in model_names]
    classes = tuple(raw["gpu_classes"])
    pair = np.array([np.asarray(pairs[c])[np.ix_(idx, idx)][..., 0] for c in classes])
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


class KernelTables(NamedTuple):
    """A :class:`ColocationTable` as the contiguous arrays the compiled rule reads.

    Attributes:
        pair: (C, M, M) float64, ``ColocationTable.pair``.
        fail: (C, M, M) bool, ``ColocationTable.fail``.
        interleave: (K,) float64, ``ColocationTable.interleave``.
        cpu_x: (M, P) each model's CPU-curve points, padded after its ``cpu_n`` points.
        cpu_y: (M, P) the curve's values, padded likewise.
        cpu_n: (M,) number of points of each model's curve.
    """

    pair: np.ndarray
    fail: np.ndarray
    interleave: np.ndarray
    cpu_x: np.ndarray
    cpu_y: np.ndarray
    cpu_n: np.ndarray


def kernel_tables(tab: ColocationTable) -> KernelTables:
    """``tab`` as :class:`KernelTables` (ragged CPU curves padded with their last point)."""
    n = np.array([len(x) for x in tab.cpu_x], dtype=np.int64)
    width = int(n.max()) if len(n) else 1
    cpu_x = np.zeros((len(n), width))
    cpu_y = np.zeros((len(n), width))
    for m, (x, y) in enumerate(zip(tab.cpu_x, tab.cpu_y, strict=True)):
        cpu_x[m, : len(x)], cpu_x[m, len(x) :] = x, x[-1]
        cpu_y[m, : len(y)], cpu_y[m, len(y) :] = y, y[-1]
    return KernelTables(
        pair=np.ascontiguousarray(tab.pair, dtype=np.float64),
        fail=np.ascontiguousarray(tab.fail, dtype=np.bool_),
        interleave=np.ascontiguousarray(tab.interleave, dtype=np.float64),
        cpu_x=cpu_x,
        cpu_y=cpu_y,
        cpu_n=n,
    )


def node_gpu_class(
    tier_names: tuple[str, ...],
    tier: np.ndarray,
    classes: tuple[str, ...],
    overrides: tuple[tuple[str, str], ...] = (),
) -> np.ndarray:
    """(N,) index into ``classes`` of each node's GPU class; -1 where unmeasured.

    Args:
        tier_names: the cluster's hardware tiers.
        tier: (N,) each node's index into ``tier_names``.
        classes: the measured GPU classes, in table order.
        overrides: ``(tier, class)`` pairs replacing :data:`TIER_GPU_CLASS` entries
            (``SimConfig.tier_gpu_classes``; ``""``: unmeasured).
    """
    mapping = {**TIER_GPU_CLASS, **{t: (c or None) for t, c in overrides}}
    per_tier = np.array(
        [
            classes.index(c) if (c := mapping.get(t)) is not None and c in classes else -1
            for t in tier_names
        ],
        dtype=np.int64,
    )
    return per_tier[tier]


class ColocationMixin:
    """``collision_mode='measured'`` for :class:`~edgesched.envs.core.EdgeClusterSim`.

    State written: per-worker ``w_seq`` (placement order, set by ``place``), per-job
    ``ckpt_progress``, ``run_slots`` and ``startup_s``; counters ``crashes``,
    ``crash_slots_lost``, ``restart_seconds``, ``shared_gpu_slots``, ``cpu_starved_slots``.
    """

    def _init_colocation(self) -> None:
        self._measured = self.cfg.collision_mode == "measured"
        # some job owes restart seconds (set by a crash, cleared by the progress model)
        self._restarting = False
        # the last slot's slowdowns (_measured_slowdown), valid while the running set (the same
        # array object: it is replaced, never changed in place) and the rates' generation hold
        self._rates_gen = 0
        self._slow_cache: tuple | None = None
        self._kstate: tuple | None = None  # _build_kstate's, for this layout
        # whether some dirty flag may be set (False is a promise: _measured_slowdown then
        # skips the compiled call when the last slowdowns hold)
        self._maybe_dirty = True
        if not self._measured:
            self._coloc = None
            return
        if self.progress_model.name != "profile":
            raise ConfigError(
                f"collision_mode='measured' with progress_model={self.progress_model.name!r}: "
                "the measured co-location costs need the profiled models (progress_model="
                "'profile')"
            )
        self._coloc = colocation_table(self.model_names, self.cfg.gavel_model_map)
        self._coloc_k = kernel_tables(self._coloc)
        # one more entry than nodes, always False: indexed by a worker's node, padding (-1)
        # reads it, which saves masking the padding out on the hot path
        self._dirty_ext = np.zeros(self.num_agents + 1, dtype=bool)
        # per node: whether a running worker there may hold a rate or flag other than the
        # defaults (rate 1, not shared, not starved). False is a promise (a calm dirty node
        # that is not slowed needs no write), True only a possibility.
        self._node_slowed = np.zeros(self.num_agents, dtype=bool)
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
            per_node = node_gpu_class(
                c.tier_names, c.tier, self._coloc.classes, tuple(self.cfg.tier_gpu_classes)
            )
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
        Each pass is one compiled call (:func:`~edgesched.envs.node_kernel.measured_slot`),
        which also gives the slowdowns (a slot with no change reuses the last slot's).
        """
        ks = self._kstate
        # the per-job arrays are replaced when the layout grows, `used` at a reset
        if ks is None or ks[4] is not self.w_node or ks[9] is not self.used:
            ks = self._build_kstate()
        c = self._slow_cache
        # the last slowdowns (still in the output buffers) hold while the running set (the
        # same array object: it is replaced, never changed in place) and the stored rates
        # (generation) are unchanged
        reuse = c is not None and c[0] is running and c[1] == self._rates_gen
        every = adv_a is None
        if reuse and not self._maybe_dirty:
            # nothing to evaluate and the last slowdowns hold: the compiled call would
            # return at once, but calling it costs microseconds (about a third of the slots)
            flags = 0
        else:
            adv = self._node_slowed if every else adv_a  # (any bool array when every)
            per = self._job_capacity
            n_crashed, evaluated, flags = measured_slot(
                self._dirty_ext, adv, every, True, reuse, running, per, *ks
            )
            if evaluated:
                self._rates_gen += 1  # every write of rates (and every crash) happened there
            if n_crashed:
                out = ks[0][:, :n_crashed]
                self._crash(np.unique(out[0]), np.unique(out[0, out[1] == 1]))
                running = running[self.status[running] == RUNNING]
                # the crashed jobs' other nodes are dirty now: evaluated with the rest
                _, evaluated, flags = measured_slot(
                    self._dirty_ext, adv, every, False, False, running, per, *ks
                )
            if every:  # every dirty flag was cleared, except the nodes to re-check
                self._maybe_dirty = evaluated == 2
        if flags:
            self._slow_cache = (running, self._rates_gen, flags)
        else:
            flags = c[2]
        shared, starved = ks[1], ks[2]
        cnt = self._cnt
        if self.copies == 1:  # item updates: cheaper than (1,) array arithmetic
            cnt["shared_gpu_slots"][0] += shared[0]
            cnt["cpu_starved_slots"][0] += starved[0]
        else:
            cnt["shared_gpu_slots"] += shared
            cnt["cpu_starved_slots"] += starved
        return running, (ks[3][: len(running)] if flags == 2 else None)

    def _build_kstate(self) -> tuple:
        """Output buffers and :meth:`_kernel_state`, the arguments of every measured call.

        Built once per layout (a reset replaces ``used``, growth the per-job arrays), not per
        slot (gathering twenty attributes costs a microsecond). Buffers: jobs to crash (and
        whether memory is why), per-copy shared and starved counts, (R, W) slowdowns.
        """
        nj, mw = self.w_node.shape
        ks = (
            np.zeros((2, nj * mw), dtype=np.int64),
            np.zeros(self.copies, dtype=np.int64),
            np.zeros(self.copies, dtype=np.int64),
            np.ones((nj, mw)),
            *self._kernel_state(),
        )
        self._kstate = ks
        self._slow_cache = None  # its slowdowns were in the old buffers
        return ks

    def _kernel_state(self) -> tuple:
        """The ``state`` :func:`~edgesched.envs.node_kernel.evaluate_nodes` reads and writes."""
        k = self._coloc_k
        return (
            self.w_node,
            self.w_seq,
            self.w_alloc,
            self.j_model,
            self.capacity,
            self.used,
            self._node_class,
            self._node_slowed,
            self._frac_levels,
            k.pair,
            k.fail,
            k.interleave,
            k.cpu_x,
            k.cpu_y,
            k.cpu_n,
            float(self.cfg.unmeasured_gpu_share),
            float(self.cfg.cpu_starvation_weight),
            self.cfg.crash_victim == "in_pair",
            self.w_rate,
            self.w_gshared,
            self.w_starved,
        )

    def _node_outcome(
        self,
        n: int,
        models: np.ndarray | list[int],
        alloc: np.ndarray | list[list[float]],
    ) -> tuple[list[int], list[float], list[bool], bool]:
        """What node ``n`` does to its workers (placement order): the reference rule.

        :func:`~edgesched.envs.sharing.node_outcome` on node ``n``'s GPU class and capacity
        (tests compare the simulator's stored rates with it).
        """
        cls = int(self._node_class[n])
        tab = self._coloc
        return node_outcome(
            tab,
            tab.pair[cls].tolist() if cls >= 0 else None,
            tab.fail[cls].tolist() if cls >= 0 else None,
            self.capacity[n],
            models,
            alloc,
            self.cfg.unmeasured_gpu_share,
            self.cfg.cpu_starvation_weight,
            self.cfg.crash_victim == "in_pair",
        )

    def _mark_dirty(self, nodes: np.ndarray) -> None:
        """Nodes (-1 = padding, ignored) whose running workers changed: re-evaluate them."""
        if self._measured:
            self._dirty_ext[nodes] = True
            self._dirty_ext[-1] = False  # padding wrote the sentinel
            self._maybe_dirty = True

    def _crash(self, jobs: np.ndarray, memory: np.ndarray) -> None:
        """Crash running ``jobs``: back to their last checkpoint, released and re-queued.

        ``memory``: those of ``jobs`` that host memory over capacity crashed (some worker's;
        the others' were a failing GPU pair), counted apart.
        """
        interval = self.cfg.checkpoint_interval
        lost = self.run_slots[jobs] % interval if interval else self.run_slots[jobs]
        self._count("crashes", jobs, self._job_capacity)
        self._count("crashes_memory", memory, self._job_capacity)
        self._tally(self._cnt["crash_slots_lost"], jobs, self._job_capacity, lost)
        self.progress[jobs] = self.ckpt_progress[jobs]
        self.quality[jobs] = self.progress_model.quality_of(self, jobs)
        self.run_slots[jobs] = 0
        # release every worker at once, job by job and worker by worker (ufunc.at applies
        # the subtractions in index order, so `used` is what a loop over the jobs gives)
        held = np.arange(self.w_node.shape[1]) < self.placed[jobs][:, None]
        nodes = self.w_node[jobs][held]
        np.subtract.at(self.used, nodes, self.w_alloc[jobs][held])
        np.subtract.at(self.node_workers, nodes, 1.0)
        # each job's GPUs summed in worker order (cumsum adds in order, as a sum of a few)
        gpus = np.cumsum(np.where(held, self.w_alloc[jobs, :, 1], 0.0), axis=1)[:, -1]
        self.startup_s[jobs] = (
            self._coloc.restart_seconds_of(self.j_model[jobs], gpus)
            * self.cfg.restart_seconds_scale
        )
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
        gone = np.zeros(len(self.status), dtype=bool)  # a lookup, cheaper than np.isin
        gone[jobs] = True
        self.running = self.running[~gone[self.running]]
        self._requeue(jobs, gone)

    def _checkpoint(self, running: np.ndarray) -> None:
        """Count a slot of running for each of ``running`` and checkpoint on the interval."""
        checkpoint(
            running,
            self.run_slots,
            self.ckpt_progress,
            self.progress,
            int(self.cfg.checkpoint_interval),
        )
