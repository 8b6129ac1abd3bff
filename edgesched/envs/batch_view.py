"""A read-only view of every copy of a batched simulator at once, copy axis first.

:class:`~edgesched.envs.view.ClusterView` shows one copy; code that decides for all copies
in one array program (the batched shields, SROLE's preemptive commit) reads the same state
through :class:`BatchView` instead of looping over per-copy views. Ids are local to each
copy (agents and nodes ``0..N-1``, jobs ``0..J-1``), as in a :class:`ClusterView`, so row
``b`` of any array here equals what ``sim.view(b)`` shows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .config import SimConfig
from .topology import Cluster

__all__ = ["BatchView", "SharedStatics"]


def _readonly(a: np.ndarray) -> np.ndarray:
    """A view of ``a`` that raises on writes (``a`` itself stays writeable)."""
    v = a.view()
    v.flags.writeable = False
    return v


class SharedStatics:
    """What a one-copy and an all-copies view share: sizes, the static cluster, the actions.

    Attributes:
        _sim: the viewed simulator (set by the subclass).
    """

    __slots__ = ("_sim",)

    @property
    def num_agents(self) -> int:
        """N, agents (= nodes) of one copy."""
        return self._sim.agents_per_copy

    @property
    def num_actions(self) -> int:
        """Size of each agent's action space (0 = defer)."""
        return self._sim.num_actions

    @property
    def num_levels(self) -> int:
        """L, allocation levels."""
        return self._sim.num_levels

    @property
    def k1(self) -> int:
        """K+1, placement targets per agent (itself first)."""
        return self._sim.k1

    @property
    def pending_slots(self) -> int:
        """P, pending jobs an agent may choose among."""
        return self._sim.pending_slots

    @property
    def config(self) -> SimConfig:
        """The scenario's parameters (immutable)."""
        return self._sim.cfg

    @property
    def cluster(self) -> Cluster:
        """The static cluster every copy shares (topology, capacities, regions)."""
        return self._sim.cluster

    @property
    def neighbors(self) -> np.ndarray:
        """(N, K+1) placement targets of each agent, itself first, -1 where absent; read-only."""
        return _readonly(self._sim.cluster.neighbors)

    @property
    def regions(self) -> np.ndarray:
        """(N,) region id of each node, read-only."""
        return _readonly(self._sim.cluster.region)

    @property
    def num_regions(self) -> int:
        """Number of regions (per copy)."""
        return self._sim.cluster.num_regions

    def decode(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Split placement actions (> 0) into (pending slot, target index, level)."""
        return self._sim.decode(actions)

    def encode(self, slot: np.ndarray, k: np.ndarray, level: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`decode`."""
        return self._sim.encode(slot, k, level)


class BatchView(SharedStatics):
    """Read-only access to the free capacity, queues, masks and allocations of all copies.

    Args:
        sim: the simulator (:class:`~edgesched.envs.core.EdgeClusterSim`, lone or batched).
        copy: ``None`` for every copy (``B = sim.copies``), or one copy's index (``B = 1``:
            the view then shows that copy alone, as a one-copy batch).

    Raises:
        ValueError: ``copy`` out of range.

    Example:
        >>> from edgesched.envs import EdgeClusterSim, make_config
        >>> sim = EdgeClusterSim(make_config("edge10"), copies=3)
        >>> sim.reset(seeds=[0, 1, 2])
        >>> BatchView(sim).free.shape
        (3, 10, 3)
    """

    __slots__ = ("_b0", "_nb")

    def __init__(self, sim: Any, copy: int | None = None) -> None:
        if copy is None:
            self._b0, self._nb = 0, int(sim.copies)
        else:
            if not 0 <= int(copy) < sim.copies:
                raise ValueError(f"copy={copy!r}: need 0 <= copy < {sim.copies}")
            self._b0, self._nb = int(copy), 1
        self._sim = sim

    def _rows(self) -> slice:
        n = self._sim.agents_per_copy
        return slice(self._b0 * n, (self._b0 + self._nb) * n)

    def _batched(self, a: np.ndarray) -> np.ndarray:
        """Rows of the viewed copies' agents, reshaped to (B, N, ...)."""
        return a[self._rows()].reshape(self._nb, self._sim.agents_per_copy, *a.shape[1:])

    # ------------------------------------------------------------------ sizes
    @property
    def num_copies(self) -> int:
        """B, copies shown."""
        return self._nb

    # ------------------------------------------------------------------ state
    @property
    def free(self) -> np.ndarray:
        """(B, N, 3) ``capacity - used``, a fresh array (negative under overload)."""
        sim = self._sim
        rows = self._rows()
        return (sim.capacity[rows] - sim.used[rows]).reshape(self._nb, -1, 3)

    @property
    def inv_capacity(self) -> np.ndarray:
        """(B, N, 3) ``1 / capacity``, 0 where the capacity is 0; read-only."""
        return _readonly(self._batched(self._sim._inv_cap))

    @property
    def mask(self) -> np.ndarray:
        """(B, N, A) feasible actions of every agent, read-only."""
        return _readonly(self._batched(self._sim.mask))

    @property
    def pending(self) -> np.ndarray:
        """(B, N, P) local job id in each agent's pending slots, -1 where empty; fresh."""
        sim = self._sim
        head = self._batched(sim.head)
        j0 = (np.arange(self._b0, self._b0 + self._nb) * sim.job_capacity)[:, None, None]
        return np.where(head >= 0, head - j0, -1)

    def alloc(self, copies: np.ndarray, jobs: np.ndarray, levels: np.ndarray) -> np.ndarray:
        """Allocation of local ``jobs`` of ``copies`` at ``levels`` (broadcast), (..., 3), fresh.

        Args:
            copies: copy of each job, ``0 <= copies < B`` (broadcastable with ``jobs``).
            jobs: local job ids (-1 indexes some other job: mask such entries out).
            levels: allocation levels, broadcastable with ``jobs``.
        """
        sim = self._sim
        ids = (np.asarray(copies) + self._b0) * sim.job_capacity + np.asarray(jobs)
        return sim.alloc_of(ids, levels)

    # ------------------------------------------------------------------ per (copy, job)
    def _job_ids(self, copies: np.ndarray, jobs: np.ndarray, valid: bool = True) -> np.ndarray:
        """Simulator ids of local ``jobs`` of ``copies`` (int arrays, broadcast).

        -1 (an empty slot) is kept unless ``valid`` says there is none.
        """
        # a lone simulator's local ids are its own: skip the id arithmetic (three (1,)-array
        # operations, a measurable part of the lone central view's decision). Read from the
        # simulator, not kept here: views pickled before this shortcut still unpickle.
        if self._sim.copies == 1:
            return jobs
        ids = (copies + self._b0) * self._sim.job_capacity + jobs
        return ids if valid else np.where(jobs >= 0, ids, -1)

    def job_feature_rows(self, copies: np.ndarray, jobs: np.ndarray) -> np.ndarray:
        """Observation features of local ``jobs`` of ``copies`` (-1: empty), (..., F), fresh."""
        return self._sim._job_features(self._job_ids(copies, jobs, valid=False))

    def alloc_options(self, copies: np.ndarray, jobs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Allocation of local ``jobs`` of ``copies`` at every level, and which are allowed.

        ``jobs`` must be valid ids (>= 0).

        Returns:
            ``(alloc (..., L, 3), allowed (..., L) bool)``, fresh.
        """
        ids = self._job_ids(copies, jobs)
        return self._sim.alloc_of(ids), self._sim.j_alloc_ok[ids]

    def job_home(self, copies: np.ndarray, jobs: np.ndarray) -> np.ndarray:
        """Local agent at whose queue each of local ``jobs`` of ``copies`` arrived; fresh.

        ``jobs`` must be valid ids (>= 0).
        """
        if self._sim.copies == 1:  # local ids and agents are the simulator's
            return self._sim.j_home[jobs]
        ids = self._job_ids(copies, jobs)
        return self._sim.j_home[ids] - (copies + self._b0) * self._sim.agents_per_copy

    def job_status(self, copies: np.ndarray, jobs: np.ndarray) -> np.ndarray:
        """Status code (``NOT_ARRIVED .. DONE``) of local ``jobs`` of ``copies``; fresh.

        ``jobs`` must be valid ids (>= 0).
        """
        return self._sim.status[self._job_ids(copies, jobs)]

    def queue_lengths(self) -> np.ndarray:
        """(B, N) queued jobs per agent now, fresh (see ``ClusterView.queue_lengths``)."""
        self._sim._update_qlen()
        return self._batched(self._sim.qlen).copy()

    # ------------------------------------------------------------------ observations
    @property
    def clock(self) -> np.ndarray:
        """(B,) the current slot of each copy, fresh."""
        return self._sim.tc[self._b0 : self._b0 + self._nb].copy()

    def node_feature_rows(self) -> np.ndarray:
        """(B, N, NODE_FEATURES) current (not delayed) node features, fresh."""
        return self._batched(self._sim._node_features())

    def time_features(self) -> np.ndarray:
        """(B, 2) sine and cosine of each copy's time of day, fresh."""
        tf = self._sim._time_features()
        if tf.ndim == 1:  # a lone simulator's one row
            return tf[None].copy()
        return self._batched(tf)[:, 0].copy()

    def view(self, b: int) -> Any:  # a ClusterView (view.py imports this module)
        """The :class:`ClusterView` of viewed copy ``b`` (``0 <= b < B``)."""
        if not 0 <= int(b) < self._nb:
            raise ValueError(f"b={b!r}: need 0 <= b < {self._nb}")
        return self._sim.view(self._b0 + int(b))
