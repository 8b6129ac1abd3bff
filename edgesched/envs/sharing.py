"""Vectorized GPU-sharing rates of many nodes at once (the fast path of ``colocation``).

:func:`packed_rates` computes, for every node that holds only whole-GPU workers each
requesting at most the node's GPUs, exactly what ``ColocationMixin._node_outcome`` computes
one node at a time: the packing of ``colocation.gpu_occupants`` in placement order, each
worker's rate from its GPU partners, and whether some GPU holds a pair whose shared run
failed (such nodes, and nodes with fractional requests or host memory over capacity, go
through the per-node path, which also decides the crashes).

With integer requests ``g_i <= G``, worker ``i`` holds the "positions" ``o_i .. o_i + g_i - 1``
of its node (``o_i`` the sum of the earlier requests) and position ``p`` lies on GPU
``p mod G``; a GPU ``r`` of a node with ``T`` positions in all is held by
``(T - 1 - r) // G + 1`` workers, one per layer ``r, r + G, r + 2G, ...``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def packed_rates(
    tab: Any,
    seg: np.ndarray,
    node_cls: np.ndarray,
    node_gpus: np.ndarray,
    models: np.ndarray,
    gpus: np.ndarray,
    unmeasured_share: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GPU-sharing rates of workers grouped by node, oldest placement first in each node.

    Args:
        tab: the simulator's :class:`~edgesched.envs.colocation.ColocationTable`.
        seg: (K,) node segment of each worker (0..S-1, non-decreasing).
        node_cls: (S,) measured GPU class of each segment's node (-1: unmeasured).
        node_gpus: (S,) GPUs of each segment's node (integers >= 1).
        models: (K,) model of each worker.
        gpus: (K,) whole GPUs each worker requests (0 <= g <= its node's GPUs).
        unmeasured_share: ``unmeasured_gpu_share`` of the configuration.

    Returns:
        ``(rate, shared, failing)``: (K,) each worker's rate relative to running alone,
        (K,) whether it shares a GPU, (S,) whether a GPU of the node holds a failing pair.
    """
    k_all = len(models)
    s_all = len(node_cls)
    g = gpus.astype(np.int64)
    rate = np.ones(k_all)
    shared = np.zeros(k_all, dtype=bool)
    failing = np.zeros(s_all, dtype=bool)
    holder = np.repeat(np.arange(k_all), g)  # worker of each position
    if len(holder) == 0:
        return rate, shared, failing
    pseg = seg[holder]
    total = np.bincount(seg, weights=g, minlength=s_all).astype(np.int64)
    first = np.cumsum(total) - total
    pin = np.arange(len(holder)) - first[pseg]  # position within its node
    big_g = node_gpus[pseg]
    t = total[pseg]
    occ = (t - 1 - pin % big_g) // big_g + 1
    if occ.max() < 2:
        return rate, shared, failing
    mp = models[holder]
    cls = node_cls[pseg]
    mult = tab.interleave[np.minimum(occ, len(tab.interleave)) - 1]
    rate_p = np.ones(len(holder))
    multi = occ >= 2
    measured = cls >= 0
    # unmeasured GPUs: time-slicing at Muri's multiplier (assumed)
    sel = multi & ~measured
    rate_p[sel] = unmeasured_share / (occ[sel] * mult[sel])
    sel = (occ >= 3) & measured
    rate_p[sel] = 1.0 / (occ[sel] * mult[sel])
    two = np.flatnonzero((occ == 2) & measured)
    if len(two):
        up = pin[two] + big_g[two] < t[two]
        partner = np.where(up, two + big_g[two], two - big_g[two])
        rate_p[two] = tab.pair[cls[two], mp[two], mp[partner]]
    # a failing pair on some GPU: any two layers of one GPU
    idx = np.flatnonzero(multi & measured)
    for d in range(1, int(occ.max())):
        above = idx[pin[idx] + d * big_g[idx] < t[idx]]
        if len(above) == 0:
            break
        other = above + d * big_g[above]
        bad = tab.fail[cls[above], mp[above], mp[other]]
        if bad.any():
            failing[pseg[above[bad]]] = True
    starts = (np.cumsum(g) - g)[g > 0]
    rate[g > 0] = np.minimum.reduceat(rate_p, starts)
    shared[g > 0] = np.maximum.reduceat(occ, starts) >= 2
    return rate, shared, failing


def cpu_rates(
    tab: Any,
    seg: np.ndarray,
    cap_cpu: np.ndarray,
    models: np.ndarray,
    alloc: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Rate factors of CPU oversubscription, and which workers' nodes are oversubscribed.

    A node's workers get ``capacity / held`` of their cores (proportional share) and run at
    their model's measured curve at that many cores per GPU over the curve at their
    allocation (``ColocationTable.cpu_rate``).

    Args:
        tab: the :class:`~edgesched.envs.colocation.ColocationTable`.
        seg: (K,) node segment of each worker.
        cap_cpu: (S,) cores of each segment's node.
        models: (K,) worker models.
        alloc: (K, 3) worker allocations.
    """
    held = np.bincount(seg, weights=alloc[:, 0], minlength=len(cap_cpu))
    over = held > cap_cpu + 1e-9
    starved = over[seg]
    factor = np.ones(len(models))
    if not starved.any():
        return factor, starved
    share = cap_cpu[seg[starved]] / held[seg[starved]]
    per_gpu = alloc[starved, 0] / np.maximum(alloc[starved, 1], 1.0)
    m = models[starved]
    f = np.ones(len(m))
    for mi in np.unique(m).tolist():
        sel = m == mi
        full = tab.cpu_rate(mi, per_gpu[sel])
        f[sel] = tab.cpu_rate(mi, per_gpu[sel] * share[sel]) / np.maximum(full, 1e-12)
    factor[starved] = f
    return factor, starved
