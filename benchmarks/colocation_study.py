"""Do collisions cost anything? Shielded vs unshielded heuristics under measured co-location.

SROLE's premise is that a collision (two agents placing on one node beyond its capacity)
costs throughput, so a shield that prevents it shortens jobs. This script measures that
premise under each collision model, on the same held-out workloads:

* ``timeshare`` (the v0 rule): an overloaded node time-shares perfectly;
* ``measured`` (``edgesched.envs.colocation``): shared GPUs at Gavel's measured pair
  throughputs (failing pairs crash the newer job), Muri's interleaving multipliers, Synergy's
  CPU curves, host-memory crashes, checkpoint/restart costs; swept over the one unmeasured
  parameter, ``unmeasured_gpu_share`` (how well a Jetson-class GPU without measurements
  time-slices; 1.0 is the default assumption), which is also its sensitivity sweep.

For each (scenario, model, heuristic) it reports the unshielded and the central-shielded
mean JCT over the held-out seeds with 95% t-intervals over seeds, the shield's relative
change, whether the two intervals are disjoint, and the 95% interval of the paired
per-workload difference (shielded minus unshielded). It changes no registered scenario.

Usage::

    python benchmarks/colocation_study.py                 # edge50-highload and edge50, 5 seeds
    python benchmarks/colocation_study.py --scenarios edge50 --seeds 3
    python benchmarks/colocation_study.py --out benchmarks/results   # + colocation_study.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import stats

from edgesched.baselines import make_baseline
from edgesched.envs.handle import resolve_scenario
from edgesched.experiment.evaluation import evaluate_scheduler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import Report  # benchmarks/ is a folder of scripts, not a package


def ci95(x: list[float]) -> tuple[float, float, float]:
    """Mean and the 95% t-interval over seeds."""
    a = np.asarray(x, dtype=np.float64)
    m = float(a.mean())
    if len(a) < 2:
        return m, m, m
    h = float(stats.t.ppf(0.975, len(a) - 1) * a.std(ddof=1) / np.sqrt(len(a)))
    return m, m - h, m + h


def main() -> None:
    """Print (and optionally write) the shield's effect under each collision model."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenarios", nargs="+", default=["edge50-highload", "edge50"])
    p.add_argument("--baselines", nargs="+", default=["least_loaded", "random"])
    p.add_argument("--shares", nargs="+", type=float, default=[0.5, 1.0, 1.5])
    p.add_argument("--seeds", type=int, default=5, help="held-out seeds from 10000")
    p.add_argument("--out", default="", help="directory for colocation_study.md")
    args = p.parse_args()
    seeds = list(range(10_000, 10_000 + args.seeds))
    rep = Report("colocation_study", args.out)
    rep.print(f"Held-out seeds {seeds[0]}..{seeds[-1]}, one episode each; JCT in slots.")
    rep.print("")
    rep.print(
        "| scenario | collision model | heuristic | JCT unshielded [95% CI] | "
        "JCT central shield [95% CI] | shield effect | CIs disjoint | paired difference "
        "[95% CI] | crashes/episode (unshielded) |"
    )
    rep.print("|---|---|---|---|---|---:|---|---|---:|")
    models = [("timeshare", {"collision_mode": "timeshare"})] + [
        (
            f"measured, unmeasured_gpu_share={s:g}",
            {"collision_mode": "measured", "unmeasured_gpu_share": s},
        )
        for s in args.shares
    ]
    for name in args.scenarios:
        for label, overrides in models:
            handle = resolve_scenario(name, **overrides)
            for base in args.baselines:
                out = {}
                for shield in ("none", "central"):
                    policy = make_baseline(base, handle.spec, seed=0)
                    res = evaluate_scheduler(policy, handle, None, seeds, 1, shield=shield)
                    out[shield] = res
                a = ci95([r["jct_mean"] for r in out["none"]["per_episode"]])
                b = ci95([r["jct_mean"] for r in out["central"]["per_episode"]])
                disjoint = b[2] < a[1] or a[2] < b[1]
                # the same workloads with and without the shield: the per-seed difference
                # removes the (large) variation between workloads
                d = ci95(
                    [
                        y["jct_mean"] - x["jct_mean"]
                        for x, y in zip(
                            out["none"]["per_episode"], out["central"]["per_episode"], strict=True
                        )
                    ]
                )
                crashes = out["none"]["summary"].get("crashes", 0.0)
                rep.print(
                    f"| {name} | {label} | {base} | {a[0]:.1f} [{a[1]:.1f}, {a[2]:.1f}] | "
                    f"{b[0]:.1f} [{b[1]:.1f}, {b[2]:.1f}] | {100 * (b[0] / a[0] - 1):+.1f}% | "
                    f"{'yes' if disjoint else 'no'} | {d[0]:+.1f} [{d[1]:+.1f}, {d[2]:+.1f}] | "
                    f"{crashes:.1f} |"
                )
    rep.save()


if __name__ == "__main__":
    main()
