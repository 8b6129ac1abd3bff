"""Where a lone simulator's step goes under measured co-location, against ``timeshare``.

``env_throughput.py --collision-modes timeshare measured`` finds the lone array path below
0.90x of ``timeshare`` on some scenario in every run. Two things differ between the modes:
the measured model's own bookkeeping (dirty nodes, slowdowns, crashes, checkpoints: the
functions of ``edgesched/envs/colocation.py`` and ``node_kernel.py``), and the dynamics it
produces (shared and starved workers run slower, crashed jobs redo work), so the same
random policy leaves more jobs in the system and every step has more to do. This script
separates them on each scenario: each mode's steps/s, the jobs running and queued per step
(read through the public cluster view, outside the timed steps) and, from a profile of the
same run, the share of step time spent in the measured model's modules.

Usage::

    python benchmarks/measured_cost.py --scenarios edge50 edge100 edge500 --steps 3000
    python benchmarks/measured_cost.py --out benchmarks/results   # also measured_cost.md
"""

from __future__ import annotations

import argparse
import cProfile
import platform
import pstats
import sys
import time
from pathlib import Path

import numpy as np

import edgesched
from edgesched.envs.core import QUEUED, RUNNING

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import Report, cpu_name  # benchmarks/ is a folder of scripts, not a package
from env_throughput import random_masked

MODEL_FILES = ("colocation.py", "node_kernel.py")
"""Modules whose functions only the measured model runs (their time is its bookkeeping)."""


def run(name: str, mode: str, steps: int, seed: int = 0) -> dict[str, float]:
    """``steps`` lone array-path steps of ``name`` under ``mode`` with a random masked policy.

    Returns:
        steps/s (best of the run's thirds: this machine drifts), mean running and queued
        jobs per step, and the share of profiled step time in :data:`MODEL_FILES`.
    """
    env = edgesched.make_parallel(name, collision_mode=mode)
    sim = env.sim
    rng = np.random.default_rng(seed)
    running, queued = [], []
    prof = cProfile.Profile()
    ep = 0
    sim.reset(seed=ep)
    thirds = []
    for part in range(4):  # part 0 warms up, untimed
        busy = 0.0
        for _ in range(steps // 3):
            if sim.terminated or sim.truncated:
                ep += 1
                sim.reset(seed=ep)
            act = random_masked(rng, sim.mask)
            t0 = time.perf_counter()
            sim.step(act)
            busy += time.perf_counter() - t0
            if part:
                status = sim.view().job_status
                running.append(np.count_nonzero(status == RUNNING))
                queued.append(np.count_nonzero(status == QUEUED))
        if part:
            thirds.append(steps // 3 / busy)
    # the same number of steps again under the profiler, for the shares only
    prof.enable()
    for _ in range(steps // 3):
        if sim.terminated or sim.truncated:
            ep += 1
            sim.reset(seed=ep)
        sim.step(random_masked(rng, sim.mask))
    prof.disable()
    st = pstats.Stats(prof).stats
    total = sum(v[2] for v in st.values())  # own time of every function
    model = sum(v[2] for k, v in st.items() if Path(k[0]).name in MODEL_FILES)
    return {
        "steps_s": max(thirds),
        "running": float(np.mean(running)),
        "queued": float(np.mean(queued)),
        "model_share": model / total if total else 0.0,
    }


def main() -> None:
    """Run the comparison and print (and with ``--out`` save) the table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenarios", nargs="+", default=["edge10", "edge50", "edge100", "edge500"])
    p.add_argument("--steps", type=int, default=3000, help="timed steps per mode (3 parts)")
    p.add_argument("--out", default="", help="folder for the results file")
    p.add_argument("--name", default="measured_cost")
    args = p.parse_args()
    if args.steps < 3:
        p.error(f"--steps={args.steps} is not allowed: need at least 3 (three timed parts)")
    rep = Report(args.name, args.out)
    rep.print(
        f"machine: {cpu_name()}, python {platform.python_version()}, numpy {np.__version__}, "
        f"edgesched {edgesched.__version__}; lone array path, random masked policy"
    )
    rep.print(
        f"{'scenario':10s} {'mode':10s} {'steps/s':>9s} {'running':>8s} {'queued':>8s} "
        f"{'model share':>11s}"
    )
    for name in args.scenarios:
        res = {mode: run(name, mode, args.steps) for mode in ("timeshare", "measured")}
        for mode, r in res.items():
            rep.print(
                f"{name:10s} {mode:10s} {r['steps_s']:9,.0f} {r['running']:8.1f} "
                f"{r['queued']:8.1f} {r['model_share']:11.1%}"
            )
        t, m = res["timeshare"], res["measured"]
        rep.print(
            f"  {name}: measured / timeshare steps/s {m['steps_s'] / t['steps_s']:.2f}x; "
            f"running jobs {m['running'] / t['running']:.2f}x, queued "
            f"{m['queued'] / max(t['queued'], 1e-9):.2f}x; the model's own code "
            f"{m['model_share']:.1%} of the profiled step"
        )
    rep.save()


if __name__ == "__main__":
    main()
