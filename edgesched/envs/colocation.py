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
from .metrics import RUNNING
from .sharing import GPU_EPS, cpu_rates, node_outcome, packed_rates

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
#: the grouped one a little less up to about 64 (see ``ColocationMixin._grouped_nodes``).
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

    def _planned_nodes(
        self, running: np.ndarray, nodes: np.ndarray, dirty: np.ndarray, adv_a: np.ndarray | None
    ) -> tuple[np.ndarray, list[int]]:
        """Dirty nodes (bool ``dirty``) through the vectorized :meth:`_sharing_plan`.

        Returns:
            The surviving running jobs and the nodes to re-check next slot.
        """
        plan = self._sharing_plan(running, nodes, dirty)
        crashed: list[int] = []
        for n, pos in plan["complex"] if plan is not None else ():
            out = self._node_outcome(n, plan["models"][pos], plan["alloc"][pos])
            crashed += plan["jobs"][pos][out[0]].tolist() if out[0] else []
        if crashed:
            self._crash(np.unique(np.array(crashed, dtype=np.int64)))
            running = running[self.status[running] == RUNNING]
            more = self._dirty_nodes if adv_a is None else self._dirty_nodes & adv_a
            plan = self._sharing_plan(running, self.w_node[running], dirty | more)
        return running, self._store_rates(plan) if plan is not None else []

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

    def _grouped_nodes(
        self, running: np.ndarray, nodes: np.ndarray, adv_a: np.ndarray | None
    ) -> tuple[np.ndarray, list[int]]:
        """The dirty nodes (a few) one at a time through the memoized outcome.

        The same two passes as the vectorized plan (crashes decided on the placements as
        they stand, the survivors' rates without the crashed workers), at about a dozen
        numpy calls per pass plus Python work per worker of the dirty nodes, instead of
        the plan's fixed cost.

        Returns:
            The surviving running jobs and the nodes to re-check next slot.
        """
        crashed, recheck = self._group_pass(running, nodes, adv_a, first=True)
        if crashed:
            self._crash(np.unique(np.array(crashed, dtype=np.int64)))
            running = running[self.status[running] == RUNNING]
            _, recheck = self._group_pass(running, self.w_node[running], adv_a, first=False)
        return running, recheck

    def _group_pass(
        self, running: np.ndarray, nodes: np.ndarray, adv_a: np.ndarray | None, first: bool
    ) -> tuple[list[int], list[int]]:
        """Outcomes of the dirty nodes (of advancing copies), workers grouped in Python.

        Nodes within capacity (whole-GPU requests only) run their workers at rate 1 (the
        plan's shortcut), which only needs writing where a worker may hold something else
        (``_node_slowed``); the others go through the memo with their workers in placement
        order. Every selected worker's rate and flags are stored, unless this is a slot's
        ``first`` pass and some job must crash: then nothing is, and the caller evaluates
        the dirty nodes again without the crashed workers.

        Returns:
            The jobs to crash (``first`` pass only) and the nodes whose outcome holds a crash.
        """
        dn = np.flatnonzero(self._dirty_nodes if adv_a is None else self._dirty_nodes & adv_a)
        cap_l = self.capacity[dn].tolist()
        if self._frac_levels:
            calm_l = [False] * len(cap_l)
        else:
            eps = GPU_EPS
            calm_l = [
                u[0] <= c[0] + eps and u[1] <= c[1] + eps and u[2] <= c[2] + eps
                for u, c in zip(self.used[dn].tolist(), cap_l, strict=True)
            ]
        # (node, its capacity, calm) of each dirty node that needs evaluating or writing
        todo = [
            (n, c, calm)
            for n, c, calm, slowed in zip(
                dn.tolist(), cap_l, calm_l, self._node_slowed[dn].tolist(), strict=True
            )
            if slowed or not calm
        ]
        if not todo:
            return [], []
        pick = self._pick_ext
        want = [t[0] for t in todo]
        pick[want] = True
        r, w = np.nonzero(pick[nodes])
        pick[want] = False
        jobs = running[r]
        node_l = nodes[r, w].tolist()
        groups: dict[int, list[int]] = {n: [] for n in want}
        for i, n in enumerate(node_l):
            groups[n].append(i)
        k = len(node_l)
        rate, shared, starved = [1.0] * k, [False] * k, [False] * k
        slowed_l = [False] * len(todo)
        crashed: list[int] = []
        recheck: list[int] = []
        if not all(t[2] for t in todo):
            # Python lists: a node holds a few workers, and numpy's fixed cost per call on
            # arrays of a few elements is what this path exists to avoid
            seq_l = self.w_seq[jobs, w].tolist()
            wkey = [
                (m, *a)
                for m, a in zip(
                    self.j_model[jobs].tolist(), self.w_alloc[jobs, w].tolist(), strict=True
                )
            ]
            cls_l = self._node_class[want].tolist()
            memo = self._coloc_memo
            for u, (n, c, calm) in enumerate(todo):
                idx = groups[n]
                if calm or not idx:
                    continue
                if len(idx) > 1:
                    idx.sort(key=seq_l.__getitem__)
                key = (cls_l[u], *c, *[wkey[i] for i in idx])
                out = memo.get(key)
                if out is None:
                    out = self._outcome_miss(key)
                if out[0]:
                    recheck.append(n)
                    if first:
                        jobs_l = jobs.tolist()
                        crashed += [jobs_l[idx[x]] for x in out[0]]
                for i, ri, si in zip(idx, out[1], out[2], strict=True):
                    rate[i], shared[i], starved[i] = ri, si, out[3]
                slowed_l[u] = out[3] or any(out[2]) or any(x != 1.0 for x in out[1])
        if not crashed:
            self.w_rate[jobs, w] = rate
            self.w_gshared[jobs, w] = shared
            self.w_starved[jobs, w] = starved
            self._node_slowed[want] = slowed_l
        return crashed, recheck

    def _mark_dirty(self, nodes: np.ndarray) -> None:
        """Nodes (-1 = padding, ignored) whose running workers changed: re-evaluate them."""
        if self._measured:
            self._dirty_ext[nodes] = True
            self._dirty_ext[-1] = False  # padding wrote the sentinel

    def _sharing_plan(
        self, running: np.ndarray, nodes: np.ndarray, which: np.ndarray
    ) -> dict[str, Any] | None:
        """The running workers of the nodes selected by bool ``which``, node by node.

        Each node's workers are in placement order (oldest first).

        Nodes of whole-GPU workers (each at most the node's GPUs) within host memory and
        without a failing pair go through :func:`~edgesched.envs.sharing.packed_rates`
        together; the others (``complex``) one at a time through :meth:`_node_outcome`.
        """
        cap = self.capacity
        r_all, w_all = np.nonzero(nodes >= 0)
        n_all = nodes[r_all, w_all]
        on = which[n_all]
        if not on.any():
            return None
        jobs = running[r_all]
        alloc = self.w_alloc[jobs, w_all]
        frac = np.abs(alloc[:, 1] - np.round(alloc[:, 1])) > GPU_EPS
        order = np.lexsort((self.w_seq[jobs[on], w_all[on]], n_all[on]))
        sel = np.flatnonzero(on)[order]
        r_s, w_s, n_s, jobs, alloc = r_all[sel], w_all[sel], n_all[sel], jobs[sel], alloc[sel]
        brk = np.empty(len(n_s), dtype=bool)
        brk[0] = True
        np.not_equal(n_s[1:], n_s[:-1], out=brk[1:])
        starts = np.flatnonzero(brk)
        seg = np.cumsum(brk) - 1
        node_u = n_s[starts]
        gpus = np.round(cap[node_u, 1])
        models = self.j_model[jobs]
        # whole GPUs, no request above the node's GPUs, memory within capacity
        ok_w = ~frac[sel] & (alloc[:, 1] <= gpus[seg] + GPU_EPS)
        ok = np.bincount(seg, weights=~ok_w, minlength=len(node_u)) == 0
        mem = np.bincount(seg, weights=alloc[:, 2], minlength=len(node_u))
        ok &= mem <= cap[node_u, 2] + GPU_EPS
        tab = self._coloc
        node_cls = self._node_class[node_u]
        fast = ok[seg]
        rate = np.ones(len(seg))
        shared_w = np.zeros(len(seg), dtype=bool)
        if fast.any():
            # segments renumbered among the fast nodes
            fseg = np.cumsum(ok) - 1
            rate[fast], shared_w[fast], failing = packed_rates(
                tab,
                fseg[seg[fast]],
                node_cls[ok],
                gpus[ok].astype(np.int64),
                models[fast],
                alloc[fast, 1],
                self.cfg.unmeasured_gpu_share,
            )
            ok[np.flatnonzero(ok)[failing]] = False
            fast = ok[seg]
        ends = np.append(starts[1:], len(seg))
        complex_ = [
            (int(node_u[i]), np.arange(starts[i], ends[i])) for i in np.flatnonzero(~ok).tolist()
        ]
        return {
            "r": r_s,
            "w": w_s,
            "jobs": jobs,
            "alloc": alloc,
            "models": models,
            "seg": seg,
            "node_u": node_u,
            "fast": fast,
            "rate": rate,
            "shared": shared_w,
            "complex": complex_,
        }

    def _store_rates(self, plan: dict[str, Any]) -> list[int]:
        """Store the rates of a :meth:`_sharing_plan`'s workers; nodes to re-check.

        Returns:
            The nodes whose survivors still hold a failing pair (decided next slot).
        """
        rate, shared, fast = plan["rate"].copy(), plan["shared"].copy(), plan["fast"]
        cpu, starved = cpu_rates(
            self._coloc,
            plan["seg"],
            self.capacity[plan["node_u"], 0],
            plan["models"],
            plan["alloc"],
        )
        rate[fast] *= cpu[fast]
        recheck = []
        for n, pos in plan["complex"]:
            crash, r, sh, _ = self._node_outcome(n, plan["models"][pos], plan["alloc"][pos])
            rate[pos], shared[pos] = r, sh
            if len(crash):
                recheck.append(n)
        jobs, w = plan["jobs"], plan["w"]
        self._node_slowed[plan["node_u"]] = True  # (a possibility, see _init_colocation)
        self.w_rate[jobs, w] = np.maximum(rate, 1e-12)
        self.w_gshared[jobs, w] = shared
        self.w_starved[jobs, w] = starved
        return recheck

    def _node_outcome(
        self,
        n: int,
        models: np.ndarray | list[int],
        alloc: np.ndarray | list[list[float]],
    ) -> tuple[list[int], list[float], list[bool], bool]:
        """What node ``n`` does to its workers (placement order): memoized.

        The outcome depends only on the node's GPU class and capacity and on the workers'
        models and allocations in order, which repeat, so it is computed once per such
        configuration (the dictionary is cleared past 65,536 entries). Callers must not
        modify the returned lists.

        Returns:
            :func:`~edgesched.envs.sharing.node_outcome`'s ``(crash, rate, gpu_shared,
            cpu_starved)``: positions of the workers whose jobs crash (newest first), each
            worker's rate relative to running alone if nothing crashed, whether it shares a
            GPU, and whether the node's cores are oversubscribed.
        """
        alloc_l = np.asarray(alloc, dtype=np.float64).reshape(-1, 3).tolist()
        key = (
            int(self._node_class[n]),
            *self.capacity[n].tolist(),
            *[(m, *a) for m, a in zip(np.asarray(models).tolist(), alloc_l, strict=True)],
        )
        out = self._coloc_memo.get(key)
        return self._outcome_miss(key) if out is None else out

    def _outcome_miss(self, key: tuple) -> tuple[list[int], list[float], list[bool], bool]:
        """Compute and memoize the outcome of a memo key (class, capacity, workers)."""
        cache = self._coloc_memo
        if len(cache) > 65_536:
            cache.clear()
        cls, workers = key[0], key[4:]
        out = node_outcome(
            self._coloc,
            self._pair_l[cls] if cls >= 0 else None,
            self._fail_l[cls] if cls >= 0 else None,
            list(key[1:4]),
            [wk[0] for wk in workers],
            [list(wk[1:]) for wk in workers],
            self.cfg.unmeasured_gpu_share,
        )
        cache[key] = out
        return out

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
