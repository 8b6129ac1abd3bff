"""How many pending jobs should an agent choose among? A small study for the v1 scenarios.

With ``pending_slots=1`` (the v0 edge scenarios) an agent can only place the head of its
queue, so task-ordering heuristics (FIFO, SJF, Tiresias, Optimus) coincide with
``least_loaded``. This script measures, for several ``pending_slots`` values on a scenario
(unchanged otherwise, by override): the held-out mean JCT of each ordering heuristic, how
many distinct results they give, the observation and action sizes a learner must handle, and
the simulator's agent-decisions/s with a random feasible policy. It changes no registered
scenario.

Usage::

    python benchmarks/pending_slots_study.py                        # edge50, measured mode
    python benchmarks/pending_slots_study.py --slots 1 4 --seeds 2
    python benchmarks/pending_slots_study.py --out benchmarks/results   # + .md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from edgesched.baselines import make_baseline
from edgesched.envs.core import EdgeClusterSim
from edgesched.envs.handle import resolve_scenario
from edgesched.envs.topology import build_cluster
from edgesched.experiment.evaluation import evaluate_scheduler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import Report  # benchmarks/ is a folder of scripts, not a package


def decisions_per_second(handle, seconds: float = 2.0) -> float:
    """Agent-decisions/s of one copy under a uniformly random feasible policy."""
    cfg = handle.config
    sim = EdgeClusterSim(cfg, build_cluster(cfg), handle.id)
    rng = np.random.default_rng(0)
    sim.reset(0)
    ep, steps, busy = 0, 0, 0.0
    wall = time.perf_counter()
    while time.perf_counter() - wall < seconds:
        act = (rng.random(sim.mask.shape) * sim.mask).argmax(axis=1)
        t0 = time.perf_counter()
        sim.step(act)
        if sim.terminated or sim.truncated:
            ep += 1
            sim.reset(ep)
        busy += time.perf_counter() - t0
        steps += 1
    return steps * sim.num_agents / busy


def main() -> None:
    """Print (and optionally write) the study's table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", default="edge50")
    p.add_argument("--collision-mode", default="measured")
    p.add_argument("--slots", nargs="+", type=int, default=[1, 2, 4, 8])
    p.add_argument(
        "--baselines", nargs="+", default=["least_loaded", "fifo", "sjf", "tiresias", "optimus"]
    )
    p.add_argument("--seeds", type=int, default=3, help="held-out seeds from 10000")
    p.add_argument("--out", default="", help="directory for pending_slots_study.md")
    args = p.parse_args()
    seeds = list(range(10_000, 10_000 + args.seeds))
    rep = Report("pending_slots_study", args.out)
    rep.print(
        f"{args.scenario}, collision_mode={args.collision_mode}; held-out seeds "
        f"{seeds[0]}..{seeds[-1]}, one episode each; mean JCT in slots."
    )
    rep.print("")
    head = " | ".join(args.baselines)
    rep.print(
        f"| pending_slots | obs size | actions | {head} | distinct results | agent-decisions/s |"
    )
    rep.print("|---:|---:|---:|" + "---:|" * len(args.baselines) + "---:|---:|")
    for k in args.slots:
        handle = resolve_scenario(
            args.scenario, pending_slots=k, collision_mode=args.collision_mode
        )
        jct = []
        for base in args.baselines:
            policy = make_baseline(base, handle.spec, seed=0)
            res = evaluate_scheduler(policy, handle, None, seeds, 1)
            jct.append(float(np.mean([r["jct_mean"] for r in res["per_episode"]])))
        distinct = len({round(x, 6) for x in jct})
        rate = decisions_per_second(handle)
        cells = " | ".join(f"{x:.2f}" for x in jct)
        rep.print(
            f"| {k} | {handle.spec.obs_dim} | {handle.spec.num_actions} | {cells} | "
            f"{distinct} | {rate:,.0f} |"
        )
    rep.save()


if __name__ == "__main__":
    main()
