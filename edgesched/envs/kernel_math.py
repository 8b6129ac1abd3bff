"""Compiled numeric helpers of the measured co-location rule (numba), numpy's to the bit.

:func:`np_sum` and :func:`interp1` reproduce ``np.sum``'s pairwise summation and
``np.interp``'s formula inside compiled code, so that the compiled rule
(:mod:`~edgesched.envs.node_kernel`) gives exactly what its plain-Python reference
(:func:`~edgesched.envs.sharing.node_outcome`, which calls numpy) gives.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit


def compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``numba.njit`` with the on-disk cache, or without it where no cache can be written.

    numba caches next to the source (``__pycache__``) or in the user's cache directory
    (``NUMBA_CACHE_DIR`` overrides both); where neither is writable it refuses to cache at
    decoration time, and the rule is then compiled in memory once per process instead.
    """
    try:
        return njit(cache=True)(fn)
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        return njit(fn)


@compiled
def _block_sum(a: np.ndarray, s: int, n: int) -> float:  # pragma: no cover - compiled
    """The pairwise summation numpy gives ``a[s:s + n]`` for ``n <= 128`` (one unrolled block)."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[s + i]
        return res
    r0, r1, r2, r3 = a[s], a[s + 1], a[s + 2], a[s + 3]
    r4, r5, r6, r7 = a[s + 4], a[s + 5], a[s + 6], a[s + 7]
    i = 8
    stop = n - (n % 8)
    while i < stop:
        r0 += a[s + i]
        r1 += a[s + i + 1]
        r2 += a[s + i + 2]
        r3 += a[s + i + 3]
        r4 += a[s + i + 4]
        r5 += a[s + i + 5]
        r6 += a[s + i + 6]
        r7 += a[s + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[s + i]
        i += 1
    return res


@compiled
def np_sum(a: np.ndarray) -> float:  # pragma: no cover - compiled
    """``float(np.sum(a))`` of a 1-D float64 array, bit for bit.

    numpy's ``DOUBLE_pairwise_sum``: blocks of at most 128 summed by :func:`_block_sum`,
    longer runs split in two (the first half a multiple of 8) and the halves added; the
    reduction starts at 0. The split tree is walked with an explicit stack: a
    self-recursive function loaded from numba's cache crashed the process (numba 0.68).
    """
    n = a.shape[0]
    if n <= 128:
        return 0.0 + _block_sum(a, 0, n)
    # frames (start, length, children done); depth <= log2(n) levels of 2 frames each
    st_s = np.empty(130, dtype=np.int64)
    st_n = np.empty(130, dtype=np.int64)
    st_done = np.zeros(130, dtype=np.bool_)
    vals = np.empty(66)
    top, nv = 1, 0
    st_s[0], st_n[0], st_done[0] = 0, n, False
    while top > 0:
        top -= 1
        s, m, done = st_s[top], st_n[top], st_done[top]
        if m <= 128:
            vals[nv] = _block_sum(a, s, m)
            nv += 1
        elif done:
            vals[nv - 2] = vals[nv - 2] + vals[nv - 1]
            nv -= 1
        else:
            n2 = m // 2
            n2 -= n2 % 8
            st_s[top], st_n[top], st_done[top] = s, m, True  # combine after both halves
            st_s[top + 1], st_n[top + 1], st_done[top + 1] = s + n2, m - n2, False
            st_s[top + 2], st_n[top + 2], st_done[top + 2] = s, n2, False  # first half first
            top += 3
    return 0.0 + vals[0]


@compiled
def interp1(x: float, xp: np.ndarray, fp: np.ndarray, n: int) -> float:  # pragma: no cover
    """``np.interp(x, xp[:n], fp[:n])`` for one point, bit for bit (numpy's arr_interp)."""
    if x < xp[0]:
        return fp[0]
    if x >= xp[n - 1]:
        return fp[n - 1]
    lo, hi = 0, n - 1  # xp[lo] <= x < xp[hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if xp[mid] <= x:
            lo = mid
        else:
            hi = mid
    j = lo
    if xp[j] == x:
        return fp[j]
    slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j])
    res = slope * (x - xp[j]) + fp[j]
    if math.isnan(res):
        res = slope * (x - xp[j + 1]) + fp[j + 1]
        if math.isnan(res) and fp[j] == fp[j + 1]:
            res = fp[j]
    return res
