"""Hierarchical gradient coding (Tang, Li, Chen, Chen, arXiv 2406.10831, 2024), in numpy.

Architecture: a master, ``n`` edge nodes, edge ``i`` with ``m_i`` workers (``M = sum m_i``).
The data is split into ``n`` partitions; the full gradient is ``g = sum_k g_k``.

Construction (two nested cyclic-repetition gradient codes, Tandon et al., ICML'17):

* **Edge level**, tolerating ``s_e`` straggling edges: edge ``i`` covers the partitions
  ``S_i = {i, i+1, ..., i+s_e} mod n`` and must deliver ``e_i = sum_{k in S_i} B[i, k] g_k``,
  where ``B`` (n x n, cyclic support) has every row in the null space of a random
  ``s_e x n`` matrix ``H`` with ``H 1 = 0``; any ``n - s_e`` rows of ``B`` then span that
  null space, which contains ``1``, so the master finds ``a`` with ``a^T B_F = 1^T`` and
  ``sum_{i in F} a_i e_i = g``.
* **Worker level**, inside edge ``i``, tolerating ``s_w`` straggling workers: each of the
  edge's partitions is cut into ``m_i`` sub-parts; ``h_l = sum_{k in S_i} B[i, k] g_{k,l}``
  and ``e_i = sum_l h_l``. Worker ``j`` computes the sub-parts ``l in {j..j+s_w} mod m_i``
  of every partition in ``S_i`` and sends ``sum_l C_i[j, l] h_l`` with the same cyclic code
  ``C_i`` (m_i x m_i); the edge decodes ``e_i`` from any ``m_i - s_w`` workers.

Load trade-off: worker ``(i, j)`` computes a fraction ``(s_w+1)/m_i * sum_{k in S_i} p_k``
of the data (``p_k``: partition sizes). The bound is ``(s_e+1)(s_w+1)/M`` (the issue's
``D/K``). It is met with equality when every window sum ``sum_{k in S_i} p_k`` equals
``(s_e+1) m_i / M``: a circulant system that :func:`partition_sizes` solves exactly when
its solution is non-negative (always for equal ``m_i``; for heterogeneous ``m_i`` when the
counts do not vary too much around the cycle and ``gcd(s_e+1, n) = 1``). Otherwise the
sizes are the non-negative least-squares fit, and ``HGCCode.bound_met`` is False with the
achieved maximum load reported: the construction does not allow the bound there.

Decoding solves a small least-squares system and checks its residual: a straggler pattern
beyond the tolerance is reported as undecodable (:class:`UndecodableError`), never decoded
to a wrong sum.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

DECODE_TOL = 1e-8


class UndecodableError(ValueError):
    """Too many stragglers for the code: the gradient sum cannot be recovered."""


def cyclic_gc_matrix(n: int, s: int, rng: np.random.Generator) -> np.ndarray:
    """Cyclic-repetition gradient code ``B`` (n x n) tolerating ``s`` stragglers.

    Row ``i`` is supported on ``{i, ..., i+s} mod n`` with ``B[i, i] = 1`` and lies in the
    null space of a random ``H`` (s x n) whose rows sum to zero (Tandon et al., Alg. 2).
    """
    if not 0 <= s < n:
        raise ValueError(f"stragglers s={s} must satisfy 0 <= s < n={n}")
    if s == 0:
        return np.eye(n)
    h = rng.standard_normal((s, n))
    h[:, -1] = -h[:, :-1].sum(axis=1)  # H 1 = 0
    b = np.zeros((n, n))
    for i in range(n):
        sup = (i + np.arange(s + 1)) % n
        b[i, i] = 1.0
        rest = sup[1:]
        b[i, rest] = -np.linalg.solve(h[:, rest], h[:, i])
    return b


def decoding_vector(b: np.ndarray, alive: np.ndarray, tol: float = DECODE_TOL) -> np.ndarray:
    """``a`` with ``a^T b[alive] = 1^T``; raises :class:`UndecodableError` if none exists."""
    rows = b[alive]
    if rows.shape[0] == 0:
        raise UndecodableError("every node straggled")
    a, *_ = np.linalg.lstsq(rows.T, np.ones(b.shape[1]), rcond=None)
    resid = float(np.abs(rows.T @ a - 1.0).max())
    if resid > tol * max(1.0, float(np.abs(a).max())):
        raise UndecodableError(
            f"{int((~alive).sum())} of {len(alive)} straggled: the survivors' code rows do "
            f"not span the all-ones vector (residual {resid:.2e})"
        )
    return a


def partition_sizes(
    m: Sequence[float], s_e: int, weights: Sequence[float] | None = None
) -> tuple[np.ndarray, bool]:
    """Partition sizes ``p`` (sum 1) that equalize worker loads; and whether exactly.

    Target window sums are ``(s_e+1) w_i / sum w`` with ``w = weights`` (default ``m``, which
    meets the load bound; workers' speeds can be folded in to balance time instead).
    """
    m = np.asarray(m, float)
    w = m if weights is None else np.asarray(weights, float)
    n = len(m)
    a = np.zeros((n, n))
    for i in range(n):
        a[i, (i + np.arange(s_e + 1)) % n] = 1.0
    c = (s_e + 1) * w / w.sum()
    p, *_ = np.linalg.lstsq(a, c, rcond=None)
    if np.abs(a @ p - c).max() < 1e-9 and (p >= -1e-12).all():
        p = np.maximum(p, 0.0)
        return p / p.sum(), True
    # non-negative least squares on the simplex by projected gradient (numpy only; the
    # system has n <= a few dozen unknowns)
    p = np.full(n, 1.0 / n)
    step = 1.0 / (np.linalg.norm(a, 2) ** 2)
    for _ in range(5000):
        new = _project_simplex(p - step * a.T @ (a @ p - c))
        if np.abs(new - p).max() < 1e-12:
            break
        p = new
    return new, False


def _project_simplex(v: np.ndarray) -> np.ndarray:
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    k = np.nonzero(u * np.arange(1, len(v) + 1) > css)[0][-1]
    return np.maximum(v - css[k] / (k + 1.0), 0.0)


@dataclass
class HGCCode:
    """A constructed two-level code (see the module docstring).

    Attributes:
        m: workers per edge.
        s_e: tolerated straggling edges.
        s_w: tolerated straggling workers per edge: one for every edge, or a tuple with
            each edge's own (per-edge tolerances,
            :func:`~edgesched.envs.coding_opt.optimize_hgc` ``method='jncss'``).
        b: edge-level code (n x n).
        c: worker-level code of each edge (m_i x m_i).
        p: partition sizes (fractions of the data, sum 1).
        loads: per edge, each worker's fraction of the whole dataset.
        bound: the trade-off bound ``(s_e+1)(s_w+1)/M`` (NaN with per-edge tolerances, for
            which the paper states none).
        bound_met: whether every worker's load equals the bound.
    """

    m: tuple[int, ...]
    s_e: int
    s_w: int | tuple[int, ...]
    b: np.ndarray
    c: list[np.ndarray]
    p: np.ndarray
    loads: list[float]
    bound: float
    bound_met: bool

    @property
    def n(self) -> int:
        """Number of edges."""
        return len(self.m)

    @property
    def s_w_edges(self) -> tuple[int, ...]:
        """Tolerated straggling workers of each edge."""
        return _per_edge(self.s_w, len(self.m))

    def edge_partitions(self, i: int) -> np.ndarray:
        """Partitions covered by edge ``i``."""
        return (i + np.arange(self.s_e + 1)) % self.n

    def worker_subparts(self, i: int, j: int) -> np.ndarray:
        """Sub-parts (of each of edge ``i``'s partitions) computed by its worker ``j``."""
        return (j + np.arange(self.s_w_edges[i] + 1)) % self.m[i]

    def encode(self, sub_grads: list[np.ndarray]) -> list[np.ndarray]:
        """Workers' messages from sub-part gradients.

        Args:
            sub_grads: per edge ``i``, an array ``(n, m_i, d)``: the gradient of sub-part
                ``l`` of partition ``k`` as cut by edge ``i`` (only rows ``k in S_i`` are
                read; ``sum_l sub_grads[i][k, l] = g_k``).

        Returns:
            per edge, ``(m_i, d)`` messages of its workers.
        """
        out = []
        for i in range(self.n):
            parts = self.edge_partitions(i)
            h = np.tensordot(self.b[i, parts], sub_grads[i][parts], axes=(0, 0))  # (m_i, d)
            out.append(self.c[i] @ h)
        return out

    def decode(
        self, messages: list[np.ndarray], edge_alive: np.ndarray, worker_alive: list[np.ndarray]
    ) -> np.ndarray:
        """Two-stage decoding: each live edge from its live workers, then the master.

        Raises:
            UndecodableError: more stragglers than the code tolerates at either level.
        """
        edge_alive = np.asarray(edge_alive, bool)
        e = []
        for i in np.flatnonzero(edge_alive):
            alive = np.asarray(worker_alive[i], bool)
            a = decoding_vector(self.c[i], alive)
            e.append(a @ messages[i][alive])
        a = decoding_vector(self.b, edge_alive)
        return a @ np.array(e)


def _per_edge(s_w: int | Sequence[int], n: int) -> tuple[int, ...]:
    """A worker tolerance for every edge: ``s_w`` repeated, or the given per-edge tuple."""
    if isinstance(s_w, int | np.integer):
        return (int(s_w),) * n
    out = tuple(int(x) for x in s_w)
    if len(out) != n:
        raise ValueError(f"s_w={list(out)}: need one tolerance per edge ({n} edges)")
    return out


def build_hgc(
    m: Sequence[int],
    s_e: int,
    s_w: int | Sequence[int],
    rng: np.random.Generator | None = None,
    weights: Sequence[float] | None = None,
) -> HGCCode:
    """Construct the hierarchical code for ``m[i]`` workers under edge ``i``.

    Args:
        m: workers per edge (each >= 1).
        s_e: straggling edges to tolerate (``0 <= s_e < len(m)``).
        s_w: straggling workers to tolerate in every edge (``0 <= s_w < min(m)``), or a
            sequence with each edge's own (``0 <= s_w[i] < m[i]``).
        rng: generator for the random code matrices (default: seed 0).
        weights: per-edge data weights (default ``m``; see :func:`partition_sizes`).

    Raises:
        ValueError: an empty edge, or a tolerance the cluster cannot give.
    """
    m = tuple(int(x) for x in m)
    if not m:
        raise ValueError("m must list at least one edge")
    if min(m) < 1:
        raise ValueError(f"m={m}: every edge needs at least one worker (empty edge)")
    if not 0 <= s_e < len(m):
        raise ValueError(f"s_e={s_e} must satisfy 0 <= s_e < number of edges ({len(m)})")
    uniform = isinstance(s_w, int | np.integer)
    if uniform and not 0 <= s_w < min(m):
        raise ValueError(f"s_w={s_w} must satisfy 0 <= s_w < the smallest edge's {min(m)} workers")
    sws = _per_edge(s_w, len(m))
    bad = [i for i, (x, mi) in enumerate(zip(sws, m, strict=True)) if not 0 <= x < mi]
    if bad:
        raise ValueError(
            f"s_w={list(sws)}: edge {bad[0]} has {m[bad[0]]} workers; need 0 <= s_w[i] < m[i]"
        )
    rng = rng if rng is not None else np.random.default_rng(0)
    b = cyclic_gc_matrix(len(m), s_e, rng)
    c = [cyclic_gc_matrix(mi, x, rng) for mi, x in zip(m, sws, strict=True)]
    p, exact = partition_sizes(m, s_e, weights)
    loads = [
        (sws[i] + 1) / mi * float(p[(i + np.arange(s_e + 1)) % len(m)].sum())
        for i, mi in enumerate(m)
    ]
    bound = (s_e + 1) * (int(s_w) + 1) / sum(m) if uniform else float("nan")
    met = uniform and exact and weights is None and max(loads) <= bound * (1 + 1e-9)
    return HGCCode(m, s_e, int(s_w) if uniform else sws, b, c, p, loads, bound, bool(met))


def allowed_patterns(code: HGCCode):
    """Every straggler pattern within tolerance: (edge_alive, worker_alive per edge)."""
    n = code.n
    for dead_e in itertools.chain.from_iterable(
        itertools.combinations(range(n), r) for r in range(code.s_e + 1)
    ):
        edge_alive = np.ones(n, bool)
        edge_alive[list(dead_e)] = False
        per_edge = []
        for mi, tol in zip(code.m, code.s_w_edges, strict=True):
            opts = []
            for r in range(tol + 1):
                for dead in itertools.combinations(range(mi), r):
                    alive = np.ones(mi, bool)
                    alive[list(dead)] = False
                    opts.append(alive)
            per_edge.append(opts)
        for combo in itertools.product(*per_edge):
            yield edge_alive, list(combo)


# ---------------------------------------------------------------------------- timing
UnitTimes = Callable[[np.random.Generator, tuple[int, int]], np.ndarray]
"""``(rng, (samples, M)) -> seconds per unit of data`` for every worker and sample."""


def shifted_exponential(shift: float = 1.0, mean: float = 1.0) -> UnitTimes:
    """Per-unit time ``shift + Exp(mean)`` (the classic gradient-coding straggler model)."""

    def draw(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
        return shift + rng.exponential(mean, shape)

    return draw


def pai_stragglers(severity: float = 1.0, prob_scale: float = 1.0) -> UnitTimes:
    """Per-unit time = the PAI-fitted slowdown factor (catalog), excess scaled by severity."""
    from .catalog import straggler_model

    model = straggler_model()

    def draw(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
        return model.sample(rng, shape[0] * shape[1], severity, prob_scale).reshape(shape)

    return draw


def _kth_smallest(x: np.ndarray, k: int) -> np.ndarray:
    """k-th smallest (1-based) along the last axis."""
    return np.partition(x, k - 1, axis=-1)[..., k - 1]


def hgc_iteration_times(
    m: Sequence[int],
    s_e: int,
    s_w: int | Sequence[int],
    unit: np.ndarray,
    speed: np.ndarray | None = None,
    loads: Sequence[float] | None = None,
    edge_comm: np.ndarray | float = 0.0,
) -> np.ndarray:
    """Monte Carlo iteration times of the hierarchical code.

    Args:
        m: workers per edge.
        s_e: tolerated straggling edges.
        s_w: tolerated straggling workers per edge (one for all, or one per edge).
        unit: (samples, M) seconds per unit of data of each worker (workers edge-major).
        speed: (M,) relative worker speeds (default 1).
        loads: per-edge worker load (default: the construction's, :func:`build_hgc`).
        edge_comm: seconds from each edge to the master: scalar, (n,) or (samples, n).

    Returns:
        (samples,) seconds per iteration: each edge waits for its ``m_i - s_w`` fastest
        workers, the master for its ``n - s_e`` fastest edges.
    """
    sws = _per_edge(s_w, len(m))
    if loads is None:
        loads = build_hgc(m, s_e, s_w).loads
    else:
        # every data point must be computed (s_e+1)(s_w+1) times for the code to tolerate
        # the stragglers, i.e. the mean load is at least the trade-off bound (with per-edge
        # tolerances, at least the smallest edge's count: a necessary condition)
        need = (s_e + 1) * (min(sws) + 1)
        have = float(np.dot(m, loads))
        if len(loads) != len(m) or have < need * (1 - 1e-9):
            raise ValueError(
                f"loads={list(loads)} violate the bound: sum_i m_i * load_i = {have:.4g} < "
                f"(s_e+1)(s_w+1) = {need} (mean load below {need / sum(m):.4g})"
            )
    speed = np.ones(sum(m)) if speed is None else np.asarray(speed, float)
    edge_t = np.empty((unit.shape[0], len(m)))
    start = 0
    for i, mi in enumerate(m):
        t = unit[:, start : start + mi] * (loads[i] / speed[start : start + mi])
        edge_t[:, i] = _kth_smallest(t, mi - sws[i])
        start += mi
    edge_t += edge_comm
    return _kth_smallest(edge_t, len(m) - s_e)


def uncoded_iteration_times(
    m: Sequence[int],
    unit: np.ndarray,
    speed: np.ndarray | None = None,
    edge_comm: np.ndarray | float = 0.0,
    balanced: bool = False,
) -> np.ndarray:
    """Uncoded aggregation: data split over all workers, everyone waited for.

    ``balanced`` splits the data in proportion to worker speed instead of equally.
    """
    total = sum(m)
    speed = np.ones(total) if speed is None else np.asarray(speed, float)
    share = speed / speed.sum() if balanced else np.full(total, 1.0 / total)
    t = unit * (share / speed)
    edge_t = np.empty((unit.shape[0], len(m)))
    start = 0
    for i, mi in enumerate(m):
        edge_t[:, i] = t[:, start : start + mi].max(axis=1)
        start += mi
    return (edge_t + edge_comm).max(axis=1)


def flat_gc_iteration_times(
    m: Sequence[int],
    s: int,
    unit: np.ndarray,
    speed: np.ndarray | None = None,
    edge_comm: np.ndarray | float = 0.0,
) -> np.ndarray:
    """Flat (one-level) cyclic gradient coding over all ``M`` workers, edges only relay.

    Each worker computes ``(s+1)/M`` of the data; the master decodes from the ``M - s``
    fastest workers (each arriving through its edge).
    """
    total = sum(m)
    if not 0 <= s < total:
        raise ValueError(f"s={s} must satisfy 0 <= s < M={total}")
    speed = np.ones(total) if speed is None else np.asarray(speed, float)
    comm = np.asarray(edge_comm, float)
    edge_of = np.repeat(np.arange(len(m)), m)
    # each worker's result crosses its edge: (samples, n) per-sample delays or (n,) / scalar
    comm = comm[:, edge_of] if comm.ndim == 2 else np.broadcast_to(comm, (len(m),))[edge_of]
    t = unit * ((s + 1) / total / speed) + comm
    return _kth_smallest(t, total - s)
