"""Choosing hierarchical gradient coding's tolerances: the greedy and JNCSS optimizers.

The codes themselves, their loads and iteration times are in :mod:`edgesched.envs.coding`;
this module searches the tolerances ``(s_e, s_w)`` that minimize the Monte Carlo expected
iteration time on given straggler samples (:func:`optimize_hgc`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .coding import _per_edge, hgc_iteration_times, partition_sizes

JNCSS_EXHAUSTIVE_MAX = 4096
"""``jncss`` scores every choice of ``(s_e, s_w[0..n-1])`` up to this many (``n x prod(m)``),
and searches by coordinate descent above it."""


@dataclass
class HGCChoice:
    """An optimizer's answer: tolerances, their expected iteration time, evaluations made."""

    s_e: int
    s_w: int | tuple[int, ...]
    expected_time: float
    evaluations: int
    weighting: str = "workers"


def optimize_hgc(
    m: Sequence[int],
    unit: np.ndarray,
    speed: np.ndarray | None = None,
    edge_comm: np.ndarray | float = 0.0,
    method: str = "greedy",
) -> HGCChoice:
    """Choose ``(s_e, s_w)`` minimizing the Monte Carlo expected iteration time.

    Loads follow from the choice through the construction, with partition sizes weighted
    either by the edges' worker counts (which meets the load bound; at ``(0, 0)`` it is plain
    uncoded aggregation with equal shares) or by their summed worker speeds (faster edges get
    more data); each candidate takes the better weighting. All candidates are scored on the
    same samples ``unit`` (common random numbers), so comparisons are not blurred by sampling
    noise.

    ``greedy`` is coordinate descent from uncoded ``(0, 0)``: it scans every ``s_e`` with
    ``s_w`` fixed and every ``s_w`` with ``s_e`` fixed, moves to the best point of both lines,
    and repeats until no line improves; each pass costs ``n + min(m)`` evaluations against
    ``n x min(m)`` for ``exhaustive``, which scores every pair. Stated bound: the greedy
    answer is never worse than uncoded (it only accepts improvements, on common samples)
    and no single tolerance can be changed to improve it (coordinate-wise optimal); it
    equals the
    exhaustive optimum whenever the expected time is unimodal along the diagonal moves it
    cannot make. Tests check it within 5% of exhaustive search on small instances.
    ``(s_w+1)`` multiplies every worker's load and waiting on fewer workers only pays under
    heavy tails, so the time is typically non-monotone in ``s_w``: a plain one-step
    neighbour search stops at uncoded.

    ``jncss`` (after the paper's joint optimization for uneven edges) gives every edge its
    own worker tolerance ``s_w[i] < m[i]`` (the answer's ``s_w`` is then a tuple): with one
    tolerance for all, an uneven cluster is held to its smallest edge's, and a large edge
    cannot wait for only its fastest workers. It runs the same coordinate descent over
    ``(s_e, s_w[0], ..., s_w[n-1])`` from the best of three starts: uncoded, the uniform
    ``greedy`` answer, and full replication ``(n-1, m_i-1)``, where every worker computes
    all the data and the master waits for the fastest worker: exactly flat coding's
    largest tolerance (:func:`flat_gc_iteration_times` with ``s = M - 1``). So the answer is
    never worse than uncoded, the uniform answer or that flat code. Where the choices number
    at most :data:`JNCSS_EXHAUSTIVE_MAX` (``n x prod(m)``: 720 on the uneven 2/3/5/6
    cluster) it scores every one instead, as the paper's optimizer returns the optimum: the
    descent moves one tolerance at a time and can stop short of an optimum that needs
    ``s_e`` and the ``s_w`` to change together (on that cluster under heavy stragglers it
    stopped at the seventh best choice, 14% slower than the best, before this search).
    """
    n, mmin = len(m), min(m)
    speed_arr = np.ones(sum(m)) if speed is None else np.asarray(speed, float)
    bounds = np.cumsum((0, *m))
    w = np.array([speed_arr[bounds[i] : bounds[i + 1]].sum() for i in range(n)])
    cache: dict[tuple, tuple[float, str]] = {}

    def score_w(se: int, sw: int | tuple[int, ...]) -> tuple[float, str]:
        if (se, sw) not in cache:
            sws = _per_edge(sw, n)
            best_w = (np.inf, "")
            for name, weights in (("workers", np.asarray(m, float)), ("speed", w)):
                p, _ = partition_sizes(m, se, weights)
                loads = [
                    (sws[i] + 1) / m[i] * float(p[(i + np.arange(se + 1)) % n].sum())
                    for i in range(n)
                ]
                t = float(hgc_iteration_times(m, se, sw, unit, speed_arr, loads, edge_comm).mean())
                best_w = min(best_w, (t, name))
            cache[(se, sw)] = best_w
        return cache[(se, sw)]

    def score(se: int, sw: int | tuple[int, ...]) -> float:
        return score_w(se, sw)[0]

    if method == "exhaustive":
        best = min(
            ((se, sw) for se in range(n) for sw in range(mmin)), key=lambda x: (score(*x), x)
        )
    elif method in ("greedy", "jncss"):
        best = (0, 0)
        while True:
            line = [(se, best[1]) for se in range(n)] + [(best[0], sw) for sw in range(mmin)]
            cand = min(line, key=lambda x: (score(*x), x))
            if score(*cand) >= score(*best):
                break
            best = cand
        if method == "jncss":
            if n * int(np.prod(m)) <= JNCSS_EXHAUSTIVE_MAX:
                best = min(
                    ((se, sws) for se in range(n) for sws in itertools.product(*map(range, m))),
                    key=lambda x: (score(*x), x),
                )
            else:
                best = _jncss_descent(m, score, best)
    else:
        raise ValueError(f"method={method!r}; use 'greedy', 'exhaustive' or 'jncss'")
    return HGCChoice(best[0], best[1], score(*best), len(cache), score_w(*best)[1])


def _jncss_descent(
    m: Sequence[int], score: Callable[[int, tuple[int, ...]], float], uniform: tuple[int, int]
) -> tuple[int, tuple[int, ...]]:
    """Coordinate descent over ``(s_e, s_w[0..n-1])`` (see :func:`optimize_hgc`, ``jncss``)."""
    n = len(m)
    starts = [
        (0, (0,) * n),
        (uniform[0], (uniform[1],) * n),
        (n - 1, tuple(mi - 1 for mi in m)),  # full replication = flat coding with s = M - 1
    ]
    best = min(starts, key=lambda x: (score(*x), x))
    while True:
        se, sws = best
        line = [(e, sws) for e in range(n)]
        for i, mi in enumerate(m):
            line += [(se, (*sws[:i], v, *sws[i + 1 :])) for v in range(mi)]
        cand = min(line, key=lambda x: (score(*x), x))
        if score(*cand) >= score(*best):
            return best
        best = cand
