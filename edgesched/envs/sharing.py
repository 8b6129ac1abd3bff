"""How a node's running workers share its GPUs and cores under ``collision_mode="measured"``.

The rules are those of ``colocation`` (its docstring gives the sources). :func:`node_outcome`
is their readable reference, one node at a time, in plain Python: crashes (host memory,
failing pairs), each worker's GPU-sharing rate from the packing :func:`gpu_occupants`, the
CPU factor. The simulator runs the same rule compiled
(:func:`~edgesched.envs.node_kernel.evaluate_nodes`); ``tests/test_node_kernel.py`` checks
the two agree bit for bit.

Worker ``i`` requesting ``g_i`` GPUs holds the GPU interval ``[o_i, o_i + g_i)``, ``o_i`` the
sum of the earlier requests, wrapped modulo the node's GPU count.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: Tolerance of GPU and capacity comparisons (allocations are sums of floats).
GPU_EPS = 1e-9


def gpu_occupants(g: np.ndarray | list[float], gpus: int) -> list[list[int]]:
    """Which workers (by position in ``g``, placement order) hold each of ``gpus`` GPUs.

    Worker ``i`` takes ``[o_i, o_i + g_i)`` on the GPU axis, ``o_i = g_0 + ... + g_{i-1}``,
    wrapped modulo ``gpus``; it holds every GPU that interval overlaps by more than a
    rounding error. A worker requesting no GPU holds none.
    """
    held: list[list[int]] = [[] for _ in range(gpus)]
    o = 0.0
    for i, gi in enumerate(g.tolist() if isinstance(g, np.ndarray) else g):
        if gi > GPU_EPS:
            first = math.floor(o + GPU_EPS)
            last = math.ceil(o + gi - GPU_EPS) - 1
            for cell in range(first, max(last, first) + 1):
                j = cell % gpus
                if i not in held[j]:
                    held[j].append(i)
        o += gi
    return held


def _failing_newest(
    fail: list[list[bool]],
    models: list[int],
    g: list[float],
    alive: list[bool],
    gpus: int,
    packed: list[list[int]] | None = None,
    in_pair: bool = False,
) -> int | None:
    """Position of the worker to crash on the first GPU holding a failing pair, if any.

    The live workers are packed among themselves (:func:`gpu_occupants`). The victim is the
    GPU's newest worker, or with ``in_pair`` its newest worker that is in a failing pair.

    Args:
        fail: ``ColocationTable.fail`` of the node's GPU class, as nested lists.
        models: model of each of the node's workers (placement order).
        g: GPUs each requests.
        alive: whether each is still alive.
        gpus: the node's GPU count.
        packed: ``gpu_occupants(g, gpus)`` when already computed (used while all live).
        in_pair: ``crash_victim='in_pair'`` (else ``'newest'``).
    """
    idx = [i for i, a in enumerate(alive) if a]
    if len(idx) < 2:
        return None
    if packed is None or len(idx) < len(alive):
        packed = gpu_occupants([g[i] for i in idx], gpus)
    for occ in packed:
        if len(occ) < 2:
            continue
        m = [models[idx[o]] for o in occ]
        bad = [
            any(fail[a][b] or fail[b][a] for y, b in enumerate(m) if y != x)
            for x, a in enumerate(m)
        ]
        if any(bad):
            x = max(x for x, b in enumerate(bad) if b) if in_pair else len(occ) - 1
            return idx[occ[x]]
    return None


def _sum(x: list[float]) -> float:
    """``np.sum`` of a 1-D float64 array of ``x``, bit for bit.

    Below eight terms numpy adds in order from zero, as this does; from eight on it uses
    pairwise summation, so that case defers to it (the memoized outcome must not depend on
    which form computed it).
    """
    if len(x) >= 8:
        return float(np.sum(np.asarray(x, dtype=np.float64)))
    t = 0.0
    for v in x:
        t += v
    return t


def node_outcome(
    tab: Any,
    pair: list[list[float]] | None,
    fail: list[list[bool]] | None,
    cap: np.ndarray | list[float],
    models: np.ndarray | list[int],
    alloc: np.ndarray | list[list[float]],
    unmeasured_share: float,
    cpu_weight: float = 1.0,
    in_pair: bool = False,
) -> tuple[list[int], list[float], list[bool], bool]:
    """What one node does to its running workers (placement order), any configuration.

    Host memory over capacity crashes the newest workers' jobs until the rest fit; then,
    while a GPU holds a failing pair among the live workers, the newest worker on it
    crashes (with ``in_pair``, its newest worker that is in a failing pair). Rates are of
    every worker as packed (:func:`gpu_occupants`), as if nothing crashed: a worker
    spanning several GPUs runs at its worst GPU's rate; the CPU factor of CPU
    oversubscription (each worker gets its proportional share of cores) multiplies.

    Args:
        tab: the :class:`~edgesched.envs.colocation.ColocationTable`.
        pair: ``tab.pair`` of the node's GPU class as nested lists (``None``: unmeasured).
        fail: ``tab.fail`` of that class as nested lists (``None``: unmeasured).
        cap: (3,) the node's capacity (cores, GPUs, memory).
        models: (K,) model of each worker.
        alloc: (K, 3) their allocations (an array or nested lists).
        unmeasured_share: ``unmeasured_gpu_share`` of the configuration.
        cpu_weight: ``cpu_starvation_weight`` of the configuration (the CPU factor's
            exponent; 1: the measured curve).
        in_pair: ``crash_victim='in_pair'`` of the configuration (else ``'newest'``).

    Returns:
        ``(crash, rate, gpu_shared, cpu_starved)`` as lists: positions of the workers whose
        jobs crash (newest first), each worker's rate relative to running alone if nothing
        crashed (at least 1e-12), whether it shares a GPU, and whether the node's cores are
        oversubscribed.
    """
    # the reference form: plain Python on lists, sums in numpy's order, so that the compiled
    # form (which reproduces numpy's order) can be checked against it bit for bit
    cap_l = cap.tolist() if isinstance(cap, np.ndarray) else [float(c) for c in cap]
    alloc_l = alloc.tolist() if isinstance(alloc, np.ndarray) else [list(a) for a in alloc]
    models_l = [int(m) for m in models]
    g_l = [float(a[1]) for a in alloc_l]
    k_all = len(models_l)
    gpus = round(float(cap_l[1]))
    mem_cap = cap_l[2] + GPU_EPS
    alive = []
    used = 0.0
    for a in alloc_l:
        used += a[2]
        alive.append(used <= mem_cap)
    crash = [i for i in range(k_all - 1, -1, -1) if not alive[i]]
    packed = gpu_occupants(g_l, gpus) if gpus > 0 else []
    if fail is not None and gpus > 0 and any(len(occ) > 1 for occ in packed):
        while True:
            victim = _failing_newest(fail, models_l, g_l, alive, gpus, packed, in_pair)
            if victim is None:
                break
            crash.append(victim)
            alive[victim] = False
    rate = [1.0] * k_all
    gpu_shared = [False] * k_all
    if gpus > 0:
        for occ in packed:
            k = len(occ)
            if k < 2:
                continue
            if pair is None:
                r = [unmeasured_share / (k * tab.multiplier(k))] * k
            elif k == 2:
                a, b = models_l[occ[0]], models_l[occ[1]]
                r = [pair[a][b], pair[b][a]]
            else:
                r = [1.0 / (k * tab.multiplier(k))] * k
            for i, ri in zip(occ, r, strict=True):
                rate[i] = min(rate[i], ri)
                gpu_shared[i] = True
    held = _sum([a[0] for a in alloc_l])
    starved = held > cap_l[0] + GPU_EPS
    if starved:
        share = cap_l[0] / held
        per_gpu = [a[0] / max(a[1], 1.0) for a in alloc_l]
        for i, mi in enumerate(models_l):
            full = float(tab.cpu_rate(mi, per_gpu[i]))
            f = float(tab.cpu_rate(mi, per_gpu[i] * share)) / max(full, 1e-12)
            if cpu_weight != 1.0:
                f = f**cpu_weight
            rate[i] *= f
    # a failing pair seen only here (a crash elsewhere re-packed the node's GPUs) makes no
    # progress this slot; the next slot's first pass crashes its newer job
    return crash, [max(r, 1e-12) for r in rate], gpu_shared, bool(starved)
