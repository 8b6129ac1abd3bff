"""Synchronization schemes: per-iteration communication time of a data-parallel job.

Each scheme is registered under a name that scenarios use in ``sync_mix``. A scheme computes,
for a batch of jobs whose workers are placed, the seconds spent synchronizing per iteration and
the statistical efficiency of its averaging (1.0 = exact gradient averaging). Placements are
non-preemptive, so the simulator calls a scheme once per job, when the job starts.

Extension point: the straggler-tolerant schemes (``edgegossip``, ``hgc``) register themselves
with :func:`register_sync_scheme` from their own module (:mod:`edgesched.envs.sync_coded`); a
scheme may also replace the compute-time aggregation (``compute_time``) because coded schemes
do not wait for the slowest worker.

Communication model (assumptions): gradients of ``model_mb`` megabytes; pairwise
bandwidth is the widest-path bottleneck between the two nodes; latency the fastest path.

* ``ps``: the parameter server sits with worker 0; every other worker pushes gradients and
  pulls parameters, and the server's link serializes them: ``2 * sum_{i>0} M / bw(ps, i)``
  plus two latencies (a worker on the server's node uses the intra-node bandwidth).
* ``allreduce``: ring all-reduce in worker order: ``2 (w-1)/w * M / min_ring_bw`` plus
  ``2 (w-1)`` hop latencies.
* ``gossip``: each worker averages with its two ring neighbours, partners wait on each other:
  ``M / min_ring_bw`` plus one latency; averaging is inexact, so samples count 0.85
  toward convergence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# (nodes[R,W] with -1 padding, valid[R,W], model_mb[R], pair_bw Gbit/s [N,N], pair_lat ms[N,N])
SyncTimeFn = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]
# (per-worker compute seconds [R,W] with padding = -inf, valid[R,W]) -> per-job seconds [R]
ComputeTimeFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


def slowest_worker(compute: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Synchronous data parallelism waits for the slowest worker every iteration.

    Padding workers (``~valid``) carry 0 compute time, which the simulator guarantees.
    """
    del valid  # padding is 0, so the plain maximum is right
    out = compute[:, 0].copy()
    for w in range(1, compute.shape[1]):  # cheaper than a reduction over a short last axis
        np.maximum(out, compute[:, w], out=out)
    return out


@dataclass(frozen=True)
class SyncScheme:
    """A registered synchronization scheme.

    Attributes:
        name: key used in ``sync_mix``.
        sync_time: seconds of communication per iteration for each job.
        efficiency: statistical efficiency of the averaging (scalar or per-config override).
        compute_time: how per-worker compute times combine into the iteration's compute time.
        bind: optional ``SimConfig -> SyncScheme`` specializing the scheme to a scenario when
            the simulator is built (``hgc`` picks its code for the scenario's stragglers).
        balance_load: data shares in proportion to worker speed (``edgegossip``): the
            simulator evens out the workers' per-iteration times when the job starts.
        accuracy_stop: the job stops once its accuracy gains flatten (``edgegossip``; the
            threshold is the scenario's ``edgegossip_min_gain``).
    """

    name: str
    sync_time: SyncTimeFn
    efficiency: float = 1.0
    compute_time: ComputeTimeFn = slowest_worker
    bind: Callable[..., SyncScheme] | None = None
    balance_load: bool = False
    accuracy_stop: bool = False


_REGISTRY: dict[str, SyncScheme] = {}


def register_sync_scheme(scheme: SyncScheme) -> None:
    """Add a scheme to the registry (re-registering a name replaces it)."""
    _REGISTRY[scheme.name] = scheme


def get_sync_scheme(name: str) -> SyncScheme:
    """Return a registered scheme or raise ``KeyError`` listing the registered names."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(
            f"unknown sync scheme {name!r}; registered schemes: {sorted(_REGISTRY)}"
        ) from None


def list_sync_schemes() -> list[str]:
    """Names of all registered schemes."""
    return sorted(_REGISTRY)


def _seconds(mb: np.ndarray, gbps: np.ndarray) -> np.ndarray:
    return mb * 8e-3 / gbps


def _ring(nodes: np.ndarray, valid: np.ndarray, pair_bw: np.ndarray, pair_lat: np.ndarray):
    """Bandwidth and latency of each worker's link to the next worker in ring order."""
    w = valid.sum(axis=1)
    nxt_idx = (np.arange(nodes.shape[1]) + 1) % np.maximum(w, 1)[:, None]
    nxt = nodes[np.arange(len(nodes))[:, None], nxt_idx]
    src = np.where(valid, nodes, 0)
    dst = np.where(valid, nxt, 0)
    bw = pair_bw[src, dst]
    bw[~valid] = np.inf
    lat = pair_lat[src, dst] * valid
    return w, bw.min(axis=1), lat


def _ps_time(nodes, valid, mb, pair_bw, pair_lat):
    ps = nodes[:, :1]
    # padding workers read the server's own link (masked below; always a real link)
    src = np.where(valid, nodes, ps)
    bw = pair_bw[np.broadcast_to(ps, src.shape), src]
    # every worker but worker 0 (which hosts the server) exchanges with the server; a
    # worker on the server's node still crosses the intra-node bus
    clients = valid.copy()
    clients[:, 0] = False
    per = np.where(clients, _seconds(mb[:, None], bw), 0.0).sum(axis=1)
    lat = np.where(clients, pair_lat[np.broadcast_to(ps, src.shape), src], 0.0).max(axis=1)
    return 2.0 * per + 2.0 * lat * 1e-3


def _allreduce_time(nodes, valid, mb, pair_bw, pair_lat):
    w, bw, lat = _ring(nodes, valid, pair_bw, pair_lat)
    t = 2.0 * (w - 1) / np.maximum(w, 1) * _seconds(mb, bw)
    return np.where(w > 1, t + 2.0 * (w - 1) * lat.max(axis=1) * 1e-3, 0.0)


def _gossip_time(nodes, valid, mb, pair_bw, pair_lat):
    w, bw, lat = _ring(nodes, valid, pair_bw, pair_lat)
    return np.where(w > 1, _seconds(mb, bw) + lat.max(axis=1) * 1e-3, 0.0)


register_sync_scheme(SyncScheme("ps", _ps_time))
register_sync_scheme(SyncScheme("allreduce", _allreduce_time))
# Neighbour averaging is inexact: consensus error costs samples. 0.85 is an assumption in the
# range decentralized-SGD studies report for ring topologies (Lian et al., NeurIPS'17).
register_sync_scheme(SyncScheme("gossip", _gossip_time, efficiency=0.85))
