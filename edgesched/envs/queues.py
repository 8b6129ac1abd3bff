"""Per-agent job queues: one sorted array of (agent, job) entries for every copy.

All queue entries of all copies live in one array sorted by a composite key
``agent * key_span + job_key`` (agent ids are global: copy ``b``'s agents come after copy
``b-1``'s), so each agent's queue is a contiguous range found by binary search, in priority
class then arrival order (or aged class, ``priority_aging_slots``). This is cheaper than
per-agent buffers in numpy. A job visible to several agents (shared visibility) has one
entry per agent; it leaves every queue once all its workers are placed.
"""

from __future__ import annotations

import numpy as np

QUEUED = 1


class QueueMixin:
    """Queue operations of :class:`~edgesched.envs.core.EdgeClusterSim`.

    State owned: ``q_ck``, ``q_job`` (sorted entries), ``qlen`` and ``_q_start`` (per agent),
    ``_queue_dirty``; arrival schedules ``_vis_job``, ``_vis_ck``, ``_vis_ptr`` per copy.
    """

    def _slot_of(self, jobs: np.ndarray) -> int | np.ndarray:
        """Current slot of each job's copy (a lone simulator: its clock, as an int)."""
        if self.copies == 1:
            return int(self.tc[0])
        # -1 (empty pending slot) reads the last copy's clock; its arrival is +inf anyway
        return self.tc[jobs // self._job_capacity]

    def _enqueue_copies(self, copies: np.ndarray) -> None:
        """Queue the jobs arriving at the current slot of each of ``copies``."""
        if len(copies) == 1:
            c = int(copies[0])
            t = int(self.tc[c])
            lo, hi = self._vis_ptr[c][t], self._vis_ptr[c][t + 1]
            if hi > lo:
                self._enqueue(self._vis_job[c][lo:hi], self._vis_ck[c][lo:hi])
            return
        jobs, keys = [], []
        for c in copies.tolist():
            t = int(self.tc[c])
            ptr = self._vis_ptr[c]
            lo, hi = ptr[t], ptr[t + 1]
            if hi > lo:
                jobs.append(self._vis_job[c][lo:hi])
                keys.append(self._vis_ck[c][lo:hi])
        if len(jobs) == 1:
            self._enqueue(jobs[0], keys[0])
        elif jobs:
            self._enqueue(np.concatenate(jobs), np.concatenate(keys))

    def _enqueue(self, jobs: np.ndarray, keys: np.ndarray) -> None:
        """Queue the (agent, job) pairs of arriving ``jobs`` under their queue ``keys``."""
        self.status[jobs] = QUEUED
        ck = np.concatenate([self.q_ck, keys])
        order = np.argsort(ck, kind="stable")
        self.q_ck = ck[order]
        self.q_job = np.concatenate([self.q_job, jobs])[order]
        self._queue_dirty = True

    def _fill_slots(self, copies: np.ndarray) -> None:
        """``pending_refill='on_advance'``: fill the empty pending slots of ``copies``' agents.

        Called when their clock has advanced (and at reset), after this slot's arrivals were
        queued: each agent's empty slots take, in order, its new arrivals, then the rest of
        its queue (queue order), skipping jobs already in its slots.
        """
        self._update_qlen()
        n, span = self.agents_per_copy, self._key_span
        slots = self._slots
        for c in np.asarray(copies).tolist():
            t = int(self.tc[c])
            new: dict[int, list[int]] = {}
            if t < len(self._vis_ptr[c]) - 1:
                lo, hi = self._vis_ptr[c][t], self._vis_ptr[c][t + 1]
                for a, j in zip(
                    (self._vis_ck[c][lo:hi] // span).tolist(),
                    self._vis_job[c][lo:hi].tolist(),
                    strict=True,
                ):
                    new.setdefault(a, []).append(j)
            for a in range(c * n, (c + 1) * n):
                row = slots[a]
                empty = np.flatnonzero(row < 0)
                if len(empty) == 0:
                    continue
                q0 = int(self._q_start[a])
                queued = self.q_job[q0 : q0 + int(self.qlen[a])].tolist()
                held = set(row[row >= 0].tolist())
                fresh = [j for j in new.get(a, []) if j not in held]
                taken = set(fresh)
                rest = [j for j in queued if j not in held and j not in taken]
                cand = (fresh + rest)[: len(empty)]
                row[empty[: len(cand)]] = cand

    def _requeue(self, jobs: np.ndarray, member: np.ndarray) -> None:
        """Queue crashed ``jobs`` again at every agent that sees them, under original keys.

        ``member`` is a bool per job id, True exactly for ``jobs`` (a lookup: ``np.isin``
        sorts both arrays on every call). None of their workers is placed; the keys order
        them by priority class, then arrival.
        """
        jc = self._job_capacity
        sel_j, sel_k = [], []
        for c in np.unique(jobs // jc).tolist():
            sel = member[self._vis_job[c]]
            sel_j.append(self._vis_job[c][sel])
            sel_k.append(self._vis_ck[c][sel])
        self.owner[jobs] = self.j_home[jobs]
        self._enqueue(np.concatenate(sel_j), np.concatenate(sel_k))

    def _drop_from_queues(self) -> None:
        """Remove fully placed jobs from every queue that holds them."""
        keep = self.status[self.q_job] == QUEUED
        self.q_ck, self.q_job = self.q_ck[keep], self.q_job[keep]
        self._queue_dirty = True

    def queued_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """All queue entries as (agent, job) arrays, each agent's in priority order."""
        return self.q_ck // self._key_span, self.q_job

    def _update_qlen(self) -> None:
        if not self._queue_dirty:
            return
        bounds = self.q_ck.searchsorted(self._agent_bounds)
        self._q_start = bounds[:-1]
        self.qlen = bounds[1:] - bounds[:-1]
        self._queue_dirty = False

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

    def _resort_queues(self) -> None:
        """Sort the entries again after their keys were rebuilt (a new job layout)."""
        if self.cfg.priority_aging_slots and len(self.q_job):
            self._age_queues(self.cfg.priority_aging_slots)
        else:
            order = np.argsort(self.q_ck, kind="stable")
            self.q_ck, self.q_job = self.q_ck[order], self.q_job[order]
        self._queue_dirty = True
