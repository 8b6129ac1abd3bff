"""Preemptive Tiresias and Optimus: the forms TapFinger's paper compared against.

Both keep the placement rule of their non-preemptive namesakes
(:class:`~edgesched.baselines.heuristics.TiresiasScheduler`,
:class:`~edgesched.baselines.heuristics.OptimusScheduler`) and add the re-allocation of
running jobs at the start of every slot (:meth:`edgesched.policy.Scheduler.reallocate`,
applied with ``EdgeClusterSim.resize``): a job's workers move one allocation level (grid
allocation: one GPU at the same CPUs) down or up, and a slot in which a job's allocation
changed progresses at the scenario's ``switch_weight``.

Per node and slot at most one job changes, by one step, and the two rules share one frame:

* an agent with queued work of which nothing can be placed now (its mask allows only
  deferring) shrinks one running job on its node, to make room;
* an agent with an empty queue grows one running job on its node that has room for it.

Adaptation (both): the published schedulers recompute every allocation each interval; one
step per node and slot is the closest form the simulator's resize offers, and it keeps each
slot's switching cost bounded.
"""

from __future__ import annotations

import numpy as np

from edgesched.envs.view import ClusterView

from . import register_baseline
from .heuristics import OptimusScheduler, TiresiasScheduler


def _node_choice(
    view: ClusterView, score_shrink: np.ndarray, score_grow: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One (job, -1 or +1) per node, from scores per running job (ties: lowest job id).

    Shrinks the best ``score_shrink`` where the agent is blocked, grows the best
    ``score_grow`` where its queue is empty.
    """
    running = np.asarray(view.running, dtype=np.int64)
    if len(running) == 0:
        return running, np.zeros(0, dtype=np.int64)
    node = view.worker_nodes[running, 0]  # a job's first worker names its node
    gpus = view.worker_alloc[running, 0, 1]
    blocked = (view.queue_lengths > 0) & ~view.mask[:, 1:].any(axis=1)
    idle = view.queue_lengths == 0
    free_gpu = view.free[:, 1]
    # a job at its smallest allocation has nothing to give: level 0 of the scale levels; on
    # the grid, one GPU per worker (fewer would leave GPU training)
    if view.config.alloc_mode == "grid":
        can_give = gpus >= 2.0 - 1e-9
    else:
        can_give = view.worker_levels[running, 0] > 0
    jobs, delta = [], []
    order = np.argsort(running, kind="stable")
    for n in np.unique(node):
        on = order[node[order] == n]
        if blocked[n]:
            cand = on[can_give[on]]
            if len(cand):
                jobs.append(running[cand[np.argmax(score_shrink[cand])]])
                delta.append(-1)
        elif idle[n] and free_gpu[n] >= 1.0 - 1e-9:
            jobs.append(running[on[np.argmax(score_grow[on])]])
            delta.append(1)
    return np.asarray(jobs, dtype=np.int64), np.asarray(delta, dtype=np.int64)


@register_baseline
class TiresiasPreemptiveScheduler(TiresiasScheduler):
    """Tiresias with preemption: least attained service first (Gu et al., NSDI'19).

    Rule: placement as :class:`~edgesched.baselines.heuristics.TiresiasScheduler`. At the
    start of every slot each running job's attained service grows by the GPUs it holds
    (CPU cores for a job without GPUs: GPU-time, Tiresias' 2D attained service). A blocked
    agent (queued work, nothing placeable) takes one GPU step from the job on its node with
    the *most* attained service; an agent with an empty queue gives one GPU step to the job
    on its node with the *least* attained service, if the node has a free GPU. New jobs have
    no service, so they come first, as in least-attained-service scheduling.

    Adaptation: Tiresias demotes jobs across discrete priority queues and preempts whole
    jobs; here a job shrinks one step at a time and never below its smallest allocation (see
    the module docstring).
    """

    name = "tiresias_preemptive"
    reallocates = True

    def reset(self, seed: int | None = None) -> None:
        """Forget the attained service of the last episode."""
        self.service = np.zeros(0)

    def reallocate(self, view: ClusterView) -> tuple[np.ndarray, np.ndarray]:
        """Accrue each running job's service, then one least-attained-service step per node."""
        if len(self.service) < view.num_jobs:
            grow = np.zeros(view.num_jobs - len(self.service))
            self.service = np.concatenate([self.service, grow])
        running = np.asarray(view.running, dtype=np.int64)
        held = view.worker_alloc[running].sum(axis=1)  # (R, 3) over the job's workers
        self.service[running] += np.where(held[:, 1] > 0, held[:, 1], held[:, 0])
        s = self.service[running]
        return _node_choice(view, score_shrink=s, score_grow=-s)


@register_baseline
class OptimusPreemptiveScheduler(OptimusScheduler):
    """Optimus with preemption: greedy marginal gain (Peng et al., EuroSys'18).

    Rule: placement and the online speed model as
    :class:`~edgesched.baselines.heuristics.OptimusScheduler`. At the start of every slot,
    with the model fitted so far, each running job's predicted progress rate is evaluated
    at its GPUs ``g`` and at ``g - 1`` and ``g + 1`` (per worker, on its node's speed, at
    its current quality). A blocked agent (queued work, nothing placeable) takes one GPU
    step from the job on its node that loses the least; an agent with an empty queue gives
    one GPU step to the job on its node that gains the most, if the node has a free GPU.

    Adaptation: Optimus re-solves the allocation of every job each interval; here one step
    per node and slot (see the module docstring).
    """

    name = "optimus_preemptive"
    reallocates = True

    def reallocate(self, view: ClusterView) -> tuple[np.ndarray, np.ndarray]:
        """Predicted marginal gains of one GPU step, then one step per node."""
        running = np.asarray(view.running, dtype=np.int64)
        coef = self.coef()[view.job_model[running]]  # (R, 3)
        w = view.job_workers[running].astype(np.float64)
        g = view.worker_alloc[running, 0, 1].astype(np.float64)
        speed = view.cluster.speed[view.worker_nodes[running, 0]]
        q = np.clip(view.job_quality[running], 0.0, 1.0)

        def rate(gpus: np.ndarray) -> np.ndarray:
            e = np.maximum(w * gpus * speed, 1e-12)
            return np.exp(coef[:, 0] + coef[:, 1] * np.log(e) + coef[:, 2] * np.log(1.2 - q))

        now = rate(g)
        loss = now - np.where(g > 1, rate(g - 1), 0.0)
        gain = rate(g + 1) - now
        return _node_choice(view, score_shrink=-loss, score_grow=gain)
