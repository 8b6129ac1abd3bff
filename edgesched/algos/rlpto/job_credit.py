"""Per-job credit for RLPTO's controller (``algo.credit=job``).

With the team reward (``credit=team``) every decision of a slot shares one advantage: the
change in the whole cluster's reward. ``benchmarks/rlpto_controller.py --signal`` measured
that at initialization the advantage of "grow" and of "keep" differ by less than one
standard error on edge10-v1 and edge50-highload: one job's choice is invisible in the team
reward, and every trained controller collapsed to "grow whenever feasible".

Per-job credit splits the same team reward over the jobs that ran in the slot and learns
each job's return along its own trajectory (GAE over the job's consecutive decisions, a
critic on the job's features):

``r_j = accuracy_weight * gain_j - resource_weight * s_j - 1/N * [j still in the system]
- (Q / N) * s_j / sum_k s_k``

where ``s_j`` is the share of the cluster's CPU and GPU that job ``j`` held during the slot
(the mean of the two, as in :meth:`ClusterView.occupied_share`, without the overload cap),
``gain_j`` its quality gained, and ``Q`` the jobs left waiting in queues. Summed over the
running jobs this is the team reward of the slot, except that jobs started in the slot
carry their own terms from their first decision on. The last term is an assumption (ours,
not the paper's): the queued jobs' waiting is charged to the running jobs in proportion to
the resources they hold, since held resources are what keeps a queued job from starting.
So growing a job pays for itself only when its speed-up outweighs the extra resources and,
while jobs wait, the extra share of their waiting; with an empty queue growth costs only
``resource_weight`` times the share.
"""

from __future__ import annotations

import numpy as np

from edgesched.envs.execution import DONE


def job_shares(view, jobs: np.ndarray) -> np.ndarray:
    """Share of the cluster's CPU and GPU held by each of ``jobs`` (mean of the two).

    Args:
        view: the copy's :class:`~edgesched.envs.view.ClusterView`.
        jobs: job ids.

    Returns:
        (len(jobs),) shares in [0, 1] (before any overload cap).
    """
    if len(jobs) == 0:
        return np.zeros(0)
    held = view.worker_alloc[jobs][..., :2].sum(1)  # (J, 2): CPU, GPU over the workers
    total = np.maximum(view.capacity[:, :2].sum(0), 1e-9)
    return (held / total).mean(1)


def job_rewards(
    gain: np.ndarray,
    share: np.ndarray,
    in_system: np.ndarray,
    queued: int,
    num_agents: int,
    resource_weight: float,
    accuracy_weight: float,
) -> np.ndarray:
    """Each running job's part of the slot's RLPTO reward (the module docs' ``r_j``).

    Args:
        gain: (J,) quality gained in the slot.
        share: (J,) cluster share held in the slot (:func:`job_shares`).
        in_system: (J,) bool, the job has not finished by the slot's end.
        queued: jobs waiting in queues at the slot's end.
        num_agents: N, the copy's agents (the team reward's normalization).
        resource_weight: weight of the held share.
        accuracy_weight: weight of the quality gained.

    Returns:
        (J,) rewards.
    """
    total = float(share.sum())
    blame = share / total if total > 0 else np.full(len(share), 1.0 / max(len(share), 1))
    return (
        accuracy_weight * gain
        - resource_weight * share
        - in_system.astype(np.float64) / num_agents
        - (queued / num_agents) * blame
    )


def finished(view, jobs: np.ndarray) -> np.ndarray:
    """(len(jobs),) bool: the job is done."""
    return view.job_status[jobs] == DONE


def sequence_gae(
    slot: np.ndarray,
    nxt: np.ndarray,
    rewards: np.ndarray,
    values: np.ndarray,
    boot: np.ndarray,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """GAE along each job's decisions, for rows of many interleaved job trajectories.

    Args:
        slot: (R,) rollout step of each row.
        nxt: (R,) index of the same job's next row in the rollout, -1 where there is none.
        rewards: (R,) the row's reward.
        values: (R,) value of the row's job state.
        boot: (R,) value after the row where ``nxt`` is -1 (0 for a finished job, the
            job's value at the rollout's end otherwise); ignored where ``nxt`` >= 0.
        gamma: discount per decision.
        lam: GAE lambda.

    Returns:
        advantages and returns, both (R,).
    """
    has_next = nxt >= 0
    nv = np.where(has_next, values[np.maximum(nxt, 0)], boot)
    delta = rewards + gamma * nv - values
    adv = np.zeros_like(delta)
    # rows of later steps first: a row's successor is always at a later step
    order = np.argsort(-slot, kind="stable")
    steps = slot[order]
    bounds = np.flatnonzero(np.diff(steps)) + 1
    for rows in np.split(order, bounds):
        follow = np.where(has_next[rows], adv[np.maximum(nxt[rows], 0)], 0.0)
        adv[rows] = delta[rows] + gamma * lam * follow
    return adv, adv + values
