"""Evaluating the nodes whose running workers changed, under ``collision_mode="measured"``.

:class:`~edgesched.envs.colocation.ColocationMixin` decides each slot which nodes are dirty;
this mixin evaluates them, in two forms of one rule that ``tests/test_colocation.py`` checks
give the same trajectory:

* :meth:`NodeEvaluationMixin._grouped_nodes`: a few dirty nodes, their workers grouped in
  Python, each node's outcome looked up in a memo of node configurations
  (:func:`~edgesched.envs.sharing.node_outcome` on a miss);
* :meth:`NodeEvaluationMixin._planned_nodes`: many dirty nodes through the vectorized plan
  (:func:`~edgesched.envs.sharing.packed_rates` and :func:`~edgesched.envs.sharing.cpu_rates`).

Both decide crashes on the placements as they stand, then store the survivors' per-worker
rates and flags (``w_rate``, ``w_gshared``, ``w_starved``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .metrics import RUNNING
from .sharing import GPU_EPS, cpu_rates, node_outcome, packed_rates


class NodeEvaluationMixin:
    """Dirty-node evaluation for :class:`~edgesched.envs.colocation.ColocationMixin`.

    Reads the state that mixin sets up (``_coloc``, ``_coloc_memo``, ``_dirty_ext``,
    ``_node_slowed``, ``_node_class``) and the simulator's worker arrays; writes the workers'
    rates and flags and crashes jobs through ``_crash``.
    """

    def _grouped_nodes(
        self, running: np.ndarray, nodes: np.ndarray, adv_a: np.ndarray | None
    ) -> tuple[np.ndarray, list[int]]:
        """The dirty nodes (a few) one at a time through the memoized outcome.

        The same two passes as the vectorized plan (crashes decided on the placements as
        they stand, the survivors' rates without the crashed workers), at about a dozen
        numpy calls per pass plus Python work per worker of the dirty nodes, instead of
        the plan's fixed cost.

        Returns:
            The surviving running jobs and the nodes to re-check next slot.
        """
        crashed, recheck = self._group_pass(running, nodes, adv_a, first=True)
        if crashed:
            self._crash(np.unique(np.array(crashed, dtype=np.int64)))
            running = running[self.status[running] == RUNNING]
            _, recheck = self._group_pass(running, self.w_node[running], adv_a, first=False)
        return running, recheck

    def _group_pass(
        self, running: np.ndarray, nodes: np.ndarray, adv_a: np.ndarray | None, first: bool
    ) -> tuple[list[int], list[int]]:
        """Outcomes of the dirty nodes (of advancing copies), workers grouped in Python.

        Nodes within capacity (whole-GPU requests only) run their workers at rate 1 (the
        plan's shortcut), which only needs writing where a worker may hold something else
        (``_node_slowed``); the others go through the memo with their workers in placement
        order. Every selected worker's rate and flags are stored, unless this is a slot's
        ``first`` pass and some job must crash: then nothing is, and the caller evaluates
        the dirty nodes again without the crashed workers.

        Returns:
            The jobs to crash (``first`` pass only) and the nodes whose outcome holds a crash.
        """
        dn = np.flatnonzero(self._dirty_nodes if adv_a is None else self._dirty_nodes & adv_a)
        cap_l = self.capacity[dn].tolist()
        if self._frac_levels:
            calm_l = [False] * len(cap_l)
        else:
            eps = GPU_EPS
            calm_l = [
                u[0] <= c[0] + eps and u[1] <= c[1] + eps and u[2] <= c[2] + eps
                for u, c in zip(self.used[dn].tolist(), cap_l, strict=True)
            ]
        # (node, its capacity, calm) of each dirty node that needs evaluating or writing
        todo = [
            (n, c, calm)
            for n, c, calm, slowed in zip(
                dn.tolist(), cap_l, calm_l, self._node_slowed[dn].tolist(), strict=True
            )
            if slowed or not calm
        ]
        if not todo:
            return [], []
        pick = self._pick_ext
        want = [t[0] for t in todo]
        pick[want] = True
        r, w = np.nonzero(pick[nodes])
        pick[want] = False
        jobs = running[r]
        node_l = nodes[r, w].tolist()
        groups: dict[int, list[int]] = {n: [] for n in want}
        for i, n in enumerate(node_l):
            groups[n].append(i)
        k = len(node_l)
        rate, shared, starved = [1.0] * k, [False] * k, [False] * k
        slowed_l = [False] * len(todo)
        crashed: list[int] = []
        recheck: list[int] = []
        if not all(t[2] for t in todo):
            # Python lists: a node holds a few workers, and numpy's fixed cost per call on
            # arrays of a few elements is what this path exists to avoid
            seq_l = self.w_seq[jobs, w].tolist()
            wkey = [
                (m, *a)
                for m, a in zip(
                    self.j_model[jobs].tolist(), self.w_alloc[jobs, w].tolist(), strict=True
                )
            ]
            cls_l = self._node_class[want].tolist()
            memo = self._coloc_memo
            for u, (n, c, calm) in enumerate(todo):
                idx = groups[n]
                if calm or not idx:
                    continue
                if len(idx) > 1:
                    idx.sort(key=seq_l.__getitem__)
                key = (cls_l[u], *c, *[wkey[i] for i in idx])
                out = memo.get(key)
                if out is None:
                    out = self._outcome_miss(key)
                if out[0]:
                    recheck.append(n)
                    if first:
                        jobs_l = jobs.tolist()
                        crashed += [jobs_l[idx[x]] for x in out[0]]
                for i, ri, si in zip(idx, out[1], out[2], strict=True):
                    rate[i], shared[i], starved[i] = ri, si, out[3]
                slowed_l[u] = out[3] or any(out[2]) or any(x != 1.0 for x in out[1])
        if not crashed:
            self.w_rate[jobs, w] = rate
            self.w_gshared[jobs, w] = shared
            self.w_starved[jobs, w] = starved
            self._node_slowed[want] = slowed_l
        return crashed, recheck

    def _planned_nodes(
        self, running: np.ndarray, nodes: np.ndarray, dirty: np.ndarray, adv_a: np.ndarray | None
    ) -> tuple[np.ndarray, list[int]]:
        """Dirty nodes (bool ``dirty``) through the vectorized :meth:`_sharing_plan`.

        Returns:
            The surviving running jobs and the nodes to re-check next slot.
        """
        plan = self._sharing_plan(running, nodes, dirty)
        crashed: list[int] = []
        for n, pos in plan["complex"] if plan is not None else ():
            out = self._node_outcome(n, plan["models"][pos], plan["alloc"][pos])
            crashed += plan["jobs"][pos][out[0]].tolist() if out[0] else []
        if crashed:
            self._crash(np.unique(np.array(crashed, dtype=np.int64)))
            running = running[self.status[running] == RUNNING]
            more = self._dirty_nodes if adv_a is None else self._dirty_nodes & adv_a
            plan = self._sharing_plan(running, self.w_node[running], dirty | more)
        return running, self._store_rates(plan) if plan is not None else []

    def _sharing_plan(
        self, running: np.ndarray, nodes: np.ndarray, which: np.ndarray
    ) -> dict[str, Any] | None:
        """The running workers of the nodes selected by bool ``which``, node by node.

        Each node's workers are in placement order (oldest first).

        Nodes of whole-GPU workers (each at most the node's GPUs) within host memory and
        without a failing pair go through :func:`~edgesched.envs.sharing.packed_rates`
        together; the others (``complex``) one at a time through :meth:`_node_outcome`.
        """
        cap = self.capacity
        r_all, w_all = np.nonzero(nodes >= 0)
        n_all = nodes[r_all, w_all]
        on = which[n_all]
        if not on.any():
            return None
        jobs = running[r_all]
        alloc = self.w_alloc[jobs, w_all]
        frac = np.abs(alloc[:, 1] - np.round(alloc[:, 1])) > GPU_EPS
        order = np.lexsort((self.w_seq[jobs[on], w_all[on]], n_all[on]))
        sel = np.flatnonzero(on)[order]
        r_s, w_s, n_s, jobs, alloc = r_all[sel], w_all[sel], n_all[sel], jobs[sel], alloc[sel]
        brk = np.empty(len(n_s), dtype=bool)
        brk[0] = True
        np.not_equal(n_s[1:], n_s[:-1], out=brk[1:])
        starts = np.flatnonzero(brk)
        seg = np.cumsum(brk) - 1
        node_u = n_s[starts]
        gpus = np.round(cap[node_u, 1])
        models = self.j_model[jobs]
        # whole GPUs, no request above the node's GPUs, memory within capacity
        ok_w = ~frac[sel] & (alloc[:, 1] <= gpus[seg] + GPU_EPS)
        ok = np.bincount(seg, weights=~ok_w, minlength=len(node_u)) == 0
        mem = np.bincount(seg, weights=alloc[:, 2], minlength=len(node_u))
        ok &= mem <= cap[node_u, 2] + GPU_EPS
        tab = self._coloc
        node_cls = self._node_class[node_u]
        fast = ok[seg]
        rate = np.ones(len(seg))
        shared_w = np.zeros(len(seg), dtype=bool)
        if fast.any():
            # segments renumbered among the fast nodes
            fseg = np.cumsum(ok) - 1
            rate[fast], shared_w[fast], failing = packed_rates(
                tab,
                fseg[seg[fast]],
                node_cls[ok],
                gpus[ok].astype(np.int64),
                models[fast],
                alloc[fast, 1],
                self.cfg.unmeasured_gpu_share,
            )
            ok[np.flatnonzero(ok)[failing]] = False
            fast = ok[seg]
        ends = np.append(starts[1:], len(seg))
        complex_ = [
            (int(node_u[i]), np.arange(starts[i], ends[i])) for i in np.flatnonzero(~ok).tolist()
        ]
        return {
            "r": r_s,
            "w": w_s,
            "jobs": jobs,
            "alloc": alloc,
            "models": models,
            "seg": seg,
            "node_u": node_u,
            "fast": fast,
            "rate": rate,
            "shared": shared_w,
            "complex": complex_,
        }

    def _store_rates(self, plan: dict[str, Any]) -> list[int]:
        """Store the rates of a :meth:`_sharing_plan`'s workers; nodes to re-check.

        Returns:
            The nodes whose survivors still hold a failing pair (decided next slot).
        """
        rate, shared, fast = plan["rate"].copy(), plan["shared"].copy(), plan["fast"]
        cpu, starved = cpu_rates(
            self._coloc,
            plan["seg"],
            self.capacity[plan["node_u"], 0],
            plan["models"],
            plan["alloc"],
        )
        rate[fast] *= cpu[fast]
        recheck = []
        for n, pos in plan["complex"]:
            crash, r, sh, _ = self._node_outcome(n, plan["models"][pos], plan["alloc"][pos])
            rate[pos], shared[pos] = r, sh
            if len(crash):
                recheck.append(n)
        jobs, w = plan["jobs"], plan["w"]
        self._node_slowed[plan["node_u"]] = True  # (a possibility, see _init_colocation)
        self.w_rate[jobs, w] = np.maximum(rate, 1e-12)
        self.w_gshared[jobs, w] = shared
        self.w_starved[jobs, w] = starved
        return recheck

    def _node_outcome(
        self,
        n: int,
        models: np.ndarray | list[int],
        alloc: np.ndarray | list[list[float]],
    ) -> tuple[list[int], list[float], list[bool], bool]:
        """What node ``n`` does to its workers (placement order): memoized.

        The outcome depends only on the node's GPU class and capacity and on the workers'
        models and allocations in order, which repeat, so it is computed once per such
        configuration (the dictionary is cleared past 65,536 entries). Callers must not
        modify the returned lists.

        Returns:
            :func:`~edgesched.envs.sharing.node_outcome`'s ``(crash, rate, gpu_shared,
            cpu_starved)``: positions of the workers whose jobs crash (newest first), each
            worker's rate relative to running alone if nothing crashed, whether it shares a
            GPU, and whether the node's cores are oversubscribed.
        """
        alloc_l = np.asarray(alloc, dtype=np.float64).reshape(-1, 3).tolist()
        key = (
            int(self._node_class[n]),
            *self.capacity[n].tolist(),
            *[(m, *a) for m, a in zip(np.asarray(models).tolist(), alloc_l, strict=True)],
        )
        out = self._coloc_memo.get(key)
        return self._outcome_miss(key) if out is None else out

    def _outcome_miss(self, key: tuple) -> tuple[list[int], list[float], list[bool], bool]:
        """Compute and memoize the outcome of a memo key (class, capacity, workers)."""
        cache = self._coloc_memo
        if len(cache) > 65_536:
            cache.clear()
        cls, workers = key[0], key[4:]
        out = node_outcome(
            self._coloc,
            self._pair_l[cls] if cls >= 0 else None,
            self._fail_l[cls] if cls >= 0 else None,
            list(key[1:4]),
            [wk[0] for wk in workers],
            [list(wk[1:]) for wk in workers],
            self.cfg.unmeasured_gpu_share,
        )
        cache[key] = out
        return out
