"""Execution: the clock. One slot of progress, completions, contention, arrivals, resizing.

Per slot and copy: each agent is charged its jobs in the system (the JCT reward); each
running job advances by its progress model (``progress`` registry) at the speed of its
placement, slowed on overloaded nodes (:meth:`ExecutionMixin.contention`), by stragglers and
by synchronization; finished jobs release their resources; the clock moves and the next
slot's jobs arrive.
"""

from __future__ import annotations

import numpy as np

from .catalog import straggler_model
from .placement import has_duplicates

RUNNING, DONE = 2, 3
_STRAGGLER_BATCH = 1 << 14
# memoized synchronization times kept before the memo is cleared (about 100 bytes each)
_SYNC_CACHE_MAX = 1 << 18


class ExecutionMixin:
    """Progress, completion and resizing of :class:`~edgesched.envs.core.EdgeClusterSim`.

    State written: ``progress``, ``quality``, ``status``, ``start_slot``, ``finish_slot``,
    ``sync_time``, ``running``, the clocks ``tc``; releases ``used``/``node_workers``.
    """

    _straggler = straggler_model()

    # ------------------------------------------------------------------ start
    def _start(self, jobs: np.ndarray) -> None:
        """Jobs whose last worker was placed start running."""
        self.status[jobs] = RUNNING
        self.start_slot[jobs] = self._slot_of(jobs)
        if self._measured:
            self._mark_dirty(self.w_node[jobs].ravel())  # their workers now run there
        if self._any_balance:
            bal = jobs[self._balance[self.j_sync[jobs]] & (self.j_workers[jobs] > 1)]
            for j in bal.tolist():
                # EdgeGossip: data shares proportional to speed even out iteration times
                w = int(self.j_workers[j])
                t = self.w_iter0[j, :w]
                self.w_iter0[j, :w] = w / np.sum(1.0 / t)
        self.running = np.concatenate([self.running, jobs])
        if not self.progress_model.single_worker:
            multi = jobs[self.j_workers[jobs] > 1]
            if len(multi):
                self._set_sync_time(multi)
        self._drop_from_queues()

    def _set_sync_time(self, jobs: np.ndarray) -> None:
        """Per-iteration synchronization seconds of multi-worker ``jobs`` (their scheme's)."""
        # Sync time depends only on (scheme, model, worker nodes) on a static topology, and
        # placements repeat, so a memo saves the vectorized call. Nodes are
        # looked up in the copy's own cluster (local ids).
        cache = self._sync_cache
        n = self.agents_per_copy
        local = self.w_node[jobs]
        local = np.where(local >= 0, local % n, -1)
        missed: dict[tuple[int, ...], None] = {}  # keys in first-seen order (an ordered set)
        late: list[tuple[int, tuple[int, ...]]] = []
        for j, sid, m, row in zip(
            jobs.tolist(),
            self.j_sync[jobs].tolist(),
            self.j_model[jobs].tolist(),
            local.tolist(),
            strict=True,
        ):
            key = (sid, m, *row)
            t = cache.get(key)
            if t is None:
                missed[key] = None
                late.append((j, key))
            else:
                self.sync_time[j] = t
        if missed:
            # one vectorized call per scheme for all new placements (a key is scheme, model,
            # worker nodes): a scheme's rows are independent, and a call costs about as much
            # for one row as for many
            by_scheme: dict[int, list[tuple[int, ...]]] = {}
            for key in missed:
                by_scheme.setdefault(key[0], []).append(key)
            mb = self.progress_model.mb
            for sid, keys in by_scheme.items():
                nodes = np.array([k[2:] for k in keys])
                times = self._sync[sid].sync_time(
                    nodes,
                    nodes >= 0,
                    mb[[k[1] for k in keys]],
                    self.cluster.pair_bw,
                    self.cluster.pair_lat,
                )
                cache.update(zip(keys, times.tolist(), strict=True))
            for j, key in late:
                self.sync_time[j] = cache[key]
            if len(cache) > _SYNC_CACHE_MAX:
                cache.clear()  # bounds memory over long runs; entries are recomputed on demand

    def occupied_share(self) -> float | np.ndarray:
        """Allocated share of the cluster's CPUs and GPUs (mean of the two; overload capped).

        RLPTO's "resources occupied": ``sum_n min(used, capacity) / sum_n capacity``; a float
        for a lone simulator, (B,) batched.
        """
        share = self._occupied()
        return share if self.lone else np.atleast_1d(share)

    def _occupied(self) -> float | np.ndarray:
        """:meth:`occupied_share` as a float for one copy, (B,) for several."""
        b = self.copies
        held = np.minimum(self.used[:, :2], self._cap2)
        if b == 1:
            held = np.add.reduce(held, axis=0) / self._cap2_total
            return float(held[0] + held[1]) / 2.0  # == .mean() of the two, without overhead
        held = np.add.reduce(held.reshape(b, self.agents_per_copy, 2), axis=1) / self._cap2_total
        return (held[:, 0] + held[:, 1]) / 2.0

    # ------------------------------------------------------------------ resizing
    def resize(self, jobs: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """Move every worker of running jobs one allocation level down or up, in place.

        The elastic-resource operation of RLPTO: a converging job's workers
        shrink to the next lower level of ``alloc_scales`` and free resources for others; a
        job may grow to the next higher level if every one of its nodes has the free
        capacity. A worker already at the lowest (highest) level does not move. In
        ``alloc_mode='grid'`` a step is one GPU less (more) at the same CPU count, to a grid
        level the job's model admits; a worker with no such level does not move. Iteration
        times are recomputed from the new allocation; the job's progress is kept, and the
        slot in which it changed progresses at ``switch_weight``. Batched, job ids are those
        of the union (copy ``b``'s start at ``b * job_capacity``).

        Args:
            jobs: running job ids (each at most once).
            delta: -1 (shrink), 0 or +1 (grow) per job.

        Returns:
            (len(jobs),) bool, whether the job's allocation changed.

        Raises:
            ValueError: a job is not running, appears twice, or a delta is not -1, 0, 1.
        """
        jobs = np.asarray(jobs, dtype=np.int64)
        delta = np.asarray(delta, dtype=np.int64)
        changed = np.zeros(len(jobs), dtype=bool)
        if len(jobs) == 0:
            return changed
        if jobs.shape != delta.shape or not np.isin(delta, (-1, 0, 1)).all():
            raise ValueError(f"delta={delta.tolist()}: need one of -1, 0, 1 per job")
        if (self.status[jobs] != RUNNING).any() or has_duplicates(jobs):
            raise ValueError(f"jobs={jobs.tolist()}: need distinct running jobs")
        # every job's target at once: a job's levels do not depend on another's resize
        targets = self._resized_levels(jobs, delta)
        for i, (j, d) in enumerate(zip(jobs.tolist(), delta.tolist(), strict=True)):
            if d == 0:
                continue
            w = int(self.j_workers[j])
            nodes = self.w_node[j, :w]
            new = targets[i, :w]
            if (new == self.w_level[j, :w]).all():
                continue
            alloc = self.alloc_of(j, new)
            diff = alloc - self.w_alloc[j, :w]
            if d > 0:
                # Checked over every node of the job's copy, not only the job's nodes: an
                # overloaded node elsewhere (negative free capacity) also refuses the growth.
                # That is v0's rule, kept so trajectories stay identical.
                n = self.agents_per_copy
                ag = slice(j // self._job_capacity * n, (j // self._job_capacity + 1) * n)
                need = np.zeros((n, 3))
                np.add.at(need, nodes - ag.start, diff)
                if (need > self.capacity[ag] - self.used[ag] + 1e-9).any():
                    continue  # some node cannot host the larger allocation
            np.add.at(self.used, nodes, diff)
            if self._measured:
                self._mark_dirty(nodes)
            self.w_alloc[j, :w] = alloc
            self.w_level[j, :w] = new
            t = self.progress_model.iteration_seconds(self, np.full(w, j), new, nodes)
            if self._balance[self.j_sync[j]] and w > 1:
                t = np.full(w, w / np.sum(1.0 / t))  # EdgeGossip keeps shares balanced
            self.w_iter0[j, :w] = t
            self.switched[j] = True
            changed[i] = True
            self._count(
                "resized_up" if d > 0 else "resized_down", jobs[i : i + 1], self._job_capacity
            )
        if changed.any():
            self._refresh()
        return changed

    def _resized_levels(self, jobs: np.ndarray, delta: int | np.ndarray) -> np.ndarray:
        """(len(jobs), W) levels the jobs' workers move to under :meth:`resize` by ``delta``.

        ``delta`` is one step for all jobs or one per job. Before the capacity check; -1 past
        each job's workers. The one rule, shared with :meth:`ClusterView.resize_levels`.
        """
        levels = self.w_level[jobs]
        d = np.asarray(delta).reshape(-1, 1)
        if self._grid:
            new = self._grid_gpu_step(jobs[:, None], levels, d)
        else:
            new = np.clip(levels + d, 0, self.num_levels - 1)
        return np.where(np.arange(levels.shape[1]) < self.j_workers[jobs][:, None], new, -1)

    def _grid_gpu_step(
        self, j: int | np.ndarray, levels: np.ndarray, d: int | np.ndarray
    ) -> np.ndarray:
        """Grid levels one GPU below (``d=-1``) or above (+1) ``levels`` at the same CPUs.

        A worker keeps its level where that (CPU, GPU) pair is off the grid, is the empty
        (0, 0) or is not admitted for job ``j``'s model.
        """
        add = self._alloc_add
        gmax = self.cfg.alloc_grid_max[1]
        c = add[levels, 0].astype(np.int64)
        g = add[levels, 1].astype(np.int64) + d
        ok = (g >= 0) & (g <= gmax) & ((c > 0) | (g > 0))
        # grid levels enumerate (c, g) row-major without (0, 0): index c * (gmax + 1) + g - 1
        cand = np.where(ok, c * (gmax + 1) + g - 1, levels)
        ok &= self.j_alloc_ok[j, cand]
        return np.where(ok, cand, levels)

    # ------------------------------------------------------------------ clock
    def contention(self, ratio: np.ndarray | None = None) -> np.ndarray:
        """Per-node slowdown: oversubscription ** contention_exponent (1 when within capacity).

        Oversubscription is the largest ratio of used to capacity over the resources; a node
        at 150% of its GPUs time-shares them, so each task runs 1.5x slower (exponent 1).

        Args:
            ratio: ``used / capacity`` per node and resource, if the caller has it already.
        """
        if ratio is None:
            ratio = self.used * self._inv_cap
        # element-wise over the three resource columns: a reduction over a length-3 axis
        # costs several times more at these sizes
        ratio = np.maximum(np.maximum(ratio[:, 0], ratio[:, 1]), np.maximum(ratio[:, 2], 1.0))
        if self.cfg.contention_exponent != 1.0:
            ratio **= self.cfg.contention_exponent
        return ratio

    def _in_system(self) -> np.ndarray:
        """Jobs in the system per agent (Little's law: their sum over slots is the total JCT).

        A queued job counts once, for its home agent, even when several agents see it (shared
        visibility), unless ``waiting_charge='every_viewer'`` charges each of them; a running
        job counts for the agent that placed it.
        """
        self._update_qlen()
        n = self.num_agents
        if not self._shared or self.cfg.waiting_charge == "every_viewer":
            queued = self.qlen
        else:
            queued = np.bincount(self.j_home[self.status == 1], minlength=n)
        return queued + np.bincount(self.owner[self.running], minlength=n)

    def _copy_mean(self, x: np.ndarray) -> np.ndarray:
        """Each agent gets its copy's per-agent mean of ``x`` (the team reward, per copy)."""
        n = self.agents_per_copy
        if self.copies == 1:
            return np.full(n, x.sum() / n)
        return (x.reshape(self.copies, n).sum(axis=1) / n)[self._agent_copy]

    def advance_copies(self, copies: np.ndarray) -> np.ndarray:
        """Run one slot of the copies selected by bool (B,) ``copies``, without decisions.

        Returns:
            (B,) each copy's summed reward of the slot (0 where not advanced).

        Raises:
            ValueError: ``copies`` is not a bool array of shape (B,).
        """
        adv = np.asarray(copies)
        if adv.shape != (self.copies,) or adv.dtype != bool:
            raise ValueError(
                f"copies must be a bool array of shape ({self.copies},); got shape "
                f"{adv.shape} dtype {adv.dtype}"
            )
        rewards = self.advance_clock(adv)
        self._check_end()  # core's: the episode ends of the advanced copies
        if self.copies == 1:
            return np.array([rewards.sum()])
        return rewards.reshape(self.copies, self.agents_per_copy).sum(axis=1)

    def advance_clock(self, adv: np.ndarray) -> np.ndarray:
        """Run one slot in the copies where bool (B,) ``adv`` holds; rewards (agents,)."""
        cfg = self.cfg
        na, nb, jc = self.num_agents, self.copies, self._job_capacity
        every = nb == 1 or bool(adv.all())
        adv_a = None if every else adv[self._agent_copy]
        team = cfg.reward_mode == "team"
        in_sys = self._in_system()
        rewards = -(self._copy_mean(in_sys) if team else in_sys.astype(np.float64))
        ratio = self.used * self._inv_cap  # shared by the contention and utilization terms
        cont = self.contention(ratio)
        over = cont > 1.0
        if adv_a is not None:
            rewards = np.where(adv_a, rewards, 0.0)
            over &= adv_a
        n_over = int(np.count_nonzero(over))
        if n_over:
            self._count_where("overload_node_slots", over, self.agents_per_copy)
            self._node_over += over
        # ufunc reductions called directly: .sum()/.max() add a Python wrapper per call
        util = np.minimum(ratio[:, 0], 1.0)
        util += np.minimum(ratio[:, 1], 1.0)
        util *= 0.5  # mean of CPU and GPU
        share = self._occupied()
        if nb == 1:
            self._util_sum += util
            self._occupied_sum[0] += share
        elif adv_a is None:
            self._util_sum += util
            self._occupied_sum += share
        else:
            np.add(self._util_sum, util, out=self._util_sum, where=adv_a)
            np.add(self._occupied_sum, share, out=self._occupied_sum, where=adv)
        running = self.running if every else self.running[adv[self.running // jc]]
        slow = nodes = None
        if self._measured:
            if len(running):
                # crashed jobs leave the running set
                running, slow = self._measured_slowdown(running, adv_a)
        elif n_over and len(running):
            nodes = self.w_node[running]
            slow = cont[np.maximum(nodes, 0)]  # padding workers: any node
        if len(running):
            gain = self._progress(running, slow, nodes)
            if self._measured:
                self._checkpoint(running)
            if cfg.accuracy_gain_weight:
                acc = np.zeros(na)
                np.add.at(acc, self.owner[running], gain)
                rewards += cfg.accuracy_gain_weight * (self._copy_mean(acc) if team else acc)
        if cfg.resource_cost_weight:
            share_a = np.zeros(na)
            # the jobs that ran this slot, finished ones included
            if len(running):
                res = (self.w_alloc[running, :, :2] / self._cap_max[:2]).sum(axis=(1, 2))
                np.add.at(share_a, self.owner[running], res)
            rewards -= cfg.resource_cost_weight * (self._copy_mean(share_a) if team else share_a)
        if nb == 1:  # item updates: cheaper than (1,) array arithmetic on the hot path
            self.tc[0] += 1
            self._adv_since_snapshot[0] = True
        else:
            self.tc += adv
            self._adv_since_snapshot |= adv
        if cfg.priority_aging_slots and len(self.q_job):
            self._age_queues(cfg.priority_aging_slots)
        if nb == 1:
            if self.tc[0] < cfg.arrival_slots:
                self._enqueue_copies(self._agent_idx[:1])
        else:
            arriving = adv & (self.tc < cfg.arrival_slots)
            if np.count_nonzero(arriving):
                self._enqueue_copies(np.flatnonzero(arriving))
        if self._refill_on_advance:
            self._fill_slots(np.flatnonzero(adv) if nb > 1 else np.zeros(1, dtype=np.int64))
        return rewards

    def _progress(
        self, running: np.ndarray, slow: np.ndarray | None, nodes: np.ndarray | None = None
    ) -> np.ndarray | None:
        """Advance running jobs by one slot; complete and release finished ones.

        Args:
            running: ids of the running jobs of the advancing copies.
            slow: (R, W) per-worker slowdown of the collision mode, or ``None``.
            nodes: ``w_node[running]`` if the caller has gathered it already.

        Returns:
            The gain in normalized quality of each running job when the accuracy-gain reward
            is on, else ``None`` (saves work on the hot path).
        """
        if nodes is None:
            nodes = self.w_node[running]
        q0 = self.quality[running] if self.cfg.accuracy_gain_weight else None
        self._strag_rows = running
        q, done = self.progress_model.advance(self, running, nodes, slow)
        if self.cfg.switch_weight != 1.0:
            self.switched[running] = False
        self.quality[running] = q
        if np.count_nonzero(done):
            fin = running[done]
            self.status[fin] = DONE
            self._tally(self._n_done_c, fin, self._job_capacity)
            self.finish_slot[fin] = self._slot_of(fin) + 1
            fnodes = nodes[done]
            if self._measured:
                self._mark_dirty(fnodes.ravel())
            fv = fnodes >= 0
            fnodes = fnodes[fv]
            np.subtract.at(self.used, fnodes, self.w_alloc[fin][fv])
            np.subtract.at(self.node_workers, fnodes, 1.0)
            self.running = self.running[self.status[self.running] == RUNNING]
        return None if q0 is None else q - q0

    def draw_stragglers(self, shape: tuple[int, ...]) -> np.ndarray:
        """Per-worker slowdown factors (>= 1) for one slot of the jobs being advanced.

        One draw per worker and slot stands for the slot's persistent slowdown of that worker.
        Draws come from a per-copy buffer refilled in large batches from the copy's
        generator: every draw is used once, in order, so this is the same i.i.d. sequence as
        drawing per slot, at a fraction of numpy's per-call cost. Batched, each copy draws
        its own jobs' rows (as wide as its widest job) exactly as it would alone, gathered
        from all copies' buffers in one indexing operation.
        """
        if self.copies == 1:
            return self._draw_from(0, shape)
        rows = self._strag_rows // self._job_capacity  # each row's copy
        n_rows, width = shape
        counts = np.bincount(rows, minlength=self.copies)
        mw = self._strag_width  # (B,) each copy's widest job
        need = counts * mw
        for b in np.flatnonzero(self._strag_pos + need > self._strag_len).tolist():
            self._refill_stragglers(b, int(need[b]))
        # a row's rank among its copy's rows, in order: its draws follow the earlier rows'
        order = np.argsort(rows, kind="stable")
        rank = np.empty(n_rows, dtype=np.int64)
        rank[order] = np.arange(n_rows) - (np.cumsum(counts) - counts)[rows[order]]
        w = mw[rows][:, None]
        k = np.arange(width)
        valid = k < w
        col = np.where(valid, (self._strag_pos[rows] + rank * mw[rows])[:, None] + k, 0)
        out = np.where(valid, self._strag_buf[rows[:, None], col], 1.0)
        self._strag_pos += need
        return out

    def _draw_from(self, b: int, shape: tuple[int, ...]) -> np.ndarray:
        n = shape[0] * shape[1] if len(shape) == 2 else int(np.prod(shape))
        if self._strag_pos[b] + n > self._strag_len[b]:
            self._refill_stragglers(b, n)
        pos = int(self._strag_pos[b])
        self._strag_pos[b] = pos + n
        return self._strag_buf[b, pos : pos + n].reshape(shape)

    def _refill_stragglers(self, b: int, n: int) -> None:
        """Copy ``b``'s unused draws followed by a fresh batch of at least ``n``."""
        pos, end = int(self._strag_pos[b]), int(self._strag_len[b])
        fresh = self._straggler.sample(
            self.rngs[b],
            max(_STRAGGLER_BATCH, n),
            self.cfg.straggler_scale,
            self.cfg.straggler_prob_scale,
        )
        size = end - pos + len(fresh)
        if size > self._strag_buf.shape[1]:
            grown = np.ones((self.copies, size))
            grown[:, : self._strag_buf.shape[1]] = self._strag_buf
            self._strag_buf = grown
        row = self._strag_buf[b]
        row[: end - pos] = row[pos:end].copy()
        row[end - pos : size] = fresh
        self._strag_len[b] = size
        self._strag_pos[b] = 0
