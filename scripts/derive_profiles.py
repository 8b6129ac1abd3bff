#!/usr/bin/env python3
"""Derive edgesched's job/cluster profile table from real, public measurements.

Reads the read-only data under ``--data-dir`` (default ``<repo>/../shared/data``) and writes
``edgesched/envs/data/profiles.json``: a small table of *figures* fitted from

* Pollux (Qiao et al., OSDI'21) traces: per-model step time vs batch size and GPU placement on
  AWS g4dn.12xlarge (4x T4 per node), and validation metric vs iteration per batch size;
* Gavel (Narayanan et al., OSDI'20) ``simulation_throughputs.json``: steps/s of many models on
  K80/P100/V100 at 1/2/4/8 GPUs, alone and space-shared;
* Alibaba PAI GPU trace v2020 (Weng et al., NSDI'22; mini-batch data from Xiao et al., AntMan,
  OSDI'20): per-worker mini-batch times of distributed jobs (stragglers).

No data file is copied; only fitted numbers are written, with citations.

Usage::

    python scripts/derive_profiles.py                 # (re)write the JSON
    python scripts/derive_profiles.py --check         # exit 1 if the committed JSON is stale

The script is deterministic: no random numbers, fixed grids and fixed-iteration searches, and
every float is rounded to 6 significant digits before writing.

Only numpy and the standard library are used (no scipy, no pandas) so that the derivation runs
with the simulator's own runtime dependencies.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = REPO_ROOT / ".." / "shared" / "data"
DEFAULT_OUT = REPO_ROOT / "edgesched" / "envs" / "data" / "profiles.json"

SCHEMA_VERSION = 1
GENERATED_BY = "scripts/derive_profiles.py"
SIG_DIGITS = 6
CHECK_RTOL = 1e-9

POLLUX_MODELS: tuple[str, ...] = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")

CITATIONS: dict[str, str] = {
    "pollux": (
        "Qiao et al., Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep "
        "Learning, OSDI'21; github.com/petuum/adaptdl osdi21-artifact "
        "c793c7089bd307462686339d29707925c461f9a9 simulator/traces/<model>/"
        "{placements,scalability,validation-<bsz>}.csv (Apache-2.0); measured on AWS "
        "g4dn.12xlarge (4x T4 per node)"
    ),
    "gavel": (
        "Narayanan et al., Heterogeneity-Aware Cluster Scheduling Policies for Deep Learning "
        "Workloads (Gavel), OSDI'20; github.com/stanford-futuredata/gavel "
        "c4fa40097339e9608ab71fd64c8bdea96a5e4a4c scheduler/simulation_throughputs.json (MIT)"
    ),
    "alibaba_pai": (
        "Weng et al., MLaaS in the Wild: Workload Analysis and Scheduling in Large-Scale "
        "Heterogeneous GPU Clusters, NSDI'22; mini-batch data from Xiao et al., AntMan, "
        "OSDI'20; github.com/alibaba/clusterdata 7a6c496e4f4b6ce6150be8f881cb051bf2abff42 "
        "cluster-trace-gpu-v2020/mini-batch-time/data/{job_1..4_norm,coefficient_variation}.csv "
        "(CC BY 4.0)"
    ),
}

# Metric semantics per Pollux model. Direction is *inferred* from the data (first vs last row of
# the smallest-batch validation file, exactly as Pollux's simulator does in applications.py);
# these names only document what the number is. Names follow the Pollux paper's workload table
# where we are confident; otherwise we say "as recorded by Pollux".
METRIC_NAMES: dict[str, str] = {
    "bert": "SQuAD F1 (%), as recorded by Pollux",
    "cifar10": "top-1 validation accuracy (fraction), as recorded by Pollux",
    "deepspeech2": "word error rate (%), as recorded by Pollux",
    "imagenet": "top-1 validation accuracy (fraction), as recorded by Pollux",
    "ncf": "hit rate (fraction), as recorded by Pollux",
    "yolov3": "validation loss, as recorded by Pollux",
}

# Grids for the convergence-curve fit q(x) = 1 - exp(-(x/tau)^k).
CONV_K_MIN, CONV_K_MAX, CONV_K_STEP = 0.2, 3.0, 0.01
CONV_TAU_GRID_POINTS = 2001
GOLDEN_ITERS = 80

# A per-time median over fewer workers than this is not a meaningful "typical worker" (with one
# worker r == 1 by construction), so such time steps are skipped for the straggler ratio.
MIN_WORKERS_FOR_RATIO = 3


class DataError(ValueError):
    """Raised when an input file is missing or malformed; the message names file and line."""


# --------------------------------------------------------------------------------------------
# Small numeric helpers
# --------------------------------------------------------------------------------------------


def round_sig(x: float, digits: int = SIG_DIGITS) -> float:
    """Round a float to a number of significant digits.

    Args:
        x: Value to round.
        digits: Significant digits to keep.

    Returns:
        The rounded value (0.0 stays 0.0; non-finite values are rejected).

    Raises:
        ValueError: If ``x`` is NaN or infinite, since JSON cannot carry it portably.
    """
    if not math.isfinite(x):
        raise ValueError(f"non-finite value {x!r} cannot be written to the profile table")
    if x == 0.0:
        return 0.0
    return float(f"{x:.{digits}g}")


def round_tree(obj: Any) -> Any:
    """Recursively round every float in a JSON-like tree to ``SIG_DIGITS`` digits.

    Args:
        obj: Nested dicts/lists of JSON scalars.

    Returns:
        A copy with floats rounded; ints, bools and strings unchanged.
    """
    if isinstance(obj, dict):
        return {k: round_tree(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [round_tree(v) for v in obj]
    # bool is a subclass of int, and neither must be touched.
    if isinstance(obj, float):
        return round_sig(obj)
    return obj


def golden_min(
    f: Callable[[float], float], lo: float, hi: float, iters: int = GOLDEN_ITERS
) -> float:
    """Minimise a unimodal 1-D function on ``[lo, hi]`` by golden-section search.

    A fixed iteration count (not a tolerance) keeps the result bit-for-bit deterministic.

    Args:
        f: Function to minimise.
        lo: Lower bound.
        hi: Upper bound.
        iters: Number of golden-section iterations.

    Returns:
        The abscissa of the best point evaluated (including the bounds).
    """
    inv_phi = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = lo, hi
    c = b - inv_phi * (b - a)
    d = a + inv_phi * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - inv_phi * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + inv_phi * (b - a)
            fd = f(d)
    # Compare against the bracket ends too: the optimum may sit on a bound.
    candidates = [(fc, c), (fd, d), (f(lo), lo), (f(hi), hi)]
    return min(candidates)[1]


def linfit(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Ordinary least-squares line ``y = a*x + b``.

    Args:
        x: Abscissae (at least two distinct values).
        y: Ordinates.

    Returns:
        ``(slope, intercept, r2)``; r2 is 1.0 when ``y`` has no variance.
    """
    xm, ym = float(x.mean()), float(y.mean())
    sxx = float(((x - xm) ** 2).sum())
    if sxx <= 0.0:
        raise ValueError("linear fit needs at least two distinct x values")
    slope = float(((x - xm) * (y - ym)).sum()) / sxx
    intercept = ym - slope * xm
    resid = y - (slope * x + intercept)
    sst = float(((y - ym) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / sst if sst > 0.0 else 1.0
    return slope, intercept, r2


def ks_distance(sorted_x: np.ndarray, cdf: Callable[[np.ndarray], np.ndarray]) -> float:
    """Kolmogorov-Smirnov distance between an empirical sample and a model CDF.

    Ties are handled by comparing the model CDF with both the left and right limits of the
    empirical CDF at each distinct value (the mini-batch times are integers, so ties are common).

    Args:
        sorted_x: Sample sorted ascending.
        cdf: Vectorised model CDF.

    Returns:
        sup |F_n - F|.
    """
    n = sorted_x.size
    values, counts = np.unique(sorted_x, return_counts=True)
    right = np.cumsum(counts) / n
    left = right - counts / n
    f = cdf(values)
    return float(max(np.abs(f - right).max(), np.abs(f - left).max()))


# --------------------------------------------------------------------------------------------
# Input readers with file:line error messages
# --------------------------------------------------------------------------------------------


def _require_file(path: Path) -> None:
    if not path.is_file():
        raise DataError(f"{path}: required input file not found")


def read_csv_table(path: Path, required: Sequence[str]) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield ``(line_number, row)`` for a headered CSV, validating its columns.

    Args:
        path: CSV file.
        required: Column names that must be present in the header.

    Yields:
        1-based line number (header is line 1) and the row as a dict.

    Raises:
        DataError: If the file is missing, a column is missing, or a row has the wrong width.
    """
    _require_file(path)
    with path.open(newline="") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise DataError(f"{path}:1: empty file, expected a header") from None
        missing = [c for c in required if c not in header]
        if missing:
            raise DataError(f"{path}:1: missing column(s) {missing}; header is {header}")
        for row in reader:
            lineno = reader.line_num
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise DataError(
                    f"{path}:{lineno}: expected {len(header)} fields, got {len(row)}: {row}"
                )
            yield lineno, dict(zip(header, row, strict=True))


def parse_float(text: str, path: Path, lineno: int, column: str, positive: bool = False) -> float:
    """Parse a finite float from a CSV cell, naming the file and line on failure.

    Args:
        text: Cell text.
        path: File the cell came from (for the error message).
        lineno: 1-based line number.
        column: Column name.
        positive: Require a strictly positive value.

    Returns:
        The parsed value.

    Raises:
        DataError: If the cell is not a finite number (or not positive when required).
    """
    try:
        value = float(text)
    except ValueError:
        raise DataError(f"{path}:{lineno}: column {column!r}: not a number: {text!r}") from None
    if not math.isfinite(value):
        raise DataError(f"{path}:{lineno}: column {column!r}: non-finite value {text!r}")
    if positive and value <= 0.0:
        raise DataError(f"{path}:{lineno}: column {column!r}: expected > 0, got {text!r}")
    return value


def parse_int(text: str, path: Path, lineno: int, column: str) -> int:
    """Parse an integer CSV cell (``"12"`` or ``"12.0"``), naming file and line on failure.

    Args:
        text: Cell text.
        path: Source file.
        lineno: 1-based line number.
        column: Column name.

    Returns:
        The integer value.

    Raises:
        DataError: If the cell is not an integer.
    """
    value = parse_float(text, path, lineno, column)
    if value != int(value):
        raise DataError(f"{path}:{lineno}: column {column!r}: expected an integer, got {text!r}")
    return int(value)


# --------------------------------------------------------------------------------------------
# Pollux: throughput vs placement, and convergence
# --------------------------------------------------------------------------------------------


def load_placements(path: Path) -> dict[str, dict[int, float]]:
    """Read ``placements.csv`` into ``{placement: {local_bsz: mean step_time}}``.

    The placement string lists GPUs per node (e.g. "13" = one node with 1 GPU and one with 3;
    this is how Pollux's simulator parses it: num_nodes = len, num_replicas = digit sum).

    Args:
        path: ``placements.csv`` of one model.

    Returns:
        Mean step time (s) per placement and local batch size (repeats averaged).

    Raises:
        DataError: On malformed rows or placement strings.
    """
    acc: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for lineno, row in read_csv_table(path, ("placement", "local_bsz", "step_time", "sync_time")):
        placement = row["placement"].strip()
        if not placement.isdigit() or "0" in placement:
            raise DataError(
                f"{path}:{lineno}: placement {placement!r} is not a string of GPU counts 1-9"
            )
        bsz = parse_int(row["local_bsz"], path, lineno, "local_bsz")
        if bsz <= 0:
            raise DataError(f"{path}:{lineno}: local_bsz must be positive, got {bsz}")
        step = parse_float(row["step_time"], path, lineno, "step_time", positive=True)
        parse_float(row["sync_time"], path, lineno, "sync_time")
        acc[placement][bsz].append(step)
    if "1" not in acc:
        raise DataError(f"{path}: no rows with placement '1' (single GPU)")
    return {p: {b: float(np.mean(v)) for b, v in d.items()} for p, d in acc.items()}


def fit_gpu_alpha(
    placements: dict[str, dict[int, float]], local_bsz: int
) -> tuple[float, float, list[tuple[int, float]]]:
    """Fit throughput(g GPUs in one node) ∝ g^alpha on log-log axes.

    Uses only single-digit placements ("1".."4": one node with g GPUs) so that the exponent
    captures intra-node scaling without network effects (those are in ``sync_*``).

    Args:
        placements: Output of :func:`load_placements`.
        local_bsz: Per-GPU batch size to evaluate at; if a placement was not measured at it, the
            closest measured local_bsz (ties broken toward the smaller) is used.

    Returns:
        ``(alpha_clipped, r2, points)`` with points ``[(g, samples_per_s)]``.
    """
    points: list[tuple[int, float]] = []
    for placement in sorted(p for p in placements if len(p) == 1):
        g = int(placement)
        by_bsz = placements[placement]
        bsz = min(by_bsz, key=lambda b: (abs(b - local_bsz), b))
        points.append((g, g * bsz / by_bsz[bsz]))
    if len(points) < 2:
        raise ValueError("need at least two single-node placements to fit gpu_alpha")
    x = np.log([p[0] for p in points])
    y = np.log([p[1] for p in points])
    alpha, _, r2 = linfit(x, y)
    return float(np.clip(alpha, 0.05, 1.0)), r2, points


def scalability_stats(path: Path) -> tuple[float, float]:
    """Median sync time and median sync/step fraction over multi-node rows.

    Args:
        path: ``scalability.csv`` of one model.

    Returns:
        ``(median sync_time [s], median sync_time/step_time)``.
    """
    sync, frac = [], []
    for lineno, row in read_csv_table(
        path, ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")
    ):
        step = parse_float(row["step_time"], path, lineno, "step_time", positive=True)
        s = parse_float(row["sync_time"], path, lineno, "sync_time")
        if s < 0.0:
            raise DataError(f"{path}:{lineno}: negative sync_time {s}")
        sync.append(s)
        frac.append(s / step)
    if not sync:
        raise DataError(f"{path}: no data rows")
    return float(np.median(sync)), float(np.median(frac))


def load_validation(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read a Pollux ``validation-<bsz>.csv``.

    Args:
        path: Validation file.

    Returns:
        ``(iteration, metric)`` arrays in file order.
    """
    it, metric = [], []
    for lineno, row in read_csv_table(path, ("iteration", "metric")):
        it.append(parse_float(row["iteration"], path, lineno, "iteration"))
        metric.append(parse_float(row["metric"], path, lineno, "metric"))
    if len(it) < 2:
        raise DataError(f"{path}: need at least 2 validation rows, found {len(it)}")
    arr = np.asarray(it)
    if np.any(np.diff(arr) <= 0):
        raise DataError(f"{path}: iteration column is not strictly increasing")
    return arr, np.asarray(metric)


def fit_convergence(x: np.ndarray, q: np.ndarray) -> tuple[float, float, float]:
    """Fit ``q(x) = 1 - exp(-(x/tau)^k)`` by least squares.

    k is searched on a fixed grid over [0.2, 3]; for each k, tau is searched on a fixed log grid
    and the best (k, tau) is then polished by golden-section search (tau for each nearby k).
    Grid + golden section instead of a gradient method keeps the result deterministic and
    robust to the flat/degenerate objectives of very short curves (BERT has 2 points).

    Args:
        x: Samples processed (> 0).
        q: Observed normalised quality in [0, 1].

    Returns:
        ``(tau, k, r2)``; r2 is computed on ``q``.
    """
    logx = np.log(x)
    log_tau_grid = np.linspace(
        logx.min() - math.log(100.0), logx.max() + math.log(100.0), CONV_TAU_GRID_POINTS
    )
    k_grid = np.round(np.arange(CONV_K_MIN, CONV_K_MAX + 1e-9, CONV_K_STEP), 10)

    def sse(k: float, log_tau: float) -> float:
        pred = 1.0 - np.exp(-np.exp(k * (logx - log_tau)))
        return float(((pred - q) ** 2).sum())

    best = (math.inf, 0.0, 0.0)
    for k in k_grid:
        # (n_tau, n_x) matrix of predictions for this k.
        pred = 1.0 - np.exp(-np.exp(k * (logx[None, :] - log_tau_grid[:, None])))
        errs = ((pred - q[None, :]) ** 2).sum(axis=1)
        i = int(np.argmin(errs))
        if errs[i] < best[0]:
            best = (float(errs[i]), float(k), float(log_tau_grid[i]))
    _, k0, lt0 = best
    dlt = float(log_tau_grid[1] - log_tau_grid[0])

    def profile(k: float) -> tuple[float, float]:
        lt = golden_min(lambda t: sse(k, t), lt0 - 2 * dlt, lt0 + 2 * dlt)
        return sse(k, lt), lt

    k_lo = max(CONV_K_MIN, k0 - CONV_K_STEP)
    k_hi = min(CONV_K_MAX, k0 + CONV_K_STEP)
    k_best = golden_min(lambda k: profile(k)[0], k_lo, k_hi)
    err, lt_best = profile(k_best)
    # Never return something worse than the grid optimum.
    if err > best[0]:
        err, k_best, lt_best = best
    sst = float(((q - q.mean()) ** 2).sum())
    r2 = 1.0 - err / sst if sst > 0.0 else 1.0
    return math.exp(lt_best), k_best, r2


def derive_pollux_model(trace_dir: Path) -> dict[str, Any]:
    """Derive one model's profile from its Pollux trace folder.

    Args:
        trace_dir: ``pollux-osdi21/traces/<model>``.

    Returns:
        The ``models[<name>]`` entry of the profile table.
    """
    placements_path = trace_dir / "placements.csv"
    placements = load_placements(placements_path)

    # A mid-range per-GPU batch: the (low) median of the distinct local_bsz measured on 1 GPU.
    # median_low keeps it a *measured* value when the count is even (imagenet has 8 sizes).
    one_gpu = placements["1"]
    local_bsz = int(statistics.median_low(sorted(one_gpu)))
    step_1 = one_gpu[local_bsz]
    alpha, alpha_r2, _ = fit_gpu_alpha(placements, local_bsz)
    sync_ref, sync_frac = scalability_stats(trace_dir / "scalability.csv")

    # Convergence: the smallest-batch validation file (statistically most efficient per sample,
    # and the one Pollux uses to decide metric direction).
    vfiles: dict[int, Path] = {}
    for p in trace_dir.glob("validation-*.csv"):
        stem = p.stem.split("-", 1)[1]
        if not stem.isdigit():
            raise DataError(f"{p}: cannot parse batch size from file name")
        vfiles[int(stem)] = p
    if not vfiles:
        raise DataError(f"{trace_dir}: no validation-<bsz>.csv files")
    conv_bsz = min(vfiles)
    iters, metric = load_validation(vfiles[conv_bsz])
    higher_better = bool(metric[-1] > metric[0])
    m_start = float(metric[0])
    m_best = float(metric.max() if higher_better else metric.min())
    if m_best == m_start:
        raise DataError(f"{vfiles[conv_bsz]}: metric never improves on its first value")
    # (metric - start)/(best - start) is direction-agnostic: both numerator and denominator flip
    # sign together for lower-is-better metrics. cummax makes "quality reached so far" monotone,
    # i.e. what a checkpoint-keeping trainer would have.
    q_obs = np.maximum.accumulate((metric - m_start) / (m_best - m_start))
    x = iters * conv_bsz
    tau, k, conv_r2 = fit_convergence(x, q_obs)
    samples_q90 = tau * math.log(10.0) ** (1.0 / k)

    return {
        "local_bsz": local_bsz,
        "step_time_1gpu": step_1,
        "base_tput": local_bsz / step_1,
        "gpu_alpha": alpha,
        "gpu_alpha_r2": alpha_r2,
        "sync_time_ref": sync_ref,
        "sync_fraction": sync_frac,
        "metric": METRIC_NAMES.get(trace_dir.name, "as recorded by Pollux"),
        "metric_higher_is_better": higher_better,
        "metric_start": m_start,
        "metric_best": m_best,
        "conv_bsz": conv_bsz,
        "conv_tau": tau,
        "conv_k": k,
        "conv_r2": conv_r2,
        "samples_to_q90": samples_q90,
    }


# --------------------------------------------------------------------------------------------
# Gavel: accelerator tiers, multi-GPU scaling, co-location
# --------------------------------------------------------------------------------------------


def load_gavel(path: Path) -> dict[str, dict[tuple[str, int], dict[str, Any]]]:
    """Load ``simulation_throughputs.json`` with parsed ``(model, scale_factor)`` keys.

    Args:
        path: The JSON file.

    Returns:
        ``{gpu_type: {(model, scale): entry}}`` where entry has ``"null"`` (isolated steps/s)
        and string keys of co-located partners mapping to ``[tput_this, tput_other]``.

    Raises:
        DataError: If the file is missing, not JSON, or a key/value is malformed.
    """
    _require_file(path)
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    out: dict[str, dict[tuple[str, int], dict[str, Any]]] = {}
    for gpu, table in raw.items():
        parsed: dict[tuple[str, int], dict[str, Any]] = {}
        for key, entry in table.items():
            try:
                model, scale = ast.literal_eval(key)
                scale = int(scale)
                iso = float(entry["null"])
            except (ValueError, SyntaxError, TypeError, KeyError):
                raise DataError(f"{path}: [{gpu}][{key}]: malformed job key or entry") from None
            if not math.isfinite(iso) or iso < 0.0:
                raise DataError(f"{path}: [{gpu}][{key}]['null']: bad throughput {iso!r}")
            parsed[(str(model), scale)] = entry
        out[gpu] = parsed
    for gpu in ("k80", "p100", "v100"):
        if gpu not in out:
            raise DataError(f"{path}: missing GPU type {gpu!r}")
    return out


def gavel_tier_speed(gavel: dict[str, dict[tuple[str, int], dict[str, Any]]]) -> dict[str, float]:
    """Geometric-mean isolated 1-GPU speed of each tier relative to K80.

    Args:
        gavel: Output of :func:`load_gavel`.

    Returns:
        ``{"k80": 1.0, "p100": ..., "v100": ...}`` over models measured (> 0) on all three.
    """
    tiers = ("k80", "p100", "v100")
    models = sorted(
        m
        for (m, s) in gavel["k80"]
        if s == 1 and all(float(gavel[t].get((m, 1), {}).get("null", 0.0)) > 0.0 for t in tiers)
    )
    if not models:
        raise ValueError("no model measured on all of k80/p100/v100")
    out = {}
    for t in tiers:
        logs = [
            math.log(float(gavel[t][(m, 1)]["null"]) / float(gavel["k80"][(m, 1)]["null"]))
            for m in models
        ]
        out[t] = math.exp(float(np.mean(logs)))
    return out


def gavel_multi_gpu_alpha(
    gavel: dict[str, dict[tuple[str, int], dict[str, Any]]], gpu: str
) -> tuple[float, float, int]:
    """Fit aggregate steps/s ∝ s^alpha across models (per-model intercepts).

    Gavel's convention (read from scheduler.py at the cited commit): a job with scale_factor s
    runs s data-parallel workers; in ``_done_callback`` the steps reported by all workers are
    *summed* (``all_num_steps[j] += ...``), and ``num_steps = throughput * time``. So the recorded
    throughput at scale s is aggregate worker-steps/s, each worker step consuming one batch of
    the batch size in the model name (per-worker batch; global batch = s * B). Hence
    samples/s = tput * B and per-worker steps/s = tput / s. The data agree: on K80, ResNet-50
    (bs 16) goes 2.30 -> 4.30 -> 7.70 -> 15.1 steps/s at s = 1, 2, 4, 8.

    Fixed effects (demeaning log tput and log s within each model) rather than dividing by the
    s = 1 point, because single measurements are noisy and this uses all scales equally.
    Zero throughputs (infeasible configurations, e.g. K80 ResNet-50 bs 128 at s > 1) are dropped.

    Args:
        gavel: Output of :func:`load_gavel`.
        gpu: Consolidated GPU type, e.g. ``"v100"``.

    Returns:
        ``(alpha, within-model r2, number of models used)``.
    """
    by_model: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for (m, s), entry in gavel[gpu].items():
        tput = float(entry["null"])
        if tput > 0.0:
            by_model[m].append((s, tput))
    xs, ys, used = [], [], 0
    for m in sorted(by_model):
        pts = sorted(by_model[m])
        if len({s for s, _ in pts}) < 2:
            continue
        lx = np.log([s for s, _ in pts])
        ly = np.log([t for _, t in pts])
        xs.append(lx - lx.mean())
        ys.append(ly - ly.mean())
        used += 1
    if not used:
        raise ValueError(f"no multi-GPU measurements on {gpu}")
    x, y = np.concatenate(xs), np.concatenate(ys)
    alpha = float((x * y).sum() / (x * x).sum())
    r2 = 1.0 - float(((y - alpha * x) ** 2).sum()) / float((y * y).sum())
    return alpha, r2, used


def gavel_colocation(
    gavel: dict[str, dict[tuple[str, int], dict[str, Any]]], gpu: str = "v100"
) -> tuple[np.ndarray, int, int]:
    """Per-job slowdown ``1 - tput_shared / tput_isolated`` over all space-sharing pairs.

    Args:
        gavel: Output of :func:`load_gavel`.
        gpu: GPU type.

    Returns:
        ``(slowdowns, n_zero_pairs_skipped, n_pairs_equal_to_isolated)``. Pairs recorded as
        ``[0, 0]`` are configurations Gavel could not run together and are skipped.
    """
    slow, zeros, equal = [], 0, 0
    for key in sorted(gavel[gpu]):
        entry = gavel[gpu][key]
        iso = float(entry["null"])
        for partner in sorted(k for k in entry if k != "null"):
            pair = entry[partner]
            if not isinstance(pair, list) or len(pair) != 2:
                raise DataError(f"gavel [{gpu}][{key}][{partner}]: expected [tput, tput_other]")
            shared = float(pair[0])
            if shared <= 0.0 or iso <= 0.0:
                zeros += 1
                continue
            if shared == iso:
                equal += 1
            slow.append(1.0 - shared / iso)
    return np.asarray(slow), zeros, equal


# --------------------------------------------------------------------------------------------
# Alibaba PAI: stragglers
# --------------------------------------------------------------------------------------------


def straggler_ratios(paths: Sequence[Path]) -> np.ndarray:
    """Pool r = batch_time / median over workers at the same time step, over all jobs.

    Args:
        paths: ``job_*_norm.csv`` files.

    Returns:
        All ratios (time steps with fewer than ``MIN_WORKERS_FOR_RATIO`` workers skipped).
    """
    ratios: list[np.ndarray] = []
    for path in paths:
        by_time: dict[int, list[float]] = defaultdict(list)
        for lineno, row in read_csv_table(path, ("worker", "time", "batch_time_norm")):
            t = parse_int(row["time"], path, lineno, "time")
            by_time[t].append(
                parse_float(row["batch_time_norm"], path, lineno, "batch_time_norm", positive=True)
            )
        if not by_time:
            raise DataError(f"{path}: no data rows")
        for t in sorted(by_time):
            v = np.asarray(by_time[t])
            if v.size >= MIN_WORKERS_FOR_RATIO:
                ratios.append(v / np.median(v))
    return np.concatenate(ratios)


def fit_lomax(e: np.ndarray) -> tuple[float, float]:
    """Maximum-likelihood Lomax (Pareto II) fit to positive excesses.

    Density ``alpha/s * (1 + e/s)^-(alpha+1)``; for fixed scale s the MLE of alpha is
    ``n / sum(log1p(e/s))``, so only the profile likelihood over log s needs a 1-D search.

    Args:
        e: Positive excesses.

    Returns:
        ``(alpha, scale)``.
    """
    n = e.size

    def neg_profile(log_s: float) -> float:
        s = math.exp(log_s)
        t = float(np.log1p(e / s).sum())
        a = n / t
        return -(n * math.log(a) - n * math.log(s) - (a + 1.0) * t)

    lo, hi = math.log(float(e.min())) - math.log(1e3), math.log(float(e.max())) + math.log(1e3)
    grid = np.linspace(lo, hi, 2001)
    vals = np.array([neg_profile(float(g)) for g in grid])
    i = int(np.argmin(vals))
    step = float(grid[1] - grid[0])
    log_s = golden_min(
        neg_profile, float(grid[max(i - 1, 0)]), float(grid[min(i + 1, grid.size - 1)])
    )
    if i in (0, grid.size - 1):
        # The likelihood is maximised at the search edge: the tail is exponential-like (alpha
        # and scale both diverge). Report it rather than silently returning an edge value.
        print(
            f"warning: Lomax profile likelihood maximised at search edge (step {step:.3g})",
            file=sys.stderr,
        )
    s = math.exp(log_s)
    return n / float(np.log1p(e / s).sum()), s


def derive_straggler(mb_dir: Path) -> dict[str, Any]:
    """Derive the straggler block from the Alibaba PAI mini-batch-time data.

    Args:
        mb_dir: ``alibaba-pai-v2020/mini-batch-time``.

    Returns:
        The ``straggler`` entry of the profile table.
    """
    paths = sorted(mb_dir.glob("job_*_norm.csv"))
    if not paths:
        raise DataError(f"{mb_dir}: no job_*_norm.csv files")
    r = straggler_ratios(paths)
    q = np.percentile(r, [50, 90, 99, 99.9])
    e = np.sort(r[r > 1.0] - 1.0)
    alpha, scale = fit_lomax(e)
    # Lognormal on the *excess* e (not on r) so both candidate families describe the same
    # quantity and are compared by KS on the same sample; a simulator draws r = 1 + e either way.
    log_e = np.log(e)
    mu, sigma = float(log_e.mean()), float(log_e.std())
    ks_p = ks_distance(e, lambda x: 1.0 - (1.0 + x / scale) ** (-alpha))
    erf = np.vectorize(math.erf)
    ks_l = ks_distance(e, lambda x: 0.5 * (1.0 + erf((np.log(x) - mu) / (sigma * math.sqrt(2.0)))))

    cv_path = mb_dir / "coefficient_variation.csv"
    _require_file(cv_path)
    cvs: list[float] = []
    with cv_path.open(newline="") as fh:
        reader = csv.reader(fh)
        next(reader, None)  # header: "", 0, 1, 2, ... (iteration index)
        for row in reader:
            lineno = reader.line_num
            # First cell is the job label (job_00...); empty cells are iterations the job lacks.
            for j, cell in enumerate(row[1:], start=2):
                if cell.strip():
                    cvs.append(parse_float(cell, cv_path, lineno, f"column {j}"))
    if not cvs:
        raise DataError(f"{cv_path}: no values")
    cv = np.asarray(cvs)
    if np.any(cv < 0):
        raise DataError(f"{cv_path}: negative coefficient of variation")

    return {
        "n_samples": int(r.size),
        "quantiles": {
            "p50": float(q[0]),
            "p90": float(q[1]),
            "p99": float(q[2]),
            "p999": float(q[3]),
            "max": float(r.max()),
        },
        "p_no_delay": float(np.mean(r <= 1.0)),
        "pareto_alpha": alpha,
        "pareto_scale": scale,
        "lognorm_mu": mu,
        "lognorm_sigma": sigma,
        "ks_pareto": ks_p,
        "ks_lognorm": ks_l,
        "family": "pareto" if ks_p <= ks_l else "lognorm",
        "cv_median": float(np.median(cv)),
        "cv_p90": float(np.percentile(cv, 90)),
    }


# --------------------------------------------------------------------------------------------
# Assembly, check mode, CLI
# --------------------------------------------------------------------------------------------


def _scale_example(
    gavel: dict[str, dict[tuple[str, int], dict[str, Any]]], gpu: str, model: str
) -> str:
    """Format one model's steps/s at every scale factor, for the human-readable note."""
    pts = sorted((s, float(e["null"])) for (m, s), e in gavel[gpu].items() if m == model)
    tputs = ", ".join(f"{t:.3g}" for _, t in pts)
    scales = ",".join(str(s) for s, _ in pts)
    return f"{model}: {tputs} steps/s at s={scales}"


def build_profiles(data_dir: Path) -> dict[str, Any]:
    """Compute the whole profile table (floats already rounded).

    Args:
        data_dir: Root of the shared data (contains ``pollux-osdi21``, ``gavel``, ...).

    Returns:
        The JSON-ready table.
    """
    traces = data_dir / "pollux-osdi21" / "traces"
    models = {m: derive_pollux_model(traces / m) for m in POLLUX_MODELS}

    gavel = load_gavel(data_dir / "gavel" / "simulation_throughputs.json")
    tiers = gavel_tier_speed(gavel)
    fits = {g: gavel_multi_gpu_alpha(gavel, g) for g in ("k80", "p100", "v100")}
    alpha_v100, r2_v100, n_v100 = fits["v100"]
    slow, _, _ = gavel_colocation(gavel, "v100")
    note = (
        "Gavel sums the steps reported by the s data-parallel workers of a job "
        "(scheduler.py _done_callback), so throughput at scale_factor s is aggregate "
        "worker-steps/s with per-worker batch B (global batch s*B): samples/s = tput*B, "
        "per-worker steps/s = tput/s. alpha is the pooled within-model log-log slope of "
        f"aggregate steps/s vs s on consolidated v100 ({n_v100} models, r2={r2_v100:.3g}); "
        f"same fit gives k80 {fits['k80'][0]:.3g} (r2={fits['k80'][1]:.3g}) and p100 "
        f"{fits['p100'][0]:.3g} (r2={fits['p100'][1]:.3g}). v100 has super-linear, "
        f"non-monotone points (e.g. {_scale_example(gavel, 'v100', 'ResNet-18 (batch size 16)')})."
    )

    table = {
        "schema_version": SCHEMA_VERSION,
        "generated_by": GENERATED_BY,
        "citations": dict(CITATIONS),
        "models": models,
        "gavel_tier_speed": tiers,
        "gavel_multi_gpu_alpha": alpha_v100,
        "gavel_multi_gpu_note": note,
        "colocation_slowdown": {
            "median": float(np.median(slow)),
            "p90": float(np.percentile(slow, 90)),
        },
        "straggler": derive_straggler(data_dir / "alibaba-pai-v2020" / "mini-batch-time"),
    }
    return round_tree(table)


def diff_tables(
    expected: Any, actual: Any, rtol: float = CHECK_RTOL, prefix: str = ""
) -> list[str]:
    """List the keys whose values differ between two JSON-like trees.

    Args:
        expected: Freshly computed table.
        actual: Committed table.
        rtol: Relative tolerance for floats.
        prefix: Key path prefix (for recursion).

    Returns:
        Human-readable descriptions of differing keys (empty if equal).
    """
    out: list[str] = []
    if isinstance(expected, dict) and isinstance(actual, dict):
        for k in sorted(set(expected) | set(actual)):
            path = f"{prefix}.{k}" if prefix else str(k)
            if k not in actual:
                out.append(f"{path}: missing in committed JSON")
            elif k not in expected:
                out.append(f"{path}: unexpected key in committed JSON")
            else:
                out.extend(diff_tables(expected[k], actual[k], rtol, path))
        return out
    if isinstance(expected, bool) or isinstance(actual, bool):
        equal = expected is actual
    elif isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        denom = max(abs(float(expected)), abs(float(actual)), 1e-300)
        equal = abs(float(expected) - float(actual)) / denom <= rtol
        equal = equal and isinstance(expected, int) == isinstance(actual, int)
    else:
        equal = expected == actual
    if not equal:
        out.append(f"{prefix}: recomputed {expected!r} != committed {actual!r}")
    return out


def format_summary(table: dict[str, Any]) -> str:
    """Render a compact human-readable summary of the table.

    Args:
        table: Output of :func:`build_profiles`.

    Returns:
        Multi-line text.
    """
    lines = [
        f"{'model':<12}{'bsz':>6}{'step1[s]':>10}{'tput/s':>10}{'alpha':>7}{'r2':>7}"
        f"{'syncfr':>8}{'dir':>5}{'cbsz':>6}{'tau':>11}{'k':>6}{'r2':>7}{'x@q90':>11}"
    ]
    for name, m in table["models"].items():
        lines.append(
            f"{name:<12}{m['local_bsz']:>6}{m['step_time_1gpu']:>10.4g}{m['base_tput']:>10.4g}"
            f"{m['gpu_alpha']:>7.3f}{m['gpu_alpha_r2']:>7.3f}{m['sync_fraction']:>8.3f}"
            f"{'up' if m['metric_higher_is_better'] else 'down':>5}{m['conv_bsz']:>6}"
            f"{m['conv_tau']:>11.4g}{m['conv_k']:>6.3f}{m['conv_r2']:>7.3f}"
            f"{m['samples_to_q90']:>11.4g}"
        )
    t = table["gavel_tier_speed"]
    lines.append(
        f"gavel tiers (x K80): p100 {t['p100']:.3g}, v100 {t['v100']:.3g}; "
        f"multi-GPU alpha (v100) {table['gavel_multi_gpu_alpha']:.3g}; colocation slowdown "
        f"median {table['colocation_slowdown']['median']:.3g}, "
        f"p90 {table['colocation_slowdown']['p90']:.3g}"
    )
    s = table["straggler"]
    qq = s["quantiles"]
    lines.append(
        f"straggler: n={s['n_samples']} p50 {qq['p50']:.4g} p90 {qq['p90']:.4g} "
        f"p99 {qq['p99']:.4g} p999 {qq['p999']:.4g} max {qq['max']:.4g}; "
        f"P(r<=1)={s['p_no_delay']:.3g}"
    )
    lines.append(
        f"  lomax alpha {s['pareto_alpha']:.4g} scale {s['pareto_scale']:.4g} "
        f"(KS {s['ks_pareto']:.3g}); lognorm mu {s['lognorm_mu']:.4g} sigma "
        f"{s['lognorm_sigma']:.4g} (KS {s['ks_lognorm']:.3g}) -> {s['family']}; "
        f"CV median {s['cv_median']:.3g} p90 {s['cv_p90']:.3g}"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point.

    Args:
        argv: Arguments (defaults to ``sys.argv[1:]``).

    Returns:
        Process exit code: 0 on success, 1 if ``--check`` finds differences, 2 on data errors.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="root of the shared real data (default: <repo>/../shared/data)",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="JSON to write, or to verify with --check"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="recompute and compare with --out instead of writing it",
    )
    parser.add_argument("--quiet", action="store_true", help="do not print the summary")
    args = parser.parse_args(argv)

    try:
        table = build_profiles(args.data_dir.resolve())
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    if args.check:
        if not args.out.is_file():
            print(f"error: {args.out} does not exist", file=sys.stderr)
            return 1
        committed = json.loads(args.out.read_text())
        diffs = diff_tables(table, committed)
        if diffs:
            print(f"{args.out} differs from the recomputed table:", file=sys.stderr)
            for d in diffs:
                print(f"  {d}", file=sys.stderr)
            return 1
        if not args.quiet:
            print(f"{args.out}: up to date")
        return 0

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(table, indent=1, sort_keys=False) + "\n")
    if not args.quiet:
        print(format_summary(table))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
