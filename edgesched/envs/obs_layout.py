"""Where each block and field of an observation lies, by name (agents' and the central view's).

Heuristics and learners parse observations through these layouts instead of computing
offsets; :class:`~edgesched.envs.view.ClusterView` hands them out (``obs_layout``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .observe import NODE_FEATURES

LINK_FEATURES = 3
"""Per-target link features after the target's node features: link present, log10
bandwidth / 2, latency / 100 ms."""


@dataclass(frozen=True)
class ObsLayout:
    """Where each block and field of one agent's observation lies.

    An observation is: own node features (``node``), time of day (``time``: sin, cos), queue
    length / 10 (``queue``), ``pending_slots`` job blocks of ``job_width`` features
    (``jobs``), then ``num_targets`` target blocks of ``target_width`` features
    (``targets``: the target's node features, then :data:`LINK_FEATURES` link features).

    The ``node_*`` fields index within a node-features block (the own block or a target
    block); the ``job_*`` fields index within one job block (the graph view's job features
    share them).

    Attributes:
        node: own node features.
        time: time-of-day features.
        queue: index of the queue-length feature.
        jobs: all pending-job blocks.
        pending_slots: P, job blocks.
        job_width: F, features per job block.
        targets: all target blocks.
        num_targets: K+1, target blocks.
        target_width: features per target block.
        node_free: free fraction (cpu, gpu, mem).
        node_capacity: capacity / largest capacity (cpu, gpu, mem).
        node_speed: speed / largest speed.
        node_workers: running workers / 8.
        node_queue: queue length / 10.
        link: a target block's link features.
        job_present: 1 for a job, 0 for an empty slot.
        job_min_demand: minimum demand / largest capacity (cpu, gpu, mem).
        job_workers: workers / 4.
        job_size: log size / 20.
        job_priority: priority one-hot.
        job_model: model one-hot.
        job_placed: placed workers / 4.
        job_wait: waiting slots / 100.
    """

    node: slice
    time: slice
    queue: int
    jobs: slice
    pending_slots: int
    job_width: int
    targets: slice
    num_targets: int
    target_width: int
    job_priority: slice
    job_model: slice
    job_placed: int
    job_wait: int
    link: slice
    node_free: slice
    node_capacity: slice
    node_speed: int
    node_workers: int
    node_queue: int
    job_present: int
    job_min_demand: slice
    job_workers: int
    job_size: int

    @staticmethod
    @lru_cache(maxsize=64)
    def build(
        pending_slots: int, num_targets: int, job_width: int, num_priorities: int
    ) -> ObsLayout:
        """The layout for the given sizes (the simulator's public sizes or an ``EnvSpec``'s).

        Args:
            pending_slots: P.
            num_targets: K+1.
            job_width: features per job block (``job_features``).
            num_priorities: priority classes (the model one-hot follows their one-hot).
        """
        nf = NODE_FEATURES
        jobs0 = nf + 3
        targets0 = jobs0 + pending_slots * job_width
        width = nf + LINK_FEATURES
        prio0 = 6
        return ObsLayout(
            node=slice(0, nf),
            time=slice(nf, nf + 2),
            queue=nf + 2,
            jobs=slice(jobs0, targets0),
            pending_slots=pending_slots,
            job_width=job_width,
            targets=slice(targets0, targets0 + num_targets * width),
            num_targets=num_targets,
            target_width=width,
            job_priority=slice(prio0, prio0 + num_priorities),
            job_model=slice(prio0 + num_priorities, job_width - 2),
            job_placed=job_width - 2,
            job_wait=job_width - 1,
            link=slice(nf, nf + LINK_FEATURES),
            # the node block as EdgeClusterSim._node_features fills it
            node_free=slice(0, 3),
            node_capacity=slice(3, 6),
            node_speed=6,
            node_workers=7,
            node_queue=8,
            # the job block as EdgeClusterSim._job_features fills it
            job_present=0,
            job_min_demand=slice(1, 4),
            job_workers=4,
            job_size=5,
        )


@dataclass(frozen=True)
class CentralObsLayout:
    """Where each block of the central view's observation lies.

    The central observation is the current job's block (fields as in :class:`ObsLayout`),
    then per node its node features and its log bandwidth to the job's home, then 3 extras.

    Attributes:
        job: the current job's features.
        nodes: all node blocks.
        node_width: features per node block (``NODE_FEATURES + 1``).
        num_nodes: N.
    """

    job: slice
    nodes: slice
    node_width: int
    num_nodes: int

    @staticmethod
    def build(job_width: int, num_nodes: int) -> CentralObsLayout:
        """The layout for ``job_width`` job features and ``num_nodes`` nodes."""
        width = NODE_FEATURES + 1
        return CentralObsLayout(
            job=slice(0, job_width),
            nodes=slice(job_width, job_width + num_nodes * width),
            node_width=width,
            num_nodes=num_nodes,
        )
