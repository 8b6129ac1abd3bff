"""Aggregate statistics of the leaderboards, computed with scipy.

The estimators follow Agarwal et al., "Deep RL at the Edge of the Statistical Precipice"
(NeurIPS 2021, the ``rliable`` library): point estimates over a score matrix of shape
``(runs, strata)``, 95% percentile confidence intervals from a *stratified* bootstrap (runs are
resampled with replacement independently within each stratum) and the probability of
improvement as the Mann-Whitney U statistic normalised by ``n * m``, averaged over strata.

``rliable`` itself is not used: it installs here, but its pinned dependency ``arch<8`` fails
to import with the pandas 3 that pip resolves next to it. The same estimators come from scipy
instead: :func:`scipy.stats.trim_mean` (what ``rliable.metrics.aggregate_iqm`` calls),
:func:`scipy.stats.bootstrap` with one sample per stratum (scipy resamples each sample
independently, which *is* the stratified bootstrap) and :func:`scipy.stats.mannwhitneyu`.
Every bootstrap uses a fixed seed, so the leaderboards are reproducible byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
N_RESAMPLES = 10_000
SEED = 0


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its confidence interval (NaN bounds when it cannot be computed).

    Attributes:
        value: the statistic on the observed scores.
        low: lower bound of the confidence interval.
        high: upper bound of the confidence interval.
    """

    value: float
    low: float
    high: float


def _flat(strata: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
    if isinstance(strata, np.ndarray):
        return strata.astype(np.float64).ravel()
    return np.concatenate([np.asarray(s, np.float64).ravel() for s in strata])


def aggregate_mean(scores: Sequence[np.ndarray] | np.ndarray) -> float:
    """Mean over every score of every stratum."""
    return float(np.mean(_flat(scores)))


def iqm(scores: Sequence[np.ndarray] | np.ndarray) -> float:
    """Interquartile mean: the mean of the middle 50% of all scores.

    ``scipy.stats.trim_mean(x, 0.25)`` semantics (also rliable's ``aggregate_iqm``):
    ``int(0.25 * n)`` scores are cut from each end of the sorted scores.
    """
    return float(stats.trim_mean(_flat(scores), 0.25))


def _mean_stat(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.concatenate(samples, axis=axis).mean(axis=axis)


def _iqm_stat(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
    return stats.trim_mean(np.concatenate(samples, axis=axis), 0.25, axis=axis)


STATISTICS: dict[str, tuple[Callable[..., float], Callable[..., np.ndarray]]] = {
    "mean": (aggregate_mean, _mean_stat),
    "iqm": (iqm, _iqm_stat),
}


def _percentile_ci(
    value: float,
    data: tuple[np.ndarray, ...],
    statistic: Callable[..., np.ndarray],
    paired: bool,
    confidence: float,
    n_resamples: int,
    seed: int,
) -> Estimate:
    """``value`` with scipy's seeded, vectorized percentile-bootstrap interval of ``statistic``."""
    ci = stats.bootstrap(
        data,
        statistic,
        n_resamples=n_resamples,
        vectorized=True,
        paired=paired,
        axis=-1,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    ).confidence_interval
    return Estimate(value, float(ci.low), float(ci.high))


def stratified_bootstrap(
    strata: Sequence[np.ndarray],
    statistic: str = "mean",
    *,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> Estimate:
    """Point estimate and stratified-bootstrap percentile CI of ``statistic``.

    Args:
        strata: one 1-D array of run scores per stratum; every bootstrap replicate resamples
            each stratum's runs with replacement, independently of the other strata, and
            applies the statistic to all resampled scores together.
        statistic: ``mean`` or ``iqm``.
        confidence: confidence level of the interval.
        n_resamples: bootstrap replicates.
        seed: seed of the bootstrap's generator (fixed: reproducible intervals).

    Returns:
        The estimate; the interval is NaN when a stratum holds fewer than two runs.
    """
    point, vectorized = STATISTICS[statistic]
    data = tuple(np.asarray(s, np.float64).ravel() for s in strata)
    value = point(data)
    if not data or min(len(s) for s in data) < 2:
        return Estimate(value, float("nan"), float("nan"))
    return _percentile_ci(value, data, vectorized, False, confidence, n_resamples, seed)


def _paired(
    name: str,
    x: np.ndarray,
    y: np.ndarray,
    statistic: Callable[..., np.ndarray],
    confidence: float,
    n_resamples: int,
    seed: int,
) -> Estimate:
    """``statistic(x, y)`` with a bootstrap CI that resamples the (x, y) pairs together."""
    x = np.asarray(x, np.float64).ravel()
    y = np.asarray(y, np.float64).ravel()
    if len(x) != len(y):
        raise ValueError(f"{name} needs paired samples, got {len(x)} and {len(y)}")
    value = float(statistic(x, y))
    if len(x) < 2:
        return Estimate(value, float("nan"), float("nan"))
    return _percentile_ci(value, (x, y), statistic, True, confidence, n_resamples, seed)


def _reduction_stat(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return 1.0 - x.mean(axis=axis) / y.mean(axis=axis)


def relative_reduction(
    x: np.ndarray,
    y: np.ndarray,
    *,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> Estimate:
    """``1 - mean(x) / mean(y)`` (how much lower X's cost is than Y's) with a paired CI.

    Args:
        x: (S,) X's score on each evaluation seed (a learned entry's mean over its
            training seeds).
        y: (S,) Y's score on the same seeds, in the same order.
        confidence: confidence level of the interval.
        n_resamples: bootstrap replicates.
        seed: seed of the bootstrap's generator.

    Returns:
        The estimate with a percentile bootstrap CI that resamples evaluation seeds *paired*
        (``scipy.stats.bootstrap(paired=True)``): both entries ran the same workloads, so the
        workload-to-workload spread, which dominates each entry's own interval, cancels.
        The interval is NaN below two seeds.

    Raises:
        ValueError: ``x`` and ``y`` differ in length.
    """
    return _paired("relative_reduction", x, y, _reduction_stat, confidence, n_resamples, seed)


def _counts(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """(size, n) how often each of ``n`` items is drawn in each of ``size`` resamples of n."""
    draws = rng.integers(0, n, size=(size, n))
    return (draws[:, :, None] == np.arange(n)).sum(axis=1).astype(np.float64)


def relative_reduction_runs(
    x: np.ndarray,
    y: np.ndarray,
    *,
    same_runs: bool = False,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> Estimate:
    """``1 - mean(x) / mean(y)`` over (runs, seeds) score matrices, training runs resampled too.

    :func:`relative_reduction` compares two entries' per-seed means: it resamples the
    evaluation seeds (paired) but holds each entry's training runs fixed, so its interval
    speaks of these trained policies, not of the algorithms that trained them; with three
    training seeds that spread can be most of the uncertainty (an audit found budget-study
    gains whose paired interval excluded zero only while the runs were held fixed). Here each
    resample draws the evaluation seeds with replacement, the same ones for both sides, and
    each side's training runs with replacement, one draw per run for all seeds (a run is one
    trained policy, evaluated on every seed: good or bad on all of them together), and takes
    the percentile interval of the statistic over the resamples. With one run on both sides
    (two heuristics) it is :func:`relative_reduction`. Two sides that hold the same trained
    policies (``same_runs``: the same runs evaluated under two sets of rules, row ``t`` of
    both the same policy) draw the same runs.

    Args:
        x: (Tx, S) X's score of each training run on each evaluation seed (a heuristic: one
            row).
        y: (Ty, S) Y's scores on the same seeds, in the same order.
        same_runs: row ``t`` of ``x`` and of ``y`` is one trained policy (Tx == Ty).
        confidence: confidence level of the interval.
        n_resamples: bootstrap replicates.
        seed: seed of the bootstrap's generator.

    Returns:
        The estimate (the ratio of the two entries' overall means) with its interval, NaN
        below two evaluation seeds.

    Raises:
        ValueError: the two matrices do not have the same evaluation seeds (columns), or
            ``same_runs`` with other numbers of runs.
    """
    x = np.atleast_2d(np.asarray(x, np.float64))
    y = np.atleast_2d(np.asarray(y, np.float64))
    if x.shape[1] != y.shape[1]:
        raise ValueError(
            f"relative_reduction_runs needs the same evaluation seeds, got {x.shape[1]} "
            f"and {y.shape[1]} columns"
        )
    if same_runs and len(x) != len(y):
        raise ValueError(
            f"relative_reduction_runs(same_runs=True) needs the same runs, got {len(x)} and "
            f"{len(y)} rows"
        )
    if len(x) == 1 and len(y) == 1:
        return relative_reduction(
            x[0], y[0], confidence=confidence, n_resamples=n_resamples, seed=seed
        )
    value = float(1.0 - x.mean() / y.mean())
    n_seeds = x.shape[1]
    if n_seeds < 2:
        return Estimate(value, float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    seeds = _counts(rng, n_seeds, n_resamples)  # (R, S)
    means = []
    shared = _counts(rng, len(x), n_resamples) if same_runs else None
    for m in (x, y):
        runs = shared if shared is not None else _counts(rng, len(m), n_resamples)  # (R, T)
        means.append(np.einsum("rt,ts,rs->r", runs, m, seeds) / m.size)
    boot = 1.0 - means[0] / means[1]
    tail = 50.0 * (1.0 - confidence)
    low, high = np.percentile(boot, [tail, 100.0 - tail])
    return Estimate(value, float(low), float(high))


def _difference_stat(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return x.mean(axis=axis) - y.mean(axis=axis)


def paired_difference(
    x: np.ndarray,
    y: np.ndarray,
    *,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> Estimate:
    """``mean(x) - mean(y)`` with a CI that resamples evaluation seeds paired.

    For scores that are not a positive cost, where a relative reduction means nothing (RLPTO's
    cluster reward is negative and higher is better).

    Args:
        x: (S,) X's score on each evaluation seed.
        y: (S,) Y's score on the same seeds, in the same order.
        confidence: confidence level of the interval.
        n_resamples: bootstrap replicates.
        seed: seed of the bootstrap's generator.

    Returns:
        The difference with a paired percentile bootstrap CI (NaN below two seeds).

    Raises:
        ValueError: ``x`` and ``y`` differ in length.
    """
    return _paired("paired_difference", x, y, _difference_stat, confidence, n_resamples, seed)


def probability_of_improvement(
    x_strata: Sequence[np.ndarray], y_strata: Sequence[np.ndarray]
) -> float:
    """P(X > Y): a run of X scores higher than a run of Y on the same stratum.

    Per stratum, the Mann-Whitney U statistic of X against Y divided by ``n * m`` (the
    fraction of run pairs where X wins, ties counting one half); averaged over strata
    (rliable's ``probability_of_improvement`` with strata as tasks). Higher scores are
    better: pass negated costs such as JCT.
    """
    if len(x_strata) != len(y_strata) or not x_strata:
        raise ValueError("probability_of_improvement needs the same, non-empty list of strata")
    per = []
    for x, y in zip(x_strata, y_strata, strict=True):
        x = np.asarray(x, np.float64).ravel()
        y = np.asarray(y, np.float64).ravel()
        u = stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic").statistic
        per.append(float(u) / (len(x) * len(y)))
    return float(np.mean(per))


def normalized_score(jct_algo: float, jct_random: float, jct_bound: float) -> float:
    """(JCT_random - JCT_algo) / (JCT_random - JCT_bound): 0 = random, 1 = the lower bound."""
    denom = jct_random - jct_bound
    if not np.isfinite(denom) or denom <= 0:
        return float("nan")
    return float((jct_random - jct_algo) / denom)


__all__ = [
    "CONFIDENCE",
    "N_RESAMPLES",
    "SEED",
    "Estimate",
    "aggregate_mean",
    "iqm",
    "normalized_score",
    "probability_of_improvement",
    "relative_reduction_runs",
    "stratified_bootstrap",
]
