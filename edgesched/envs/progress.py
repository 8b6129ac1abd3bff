"""Progress models: how a running job advances per slot (a registry, like the sync schemes).

A progress model owns everything that depends on what "progress" means:

* the model catalog it accepts and each model's minimum demand;
* a worker's samples per second at each allocation level (the throughput table);
* the per-job convergence parameters drawn with the workload;
* one slot of progress of the running jobs, and the JCT lower bound.

Two are registered:

* ``profile`` (default): measured, concave throughput per model (Pollux/Gavel/TapFinger
  profiles, catalog module) and convergence curves ``q = 1 - exp(-(x / tau) ** k)``;
* ``tapfinger``: the original TapFinger environment's rules: IMG jobs progress
  0.25 per slot, LM jobs ``tanh(g / 16) * sqrt(1.2 - p)`` with ``g`` GPUs.

Adding one: subclass :class:`ProgressModel` and call :func:`register_progress_model`; the
scenario parameter ``progress_model`` then accepts its name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .catalog import model_catalog
from .errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from .workload import Workload

# the simulator is passed in as ``sim`` (an EdgeClusterSim); typed Any so that this module
# does not import the core, which imports it
EdgeClusterSim = Any

TAPFINGER_MODELS = ("IMG", "LM")
"""TapFinger's job types; only used with ``progress_model='tapfinger'``."""
TAPFINGER_MIN_DEMAND = (2.0, 1.0, 0.0)
"""Minimum (cpu, gpu, mem) of a TapFinger task. The original code's settings give every
type the same minimum: (2 CPUs, 1 GPU) for IMG and LM in its six-agent heterogeneous setting
(``job_min_requirement`` in ``img/hetero_6_agent/config.py`` and ``utils/config.py`` of
github.com/nooblyh/TapFinger at 008b4f1), (1, 1) for all three types in its trace setting.
Memory is not a TapFinger resource."""


class ProgressModel:
    """Base class of progress models (see the module docstring).

    Attributes:
        name: registry key (the value of the ``progress_model`` parameter).
        single_worker: jobs have exactly one worker (no draw of the worker count, no sync).
        has_throughput: ``throughput_table`` gives samples/s (else iteration "seconds" are
            the GPU count of the allocation, as TapFinger's rules need).
    """

    name = ""
    single_worker = False
    has_throughput = True

    def __init__(self, model_names: tuple[str, ...], capacity: np.ndarray, cfg: Any = None) -> None:
        self.model_names = model_names
        self.cfg = cfg
        self.min_demand = self._min_demand(model_names)
        too_big = (self.min_demand[:, None, :] > capacity[None, :, :]).any(-1).all(1)
        if too_big.any():
            raise ConfigError(
                f"models {[model_names[i] for i in np.flatnonzero(too_big)]} need more than any "
                "node's capacity; remove them or add larger tiers"
            )

    def _min_demand(self, names: tuple[str, ...]) -> np.ndarray:
        raise NotImplementedError

    def throughput_table(self, alloc: np.ndarray) -> np.ndarray | None:
        """(M, L) samples/s of one worker at speed 1 per model and allocation level."""
        return None

    def reference_rates(self) -> np.ndarray | None:
        """(M,) samples/s of one reference worker per model, or ``None`` without throughputs.

        The reference worker is the one a job's size is declared on: one GPU at speed 1 with
        the model's minimum cores. A job's size over its model's rate is the time the job
        is expected to take on one such worker, comparable across models.
        """
        return None

    def job_parameters(
        self, wl: Workload, size_factor: np.ndarray, cfg: Any, tput: np.ndarray | None
    ) -> None:
        """Set the workload's per-job progress arrays (``tau``, ``x90``, ``max_samples``...).

        Args:
            wl: the copy's workload (models, workers, sync efficiencies drawn).
            size_factor: (J,) lognormal (or trace) size multipliers.
            cfg: the scenario configuration.
            tput: the (M, L) :meth:`throughput_table`, or ``None``.
        """
        raise NotImplementedError

    def iteration_seconds(
        self, sim: EdgeClusterSim, jobs: np.ndarray, level: np.ndarray, nodes: np.ndarray
    ) -> np.ndarray:
        """What is stored per placed worker (``w_iter0``) for :meth:`advance` to read."""
        raise NotImplementedError

    def advance(
        self, sim: EdgeClusterSim, running: np.ndarray, nodes: np.ndarray, slow: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """One slot of progress of ``running`` jobs (workers on ``nodes``, -1 = padding).

        Args:
            sim: the simulator (its ``progress`` is updated in place).
            running: job ids.
            nodes: (R, W) worker nodes.
            slow: (R, W) per-worker slowdown factors (>= 1) of the collision mode, or
                ``None`` when no worker is slowed.

        Returns:
            ``(quality, done)``: the jobs' new normalized quality and whether each finished.
        """
        raise NotImplementedError

    def lower_bound(self, sim: EdgeClusterSim, wl: Workload) -> np.ndarray:
        """Per-job JCT lower bound in slots of copy workload ``wl``."""
        raise NotImplementedError

    def final_metric(self, model: np.ndarray, quality: np.ndarray) -> np.ndarray | None:
        """The models' own metric (accuracy, perplexity...) at ``quality``, if defined."""
        return None


class ProfileProgress(ProgressModel):
    """Measured throughput and convergence curves (the default).

    A job iterates: each worker processes ``local_bsz`` samples at its measured throughput
    (``base * speed * g ** alpha * min(1, c / (kappa g)) ** gamma``, fitted from Pollux's
    placements by ``scripts/derive_profiles.py``), the slowest worker sets the compute time,
    and the sync scheme adds its time. Simplifications (each a dynamics choice of the
    registered versions; README, *The model in one page*):

    * the batch is per worker whatever its GPUs, while ``g ** alpha`` was fitted at
      Pollux's per-GPU batch, so a ``g``-GPU worker synchronizes ``g`` times as often per
      sample as the measured replicas did (known deviation: wide workers of sync-heavy jobs
      run slower than the data implies);
    * progress per sample is independent of the batch size (Pollux's statistical
      efficiency is not modelled: assumed);
    * a job's size is drawn around ``job_size_median_slots`` of its reference throughput for
      every model, not from Pollux's measured samples to 90% quality (assumed), and an
      epoch is a tenth of it.
    """

    name = "profile"

    def _min_demand(self, names: tuple[str, ...]) -> np.ndarray:
        cat = model_catalog()
        bad = [n for n in names if n not in cat.names]
        if bad:
            raise ConfigError(f"models names unknown model(s) {bad}; catalog: {list(cat.names)}")
        idx = np.array([cat.index(n) for n in names])
        self.cat_idx = idx
        self.base = cat.base_tput[idx]
        self.bsz = cat.local_bsz[idx]
        self.alpha = cat.gpu_alpha[idx]
        self.kappa = cat.cpu_per_gpu[idx]
        self.gamma = cat.cpu_gamma[idx]
        self.mb = cat.model_mb[idx]
        self.convk = cat.conv_k[idx]
        self.q90f = cat.q90_factor[idx]
        return cat.min_demand[idx]

    def throughput_table(self, alloc: np.ndarray) -> np.ndarray:
        """See :meth:`ProgressModel.throughput_table`."""
        m = np.arange(len(self.model_names))[:, None]
        c, g = alloc[..., 0], alloc[..., 1]
        # grid levels without a GPU: c / 0 = inf, so cpu_ok = 1 and the throughput is 0
        # (those levels are below every model's minimum demand and masked anyway)
        with np.errstate(divide="ignore", invalid="ignore"):
            cpu_ok = np.minimum(1.0, c / (self.kappa[m] * g))
            return self.base[m] * g ** self.alpha[m] * cpu_ok ** self.gamma[m]

    def reference_rates(self) -> np.ndarray:
        """See :meth:`ProgressModel.reference_rates`: one T4 GPU, the model's minimum CPUs."""
        ref_cpu = np.minimum(1.0, self.min_demand[:, 0] / self.kappa) ** self.gamma
        return self.base * ref_cpu

    def job_parameters(self, wl, size_factor, cfg, tput):
        """See :meth:`ProgressModel.job_parameters`."""
        m = wl.model
        ref_tput = self.reference_rates()[m]
        wl.x90 = cfg.job_size_median_slots * size_factor * cfg.slot_seconds * ref_tput
        wl.tau = wl.x90 / self.q90f[m]
        # an epoch is a tenth of the samples to 90% quality (the model leaves the dataset
        # size free; this keeps the epoch limit meaningful for every model)
        wl.max_samples = cfg.max_epochs * wl.x90 / 10.0
        wl.k = self.convk[m]
        wl.samples_per_iter = wl.workers * self.bsz[m] * wl.eff
        with np.errstate(divide="ignore"):  # zero-GPU grid levels: infinite time
            wl.iter_at_speed1 = self.bsz[m][:, None] / tput[m]

    def iteration_seconds(self, sim, jobs, level, nodes):
        """``local_bsz / throughput`` of one worker alone on its node (no contention).

        The throughput ``base * speed * g ** alpha * min(1, c / (kappa g)) ** gamma`` is the
        measured, concave one of the catalog; its speed-free part is tabulated per (job,
        level) at reset.
        """
        return sim._j_iter_at_speed1[jobs, level] / sim.speed[nodes]

    def quality_of(self, sim: EdgeClusterSim, jobs: np.ndarray) -> np.ndarray:
        """Normalized quality of ``jobs`` at their current progress (samples processed)."""
        u = (sim.progress[jobs] / sim.j_tau[jobs]) ** sim.j_k[jobs]
        return -np.expm1(-u)

    def advance(self, sim, running, nodes, slow):
        """See :meth:`ProgressModel.advance`."""
        compute = sim.w_iter0[running] * sim.draw_stragglers(nodes.shape)
        if slow is not None:
            compute *= slow  # padding workers have 0 compute time
        valid = nodes >= 0
        if sim._single_compute_rule:
            it = sim._sync[0].compute_time(compute, valid)
        else:
            sync_idx = sim.j_sync[running]
            it = np.empty(len(running))
            for s in np.unique(sync_idx):
                sel = sync_idx == s
                it[sel] = sim._sync[s].compute_time(compute[sel], valid[sel])
        it += sim.sync_time[running]
        start = sim.startup_s[running] if sim._measured and sim._restarting else None
        if start is not None and start.any():
            # a restarted job first spends its measured restart seconds (colocation.py)
            secs = np.maximum(sim.cfg.slot_seconds - start, 0.0)
            sim.startup_s[running] = np.maximum(start - sim.cfg.slot_seconds, 0.0)
            inc = secs / it * sim.j_samples_per_iter[running]
            # queued crashed jobs still owe theirs: only the whole array can clear the flag
            sim._restarting = bool(sim.startup_s.any())
        else:
            # (no running job owes seconds: the arithmetic above would give exactly this)
            inc = sim.cfg.slot_seconds / it * sim.j_samples_per_iter[running]
        w = sim.cfg.switch_weight
        if w != 1.0:
            inc = np.where(sim.switched[running], w * inc, inc)  # re-allocated this slot
        x = sim.progress[running] + inc
        sim.progress[running] = x
        u = (x / sim.j_tau[running]) ** sim.j_k[running]
        q = -np.expm1(-u)
        done = (q >= sim.j_target[running]) | (x >= sim.j_max_samples[running])
        if sim._acc_stop.any():
            # EdgeGossip's accuracy-aware stop. On q = 1 - exp(-u), u = (x / tau)^k, the gain
            # per sample is k u (1 - q) / x; per epoch it is that times the epoch's samples.
            # Early on (before the inflection, u < (k-1)/k) gains still grow.
            k = sim.j_k[running]
            stop = sim._acc_stop[sim.j_sync[running]] & (u > (k - 1.0) / k)
            gain = k * u * (1.0 - q) / np.maximum(x, 1e-12) * (0.1 * sim.j_x90[running])
            done |= stop & (gain < sim.cfg.edgegossip_min_gain)
        return q, done

    def lower_bound(self, sim, wl):
        """The job alone at its best allocation on the best node for it.

        No queueing, sync cost, stragglers or contention; trained to its target, or only up
        to where an accuracy-aware stop (``edgegossip``) could first end it, if sooner.
        """
        fits, _ = _fitting_levels(sim)
        m = wl.model
        tput = sim._m_tput[:, :, None] * sim.cluster.speed[None, None, :]
        best = np.where(fits, tput, 0.0).max(axis=(1, 2))[m]
        samples_per_slot = sim.cfg.slot_seconds * wl.workers * best
        need_q = np.minimum(wl.target, 1 - 1e-12)
        x_target = wl.tau * (-np.log1p(-need_q)) ** (1.0 / self.convk[m])
        need = np.minimum(x_target, wl.max_samples)
        if sim.cfg.edgegossip_min_gain > 0 and sim._acc_stop.any():
            u = accuracy_stop_u(self.convk, self.q90f, sim.cfg.edgegossip_min_gain)[m]
            stops = sim._acc_stop[wl.sync]
            need = np.where(stops, np.minimum(need, wl.tau * u ** (1.0 / self.convk[m])), need)
        return np.maximum(np.ceil(need / samples_per_slot - 1e-9), 1.0)

    def final_metric(self, model, quality):
        """See :meth:`ProgressModel.final_metric`."""
        return model_catalog().metric_at(self.cat_idx[model], quality)


class TapFingerProgress(ProgressModel):
    """TapFinger's per-slot progress rules; single-worker jobs."""

    name = "tapfinger"
    single_worker = True
    has_throughput = False

    def _min_demand(self, names: tuple[str, ...]) -> np.ndarray:
        bad = [n for n in names if n not in TAPFINGER_MODELS]
        if bad:
            raise ConfigError(
                f"models={names!r}: progress_model='tapfinger' allows only {list(TAPFINGER_MODELS)}"
            )
        self.is_lm = np.array([n == "LM" for n in names])
        given = getattr(self.cfg, "tapfinger_min_demand", ()) or ()
        return tapfinger_min_demand(names, {n: (c, g) for n, c, g in given})

    def job_parameters(self, wl, size_factor, cfg, tput):
        """See :meth:`ProgressModel.job_parameters`."""
        jn = wl.num_jobs
        wl.is_lm = self.is_lm[wl.model]
        wl.tau = np.ones(jn)
        wl.max_samples = np.full(jn, np.inf)
        wl.x90 = np.ones(jn)

    def iteration_seconds(self, sim, jobs, level, nodes):
        """The GPU count of the allocation (the LM rule's ``g``)."""
        return sim.alloc_of(jobs, level)[..., 1]

    def advance(self, sim, running, nodes, slow):
        """See :meth:`ProgressModel.advance`."""
        g = sim.w_iter0[running, 0]
        p = sim.progress[running]
        step = tapfinger_step(sim._j_is_lm[running], g, p)
        if slow is not None:
            step = step / slow[:, 0]
        w = sim.cfg.switch_weight
        if w != 1.0:
            step = np.where(sim.switched[running], w * step, step)  # re-allocated this slot
        p = p + step
        sim.progress[running] = p
        return np.minimum(p, 1.0), p >= 1.0 - 1e-12

    def lower_bound(self, sim, wl):
        """See :meth:`ProgressModel.lower_bound`."""
        fits, m_alloc = _fitting_levels(sim)
        gmax = np.where(fits, m_alloc[:, :, None, 1], 0.0).max(axis=(1, 2))[wl.model]
        lm = self.is_lm[wl.model]
        p = np.zeros(wl.num_jobs)
        slots = np.zeros(wl.num_jobs)
        for _ in range(10_000):
            todo = p < 1.0 - 1e-12
            if not todo.any():
                break
            p = np.where(todo, p + tapfinger_step(lm, gmax, p), p)
            slots += todo
        return slots


def _fitting_levels(sim: EdgeClusterSim) -> tuple[np.ndarray, np.ndarray]:
    """(M, L, N) whether each model's level fits each node (and meets the minimum)."""
    # per model, then gathered per job: the per-job (J, L, N, 3) comparison took ~18 ms
    # per episode on tapfinger-hetero6
    m_alloc = sim._m_alloc
    fits = (m_alloc[:, :, None, :] <= sim.cluster.capacity[None, None, :, :] + 1e-9).all(-1)
    fits &= sim._m_ok[:, :, None]
    return fits, m_alloc


def tapfinger_min_demand(
    names: tuple[str, ...], per_type: dict[str, tuple[float, float]] | None = None
) -> np.ndarray:
    """(M, 3) minimum (cpu, gpu, mem) of TapFinger task types.

    The constant :data:`TAPFINGER_MIN_DEMAND`, or per type where ``per_type`` gives (cpu, gpu).
    """
    per_type = per_type or {}
    return np.array(
        [(*map(float, per_type[n]), 0.0) if n in per_type else TAPFINGER_MIN_DEMAND for n in names],
        dtype=np.float64,
    )


def tapfinger_step(is_lm: np.ndarray, gpus: np.ndarray, p: np.ndarray) -> np.ndarray:
    """TapFinger's per-slot progress: IMG 0.25, LM tanh(g/16) sqrt(1.2 - p)."""
    return np.where(is_lm, np.tanh(gpus / 16.0) * np.sqrt(np.maximum(1.2 - p, 0.0)), 0.25)


def accuracy_stop_u(k: np.ndarray, q90f: np.ndarray, min_gain: float) -> np.ndarray:
    """Per model, the least ``u = (x / tau) ** k`` at which EdgeGossip's stop can fire.

    The stop (:meth:`ProfileProgress.advance`) fires once ``u > (k - 1) / k`` and the gain
    per epoch ``0.1 k q90f u ** (1 - 1/k) exp(-u)`` is below ``min_gain``; past ``(k - 1) /
    k`` (the gain's peak) the gain only falls, so bisection finds the crossing. The lower end
    of the bracket is returned: a bound from it never exceeds the true point.
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


_REGISTRY: dict[str, type[ProgressModel]] = {}


def register_progress_model(cls: type[ProgressModel]) -> type[ProgressModel]:
    """Register a progress model class under ``cls.name`` (usable as a decorator)."""
    if not cls.name:
        raise ValueError("a progress model needs a non-empty class attribute 'name'")
    _REGISTRY[cls.name] = cls
    return cls


def get_progress_model(name: str) -> type[ProgressModel]:
    """The registered progress model class ``name``.

    Raises:
        ConfigError: unknown name (the message lists the registered ones).
    """
    if name not in _REGISTRY:
        raise ConfigError(f"progress_model={name!r}: unknown; registered: {list_progress_models()}")
    return _REGISTRY[name]


def list_progress_models() -> list[str]:
    """Names of the registered progress models."""
    return sorted(_REGISTRY)


register_progress_model(ProfileProgress)
register_progress_model(TapFingerProgress)
