"""Workload and arrivals: every job of one episode of one copy, drawn at reset.

:func:`draw_workload` draws arrival slots, home nodes, models, worker counts, priorities,
sync schemes, targets, sizes and visibility from the copy's generator, in one fixed order
(the order is part of the scenario: changing it changes every trajectory). The result is a
:class:`Workload` of per-job arrays with the copy's local job ids ``0..J-1`` in arrival
order; the simulator installs it into the copy's block of its batched job arrays.

Arrivals are Poisson per node or cluster-wide, modulated by a diurnal sine and cluster-wide
bursts (a two-state Markov chain), or trace-driven (``trace_path``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# the simulator is passed in as ``sim`` (an EdgeClusterSim); typed Any so that this module
# does not import the core, which imports it
EdgeClusterSim = Any


@dataclass
class Workload:
    """The jobs of one episode of one copy (local ids, arrival order).

    Attributes are (J,) arrays unless noted; ``alloc_ok`` is (J, L). ``gpu_share`` is the
    share of a GPU each worker of a job holds per GPU of its level (1 but for part-GPU trace
    jobs), so job ``j`` at level ``l`` takes its model's allocation with the GPU scaled by it.
    ``vis_agent``/``vis_job`` are the (agent, job) visibility pairs sorted by arrival slot,
    ``vis_slot_ptr[s]`` the first pair arriving at slot ``s``.
    """

    num_jobs: int
    arrival: np.ndarray
    home: np.ndarray
    model: np.ndarray
    workers: np.ndarray
    prio: np.ndarray
    sync: np.ndarray
    min: np.ndarray
    target: np.ndarray
    eff: np.ndarray
    gpu_share: np.ndarray
    alloc_ok: np.ndarray
    vis_agent: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    vis_job: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    vis_slot_ptr: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    x90: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tau: np.ndarray = field(default_factory=lambda: np.zeros(0))
    max_samples: np.ndarray = field(default_factory=lambda: np.zeros(0))
    k: np.ndarray = field(default_factory=lambda: np.zeros(0))
    is_lm: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    samples_per_iter: np.ndarray = field(default_factory=lambda: np.zeros(0))
    iter_at_speed1: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    trace_window_start: float = float("nan")

    @property
    def max_workers(self) -> int:
        """The widest job's worker count (at least 1)."""
        return int(self.workers.max(initial=1))


def arrival_modulation(cfg: Any, rng: np.random.Generator) -> np.ndarray:
    """Per-slot multiplier of the arrival rate: diurnal sine times burst state."""
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


def draw_workload(sim: EdgeClusterSim, rng: np.random.Generator) -> Workload:
    """Draw one copy's episode workload from ``rng`` (see the module docstring).

    Args:
        sim: the simulator (its configuration, model tables and progress model are read).
        rng: the copy's generator, freshly seeded by ``reset``.
    """
    cfg = sim.cfg
    n = sim.agents_per_copy
    pm = sim.progress_model
    tw = sim._trace_wl
    tj = None  # indices of this episode's jobs in the prepared trace
    window_start = float("nan")
    if tw is not None:
        slot, tj, window_start = tw.window(
            rng, cfg.arrival_slots, cfg.trace_window_start_hours, cfg.trace_window_rule
        )
        home = rng.integers(n, size=len(slot))
    elif cfg.arrival_scope == "node":
        rate = cfg.arrival_rate * arrival_modulation(cfg, rng)
        counts = rng.poisson(rate[:, None] * np.ones((1, n)))
        slot = np.repeat(np.repeat(np.arange(cfg.arrival_slots), n), counts.ravel())
        home = np.repeat(np.tile(np.arange(n), cfg.arrival_slots), counts.ravel())
    else:
        rate = cfg.arrival_rate * arrival_modulation(cfg, rng)
        counts = rng.poisson(rate)
        slot = np.repeat(np.arange(cfg.arrival_slots), counts)
        home = rng.integers(n, size=len(slot))
    if cfg.max_jobs:
        slot, home = slot[: cfg.max_jobs], home[: cfg.max_jobs]
        tj = tj[: cfg.max_jobs] if tj is not None else None
    jn = len(slot)
    model = rng.choice(sim.num_models, size=jn, p=sim._model_p)
    if tj is not None:
        named = tw.model[tj]
        model = np.where(named >= 0, named, model)
    if pm.single_worker:
        workers = np.ones(jn, dtype=np.int64)
    elif tj is not None:
        workers = tw.workers[tj]
    else:
        wvals = np.array([w for w, _ in cfg.workers_dist], dtype=np.int64)
        workers = wvals[rng.choice(len(wvals), size=jn, p=probs(cfg.workers_dist))]
    pp = np.array(cfg.priority_probs) / np.sum(cfg.priority_probs)
    prio = rng.choice(len(pp), size=jn, p=pp)
    sync = rng.choice(len(sim._sync_names), size=jn, p=probs(cfg.sync_mix))
    target = rng.uniform(*cfg.target_quality, size=jn)
    if tj is not None:
        size_factor = tw.size_factor[tj]
    else:
        size_factor = np.exp(cfg.job_size_sigma * rng.standard_normal(jn))
    dmin = sim._min_demand_m[model]
    gpu_share = np.ones(jn)
    if tj is not None and cfg.trace_fractional_gpus and tw.gpu_fraction is not None:
        frac = tw.gpu_fraction[tj]
        if (frac < 1.0).any():
            # a part-GPU job's worker holds that share of a GPU at every level
            scale = np.ones((jn, 3))
            scale[:, 1] = frac
            dmin, gpu_share = dmin * scale, scale[:, 1].copy()
    wl = Workload(
        num_jobs=jn,
        arrival=slot.astype(np.int64),
        home=home.astype(np.int64),
        model=model,
        workers=workers,
        prio=prio,
        sync=sync,
        min=dmin,
        target=target,
        eff=sim._sync_eff[sync],
        # a job's allocation at each level is its model's, times its GPU share: looked up
        # when needed (LayoutMixin.alloc_of), since a (J, L, 3) table per episode was most
        # of a TapFinger reset (288 levels: 2.7 MB a copy, gathered and then copied)
        gpu_share=gpu_share,
        alloc_ok=sim._m_ok[model],
        trace_window_start=window_start,
    )
    pm.job_parameters(wl, size_factor, cfg, sim._m_tput)
    if cfg.visibility == "home":
        vis_agent, vis_job = wl.home, np.arange(jn)
    else:
        k = rng.integers(1, n + 1, size=jn)
        perm = np.argsort(rng.random((jn, n)), axis=1)
        take = np.arange(n)[None, :] < k[:, None]
        vis_agent = perm[take]
        vis_job = np.repeat(np.arange(jn), k)
        # the job's home (its reward owner while queued) is the first agent that sees it
        wl.home = perm[:, 0].astype(np.int64)
    # pairs sorted by arrival slot so each slot's arrivals are a contiguous range
    order = np.argsort(wl.arrival[vis_job], kind="stable")
    wl.vis_agent, wl.vis_job = vis_agent[order].astype(np.int64), vis_job[order]
    wl.vis_slot_ptr = np.searchsorted(
        wl.arrival[wl.vis_job],
        np.arange(max(cfg.arrival_slots, cfg.max_slots) + 2),
        side="left",
    )
    return wl


def static_job_features(sim: EdgeClusterSim, wl: Workload) -> np.ndarray:
    """(J, F) job features that never change, with the two dynamic columns zeroed.

    Layout: present, minimum demand / max capacity (3), workers / 4, log size / 20, priority
    one-hot, model one-hot, placed workers / 4, waiting slots / 100 (the last two are filled
    per step).
    """
    jn = wl.num_jobs
    return np.concatenate(
        [
            np.ones((jn, 1), np.float32),
            (wl.min / sim._cap_max).astype(np.float32),
            (wl.workers / 4.0)[:, None].astype(np.float32),
            (np.log1p(wl.x90) / 20.0)[:, None].astype(np.float32),
            np.eye(sim.num_priorities, dtype=np.float32)[wl.prio],
            np.eye(sim.num_models, dtype=np.float32)[wl.model],
            np.zeros((jn, 2), np.float32),
        ],
        axis=1,
    )


def probs(pairs: tuple[tuple[Any, float], ...]) -> np.ndarray:
    """Normalized weights of ``(value, weight)`` pairs."""
    w = np.array([p for _, p in pairs], dtype=np.float64)
    return w / w.sum()
