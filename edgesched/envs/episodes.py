"""Episodes: starting them in every copy (``reset``) or in some (``reset_copies``).

A copy's episode draws its whole workload from ``np.random.default_rng(seed)`` at reset;
the per-copy clocks, end flags, counters and straggler buffers restart, and the slot-0
arrivals are queued. Resetting some copies leaves the others running untouched.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .metrics import COUNTER_KEYS
from .workload import draw_workload


class EpisodeMixin:
    """Reset of :class:`~edgesched.envs.core.EdgeClusterSim`, all copies or some.

    State written: ``rngs``, the per-copy clocks ``tc``, end flags, counters, utilization
    and straggler buffers, ``used``/``node_workers``/``return_sum``, the pending slots; the
    workloads through ``_install`` (``layout``).
    """

    def reset(self, seed: int | None = None, *, seeds: Any = None) -> None:
        """Start an episode in every copy.

        Args:
            seed: a lone simulator's seed; batched, copy ``b`` gets ``seed + b`` (0 + b when
                ``None``) unless ``seeds`` is given.
            seeds: one seed per copy (batched).

        Raises:
            ValueError: ``seeds`` of the wrong length.
        """
        b = self.copies
        if seeds is None:
            if self.lone:
                seeds = [seed]
            else:
                base = 0 if seed is None else int(seed)
                seeds = [base + i for i in range(b)]
        seeds = list(seeds)
        if len(seeds) != b:
            raise ValueError(f"seeds has {len(seeds)} entries; need copies={b}")
        self.rngs = [np.random.default_rng(s) for s in seeds]
        self._order_rngs = [self._order_rng(s) for s in seeds]
        wls = [draw_workload(self, rng) for rng in self.rngs]
        self._layout(max(w.num_jobs for w in wls), max(w.max_workers for w in wls))
        self._reset_per_copy_state()
        for i, wl in enumerate(wls):
            self._install(i, wl)
        self._start_episodes(list(range(b)))

    def _order_rng(self, seed: int | None) -> np.random.Generator | None:
        """``crash_order='random'``: the copy's generator of round orders.

        A child of ``SeedSequence(seed)``, the sequence ``np.random.default_rng(seed)``
        draws from for an integer seed (fresh entropy for ``None``), so the orders are
        seeded and leave every other draw of the episode (workload, stragglers) as under
        ``crash_order='agent'``.
        """
        if self.cfg.crash_order != "random":
            return None
        return np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])

    def reset_copy(self, b: int, seed: int | None) -> None:
        """Start a new episode in copy ``b`` only (the others keep running)."""
        self.reset_copies([b], [seed])

    def reset_copies(self, copies: Any, seeds: Any) -> None:
        """Start a new episode in each of ``copies`` (with ``seeds``); one refresh for all.

        Raises:
            ValueError: a copy index out of range or repeated, or ``seeds`` of another length.
        """
        copies = [int(c) for c in copies]
        seeds = list(seeds)
        bad = [c for c in copies if not 0 <= c < self.copies]
        if bad or len(set(copies)) != len(copies):
            raise ValueError(
                f"copies={copies}: need distinct indices 0 <= b < copies={self.copies}"
            )
        if len(seeds) != len(copies):
            raise ValueError(f"seeds has {len(seeds)} entries; need one per copy ({len(copies)})")
        if not copies:
            return
        if self._wl[0] is None or self.lone:
            if self.lone:
                return self.reset(seeds[0])
            raise RuntimeError("call reset() once before resetting single copies")
        wls = []
        for c, s in zip(copies, seeds, strict=True):
            self.rngs[c] = np.random.default_rng(s)
            self._order_rngs[c] = self._order_rng(s)
            wls.append(draw_workload(self, self.rngs[c]))
        need_j = max(w.num_jobs for w in wls)
        need_w = max(w.max_workers for w in wls)
        if need_j > self._job_capacity or need_w > self.max_workers:
            self._grow(max(need_j, self._job_capacity), max(need_w, self.max_workers))
        self._drop_copies(copies)
        for c, wl in zip(copies, wls, strict=True):
            self._install(c, wl)
        self._start_episodes(copies)

    def _drop_copies(self, copies: list[int]) -> None:
        """Remove the running and queued jobs of ``copies`` and free their nodes."""
        gone = np.zeros(self.copies, dtype=bool)
        gone[copies] = True
        jc = self._job_capacity
        self.running = self.running[~gone[self.running // jc]]
        keep = ~gone[self.q_job // jc]
        self.q_job, self.q_ck = self.q_job[keep], self.q_ck[keep]
        self._queue_dirty = True
        agents = gone[self._agent_copy]
        self.used[agents] = 0.0
        self._slots[agents] = -1
        self.node_workers[agents] = 0.0
        self.return_sum[agents] = 0.0
        self._util_sum[agents] = 0.0
        self._node_over[agents] = 0

    def _reset_per_copy_state(self) -> None:
        b, na = self.copies, self.num_agents
        self.tc = np.zeros(b, dtype=np.int64)
        self._term = np.zeros(b, dtype=bool)
        self._trunc = np.zeros(b, dtype=bool)
        self._cnt = {k: np.zeros(b, dtype=np.int64) for k in COUNTER_KEYS}
        self._util_sum = np.zeros(na)
        # per node: slots spent over capacity this episode (ClusterView.node_overload_slots)
        self._node_over = np.zeros(na, dtype=np.int64)
        self._occupied_sum = np.zeros(b)
        self._n_done_c = np.zeros(b, dtype=np.int64)
        self._num_jobs_c = np.zeros(b, dtype=np.int64)
        self._last_arrival_c = np.zeros(b, dtype=np.int64)
        # per-copy straggler draws: rows of one array so that a batched step gathers all
        # copies' draws at once (see execution.draw_stragglers)
        self._strag_buf = np.ones((b, 0))
        self._strag_len = np.zeros(b, dtype=np.int64)
        self._strag_pos = np.zeros(b, dtype=np.int64)
        self._strag_width = np.ones(b, dtype=np.int64)
        # pending_refill="on_advance": each agent's pending slots (job ids, -1 = empty)
        self._slots = np.full((na, self.pending_slots), -1, dtype=np.int64)
        self.used = np.zeros((na, 3))
        self.node_workers = np.zeros(na)
        self.return_sum = np.zeros(na)
        self._reset_history(np.ones(b, dtype=bool))

    def _start_episodes(self, copies: list[int]) -> None:
        """Per-copy clocks and counters to zero, slot-0 arrivals queued, views refreshed."""
        for c in copies:
            wl = self._wl[c]
            self.tc[c] = 0
            self._term[c] = self._trunc[c] = False
            for arr in self._cnt.values():
                arr[c] = 0
            self._occupied_sum[c] = 0.0
            self._n_done_c[c] = 0
            self._num_jobs_c[c] = wl.num_jobs
            self._last_arrival_c[c] = wl.arrival[-1] if wl.num_jobs else -1
            self._strag_len[c] = 0
            self._strag_pos[c] = 0
            self._strag_width[c] = wl.max_workers
        sel = np.zeros(self.copies, dtype=bool)
        sel[copies] = True
        self._reset_history(sel)
        self.invalid_mask = None
        self._enqueue_copies(np.asarray(copies, dtype=np.int64))
        if self._refill_on_advance:
            self._fill_slots(np.asarray(copies, dtype=np.int64))
        self._refresh()
