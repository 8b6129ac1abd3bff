"""A narrow, read-only view of the simulator for shields, heuristics and RLPTO.

Modules outside :mod:`edgesched.envs` read the simulator only through :class:`ClusterView`:
free capacity, queues, the allocation table, the action encoding, the per-job arrays RLPTO
needs, and the one collision test (:func:`colliding_nodes`). Every array it hands out is a
read-only numpy view of the simulator's current array or a fresh copy, so a consumer can
never change simulator state through it; the only mutation it offers is
:meth:`ClusterView.check_actions`, which counts invalid actions exactly as a step does.

A view holds nothing but its simulator: every property reads the simulator's state at the
time of the call, so one view stays valid across steps and resets.

:class:`ObsLayout` names the blocks of an agent's observation (and :class:`CentralObsLayout`
those of the central view's), so heuristics parse observations without computing offsets;
both live in :mod:`edgesched.envs.obs_layout` and are re-exported here.
"""

from __future__ import annotations

from typing import Any, NoReturn, overload

import numpy as np

from .batch_view import BatchView, SharedStatics, _readonly
from .metrics import QUEUED
from .obs_layout import LINK_FEATURES, CentralObsLayout, ObsLayout
from .placement import CAPACITY_EPS, colliding_nodes

__all__ = ["LINK_FEATURES", "CentralObsLayout", "ClusterView", "ObsLayout"]


class _PerJob:
    """Read-only property of :class:`ClusterView`: the copy's rows of one per-job array.

    Most of the view's per-job properties are this one read (a read-only view of the
    simulator array ``attr`` over the copy's jobs); one descriptor keeps each a line with its
    docstring, rather than the same five-line property a dozen times.
    """

    def __init__(self, attr: str, doc: str) -> None:
        self.attr, self.__doc__ = attr, doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = f"{owner.__name__}.{name}"

    @overload
    def __get__(self, view: None, owner: type | None = None) -> _PerJob: ...
    @overload
    def __get__(self, view: ClusterView, owner: type | None = None) -> np.ndarray: ...
    def __get__(self, view: ClusterView | None, owner: type | None = None) -> Any:
        if view is None:
            return self
        return _readonly(getattr(view._sim, self.attr)[view._js()])

    def __set__(self, view: ClusterView, value: Any) -> NoReturn:
        raise AttributeError(f"{self.name} is read-only")


class ClusterView(SharedStatics):
    """Read-only access to one simulator's cluster, queues, jobs and actions.

    A view shows one copy of the simulator, with that copy's local agent, node and job ids
    (``0..N-1``, ``0..J-1``): a lone simulator's view is the whole simulator; a batched
    simulator's needs ``copy``.

    Args:
        sim: the simulator (:class:`~edgesched.envs.core.EdgeClusterSim` or a subclass).
        copy: which copy of a batched simulator (``None``: the only one).

    Raises:
        ValueError: ``copy`` missing on a batched simulator or out of range.

    Example:
        >>> from edgesched.envs import EdgeClusterSim, make_config
        >>> sim = EdgeClusterSim(make_config("edge10"))
        >>> sim.reset(0)
        >>> view = ClusterView(sim)
        >>> view.free.shape
        (10, 3)
    """

    __slots__ = ("_b",)

    def __init__(self, sim: Any, copy: int | None = None) -> None:
        if copy is None:
            if sim.copies != 1:
                raise ValueError(
                    f"copy=None: a batched simulator ({sim.copies} copies) needs copy=b, "
                    f"0 <= b < {sim.copies}"
                )
            copy = 0
        if not 0 <= int(copy) < sim.copies:
            raise ValueError(f"copy={copy!r}: need 0 <= copy < {sim.copies}")
        self._sim, self._b = sim, int(copy)

    # the copy's agents and job ids in the simulator's (batched) arrays
    def _ag(self) -> slice:
        n = self._sim.agents_per_copy
        return slice(self._b * n, (self._b + 1) * n)

    def _j0(self) -> int:
        return self._b * self._sim.job_capacity

    def _js(self) -> slice:
        j0 = self._j0()
        return slice(j0, j0 + self._sim.workload(self._b).num_jobs)

    def batch_view(self) -> BatchView:
        """This copy as a one-copy :class:`~edgesched.envs.batch_view.BatchView`."""
        return BatchView(self._sim, self._b)

    def _local(self, ids: np.ndarray, offset: int) -> np.ndarray:
        """Ids of the copy shifted to local ones, -1 kept; read-only."""
        if offset == 0:
            return _readonly(ids)
        return np.where(ids >= 0, ids - offset, -1)

    # ------------------------------------------------------------------ sizes
    @property
    def num_jobs(self) -> int:
        """Jobs of the current episode's workload (arrived or not)."""
        return self._sim.workload(self._b).num_jobs

    @property
    def num_priorities(self) -> int:
        """Priority classes."""
        return self._sim.num_priorities

    @property
    def num_models(self) -> int:
        """Models in the scenario's catalog."""
        return self._sim.num_models

    @property
    def job_features(self) -> int:
        """F, features per pending job in an observation."""
        return self._sim.job_features

    @property
    def max_workers(self) -> int:
        """Worker columns of the per-worker arrays (the episode's largest gang)."""
        return self._sim.w_node.shape[1]

    # ------------------------------------------------------------------ cluster and load
    @property
    def clock(self) -> int:
        """The current slot."""
        return int(self._sim.tc[self._b])

    @property
    def capacity(self) -> np.ndarray:
        """(N, 3) capacity per node (cpu cores, GPUs, memory GiB), read-only."""
        return _readonly(self._sim.capacity[self._ag()])

    @property
    def used(self) -> np.ndarray:
        """(N, 3) allocated resources per node, read-only (may exceed capacity)."""
        return _readonly(self._sim.used[self._ag()])

    @property
    def free(self) -> np.ndarray:
        """(N, 3) ``capacity - used``, a fresh array (negative under overload)."""
        ag = self._ag()
        return self._sim.capacity[ag] - self._sim.used[ag]

    @property
    def inv_capacity(self) -> np.ndarray:
        """(N, 3) ``1 / capacity``, 0 where the capacity is 0; read-only."""
        return _readonly(self._sim._inv_cap[self._ag()])

    @property
    def boundary(self) -> np.ndarray:
        """(N,) whether agents of two or more regions can target the node, read-only."""
        return _readonly(self._sim.cluster.boundary)

    def occupied_share(self) -> float:
        """Allocated share of the cluster's CPUs and GPUs (RLPTO's "resources occupied")."""
        return float(np.atleast_1d(self._sim.occupied_share())[self._b])

    @property
    def node_overload_slots(self) -> np.ndarray:
        """(N,) slots each node has spent over capacity this episode, read-only.

        Their sum is the episode's ``overload_node_slots`` metric; the per-node counts show
        where overloads concentrate. A simulator restored from a checkpoint written before
        this counter existed counts from its restoration.
        """
        return _readonly(self._sim._node_over[self._ag()])

    def crashes_by_cause(self) -> dict[str, int]:
        """This episode's crashes (``collision_mode='measured'``) by what caused them.

        ``memory``: host memory over capacity crashed some worker of the job; ``gpu_pair``:
        a failing pair on a shared GPU. Their sum is the ``crashes`` metric. A simulator
        restored from a checkpoint written before the causes were counted counts every
        earlier crash as ``gpu_pair``.
        """
        cnt = self._sim._cnt
        total, memory = int(cnt["crashes"][self._b]), int(cnt["crashes_memory"][self._b])
        return {"memory": memory, "gpu_pair": total - memory}

    # ------------------------------------------------------------------ queues
    @property
    def pending(self) -> np.ndarray:
        """(N, P) job id in each agent's pending slots, -1 where empty; read-only."""
        return self._local(self._sim.head[self._ag()], self._j0())

    @property
    def queue_lengths(self) -> np.ndarray:
        """(N,) queued jobs per agent now, read-only.

        Current even between steps (the simulator counts its queues lazily, at its next
        step or clock advance; views that drive placements themselves read in between).
        """
        self._sim._update_qlen()
        return _readonly(self._sim.qlen[self._ag()])

    def queued_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """All queue entries as (agent, job) arrays, each agent's in priority order."""
        agents, jobs = self._sim.queued_pairs()
        if self._sim.copies > 1:
            mine = jobs // self._sim.job_capacity == self._b
            agents = agents[mine] - self._ag().start
            jobs = jobs[mine] - self._j0()
        return _readonly(agents), _readonly(jobs)

    # ------------------------------------------------------------------ jobs
    def alloc(self, jobs: np.ndarray, levels: np.ndarray) -> np.ndarray:
        """Allocation of ``jobs`` at ``levels`` (broadcast together), (..., 3), fresh.

        Args:
            jobs: job ids (any shape; -1 indexes the last job: mask such entries out).
            levels: allocation levels, broadcastable with ``jobs``.
        """
        return self._sim.alloc_of(np.asarray(jobs) + self._j0(), levels)

    def resize_levels(self, jobs: np.ndarray, delta: int) -> np.ndarray:
        """Levels the workers of running ``jobs`` would move to under a resize by ``delta``.

        The simulator's own rule (:meth:`EdgeClusterSim.resize`): one level of
        ``alloc_scales`` in ``scale`` mode, one GPU at the same CPUs in ``grid`` mode; a
        worker that cannot move keeps its level. Whether the nodes have room for a growth is
        not checked (compare the allocations with :attr:`free`).

        Args:
            jobs: running job ids of this copy.
            delta: -1 (shrink) or +1 (grow).

        Returns:
            (len(jobs), W) int64 levels, fresh; -1 past each job's workers.

        Raises:
            ValueError: ``delta`` is not -1 or +1.
        """
        if delta not in (-1, 1):
            raise ValueError(f"delta={delta!r}: need -1 (shrink) or +1 (grow)")
        return self._sim._resized_levels(np.asarray(jobs, dtype=np.int64) + self._j0(), delta)

    @property
    def alloc_table(self) -> np.ndarray:
        """(J, L, 3) allocation of every job at every level, read-only."""
        js = self._js()
        return _readonly(self._sim.alloc_of(np.arange(js.start, js.stop)))

    # per-job arrays: (J, ...) rows of the copy's jobs, read-only views
    alloc_allowed = _PerJob(
        "j_alloc_ok", "(J, L) whether each job may take each allocation level, read-only."
    )
    job_arrival = _PerJob(
        "j_arrival", "(J,) arrival slot of each job (ids are in arrival order), read-only."
    )
    job_priority = _PerJob("j_prio", "(J,) priority class of each job (0 first), read-only.")
    job_model = _PerJob("j_model", "(J,) model (catalog index) of each job, read-only.")
    job_workers = _PerJob("j_workers", "(J,) workers (gang size) of each job, read-only.")
    job_x90 = _PerJob("j_x90", "(J,) samples to 90% quality of each job (its size), read-only.")
    job_max_samples = _PerJob(
        "j_max_samples", "(J,) sample budget of each job (its epoch limit), read-only."
    )
    job_status = _PerJob(
        "status", "(J,) status code of each job (``NOT_ARRIVED .. DONE``), read-only."
    )
    job_quality = _PerJob("quality", "(J,) normalized model quality of each job, read-only.")
    job_progress = _PerJob(
        "progress", "(J,) training progress of each job (samples; TapFinger: fraction), read-only."
    )
    job_start_slot = _PerJob(
        "start_slot", "(J,) slot each job started running (-1: not yet), read-only."
    )
    worker_alloc = _PerJob("w_alloc", "(J, W, 3) allocation of each job's workers, read-only.")
    worker_levels = _PerJob("w_level", "(J, W) allocation level of each job's workers, read-only.")

    @property
    def job_home(self) -> np.ndarray:
        """(J,) agent at whose queue each job arrived, read-only."""
        return self._local(self._sim.j_home[self._js()], self._ag().start)

    def queue_key(self, jobs: np.ndarray) -> np.ndarray:
        """Sort key of ``jobs`` in the queues' static order (priority class, then arrival)."""
        return self._sim.j_key_of(np.asarray(jobs, dtype=np.int64) + self._j0())

    @property
    def queued(self) -> np.ndarray:
        """(J,) bool, jobs waiting in a queue (status ``QUEUED``); fresh."""
        return self._sim.status[self._js()] == QUEUED

    @property
    def running(self) -> np.ndarray:
        """Ids of the running jobs, in start order; read-only."""
        running = self._sim.running
        if self._sim.copies > 1:
            running = running[running // self._sim.job_capacity == self._b]
        return self._local(running, self._j0())

    @property
    def worker_nodes(self) -> np.ndarray:
        """(J, W) node of each job's workers (-1: not placed or no such worker), read-only."""
        return self._local(self._sim.w_node[self._js()], self._ag().start)

    def episode_key(self) -> tuple[int, int]:
        """A key of the current episode: it changes at every reset.

        It is the simulator's uid and the episode's number among every episode the
        simulator has begun in any of its copies. Both travel with a pickled simulator, so
        a copy restored from a checkpoint has the key it had when saved. Keys are unique
        among the simulators made in one process; an unpickled simulator keeps the uid it
        was made with, which a simulator made in another process may share: compare a key
        only with keys of the same view.
        """
        return (self._sim.uid, int(self._sim._episode_no[self._b]))

    # ------------------------------------------------------------------ actions
    @property
    def mask(self) -> np.ndarray:
        """(N, A) feasible actions of every agent, read-only."""
        return _readonly(self._sim.mask[self._ag()])

    def check_actions(self, actions: np.ndarray) -> np.ndarray:
        """Validate one action per agent by the rules of a step, without stepping.

        Under ``invalid_action='raise'`` an invalid action raises and nothing changes; under
        ``'defer'`` invalid actions become 0, are counted in the episode's
        ``invalid_actions`` (as a step would count them) and are marked in
        :attr:`invalid_mask`.

        Args:
            actions: (N,) integer actions.

        Returns:
            (N,) the actions with the invalid ones deferred.

        Raises:
            InvalidActionError: wrong shape or dtype, or an invalid action under ``'raise'``.
        """
        sim = self._sim
        if sim.copies != 1:
            raise TypeError("check_actions needs a one-copy simulator (steps check batches)")
        sim.invalid_mask = None  # only set by the check when an action is invalid
        return sim._checked_actions(actions)

    @property
    def invalid_mask(self) -> np.ndarray | None:
        """(N,) bool, agents whose action the last check or step deferred; ``None``: none."""
        bad = self._sim.invalid_mask
        return None if bad is None else _readonly(bad[self._ag()])

    # ------------------------------------------------------------------ collisions
    def colliding_nodes(self, targets: np.ndarray, alloc: np.ndarray) -> np.ndarray:
        """:func:`colliding_nodes` against the current free capacity."""
        return colliding_nodes(targets, alloc, self.free)

    # ------------------------------------------------------------------ observations
    def job_feature_rows(self, jobs: np.ndarray) -> np.ndarray:
        """Observation features of ``jobs`` (any shape, -1 = empty slot), (..., F), fresh."""
        jobs = np.asarray(jobs, dtype=np.int64)
        return self._sim._job_features(np.where(jobs >= 0, jobs + self._j0(), -1))

    def node_feature_rows(self) -> np.ndarray:
        """(N, NODE_FEATURES) current (not delayed) node features, fresh."""
        return self._sim._node_features()[self._ag()]

    def time_features(self) -> np.ndarray:
        """(2,) sine and cosine of the copy's time of day, fresh."""
        tf = self._sim._time_features()
        return np.array(tf if tf.ndim == 1 else tf[self._ag().start])

    @property
    def obs_layout(self) -> ObsLayout:
        """Where each block and field of an agent's observation lies."""
        sim = self._sim
        return ObsLayout.build(sim.pending_slots, sim.k1, sim.job_features, sim.num_priorities)


__all__ = ["CAPACITY_EPS", "CentralObsLayout", "ClusterView", "ObsLayout", "colliding_nodes"]
