"""The per-job state layout: every copy's block of job ids in one set of arrays.

Copy ``b`` owns job ids ``b * job_capacity .. (b+1) * job_capacity - 1``; its workload's
jobs take the first ids of the block and the rest are padding that never arrives. The
tables below are the complete per-job state of the simulator: a new per-job quantity is
added here (with its padding value) and nowhere else.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .workload import Workload, static_job_features

_NO_ARRIVAL = np.iinfo(np.int64).max // 4
"""Arrival slot of the unused job ids of a copy's block (they never arrive)."""

# The per-job state: attribute -> (Workload field or None, fill of unused ids). Arrays with a
# worker axis are padded to the widest job of any copy.
_JOB_STATIC = {
    "j_arrival": ("arrival", _NO_ARRIVAL),
    "j_home": ("home", 0),
    "j_model": ("model", 0),
    "j_workers": ("workers", 1),
    "j_prio": ("prio", 0),
    "j_sync": ("sync", 0),
    "j_min": ("min", 0.0),
    "j_target": ("target", 1.0),
    "j_tau": ("tau", 1.0),
    "j_max_samples": ("max_samples", np.inf),
    "j_x90": ("x90", 1.0),
    "j_eff": ("eff", 1.0),
    "j_gpu_share": ("gpu_share", 1.0),
    "j_alloc_ok": ("alloc_ok", False),
}
_JOB_STATIC_BY_MODEL = {
    "profile": {
        "j_k": ("k", 1.0),
        "j_samples_per_iter": ("samples_per_iter", 0.0),
        "_j_iter_at_speed1": ("iter_at_speed1", np.inf),
    },
    "tapfinger": {"_j_is_lm": ("is_lm", False)},
}
_JOB_DYNAMIC = {
    "status": (np.int8, 0),
    "owner": (np.int64, 0),
    "progress": (np.float64, 0.0),
    "quality": (np.float64, 0.0),
    "sync_time": (np.float64, 0.0),
    "start_slot": (np.int64, -1),
    "finish_slot": (np.int64, -1),
    # collision_mode="measured" (colocation.py): progress at the last checkpoint, slots run
    # since the last (re)start, restart seconds still to pay
    "ckpt_progress": (np.float64, 0.0),
    "run_slots": (np.int64, 0),
    "startup_s": (np.float64, 0.0),
    # the job's allocation changed (resize) since its last slot: switch_weight applies
    "switched": (np.bool_, False),
}
_WORKER = {
    "w_node": (np.int64, -1),
    "w_alloc": (np.float64, 0.0),
    "w_level": (np.int64, 0),
    "w_iter0": (np.float64, 0.0),
    "w_seq": (np.int64, -1),  # placement order (which of two workers sharing a GPU is newer)
    # collision_mode="measured": rate relative to running alone, on a shared GPU, on
    # oversubscribed cores (recomputed only when the worker's node changes; colocation.py)
    "w_rate": (np.float64, 1.0),
    "w_gshared": (np.bool_, False),
    "w_starved": (np.bool_, False),
}


class LayoutMixin:
    """Allocation, installation and growth of the per-job arrays of ``EdgeClusterSim``."""

    def _job_fields(self) -> dict[str, tuple[str, Any]]:
        return {**_JOB_STATIC, **_JOB_STATIC_BY_MODEL[self.progress_model.name]}

    def _layout(self, capacity: int, max_workers: int) -> None:
        """Allocate every per-job array for ``capacity`` ids per copy (all copies empty)."""
        b = self.copies
        self._job_capacity = jc = max(int(capacity), 1) if b > 1 else int(capacity)
        self.num_jobs = nj = b * jc
        self.max_workers = mw = int(max_workers)
        lv = self.num_levels
        shapes = {
            "j_min": (3,),
            "j_alloc_ok": (lv,),
            "_j_iter_at_speed1": (lv,),
        }
        dtypes = {"j_alloc_ok": bool, "_j_is_lm": bool}
        for name, (_, fill) in self._job_fields().items():
            ints = isinstance(fill, int) and not isinstance(fill, bool)
            dt = dtypes.get(name, np.int64 if ints else np.float64)
            setattr(self, name, np.full((nj, *shapes.get(name, ())), fill, dtype=dt))
        for name, (dt, fill) in _JOB_DYNAMIC.items():
            setattr(self, name, np.full(nj, fill, dtype=dt))
        for name, (dt, fill) in _WORKER.items():
            extra = (3,) if name == "w_alloc" else ()
            setattr(self, name, np.full((nj, mw, *extra), fill, dtype=dt))
        self.placed = np.zeros(nj + 1, dtype=np.int64)  # last entry: empty-slot sentinel
        self.j_static = np.zeros((nj + 1, self.job_features), np.float32)
        # hot-path copies with a sentinel row at index -1 (= empty pending slot): an
        # allocation that never fits, so gathers need no validity masking. A zero need (e.g.
        # a CPU-only model's GPU) must never limit: a large finite inverse avoids 0 * inf.
        self._j_min_ext = np.full((nj + 1, 3), np.inf)
        # scale-mode mask inputs: 1 / minimum CPU, 1 / minimum GPU, minimum memory
        self._scale_need_ext = np.zeros((nj + 1, 3))
        self._scale_need_ext[:, 2] = np.inf
        self._j_alloc_ok_ext = np.zeros((nj + 1, lv), dtype=bool)
        self._j_arrival_ext = np.full(nj + 1, np.inf)
        self._key_span = self.num_priorities * (nj + 1)
        self._agent_bounds = np.arange(self.num_agents + 1, dtype=np.int64) * self._key_span
        self.running = np.zeros(0, dtype=np.int64)
        self.q_ck = np.zeros(0, dtype=np.int64)
        self.q_job = np.zeros(0, dtype=np.int64)
        self._queue_dirty = True
        self._vis_job = [np.zeros(0, np.int64)] * b
        self._vis_ck = [np.zeros(0, np.int64)] * b
        self._vis_ptr = [np.zeros(1, np.int64)] * b

    def _install(self, b: int, wl: Workload) -> None:
        """Write copy ``b``'s fresh workload into its block; its dynamic state starts empty."""
        jc, jn, n = self._job_capacity, wl.num_jobs, self.agents_per_copy
        j0, a0 = b * jc, b * n
        blk, js = slice(j0, j0 + jc), slice(j0, j0 + jn)
        for name, (src, fill) in self._job_fields().items():
            arr = getattr(self, name)
            arr[blk] = fill
            arr[js] = getattr(wl, src)
        # stays set once any copy held a part-GPU job: multiplying by 1 changes no value
        self._gpu_shared = self._gpu_shared or bool((wl.gpu_share != 1.0).any())
        self.j_home[js] += a0
        for name, (_, fill) in {**_JOB_DYNAMIC, **_WORKER}.items():
            getattr(self, name)[blk] = fill
        self.owner[js] = self.j_home[js]
        self.placed[blk] = 0
        self.j_static[blk] = 0.0
        self.j_static[js] = static_job_features(self, wl)
        self._j_min_ext[blk] = np.inf
        self._j_min_ext[js] = wl.min
        self._scale_need_ext[blk] = (0.0, 0.0, np.inf)
        self._scale_need_ext[js, :2] = 1.0 / np.maximum(wl.min[:, :2], 1e-12)
        self._scale_need_ext[js, 2] = wl.min[:, 2]
        self._j_alloc_ok_ext[blk] = False
        self._j_alloc_ok_ext[js] = wl.alloc_ok
        self._j_arrival_ext[blk] = np.inf
        self._j_arrival_ext[js] = wl.arrival
        # queue key: priority class first, then arrival order (job ids are in arrival order)
        self._vis_job[b] = wl.vis_job + j0
        self._vis_ck[b] = (wl.vis_agent + a0) * self._key_span + self.j_key_of(self._vis_job[b])
        self._vis_ptr[b] = wl.vis_slot_ptr
        self._wl[b] = wl
        # numbers only grow, so the next one is the largest so far plus one
        self._episode_no[b] = self._episode_no.max() + 1

    def alloc_of(self, jobs: Any, levels: Any = None) -> np.ndarray:
        """Allocation (CPU, GPU, memory) of ``jobs`` at ``levels``, fresh.

        Args:
            jobs: global job ids (an int or an array; -1 reads the last id: mask it out).
            levels: allocation levels, broadcastable with ``jobs``; ``None``: every level.

        Returns:
            (..., 3) for ``jobs`` and ``levels`` broadcast together, or (..., L, 3) for every
            level: the job's model's allocation, its GPU times the job's GPU share.
        """
        model = self.j_model[jobs]
        alloc = self._m_alloc[model] if levels is None else self._m_alloc[model, levels]
        if self._gpu_shared:
            share = self.j_gpu_share[jobs]
            alloc[..., 1] *= share if levels is not None else np.expand_dims(share, -1)
        return alloc

    @property
    def j_alloc(self) -> np.ndarray:
        """(num_jobs, L, 3) allocation of every job id at every level, gathered (fresh).

        The tables are per model (:meth:`alloc_of`); this full gather is for inspection.
        """
        return self.alloc_of(np.arange(self.num_jobs))

    def j_key_of(self, jobs: np.ndarray) -> np.ndarray:
        """Queue key of ``jobs`` without aging: priority class, then arrival order."""
        return self.j_prio[jobs].astype(np.int64) * (self.num_jobs + 1) + jobs

    def _grow(self, capacity: int, max_workers: int) -> None:
        """Lay every copy out again for larger blocks, keeping the running copies' state."""
        b, jc_old, mw_old = self.copies, self._job_capacity, self.max_workers
        keep = {
            name: getattr(self, name) for name in (*self._job_fields(), *_JOB_DYNAMIC, *_WORKER)
        }
        ext = {
            name: getattr(self, name)
            for name in ("placed", "j_static", "_j_min_ext", "_scale_need_ext")
        }
        ext.update(_j_alloc_ok_ext=self._j_alloc_ok_ext, _j_arrival_ext=self._j_arrival_ext)
        running, q_job, q_agent = self.running, self.q_job, self.q_ck // self._key_span
        vis = [(v, ck // self._key_span) for v, ck in zip(self._vis_job, self._vis_ck, strict=True)]
        vis_ptr = self._vis_ptr
        self._layout(capacity, max_workers)
        jc = self._job_capacity

        def remap(ids: np.ndarray) -> np.ndarray:
            return (ids // jc_old) * jc + ids % jc_old

        for name, old in {**keep, **ext}.items():
            new = getattr(self, name)
            body = old[: b * jc_old] if len(old) == b * jc_old + 1 else old
            nv = new[: b * jc].reshape(b, jc, *new.shape[1:])
            ov = body.reshape(b, jc_old, *old.shape[1:])
            if name in _WORKER:
                nv[:, :jc_old, :mw_old] = ov
            else:
                nv[:, :jc_old] = ov
        slots = self._slots
        self._slots = np.where(slots >= 0, remap(np.maximum(slots, 0)), -1)
        self.running = remap(running)
        self.q_job = remap(q_job)
        self.q_ck = q_agent * self._key_span + self.j_key_of(self.q_job)
        for c, (v, agent) in enumerate(vis):
            self._vis_job[c] = remap(v)
            self._vis_ck[c] = agent * self._key_span + self.j_key_of(self._vis_job[c])
        self._vis_ptr = vis_ptr
        self._resort_queues()
