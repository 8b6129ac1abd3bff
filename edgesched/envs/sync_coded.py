"""Straggler-tolerant sync schemes: ``hgc`` and ``edgegossip``.

``hgc``: hierarchical gradient coding (:mod:`edgesched.envs.coding`). A job's workers are
grouped, in worker order, into edges of :data:`HGC_GROUP` workers (the last may be smaller);
worker 0's node hosts the master and each group's first worker its edge aggregator. When the
simulator is built, the scheme picks per job size the tolerances ``(s_e, s_w)`` that minimize
the expected iteration time under the scenario's own straggler model (the PAI-fitted
slowdown with its ``straggler_scale`` and ``straggler_prob_scale``; Monte Carlo with a fixed
seed, greedy optimizer of :func:`~edgesched.envs.coding_opt.optimize_hgc`). Each slot the
iteration's compute time is the order statistic of the coded workers' times: every edge
waits for its ``m_i - s_w`` fastest workers, each computing its coded load, and the master
for its ``n - s_e`` fastest edges. Communication: each worker sends one gradient to its
aggregator, the aggregators to the master, and the master broadcasts back (parameter-server
style over the two levels).

``edgegossip``: EdgeGossip (Han et al., TPDS 32(7), 2021) on top of ``gossip``:

* heterogeneity-aware load balancing: data shares in proportion to each worker's measured
  speed (its solo per-iteration time when placed), so per-iteration times even out: every
  worker's time becomes ``W / sum_j (1 / t_j)`` before stragglers (the throughput profile's
  concavity in the local batch is ignored for the re-balanced shares, an assumption);
* accuracy-aware training: once past the inflection of its accuracy curve, the job stops
  when its accuracy gain per epoch falls below ``edgegossip_min_gain`` (default one point
  per epoch), even before its target accuracy: the paper's "stop spending time once
  accuracy gains flatten".
"""

from __future__ import annotations

import functools

import numpy as np

from .coding import pai_stragglers
from .coding_opt import optimize_hgc
from .config import SimConfig
from .sync import SyncScheme, _gossip_time, _seconds, register_sync_scheme

HGC_GROUP = 2
"""Workers per edge group of an ``hgc`` job."""
HGC_MAX_WORKERS = 64
HGC_SAMPLES = 4000


def hgc_groups(w: int) -> tuple[int, ...]:
    """Edge group sizes of a ``w``-worker job."""
    full, rest = divmod(w, HGC_GROUP)
    return (HGC_GROUP,) * full + ((rest,) if rest else ())


@functools.lru_cache(maxsize=64)
def hgc_plan(w: int, straggler_scale: float, prob_scale: float) -> tuple[int, int, np.ndarray]:
    """``(s_e, s_w, per-worker load factor vs uncoded)`` chosen for a ``w``-worker job."""
    m = hgc_groups(w)
    if w == 1 or straggler_scale == 0.0:
        return 0, 0, np.ones(w)
    rng = np.random.default_rng(0)  # a static design choice, not part of any episode
    unit = pai_stragglers(straggler_scale, prob_scale)(rng, (HGC_SAMPLES, w))
    choice = optimize_hgc(m, unit)
    from .coding import build_hgc

    code = build_hgc(m, choice.s_e, choice.s_w)
    factor = np.repeat(np.asarray(code.loads) * w, m)  # uncoded load is 1/w per worker
    return choice.s_e, choice.s_w, factor


def _hgc_sync_time(nodes, valid, mb, pair_bw, pair_lat):
    r = nodes.shape[0]
    out = np.zeros(r)
    for i in range(r):
        w = int(valid[i].sum())
        if w <= 1:
            continue
        row = nodes[i, :w]
        master = row[0]
        per_edge = []
        lat = 0.0
        for start in range(0, w, HGC_GROUP):
            grp = row[start : start + HGC_GROUP]
            agg = grp[0]
            up = max((_seconds(mb[i], pair_bw[x, agg]) for x in grp[1:]), default=0.0)
            per_edge.append(up)
            lat = max(lat, max((pair_lat[x, agg] for x in grp), default=0.0))
        aggs = row[::HGC_GROUP]
        to_master = sum(_seconds(mb[i], pair_bw[a, master]) for a in aggs[1:])
        lat_m = max((pair_lat[a, master] for a in aggs), default=0.0)
        # up through the edges, then the master's broadcast back down the same links
        out[i] = 2.0 * (max(per_edge) + to_master) + 2.0 * (lat + lat_m) * 1e-3
    return out


class HGCComputeTime:
    """Iteration compute time of ``hgc`` jobs for one scenario's straggler model.

    A class rather than a closure so simulators (and training checkpoints) pickle.
    """

    def __init__(self, straggler_scale: float, prob_scale: float) -> None:
        self.scale = float(straggler_scale)
        self.prob = float(prob_scale)

    def __call__(self, compute: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """(R, W) per-worker compute seconds -> (R,) coded iteration compute seconds."""
        w_all = valid.sum(axis=1)
        out = np.empty(len(compute))
        for w in np.unique(w_all):
            sel = w_all == w
            w = int(w)
            s_e, s_w, factor = hgc_plan(w, self.scale, self.prob)
            t = compute[sel, :w] * factor
            m = hgc_groups(w)
            edge_t = np.empty((t.shape[0], len(m)))
            start = 0
            for g, mi in enumerate(m):
                k = mi - min(s_w, mi - 1)
                edge_t[:, g] = np.partition(t[:, start : start + mi], k - 1, axis=1)[:, k - 1]
                start += mi
            ke = len(m) - s_e
            out[sel] = np.partition(edge_t, ke - 1, axis=1)[:, ke - 1]
        return out


def _bind_hgc(cfg: SimConfig) -> SyncScheme:
    compute_time = HGCComputeTime(cfg.straggler_scale, cfg.straggler_prob_scale)
    return SyncScheme("hgc", _hgc_sync_time, 1.0, compute_time)


register_sync_scheme(SyncScheme("hgc", _hgc_sync_time, bind=_bind_hgc))
# Same averaging as gossip (so the same statistical efficiency), plus load balancing and the
# accuracy-aware stop, which the simulator applies for schemes that declare them.
register_sync_scheme(
    SyncScheme("edgegossip", _gossip_time, efficiency=0.85, balance_load=True, accuracy_stop=True)
)
