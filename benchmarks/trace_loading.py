"""Time reading and preparing the whole Philly trace, and describe the trace scenarios' windows.

Usage::

    python benchmarks/trace_loading.py [--data-dir ../shared/data] [--repeats 5] [--seeds 200]
    python benchmarks/trace_loading.py --out benchmarks/results   # also trace_loading.md

Prints the wall time of (a) parsing the 82k-job Philly CSV, (b) preparing it for edge50
(rate rescaling, sizes, workers), (c) building the edge50-philly simulator and one reset, and
the distribution of jobs per episode window over ``--seeds`` reset seeds; then the same for
``edge50-philly`` and ``edge50-trace`` under each replay-window rule (``trace_window_rule``:
``any_job``, uniform over the trace's span and redrawn while empty; ``per_job``, around a
uniformly drawn job). The target of (a) + (b) is under 5 s. Nothing is asserted; the figures
go in the README.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

from edgesched.envs import EdgeClusterSim, make_config
from edgesched.envs.topology import find_data_dir
from edgesched.envs.trace_scenarios import PHILLY_TRACE
from edgesched.envs.workloads import TraceWorkload, read_philly

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import Report  # benchmarks/ is a folder of scripts, not a package


def main() -> None:
    """Run the timing and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default="")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--out", default="", help="directory for trace_loading.md")
    args = ap.parse_args()
    report = Report("trace_loading", args.out)
    data = find_data_dir(args.data_dir)
    if data is None:
        raise SystemExit("real-data folder not found: pass --data-dir or set EDGESCHED_DATA_DIR")
    path = data / PHILLY_TRACE
    cfg = make_config("edge50-philly", data_dir=str(data))
    read_s, prep_s = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        trace = read_philly(path)  # uncached reader: the full parse every time
        t1 = time.perf_counter()
        tw = TraceWorkload.prepare(trace, 50 * cfg.arrival_rate, 4, ("cifar10",))
        t2 = time.perf_counter()
        read_s.append(t1 - t0)
        prep_s.append(t2 - t1)
    t0 = time.perf_counter()
    sim = EdgeClusterSim(cfg)
    sim.reset(0)
    build_s = time.perf_counter() - t0
    c = episode_jobs(sim, args.seeds)
    machine = platform.processor() or platform.machine()
    report.print(f"machine: {machine}, python {platform.python_version()}")
    report.print(f"Philly trace: {len(trace)} jobs over {trace.span_seconds / 86400:.1f} days")
    report.print(f"read (median of {args.repeats}): {np.median(read_s):.3f} s")
    report.print(f"prepare (median): {np.median(prep_s):.3f} s")
    report.print(f"read + prepare: {np.median(read_s) + np.median(prep_s):.3f} s (target < 5 s)")
    report.print(
        f"edge50-philly build + first reset (trace cached after first read): {build_s:.3f} s"
    )
    report.print(
        f"one slot = {tw.seconds_per_slot:.1f} trace seconds; a 200-slot window = "
        f"{200 * tw.seconds_per_slot / 3600:.2f} trace hours; long-run mean "
        f"{50 * cfg.arrival_rate * 200:.0f} jobs per window"
    )
    q = np.percentile(c, [10, 25, 50, 75, 90])
    report.print(
        f"jobs per episode over {args.seeds} seeds: mean {c.mean():.1f}, "
        f"p10/p25/median/p75/p90 = {'/'.join(f'{v:.0f}' for v in q)}, max {c.max()}"
    )
    mean_jobs = 50 * cfg.arrival_rate * cfg.arrival_slots
    report.print("")
    report.print(
        f"jobs per episode under each window rule ({args.seeds} reset seeds; near-empty: "
        f"fewer than a tenth of the long-run mean, {mean_jobs / 10:.0f} jobs):"
    )
    report.print("")
    report.print(
        "| scenario | trace_window_rule | trace_drop_never_ran | mean | p10 | median | p90 | "
        "near-empty |"
    )
    report.print("|---|---|---|---:|---:|---:|---:|---:|")
    for name in ("edge50-philly", "edge50-trace"):
        own = make_config(name, data_dir=str(data))
        for rule in (own.trace_window_rule, *({"any_job", "per_job"} - {own.trace_window_rule})):
            drop = own.trace_drop_never_ran
            label = f"{rule} (the scenario's)" if rule == own.trace_window_rule else rule
            n = episode_jobs(
                EdgeClusterSim(
                    make_config(
                        name, data_dir=str(data), trace_window_rule=rule, trace_drop_never_ran=drop
                    )
                ),
                args.seeds,
            )
            p10, p50, p90 = np.percentile(n, [10, 50, 90])
            report.print(
                f"| {name} | {label} | {drop} | {n.mean():.1f} | {p10:.0f} | {p50:.0f} | "
                f"{p90:.0f} | {100 * np.mean(n < mean_jobs / 10):.1f}% |"
            )
    report.save()


def episode_jobs(sim: EdgeClusterSim, seeds: int) -> np.ndarray:
    """Jobs in the episode of each reset seed ``0..seeds-1``."""
    counts = []
    for seed in range(seeds):
        sim.reset(seed)
        counts.append(sim.num_jobs)
    return np.array(counts)


if __name__ == "__main__":
    main()
