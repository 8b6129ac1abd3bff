"""Classic scheduling heuristics behind the policy interface.

Every scheduler here reads only what an agent may see: its observation (blocks and fields
named by :class:`~edgesched.envs.obs_layout.ObsLayout`, built from the
:class:`~edgesched.policy.EnvSpec`), its action mask, and - for Optimus - the graph view. All
decisions are vectorized over agents with numpy; small loops run only over pending slots or
allocation levels where unavoidable.

Shared conventions:

* **Feasibility comes from the mask only.** A scheduler scores the (pending slot, target,
  level) triples the mask allows and defers when none is allowed, so it can never take a
  masked action. Observed loads may be stale (``obs_delay``); the mask never is.
* **Task selection.** Unless a scheduler orders tasks itself (FIFO, SJF, Tiresias, DRF,
  Optimus) it serves the first pending slot, in queue order (priority class, then arrival),
  that has a feasible placement. With ``pending_slots == 1`` (the edge scenarios) this is the
  head of the queue.
* **Minimum allocation.** The lowest-index feasible level. Levels are ordered by size in both
  allocation modes, so this is the job's minimum demand (``scale`` mode: multiplier 1;
  ``grid`` mode: the smallest CPU count, then the smallest GPU count, that meets the minimum).
* **Units.** Loads are compared in units of the largest node's capacity: a target's free
  amount is ``free fraction x capacity / max capacity`` and a job's minimum demand is observed
  as ``demand / max capacity``.
* **Allocation sizes.** Schedulers that size allocations (Tiresias, DRF, Optimus) need what
  each level allocates: :func:`level_table` reads it from the static
  :class:`~edgesched.policy.EnvSpec` (a documented fact of the action space, like the number
  of levels).
"""

from __future__ import annotations

import math

import numpy as np

from edgesched.envs.view import CentralObsLayout, ObsLayout
from edgesched.policy import EnvSpec, Scheduler

from . import register_baseline


# ---------------------------------------------------------------------------- static facts
def level_table(spec: EnvSpec) -> tuple[np.ndarray, np.ndarray]:
    """What each allocation level gives a task, as ``alloc = min_demand * scale + add``.

    ``scale`` and ``add`` have shape (L, 3) over (cpu, gpu, mem); ``add`` is in units of the
    largest node's capacity so it compares with observed (normalized) loads. Read from the
    static :class:`EnvSpec`.
    """
    scale = np.asarray(spec.level_scale, dtype=np.float64)
    add = np.asarray(spec.level_add, dtype=np.float64)
    return scale, add / np.maximum(np.asarray(spec.cap_max, dtype=np.float64), 1e-12)


def obs_layout(spec: EnvSpec) -> ObsLayout:
    """Where each block and field of an agent's observation lies, for ``spec``'s sizes."""
    return ObsLayout.build(
        spec.pending_slots, spec.num_targets, spec.job_features, spec.num_priorities
    )


class _View:
    """One decision round's observations parsed into named arrays (all agents at once)."""

    def __init__(self, spec: EnvSpec, obs: np.ndarray, mask: np.ndarray) -> None:
        n, p, k1, f = len(obs), spec.pending_slots, spec.num_targets, spec.job_features
        lay = obs_layout(spec)
        self.n = n
        self.jobs = obs[:, lay.jobs].reshape(n, p, f).astype(np.float64)
        self.tg = obs[:, lay.targets].reshape(n, k1, lay.target_width).astype(np.float64)
        self.pm = spec.placement_mask(mask)  # (N, P, K1, L)
        self.pair_ok = self.pm.any(axis=-1)  # (N, P, K1)
        self.slot_ok = self.pair_ok.any(axis=-1)  # (N, P)
        self.min_level = self.pm.argmax(axis=-1)  # (N, P, K1): lowest feasible level
        cap = self.tg[..., lay.node_capacity]
        self.cap = cap  # (N, K1, 3) capacity / max capacity
        self.free_frac = self.tg[..., lay.node_free]  # (N, K1, 3) free fraction
        self.free = self.free_frac * cap  # (N, K1, 3) free / max capacity
        self.speed = self.tg[..., lay.node_speed]  # (N, K1) speed / max speed
        self.node_workers = self.tg[..., lay.node_workers]  # (N, K1) running workers / 8
        self.min_demand = self.jobs[..., lay.job_min_demand]  # (N, P, 3)
        self.workers = np.maximum(np.rint(self.jobs[..., lay.job_workers] * 4.0), 1.0)
        self.placed = self.jobs[..., lay.job_placed]
        self.wait = self.jobs[..., lay.job_wait]
        self.size = self.jobs[..., lay.job_size]
        self.model = self.jobs[..., lay.job_model].argmax(axis=-1)
        self.qlen = obs[:, lay.queue].astype(np.float64) * 10.0

    def alloc(self, table: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """Allocation of every (pending slot, level), (N, P, L, 3), max-capacity units."""
        scale, add = table
        return self.min_demand[:, :, None, :] * scale[None, None] + add[None, None]


def _first_true(ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of the first True along the last axis, and whether there is one."""
    return ok.argmax(axis=-1), ok.any(axis=-1)


def _argmax_where(score: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Argmax of ``score`` over the last axis among ``ok`` entries (ties: lowest index)."""
    return np.where(ok, score, -np.inf).argmax(axis=-1)


def _take(a: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """``a[n, slot[n]]`` for every agent n."""
    return a[np.arange(len(slot)), slot]


def _encode(spec: EnvSpec, has: np.ndarray, slot, target, level) -> np.ndarray:
    """Actions of the chosen placements; 0 (defer) where ``has`` is False."""
    a = spec.action(np.asarray(slot), np.asarray(target), np.asarray(level))
    return np.where(has, a, 0).astype(np.int64)


def _least_loaded_target(v: _View, slot: np.ndarray) -> np.ndarray:
    """Feasible target with the most observed free GPU fraction (ties: lowest index)."""
    ok = _take(v.pair_ok, slot)  # (N, K1)
    return _argmax_where(v.free_frac[..., 1], ok)


def _ordered_slot(v: _View, *keys: np.ndarray) -> np.ndarray:
    """Pending slot with the smallest lexicographic key among feasible slots.

    ``keys`` are (N, P) arrays, most significant first; ties fall to queue order.
    """
    p = v.slot_ok.shape[1]
    idx = np.broadcast_to(np.arange(p), v.slot_ok.shape)
    order = np.lexsort((idx, *reversed(keys), ~v.slot_ok), axis=-1)
    return order[:, 0]


class _CentralMixin:
    """Helpers for the central view (the Gymnasium cluster head).

    Observation: job features, N x (node features, log bandwidth to the job's home), 3
    extras; action ``1 + n * L + l``; the mask is ``action_masks()``.
    """

    spec: EnvSpec

    def _central(self, obs: np.ndarray, mask: np.ndarray):
        n, lv = self.spec.num_agents, self.spec.num_levels
        lay = CentralObsLayout.build(self.spec.job_features, n)
        obs = np.asarray(obs, dtype=np.float64)
        nodes = obs[lay.nodes].reshape(n, lay.node_width)
        pm = np.asarray(mask)[1:].reshape(n, lv)
        return obs[lay.job], nodes, pm, pm.any(axis=1), pm.argmax(axis=1)

    @staticmethod
    def _central_action(node_ok: np.ndarray, node: int, level: np.ndarray, lv: int) -> int:
        if not node_ok.any():
            return 0
        return int(1 + node * lv + level[node])


# ---------------------------------------------------------------------------- schedulers
@register_baseline
class RoundRobinScheduler(Scheduler):
    """Round-robin placement over each agent's neighbourhood.

    Rule: each agent keeps a pointer into its targets (itself, then its K neighbours); it
    places its first feasible pending task on the first feasible target at or after the
    pointer, at the minimum allocation, and moves the pointer past that target. Infeasible
    targets are skipped; with none feasible it defers. The classic load-spreading dispatcher
    (e.g. the round-robin baseline of Kubernetes-style and edge-offloading studies such as
    SROLE, Ghosh et al.).
    """

    name = "round_robin"

    def reset(self, seed: int | None = None) -> None:
        """Point every agent at its own node."""
        self.ptr = np.zeros(self.spec.num_agents, dtype=np.int64)

    def act(self, obs, mask, state, graph=None) -> np.ndarray:
        """Next feasible target in cyclic order, minimum level."""
        v = _View(self.spec, obs, mask)
        slot, has = _first_true(v.slot_ok)
        ok = _take(v.pair_ok, slot)  # (N, K1)
        k1 = ok.shape[1]
        order = (self.ptr[:, None] + np.arange(k1)[None]) % k1
        first = np.take_along_axis(ok, order, axis=1).argmax(axis=1)
        target = order[np.arange(v.n), first]
        self.ptr = np.where(has, (target + 1) % k1, self.ptr)
        level = _take(v.min_level, slot)[np.arange(v.n), target]
        return _encode(self.spec, has, slot, target, level)


@register_baseline
class LeastLoadedScheduler(Scheduler, _CentralMixin):
    """Greedy least-loaded placement on observed free capacity.

    Rule: the first feasible pending task goes to the feasible target with the largest
    observed free GPU fraction (ties: lowest target index, i.e. the agent itself first), at
    the minimum allocation. The standard greedy load balancer ("join the least loaded
    server"; e.g. Gandhi et al. and the least-loaded baselines of Gavel/Pollux-era cluster
    schedulers). Central view: :meth:`act_central` applies the same rule over all nodes.
    """

    name = "least_loaded"

    def act(self, obs, mask, state, graph=None) -> np.ndarray:
        """Most free GPU fraction, minimum level."""
        v = _View(self.spec, obs, mask)
        slot, has = _first_true(v.slot_ok)
        target = _least_loaded_target(v, slot)
        level = _take(v.min_level, slot)[np.arange(v.n), target]
        return _encode(self.spec, has, slot, target, level)

    def act_central(self, obs: np.ndarray, mask: np.ndarray) -> int:
        """Central view: the feasible node with the most free GPU fraction, minimum level."""
        _, nodes, _, node_ok, level = self._central(obs, mask)
        free_frac = nodes[:, obs_layout(self.spec).node_free]
        node = int(_argmax_where(free_frac[:, 1], node_ok))
        return self._central_action(node_ok, node, level, self.spec.num_levels)


@register_baseline
class BestFitScheduler(Scheduler, _CentralMixin):
    """Best-fit (tightest-fit) placement.

    Rule: the first feasible pending task goes, at the minimum allocation, to the feasible
    target whose free capacity after the placement is smallest: least leftover GPUs, then
    least leftover CPUs (in units of the largest node's capacity), ties by target index.
    Classic bin packing best fit (Johnson, 1974), as used by Borg-style schedulers
    (Verma et al., EuroSys'15) to limit fragmentation. Central view: :meth:`act_central`.
    """

    name = "best_fit"

    @staticmethod
    def _leftover(free: np.ndarray, demand: np.ndarray) -> np.ndarray:
        left = free - demand
        return left[..., 1] + 1e-3 * left[..., 0]

    def act(self, obs, mask, state, graph=None) -> np.ndarray:
        """Tightest feasible fit, minimum level."""
        v = _View(self.spec, obs, mask)
        slot, has = _first_true(v.slot_ok)
        demand = _take(v.min_demand, slot)[:, None, :]  # (N, 1, 3)
        score = -self._leftover(v.free, demand)  # (N, K1)
        target = _argmax_where(score, _take(v.pair_ok, slot))
        level = _take(v.min_level, slot)[np.arange(v.n), target]
        return _encode(self.spec, has, slot, target, level)

    def act_central(self, obs: np.ndarray, mask: np.ndarray) -> int:
        """Central view: tightest feasible node for the current job, minimum level."""
        job, nodes, _, node_ok, level = self._central(obs, mask)
        lay = obs_layout(self.spec)
        free = nodes[:, lay.node_free] * nodes[:, lay.node_capacity]
        demand = job[lay.job_min_demand]
        node = int(_argmax_where(-self._leftover(free, demand), node_ok))
        return self._central_action(node_ok, node, level, self.spec.num_levels)


@register_baseline
class FIFOScheduler(Scheduler):
    """First-in-first-out task ordering with least-loaded placement.

    Rule: among the pending slots with a feasible placement, serve the job that has waited
    longest (ties: queue order), on the least-loaded feasible target (most free GPU
    fraction) at the minimum allocation. FIFO ignores priority classes, unlike the queue
    order. The default of YARN/Kubernetes batch queues. With ``pending_slots == 1`` it
    reduces to the head of the queue, i.e. to ``least_loaded``.
    """

    name = "fifo"

    def _slot(self, v: _View) -> np.ndarray:
        return _ordered_slot(v, -v.wait)

    def act(self, obs, mask, state, graph=None) -> np.ndarray:
        """Ordered task, least-loaded target, minimum level."""
        v = _View(self.spec, obs, mask)
        slot = self._slot(v)
        has = _take(v.slot_ok, slot)
        target = _least_loaded_target(v, slot)
        level = _take(v.min_level, slot)[np.arange(v.n), target]
        return _encode(self.spec, has, slot, target, level)


@register_baseline
class SJFScheduler(FIFOScheduler):
    """Shortest-job-first task ordering with least-loaded placement.

    Rule: among the pending slots with a feasible placement, serve the job of shortest
    expected time (ties: fewer workers, longest waiting, then queue order), on the
    least-loaded feasible target at the minimum allocation. Classic SJF (Smith, 1956; the
    SJF baseline of Tiresias/Gandiva-era studies). A job's expected time is its declared
    size (samples to 90% quality, the log-size feature) over its model's rate on one
    reference worker (``EnvSpec.model_rates``, the measured profiles) and over its workers:
    sizes count samples, which models process at rates four orders of magnitude apart, so
    the size alone would compare only within a model. Without model rates (TapFinger's
    rules, where every task declares the same size) it orders by size, i.e. equals FIFO.
    With ``pending_slots == 1`` it reduces to the head of the queue, i.e. to
    ``least_loaded``.
    """

    name = "sjf"

    def __init__(self, spec: EnvSpec) -> None:
        super().__init__(spec)
        rates = np.asarray(spec.model_rates, dtype=np.float64)
        self.log_rate = np.log(rates) if len(rates) else None

    def _slot(self, v: _View) -> np.ndarray:
        return _ordered_slot(v, self.expected_time(v), v.workers, -v.wait)

    def expected_time(self, v: _View) -> np.ndarray:
        """(N, P) log of each pending job's expected seconds on its reference workers.

        ``log(size / (rate[model] * workers))``, with the size from the log-size feature
        (``log1p(size) / 20``); the size feature alone where the spec has no model rates.
        """
        if self.log_rate is None:
            return v.size
        return 20.0 * v.size - self.log_rate[v.model] - np.log(v.workers)


@register_baseline
class TiresiasScheduler(Scheduler):
    """Tiresias: least attained service first (Gu et al., NSDI'19), non-preemptive form.

    Rule: serve the pending job with the least attained service. Nothing runs before its
    whole gang is placed, so a pending job's service is the part of its gang already placed
    (placed workers); ties go to the longest waiting job, then queue order. Its next worker
    goes to the least-loaded feasible target (most free GPU fraction) with the allocation of
    TapFinger's non-preemptive Tiresias: ``ceil(capacity / (pending +
    running))`` per resource, where capacity is the target's, pending is the agent's queue
    length and running the target's running workers, mapped to the feasible level nearest to
    it (L1 distance over CPU and GPU; ties to the smaller level).

    Adaptation: Tiresias proper preempts, demoting jobs across priority queues as their
    attained GPU-time grows; here allocations are final, so only the ordering and the
    equal-share sizing survive. A job back in its queue after a crash
    (``collision_mode='measured'``) counts as unserved: the observation does not carry the
    service it attained before the crash. The ceiling is taken in the node's own units
    (cores, GPUs), recovered from the observed capacity fraction where the level table is
    absolute.
    """

    name = "tiresias"

    def __init__(self, spec: EnvSpec) -> None:
        super().__init__(spec)
        self.table = level_table(spec)

    def act(self, obs, mask, state, graph=None) -> np.ndarray:
        """Least attained service; equal-share level on the least-loaded target."""
        v = _View(self.spec, obs, mask)
        slot = _ordered_slot(v, v.placed, -v.wait)
        has = _take(v.slot_ok, slot)
        target = _least_loaded_target(v, slot)
        ar = np.arange(v.n)
        cap = v.cap[ar, target]  # (N, 3) target capacity / max capacity
        sharers = np.maximum(v.qlen + np.rint(v.node_workers[ar, target] * 8.0), 1.0)
        share = cap / sharers[:, None]
        # ceil in the node's own units (one core, one GPU) when levels are absolute (grid);
        # scale levels are multiples of the job's minimum, so the ceiling is on the multiple
        add = self.table[1]
        if add[:, :2].any():
            unit = np.array([add[add[:, r] > 0, r].min(initial=np.inf) for r in range(2)])
            unit = np.where(np.isfinite(unit), unit, 1.0)
            share[:, :2] = np.ceil(share[:, :2] / unit - 1e-9) * unit
        else:
            need = _take(v.min_demand, slot)[:, :2]
            ratio = np.where(need > 1e-9, share[:, :2] / np.maximum(need, 1e-12), np.inf)
            mult = np.ceil(ratio.min(axis=1) - 1e-9)
            mult = np.where(np.isfinite(mult), np.maximum(mult, 1.0), 1.0)
            share[:, :2] = need * mult[:, None]
        alloc = _take(v.alloc(self.table), slot)  # (N, L, 3)
        dist = np.abs(alloc[..., :2] - share[:, None, :2]).sum(axis=-1)
        ok = _take(v.pm, slot)[ar, target]  # (N, L)
        level = _argmax_where(-dist, ok)
        return _encode(self.spec, has, slot, target, level)


@register_baseline
class DRFScheduler(Scheduler):
    """Dominant resource fairness (Ghodsi et al., NSDI'11), adapted to placement.

    Rule: each job is a DRF user. A job's dominant share is its placed workers times its
    dominant demand (largest minimum demand over CPU/GPU/memory, in units of the largest
    node). The agent serves the feasible pending job with the smallest dominant share (ties:
    queue order), progressive-filling style: on the feasible target whose dominant
    utilisation after placement (max over resources of used + allocation over capacity) is
    lowest, at the largest feasible level whose dominant share of that target stays within
    the equal share ``1 / (pending + running)`` (pending: the agent's queue; running: the
    target's running workers), or the minimum level if none does.

    Adaptation: DRF allocates a shared pool among long-lived users; here each decision is
    one task's allocation, so fairness is equalising each job's dominant share of its node.
    Owners' (agents') aggregate shares are not observable locally and are not used.
    """

    name = "drf"

    def __init__(self, spec: EnvSpec) -> None:
        super().__init__(spec)
        self.table = level_table(spec)

    def act(self, obs, mask, state, graph=None) -> np.ndarray:
        """Lowest dominant share first; equal dominant share per job on its node."""
        v = _View(self.spec, obs, mask)
        dom_demand = v.min_demand.max(axis=-1)
        slot = _ordered_slot(v, v.placed * dom_demand)
        has = _take(v.slot_ok, slot)
        ar = np.arange(v.n)
        inv_cap = np.where(v.cap > 1e-12, 1.0 / np.maximum(v.cap, 1e-12), 0.0)  # (N, K1, 3)
        used = v.cap - v.free
        demand = _take(v.min_demand, slot)[:, None, :]
        after = ((used + demand) * inv_cap).max(axis=-1)  # (N, K1)
        target = _argmax_where(-after, _take(v.pair_ok, slot))
        alloc = _take(v.alloc(self.table), slot)  # (N, L, 3)
        dom = (alloc * inv_cap[ar, target][:, None, :]).max(axis=-1)  # (N, L)
        sharers = np.maximum(v.qlen + np.rint(v.node_workers[ar, target] * 8.0), 1.0)
        ok = _take(v.pm, slot)[ar, target]  # (N, L)
        within = ok & (dom <= 1.0 / sharers[:, None] + 1e-9)
        biggest = _argmax_where(dom, within)  # largest dominant share within the fair share
        level = np.where(within.any(axis=1), biggest, ok.argmax(axis=1))
        return _encode(self.spec, has, slot, target, level)


@register_baseline
class MinAllocScheduler(Scheduler, _CentralMixin):
    """Minimum allocation: "allocate what is requested" (TapFinger's "Min" baseline).

    Rule: the first feasible pending task goes to the first feasible target in neighbourhood
    order (the agent itself first) at the minimum allocation, the default of container
    schedulers that grant exactly the requested resources (Kubernetes requests; TapFinger,
    Li et al., INFOCOM'23, "Min"). Unlike TapFinger's Min, the task is the first feasible in
    queue order rather than a random one, so the baseline is deterministic. Central view:
    :meth:`act_central` places on the first feasible node.
    """

    name = "min_alloc"

    def act(self, obs, mask, state, graph=None) -> np.ndarray:
        """First feasible target, minimum level."""
        v = _View(self.spec, obs, mask)
        slot, has = _first_true(v.slot_ok)
        target, _ = _first_true(_take(v.pair_ok, slot))
        level = _take(v.min_level, slot)[np.arange(v.n), target]
        return _encode(self.spec, has, slot, target, level)

    def act_central(self, obs: np.ndarray, mask: np.ndarray) -> int:
        """Central view: the first feasible node, minimum level."""
        _, _, _, node_ok, level = self._central(obs, mask)
        node = int(node_ok.argmax())
        return self._central_action(node_ok, node, level, self.spec.num_levels)


@register_baseline
class OptimusScheduler(Scheduler):
    """Optimus: greedy marginal gain on an online-fitted speed model (Peng et al., EuroSys'18).

    What is fitted, and from what: between two decision rounds in which the clock advanced
    one slot (detected from the time-of-day features), every job running in both rounds
    (graph view: ``running`` ids and their normalized quality, the feature after the job
    block) contributes one sample of its per-slot quality gain ``dq``. Its compute is
    ``e = workers x min over workers (GPU allocation x node speed)`` (``runs_on`` edge
    attributes, node speed feature; the slowest worker paces synchronous training). Per model
    (the model one-hot) we fit, by ridge-regularised least squares on running sums,

        log dq = a_m + b_m log e + c_m log(1.2 - q)

    (a power law in compute, times a slow-down as the job converges; prior (0, 0.5, 0.5),
    ridge weight 1). Optimus fits an iteration-time model and a convergence curve; quality
    per slot folds both into one observable.

    Decision (Optimus's greedy marginal gain, one placement per agent and round): for every
    feasible (pending job, target, level) the predicted progress rate ``r`` of the job at
    ``q = 0`` with that allocation on that target's speed, divided by the resource it costs,
    ``max over resources (allocation / target's observed free amount)`` - the bottleneck
    share it consumes. The agent takes the triple with the best gain per resource (ties:
    lowest index). Because ``b_m < 1`` fits concave speed-ups, extra GPUs are bought only
    when they are cheap, i.e. when another resource is the bottleneck.

    Adaptation: Optimus re-allocates all running jobs every interval (preemptive); here only
    new placements are chosen.
    """

    name = "optimus"
    needs_graph = True
    prior = np.array([0.0, 0.5, 0.5])
    ridge = 1.0

    def __init__(self, spec: EnvSpec) -> None:
        super().__init__(spec)
        self.table = level_table(spec)

    def reset(self, seed: int | None = None) -> None:
        """Forget the fitted model and the last round."""
        m = max(self.spec.num_models, 1)
        self.xtx = np.zeros((m, 3, 3))
        self.xty = np.zeros((m, 3))
        self.samples = np.zeros(m, dtype=np.int64)
        self.prev_time: np.ndarray | None = None
        self.prev_ids = np.zeros(0, dtype=np.int64)
        self.prev_q = np.zeros(0)
        self.prev_e = np.zeros(0)
        self.prev_m = np.zeros(0, dtype=np.int64)

    def coef(self) -> np.ndarray:
        """Current fitted coefficients (M, 3): ``a_m, b_m, c_m``."""
        eye = self.ridge * np.eye(3)
        return np.linalg.solve(self.xtx + eye, (self.xty + self.ridge * self.prior)[..., None])[
            ..., 0
        ]

    def _observe(self, obs: np.ndarray, graph: dict) -> None:
        lay = obs_layout(self.spec)
        ids = np.asarray(graph["ids"]["running"], dtype=np.int64)
        # running jobs: the job block's features, then quality, then sync time
        feat = graph["nodes"]["running"]
        q = feat[:, lay.job_width].astype(np.float64) if len(ids) else np.zeros(0)
        model = feat[:, lay.job_model].argmax(axis=1) if len(ids) else np.zeros(0, int)
        workers = (
            np.maximum(np.rint(feat[:, lay.job_workers] * 4.0), 1.0) if len(ids) else np.zeros(0)
        )
        r_idx, node = graph["edges"][("running", "runs_on", "node")]
        attr = np.asarray(graph["edge_attr"][("running", "runs_on", "node")], dtype=np.float64)
        res = np.where(attr[:, 1] > 0, attr[:, 1], attr[:, 0])  # GPU, or CPU if none
        speed = graph["nodes"]["node"][:, lay.node_speed].astype(np.float64)
        per = np.full(len(ids), np.inf)
        np.minimum.at(per, r_idx, res * speed[node])
        e = workers * np.where(np.isfinite(per), per, 0.0)
        time = obs[0, lay.time].astype(np.float64)
        if self.prev_time is not None and not np.array_equal(time, self.prev_time):
            _, i_prev, i_now = np.intersect1d(self.prev_ids, ids, return_indices=True)
            dq = q[i_now] - self.prev_q[i_prev]
            q0, e0 = self.prev_q[i_prev], self.prev_e[i_prev]
            good = (dq > 1e-12) & (e0 > 0) & (q0 < 1.0)
            if good.any():
                x = np.stack(
                    [np.ones(good.sum()), np.log(e0[good]), np.log(1.2 - q0[good])], axis=1
                )
                y = np.log(dq[good])
                mm = self.prev_m[i_prev][good]
                np.add.at(self.xtx, mm, x[:, :, None] * x[:, None, :])
                np.add.at(self.xty, mm, x * y[:, None])
                np.add.at(self.samples, mm, 1)
        self.prev_time = time
        self.prev_ids, self.prev_q, self.prev_e, self.prev_m = ids, q, e, model

    def act(self, obs, mask, state, graph=None) -> np.ndarray:
        """Best predicted progress per unit of bottleneck resource."""
        if graph is not None:
            self._observe(obs, graph)
        v = _View(self.spec, obs, mask)
        coef = self.coef()[v.model]  # (N, P, 3)
        alloc = v.alloc(self.table)  # (N, P, L, 3)
        res = np.where(alloc[..., 1] > 0, alloc[..., 1], alloc[..., 0])  # (N, P, L)
        speed = v.speed  # (N, K1)
        e = v.workers[:, :, None, None] * res[:, :, None, :] * speed[:, None, :, None]
        log_rate = (
            coef[..., 0, None, None]
            + coef[..., 1, None, None] * np.log(np.maximum(e, 1e-12))
            + coef[..., 2, None, None] * math.log(1.2)
        )  # (N, P, K1, L)
        free = np.maximum(v.free, 1e-9)[:, None, :, None, :]  # (N, 1, K1, 1, 3)
        need = alloc[:, :, None, :, :]  # (N, P, 1, L, 3)
        cost = np.where(need > 1e-12, need / free, 0.0).max(axis=-1)  # (N, P, K1, L)
        score = log_rate - np.log(np.maximum(cost, 1e-12))
        n = v.n
        flat = _argmax_where(score.reshape(n, -1), v.pm.reshape(n, -1))
        has = v.slot_ok.any(axis=1)
        return np.where(has, 1 + flat, 0).astype(np.int64)
