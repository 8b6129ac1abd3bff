"""How often do the measured co-location model's unswept assumptions bind?

``benchmarks/colocation_study.py`` sweeps the assumptions that have a parameter. Two more
have none, so this script measures how often a run reaches them, on the v1 edge boards'
held-out workloads with the unshielded heuristics:

* **Interleaving beyond four jobs.** Muri measured the iteration-time multiplier of 2, 3
  and 4 jobs interleaved on one GPU; for more, the multiplier of 4 is assumed. A node whose
  running workers request more than four times its GPUs holds five or more workers on some
  GPU (each requested GPU covers one GPU of the node's wrapped packing), so the
  node-slots with GPU demand over 4x its GPUs count (nearly exactly; fractional requests
  can also stack five on a GPU below that) where the assumption binds.
* **The CPU curve below one core per GPU.** Synergy measured from one core per GPU up; below
  that the curve is assumed linear through 0. A worker on a node whose cores are
  oversubscribed gets its proportional share of cores; the worker-slots where that share
  falls below one core per GPU are where the assumption binds.
* **The victim of host memory over capacity.** The newest workers' jobs crash until the
  rest fit (assumed: the kernel's out-of-memory killer picks the newest process). The
  simulator counts crashes by cause (``ClusterView.crashes_by_cause``): every memory crash
  is a place where this rule binds, every other crash is a failing GPU pair as measured.

Everything is read from the public cluster view (``ClusterView``) after each step, over
every step of one episode per held-out seed (the workloads the boards evaluate on); the
simulator's own count of CPU-starved worker-slots, taken during each slot rather than after
it, is printed beside this script's for comparison. Nothing is asserted.

Usage::

    python benchmarks/colocation_binding.py                       # edge50-highload, edge50
    python benchmarks/colocation_binding.py --scenarios edge10 --seeds 3
    python benchmarks/colocation_binding.py --out benchmarks/results   # + colocation_binding.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from edgesched.baselines import make_baseline
from edgesched.envs import EdgeClusterSim, make_config
from edgesched.envs.view import ClusterView
from edgesched.policy import EnvSpec
from edgesched.protocol import eval_workload_seed

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import Report  # benchmarks/ is a folder of scripts, not a package

EPS = 1e-9


def binding_counts(view: ClusterView) -> dict[str, float]:
    """This step's node-slots and worker-slots where each unswept assumption binds.

    Returns:
        ``gpu_nodes``: nodes with GPUs; ``gpu_over4``: nodes whose running workers request
        more than 4x their GPUs; ``workers``: running workers; ``starved``: workers on
        nodes with oversubscribed cores; ``below_one``: those whose share of cores falls
        below one core per GPU.
    """
    cap = view.capacity
    running = view.running
    nodes = view.worker_nodes[running]  # (R, W)
    alloc = view.worker_alloc[running]  # (R, W, 3)
    placed = nodes >= 0
    wn = nodes[placed]
    wa = alloc[placed]
    # what the running workers hold (the co-location rule sees running workers only; a
    # gang still being placed holds resources but shares nothing yet)
    n = len(cap)
    used = np.stack([np.bincount(wn, weights=wa[:, r], minlength=n) for r in range(2)], 1)
    gpus = cap[:, 1]
    has_gpu = gpus > EPS
    over4 = has_gpu & (used[:, 1] > 4.0 * gpus + EPS)
    starved_node = used[:, 0] > cap[:, 0] + EPS
    share = np.where(starved_node, cap[:, 0] / np.maximum(used[:, 0], EPS), 1.0)
    per_gpu = wa[:, 0] / np.maximum(wa[:, 1], 1.0)
    starved = starved_node[wn]
    below = starved & (per_gpu * share[wn] < 1.0 - EPS)
    return {
        "gpu_nodes": float(has_gpu.sum()),
        "gpu_over4": float(over4.sum()),
        "workers": float(len(wn)),
        "starved": float(starved.sum()),
        "below_one": float(below.sum()),
    }


def run_episode(scenario: str, baseline: str, seed: int) -> dict[str, float]:
    """Step sums of :func:`binding_counts` over held-out seed ``seed``'s episode, unshielded."""
    sim = EdgeClusterSim(make_config(scenario))
    policy = make_baseline(baseline, EnvSpec.of(sim), seed=0)
    # the workload the evaluation protocol plays for this held-out seed (the boards' own)
    workload = eval_workload_seed(seed, 0)
    sim.reset(workload)
    policy.reset(workload)
    view = ClusterView(sim)
    total: dict[str, float] = {}
    while not (sim.terminated or sim.truncated):
        graph = sim.graph() if policy.needs_graph else None
        sim.step(policy.act(sim.obs, sim.mask, sim.state(), graph=graph))
        for k, v in binding_counts(view).items():
            total[k] = total.get(k, 0.0) + v
    total["sim_starved"] = float(sim.counters.cpu_starved_slots)
    causes = view.crashes_by_cause()
    total["crash_memory"] = float(causes["memory"])
    total["crash_pair"] = float(causes["gpu_pair"])
    return total


def main() -> None:
    """Print (and optionally write) how often the unswept assumptions bind."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenarios", nargs="+", default=["edge50-highload", "edge50"])
    p.add_argument("--baselines", nargs="+", default=["least_loaded", "random"])
    p.add_argument("--seeds", type=int, default=10, help="held-out seeds from 10000")
    p.add_argument("--out", default="", help="directory for colocation_binding.md")
    args = p.parse_args()
    seeds = list(range(10_000, 10_000 + args.seeds))
    rep = Report("colocation_binding", args.out)
    rep.print(
        f"Held-out seeds {seeds[0]}..{seeds[-1]}, one episode each, no shield; sums over "
        "every step of every episode."
    )
    rep.print("")
    rep.print(
        "| scenario | heuristic | node-slots with GPU demand over 4x the GPUs | "
        "share of GPU node-slots | starved worker-slots (the simulator's count) | of which "
        "below one core per GPU | share | crashes per episode: host memory | failing GPU pair |"
    )
    rep.print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.scenarios:
        for base in args.baselines:
            tot: dict[str, float] = {}
            for seed in seeds:
                for k, v in run_episode(name, base, seed).items():
                    tot[k] = tot.get(k, 0.0) + v
            rep.print(
                f"| {name} | {base} | {tot['gpu_over4']:.0f} | "
                f"{100 * tot['gpu_over4'] / max(tot['gpu_nodes'], 1):.2f}% | "
                f"{tot['starved']:.0f} ({tot['sim_starved']:.0f}) | {tot['below_one']:.0f} | "
                f"{100 * tot['below_one'] / max(tot['starved'], 1):.1f}% | "
                f"{tot['crash_memory'] / len(seeds):.1f} | {tot['crash_pair'] / len(seeds):.1f} |"
            )
    rep.save()


if __name__ == "__main__":
    main()
