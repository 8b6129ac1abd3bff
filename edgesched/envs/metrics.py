"""Counters and episode metrics, per copy.

Every counter is a (B,) array, one entry per copy, reset with the copy's episode.
:meth:`MetricsMixin.episode_metrics` summarizes one copy's episode; JCTs are in slots.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

NOT_ARRIVED, QUEUED, RUNNING, DONE = 0, 1, 2, 3

COUNTER_KEYS = (
    "steps",
    "collisions_proposed",
    "collisions_executed",
    "collision_agents",
    "rejected",
    "task_conflicts",
    "overload_node_slots",
    "invalid_actions",
    "placements",
    "resized_up",
    "resized_down",
    "crashes",
    "crash_slots_lost",
    "restart_seconds",
    "shared_gpu_slots",
    "cpu_starved_slots",
    "crashes_memory",
)
"""The per-copy episode counters."""

MEASURED_METRICS = (
    "crashes",
    "crash_slots_lost",
    "restart_seconds",
    "shared_gpu_slots",
    "cpu_starved_slots",
)
"""Episode metrics of ``collision_mode='measured'``: jobs crashed (a failing GPU pair or
host memory); slots of running they lost (each crash's slots since its job's last
checkpoint, slowed or restarting slots included); restart seconds they owe (counted at the
crash, whether or not the job restarts before the episode ends); worker-slots on a shared
GPU and on oversubscribed cores."""


@dataclass
class Counters:
    """One copy's episode-long counters (plain ints/floats so they serialize).

    ``crashes_memory`` counts the crashes caused by host memory over capacity (some worker
    of the job; the rest of ``crashes`` are failing GPU pairs). It is a counter only, not an
    episode metric, so that records and trajectory hashes from before it stay valid.
    """

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
    crashes: int = 0
    crash_slots_lost: int = 0
    restart_seconds: int = 0
    shared_gpu_slots: int = 0
    cpu_starved_slots: int = 0
    crashes_memory: int = 0
    occupied_share_sum: float = 0.0
    util_sum: np.ndarray = field(default_factory=lambda: np.zeros(0))


class MetricsMixin:
    """Counters and episode metrics of :class:`~edgesched.envs.core.EdgeClusterSim`."""

    def counters_of(self, b: int) -> Counters:
        """Copy ``b``'s episode counters (a snapshot)."""
        ag = slice(b * self.agents_per_copy, (b + 1) * self.agents_per_copy)
        return Counters(
            **{k: int(v[b]) for k, v in self._cnt.items()},
            occupied_share_sum=float(self._occupied_sum[b]),
            util_sum=self._util_sum[ag].copy(),
        )

    def _copy_jobs(self, b: int) -> slice:
        j0 = b * self._job_capacity
        return slice(j0, j0 + self.workload(b).num_jobs)

    def job_counts(self, b: int | None = None) -> dict[str, int]:
        """Arrived, queued, running and done jobs of copy ``b`` (all copies if ``None``).

        Conservation: arrived = queued + running + done.
        """
        st = self.status if b is None else self.status[self._copy_jobs(b)]
        return {
            "arrived": int((st != NOT_ARRIVED).sum()),
            "queued": int((st == QUEUED).sum()),
            "running": int((st == RUNNING).sum()),
            "done": int((st == DONE).sum()),
        }

    def lower_bound_slots(self, b: int = 0) -> np.ndarray:
        """Per-job JCT lower bound in slots of copy ``b``'s episode.

        The job alone, at its best allocation on the best node for it, no queueing, no sync
        cost, no stragglers, no contention (the progress model's ``lower_bound``).
        """
        wl = self.workload(b)
        if wl.num_jobs == 0:
            return np.zeros(0)
        return self.progress_model.lower_bound(self, wl)

    def episode_metrics_of(self, b: int) -> dict[str, Any]:
        """:meth:`episode_metrics` of copy ``b``."""
        return self.episode_metrics(b)

    def episode_metrics(self, b: int | None = None) -> dict[str, Any]:
        """Summary of copy ``b``'s episode so far; JCTs in slots unless seconds.

        JCT statistics cover every arrived job. A job still unfinished when the episode is
        truncated counts with its time so far (right-censored), so a scheduler cannot look
        good by leaving hard jobs unfinished; ``jobs_unfinished`` says how many there are,
        and ``jct_mean_completed`` is the mean over completed jobs only. With the default
        reward, ``jct_mean * jobs_arrived == -sum of all agents' returns`` (Little's law).

        Args:
            b: the copy; may be omitted on a lone simulator.
        """
        if b is None:
            if not self.lone:
                raise TypeError("a batched simulator has one episode per copy: pass b")
            b = 0
        wl = self.workload(b)
        js = self._copy_jobs(b)
        ag = slice(b * self.agents_per_copy, (b + 1) * self.agents_per_copy)
        t = int(self.tc[b])
        status, finish, quality = self.status[js], self.finish_slot[js], self.quality[js]
        cnt = self.counters_of(b)
        done = status == DONE
        arrived = status != NOT_ARRIVED
        end = np.where(done, finish, t)
        jct = (end - wl.arrival)[arrived].astype(np.float64)
        jct_done = (finish - wl.arrival)[done].astype(np.float64)
        sec = self.cfg.slot_seconds
        lb = self.lower_bound_slots(b)
        util = cnt.util_sum / max(t, 1)
        prio = wl.prio[arrived]
        prio_jct = [
            float(jct[prio == p].mean()) if (prio == p).any() else None
            for p in range(self.num_priorities)
        ]
        first = wl.arrival[arrived].min() if arrived.any() else 0
        nan = float("nan")
        m: dict[str, Any] = {
            "slots": t,
            "steps": cnt.steps,
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
            "collisions_proposed": cnt.collisions_proposed,
            "collisions_executed": cnt.collisions_executed,
            "collision_agents": cnt.collision_agents,
            "rejected_placements": cnt.rejected,
            "task_conflicts": cnt.task_conflicts,
            "overload_node_slots": cnt.overload_node_slots,
            "invalid_actions": cnt.invalid_actions,
            "placements": cnt.placements,
            "resized_up": cnt.resized_up,
            "resized_down": cnt.resized_down,
            "occupied_share_mean": cnt.occupied_share_sum / max(t, 1),
            "quality_total": float(quality[arrived].sum()),
            "jct_by_priority": prio_jct,
            "final_quality": quality[done].copy(),
            "final_quality_mean": float(quality[done].mean()) if done.any() else nan,
            "episode_return_mean": float(self.return_sum[ag].mean()),
        }
        if self._measured:
            # collision_mode="measured" only, so earlier modes' records keep their keys
            m.update({k: getattr(cnt, k) for k in MEASURED_METRICS})
        metric = self.progress_model.final_metric(wl.model[done], quality[done])
        if metric is not None:
            m["final_metric"] = metric
        return m
