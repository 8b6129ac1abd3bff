"""Compiled evaluation of the dirty nodes under ``collision_mode="measured"`` (numba).

:func:`evaluate_nodes` applies :func:`~edgesched.envs.sharing.node_outcome`'s rule to every
node whose running workers changed, in one compiled call. The rule is the pure-Python
``node_outcome`` (the readable reference); ``tests/test_node_kernel.py`` checks the two agree
bit for bit on random configurations, and ``tests/test_colocation.py`` keeps the golden cases.

Why compiled code: a node holds a few workers, so the rule is a few dozen scalar operations
per node, and interpreted Python (or numpy's fixed cost per call on arrays of a few elements)
made the measured model cost 0.7-0.8 of timeshare's steps/s; numba runs the rule at the cost
of one call. Floating-point operations are kept in the reference's order (no fast-math, no
contraction), so the results are the reference's to the bit: ``np.sum``'s pairwise order for
the cores held and ``np.interp``'s formula for the CPU curves are reproduced in
:mod:`~edgesched.envs.kernel_math`.
"""

from __future__ import annotations

import math

import numpy as np

from .kernel_math import compiled, interp1, np_sum
from .sharing import GPU_EPS

_EPS = GPU_EPS


@compiled
def _occupants(
    g: np.ndarray, live: np.ndarray, gpus: int, occ: np.ndarray, cnt: np.ndarray
):  # pragma: no cover
    """:func:`~edgesched.envs.sharing.gpu_occupants` of the live workers among themselves.

    Fills ``occ[r, :cnt[r]]`` with the positions (in ``g``) of the workers on GPU ``r``, in
    placement order.
    """
    cnt[:] = 0
    o = 0.0
    for i in range(g.shape[0]):
        if not live[i]:
            continue
        gi = g[i]
        if gi > _EPS:
            first = math.floor(o + _EPS)
            last = math.ceil(o + gi - _EPS) - 1
            for cell in range(first, max(last, first) + 1):
                r = cell % gpus
                c = cnt[r]
                if c == 0 or occ[r, c - 1] != i:
                    occ[r, c] = i
                    cnt[r] = c + 1
        o += gi


@compiled
def node_rule(
    cls: int,
    cap: np.ndarray,
    models: np.ndarray,
    alloc: np.ndarray,
    tables: tuple,
    unmeasured_share: float,
    cpu_weight: float,
    in_pair: bool,
    rate: np.ndarray,
    shared: np.ndarray,
    crash: np.ndarray,
    alive: np.ndarray,
    everyone: np.ndarray,
    occ: np.ndarray,
    cnt: np.ndarray,
    occ_l: np.ndarray,
    cnt_l: np.ndarray,
) -> tuple[int, int, bool]:  # pragma: no cover - compiled
    """:func:`~edgesched.envs.sharing.node_outcome` of one node, into preallocated arrays.

    ``tables`` holds the fields of :class:`~edgesched.envs.colocation.KernelTables` in their
    order (a plain tuple: the compiled callers build it from their flat arguments). Writes
    each worker's ``rate`` and ``shared`` flag and the crash positions (newest first) into
    ``crash``. The rest are scratch that :func:`evaluate_nodes` reuses across nodes:
    ``alive`` and ``everyone`` hold at least ``len(models)`` entries, ``occ``/``occ_l`` at
    least (the node's GPUs, ``len(models)``) and ``cnt``/``cnt_l`` the node's GPUs.

    Returns:
        The number of crashes, how many of them (the first in ``crash``) are host memory
        over capacity rather than a failing GPU pair, and whether the node's cores are
        oversubscribed.
    """
    pair, fail, interleave, cpu_x, cpu_y, cpu_n = tables
    k_all = models.shape[0]
    gpus = int(np.rint(cap[1]))
    mem_cap = cap[2] + _EPS
    used = 0.0
    for i in range(k_all):
        used += alloc[i, 2]
        alive[i] = used <= mem_cap
    n_crash = 0
    for i in range(k_all - 1, -1, -1):
        if not alive[i]:
            crash[n_crash] = i
            n_crash += 1
    n_mem = n_crash
    g = alloc[:, 1]
    everyone[:k_all] = True
    if gpus > 0:
        _occupants(g, everyone, gpus, occ, cnt)
    multi = False
    for r in range(gpus):
        if cnt[r] > 1:
            multi = True
    if cls >= 0 and gpus > 0 and multi:
        # while a GPU of the live workers (packed among themselves) holds a failing pair,
        # the newest worker on the first such GPU crashes (in_pair: the newest in a pair)
        while True:
            n_live = 0
            for i in range(k_all):
                if alive[i]:
                    n_live += 1
            if n_live < 2:
                break
            if n_live < k_all:
                _occupants(g, alive, gpus, occ_l, cnt_l)
                o_use, c_use = occ_l, cnt_l
            else:
                o_use, c_use = occ, cnt
            victim = -1
            for r in range(gpus):
                c = c_use[r]
                for x in range(c - 1, -1, -1):  # the newest worker in a failing pair first
                    mx = models[o_use[r, x]]
                    for y in range(c):
                        my = models[o_use[r, y]]
                        if y != x and (fail[cls, mx, my] or fail[cls, my, mx]):
                            victim = o_use[r, x if in_pair else c - 1]
                    if victim >= 0:
                        break
                if victim >= 0:
                    break
            if victim < 0:
                break
            crash[n_crash] = victim
            n_crash += 1
            alive[victim] = False
    for i in range(k_all):
        rate[i] = 1.0
        shared[i] = False
    for r in range(gpus):
        k = cnt[r]
        if k < 2:
            continue
        mult = interleave[min(k, interleave.shape[0]) - 1]
        for x in range(k):
            i = occ[r, x]
            if cls < 0:
                ri = unmeasured_share / (k * mult)
            elif k == 2:
                a, b = models[occ[r, 0]], models[occ[r, 1]]
                ri = pair[cls, a, b] if x == 0 else pair[cls, b, a]
            else:
                ri = 1.0 / (k * mult)
            rate[i] = min(rate[i], ri)
            shared[i] = True
    held = np_sum(alloc[:, 0])
    starved = held > cap[0] + _EPS
    if starved:
        share = cap[0] / held
        for i in range(k_all):
            m = models[i]
            per_gpu = alloc[i, 0] / max(alloc[i, 1], 1.0)
            full = interp1(per_gpu, cpu_x[m], cpu_y[m], cpu_n[m])
            f = interp1(per_gpu * share, cpu_x[m], cpu_y[m], cpu_n[m]) / max(full, 1e-12)
            if cpu_weight != 1.0:
                f = f**cpu_weight
            rate[i] *= f
    for i in range(k_all):
        rate[i] = max(rate[i], 1e-12)
    return n_crash, n_mem, starved


@compiled
def evaluate_nodes(
    dirty: np.ndarray,
    first: bool,
    running: np.ndarray,
    state: tuple,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Outcomes of the ``dirty`` nodes (bool, per node) for the ``running`` jobs' workers.

    ``state`` is the simulator's arrays in the order of ``ColocationMixin._kernel_state``:
    per job and worker ``w_node``, ``w_seq``, ``w_alloc``, ``j_model``; per node
    ``capacity``, ``used``, ``node_class``, ``node_slowed``; whether some level requests a
    fractional GPU; the :class:`~edgesched.envs.colocation.KernelTables`; the
    ``unmeasured_gpu_share``, ``cpu_starvation_weight`` and whether ``crash_victim`` is
    ``in_pair``; and the per-worker outputs
    ``w_rate``, ``w_gshared``, ``w_starved``.

    A dirty node within capacity (whole-GPU requests only, no fractional levels) shares
    nothing: its workers run at rate 1, which needs writing only where ``node_slowed`` says
    a worker may hold something else. Every other dirty node's workers, in placement order
    (``w_seq``), go through :func:`node_rule`. Every evaluated worker's rate and flags are
    stored, and ``node_slowed`` is updated, unless this is a slot's ``first`` pass and some
    job must crash: then nothing is written, and the caller crashes those jobs and evaluates
    the dirty nodes again without them.

    Returns:
        ``(crashed, memory, recheck)``: the jobs to crash (``first`` pass only; a job may
        appear twice), for each entry whether it is host memory over capacity (else a
        failing GPU pair), and the nodes whose outcome holds a crash.
    """
    (
        w_node, w_seq, w_alloc, j_model, capacity, used, node_class, node_slowed,
        frac_levels, pair, fail, interleave, cpu_x, cpu_y, cpu_n, unmeasured_share,
        cpu_weight, in_pair, w_rate, w_gshared, w_starved,
    ) = state  # fmt: skip
    tables = (pair, fail, interleave, cpu_x, cpu_y, cpu_n)
    n_nodes = dirty.shape[0]
    todo = np.zeros(n_nodes, dtype=np.bool_)
    calm = np.zeros(n_nodes, dtype=np.bool_)
    any_todo = False
    for n in range(n_nodes):
        if not dirty[n]:
            continue
        c = not frac_levels
        if c:
            for d in range(3):
                if used[n, d] > capacity[n, d] + _EPS:
                    c = False
        calm[n] = c
        if node_slowed[n] or not c:
            todo[n] = True
            any_todo = True
    none = np.empty(0, dtype=np.int64)
    if not any_todo:
        return none, np.empty(0, dtype=np.bool_), none
    n_w = w_node.shape[1]
    count = np.zeros(n_nodes + 1, dtype=np.int64)
    for r in range(running.shape[0]):
        j = running[r]
        for w in range(n_w):
            n = w_node[j, w]
            if n >= 0 and todo[n]:
                count[n + 1] += 1
    start = np.cumsum(count)  # start[n]: first slot of node n's workers
    total = start[n_nodes]
    wj = np.empty(total, dtype=np.int64)
    ww = np.empty(total, dtype=np.int64)
    fill = start[:n_nodes].copy()
    for r in range(running.shape[0]):
        j = running[r]
        for w in range(n_w):
            n = w_node[j, w]
            if n >= 0 and todo[n]:
                p = fill[n]
                # insertion by placement order (a node holds a few workers)
                while p > start[n] and w_seq[wj[p - 1], ww[p - 1]] > w_seq[j, w]:
                    wj[p] = wj[p - 1]
                    ww[p] = ww[p - 1]
                    p -= 1
                wj[p] = j
                ww[p] = w
                fill[n] += 1
    rate = np.ones(total)
    shared = np.zeros(total, dtype=np.bool_)
    starved = np.zeros(total, dtype=np.bool_)
    slowed = np.zeros(n_nodes, dtype=np.bool_)
    crashed = np.empty(total, dtype=np.int64)
    memory = np.empty(total, dtype=np.bool_)
    n_crashed = 0
    recheck = np.empty(n_nodes, dtype=np.int64)
    n_recheck = 0
    cap = np.empty(3)
    # scratch of the largest node, reused by every node (numba slices are views)
    k_max, g_max = 1, 1
    for n in range(n_nodes):
        if todo[n]:
            k_max = max(k_max, start[n + 1] - start[n])
            g_max = max(g_max, int(np.rint(capacity[n, 1])))
    models_b = np.empty(k_max, dtype=np.int64)
    alloc_b = np.empty((k_max, 3))
    crash = np.empty(k_max, dtype=np.int64)
    alive = np.empty(k_max, dtype=np.bool_)
    everyone = np.empty(k_max, dtype=np.bool_)
    occ = np.empty((g_max, k_max), dtype=np.int64)
    cnt = np.zeros(g_max, dtype=np.int64)
    occ_l = np.empty((g_max, k_max), dtype=np.int64)
    cnt_l = np.zeros(g_max, dtype=np.int64)
    for n in range(n_nodes):
        s, e = start[n], start[n + 1]
        if not todo[n] or calm[n] or e == s:
            continue
        k = e - s
        models = models_b[:k]
        alloc = alloc_b[:k]
        for x in range(k):
            models[x] = j_model[wj[s + x]]
            for d in range(3):
                alloc[x, d] = w_alloc[wj[s + x], ww[s + x], d]
        for d in range(3):
            cap[d] = capacity[n, d]
        n_c, n_m, st = node_rule(
            node_class[n],
            cap,
            models,
            alloc,
            tables,
            unmeasured_share,
            cpu_weight,
            in_pair,
            rate[s:e],
            shared[s:e],
            crash,
            alive,
            everyone,
            occ,
            cnt,
            occ_l,
            cnt_l,
        )
        if n_c:
            recheck[n_recheck] = n
            n_recheck += 1
            if first:
                for x in range(n_c):
                    crashed[n_crashed] = wj[s + crash[x]]
                    memory[n_crashed] = x < n_m
                    n_crashed += 1
        sl = st
        for x in range(s, e):
            starved[x] = st
            if shared[x] or rate[x] != 1.0:
                sl = True
        slowed[n] = sl
    if n_crashed == 0:
        for x in range(total):
            w_rate[wj[x], ww[x]] = rate[x]
            w_gshared[wj[x], ww[x]] = shared[x]
            w_starved[wj[x], ww[x]] = starved[x]
        for n in range(n_nodes):
            if todo[n]:
                node_slowed[n] = slowed[n]
    return crashed[:n_crashed], memory[:n_crashed], recheck[:n_recheck]


@compiled
def slot_rates(
    running: np.ndarray,
    w_rate: np.ndarray,
    w_gshared: np.ndarray,
    w_starved: np.ndarray,
    per: int,
    shared: np.ndarray,
    starved: np.ndarray,
    slow: np.ndarray,
) -> bool:  # pragma: no cover - compiled
    """The ``running`` jobs' stored rates as (R, W) slowdowns, and per-copy flag counts.

    Writes ``shared`` and ``starved`` ((copies,): workers sharing a GPU and workers on an
    oversubscribed node per copy, ``per`` job ids a copy) and ``slow[:R]`` (``1 / rate`` of
    every worker slot of the R running jobs).

    Returns:
        Whether any rate differs from 1.
    """
    n_w = w_rate.shape[1]
    shared[:] = 0
    starved[:] = 0
    slowed = False
    for r in range(running.shape[0]):
        j = running[r]
        b = j // per
        for w in range(n_w):
            x = w_rate[j, w]
            if x == 1.0:  # most workers: skip the division (1 / 1 is exactly 1)
                slow[r, w] = 1.0
            else:
                slow[r, w] = 1.0 / x
                slowed = True
            if w_gshared[j, w]:
                shared[b] += 1
            if w_starved[j, w]:
                starved[b] += 1
    return slowed


@compiled
def checkpoint(
    running: np.ndarray,
    run_slots: np.ndarray,
    ckpt_progress: np.ndarray,
    progress: np.ndarray,
    interval: int,
) -> None:  # pragma: no cover - compiled
    """Count a slot of running for each of ``running``; checkpoint every ``interval`` slots."""
    for r in range(running.shape[0]):
        j = running[r]
        s = run_slots[j] + 1
        run_slots[j] = s
        if interval and s % interval == 0:
            ckpt_progress[j] = progress[j]


@compiled
def measured_slot(
    dirty_ext: np.ndarray,
    adv: np.ndarray,
    every: bool,
    first: bool,
    reuse: bool,
    running: np.ndarray,
    per: int,
    crashed_out: np.ndarray,
    shared_out: np.ndarray,
    starved_out: np.ndarray,
    slow_out: np.ndarray,
    w_node: np.ndarray,
    w_seq: np.ndarray,
    w_alloc: np.ndarray,
    j_model: np.ndarray,
    capacity: np.ndarray,
    used: np.ndarray,
    node_class: np.ndarray,
    node_slowed: np.ndarray,
    frac_levels: bool,
    pair: np.ndarray,
    fail: np.ndarray,
    interleave: np.ndarray,
    cpu_x: np.ndarray,
    cpu_y: np.ndarray,
    cpu_n: np.ndarray,
    unmeasured_share: float,
    cpu_weight: float,
    in_pair: bool,
    w_rate: np.ndarray,
    w_gshared: np.ndarray,
    w_starved: np.ndarray,
) -> tuple[int, int, int]:  # pragma: no cover - compiled
    """One slot's measured bookkeeping in one call: dirty nodes, then the slowdowns.

    Evaluates the dirty nodes (``dirty_ext``, per node plus an always-False sentinel) of the
    advancing copies (``adv`` per node, or all when ``every``) with :func:`evaluate_nodes`
    (the arguments from ``w_node`` on are its ``state``, flattened: numba types a tuple
    argument element by element in Python, a flat array argument in C).
    If the ``first`` pass finds jobs to crash it writes them to ``crashed_out[0]`` (and
    ``crashed_out[1]``: 1 where the cause is host memory, 0 a failing pair) and returns at
    once, writing nothing else; the caller crashes them and calls again with
    ``first=False``. Otherwise it clears those dirty flags, sets the flags of nodes to
    re-check next slot, and writes :func:`slot_rates`'s outputs to ``shared_out``,
    ``starved_out`` and ``slow_out``, unless nothing was dirty and ``reuse`` says the
    caller's last ones (still in those buffers) hold. Results go to the caller's buffers
    because returning arrays costs a boxed array each, a few microseconds a slot.

    Returns:
        ``(n_crashed, evaluated, flags)``: how many columns of ``crashed_out`` are jobs to
        crash (a job may appear twice); whether some node was evaluated (0: no; 1: yes; 2:
        yes, and some node is dirty again, to re-check next slot); and 0 (nothing
        written: reuse the last), 1 (written, nothing slowed) or 2 (written, some worker
        slowed).
    """
    n_nodes = adv.shape[0]
    dirty = np.zeros(n_nodes, dtype=np.bool_)
    any_dirty = False
    for n in range(n_nodes):
        if dirty_ext[n] and (every or adv[n]):
            dirty[n] = True
            any_dirty = True
    if any_dirty:
        state = (
            w_node, w_seq, w_alloc, j_model, capacity, used, node_class, node_slowed,
            frac_levels, pair, fail, interleave, cpu_x, cpu_y, cpu_n, unmeasured_share,
            cpu_weight, in_pair, w_rate, w_gshared, w_starved,
        )  # fmt: skip
        crashed, memory, recheck = evaluate_nodes(dirty, first, running, state)
        if crashed.shape[0]:
            for x in range(crashed.shape[0]):
                crashed_out[0, x] = crashed[x]
                crashed_out[1, x] = memory[x]
            return crashed.shape[0], 1, 0
        for n in range(n_nodes):
            if every or adv[n]:
                dirty_ext[n] = False
        # a failing pair that only the survivors' re-packing revealed: decided next slot
        for x in range(recheck.shape[0]):
            dirty_ext[recheck[x]] = True
        evaluated = 2 if recheck.shape[0] else 1
    elif reuse:
        return 0, 0, 0
    else:
        evaluated = 0
    slowed = slot_rates(
        running, w_rate, w_gshared, w_starved, per, shared_out, starved_out, slow_out
    )
    return 0, evaluated, 2 if slowed else 1
