"""Reproduction report for issue 8: hierarchical gradient coding and EdgeGossip.

Part A (Tang et al., 2024): expected per-iteration time of uncoded aggregation, flat
(one-level) cyclic gradient coding with its best tolerance, and hierarchical gradient coding
with the optimizer's tolerances, across straggler severities and cluster shapes. Workers'
time per unit of data is ``1 + Exp(mean = severity)`` (shifted exponential) or the
PAI-fitted slowdown with its excess scaled by the severity; each edge's upload to the master
takes ``0.2 x`` a draw of the same law (edge nodes straggle too). Monte Carlo with common
random numbers across schemes.

Part B (Han et al., TPDS 2021): training time and final accuracy of jobs on the
heterogeneous edge50 tiers with plain gossip, EdgeGossip's load balancing alone, and full
EdgeGossip (balancing + accuracy-aware stop), same workloads and the same placement
heuristic (least_loaded). Training time = slots from a job's start to its end, over
multi-worker jobs that finished.

Usage::

    python benchmarks/straggler_coding.py                 # both parts, prints tables
    python benchmarks/straggler_coding.py --out benchmarks/results   # + .md and .png
"""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path

import numpy as np

from edgesched.baselines import make_baseline
from edgesched.envs.coding import (
    flat_gc_iteration_times,
    pai_stragglers,
    shifted_exponential,
    uncoded_iteration_times,
)
from edgesched.envs.coding_opt import optimize_hgc
from edgesched.envs.core import DONE, EdgeClusterSim
from edgesched.envs.scenarios import get_scenario
from edgesched.experiment.seeds import eval_workload_seed
from edgesched.policy import EnvSpec

SHAPES = {"4x4": (4, 4, 4, 4), "8x2": (2,) * 8, "2x8": (8, 8), "hetero": (2, 3, 5, 6)}
SEVERITIES = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
PAI_SEVERITIES = (1.0, 3.0, 10.0)


def part_a(samples: int, seed: int) -> list[dict]:
    """Per-iteration times of the three schemes for every (model, severity, shape)."""
    rows = []
    for model, sevs in (("shifted-exp", SEVERITIES), ("PAI", PAI_SEVERITIES)):
        for sev in sevs:
            draw = shifted_exponential(1.0, sev) if model == "shifted-exp" else pai_stragglers(sev)
            for shape, m in SHAPES.items():
                rng = np.random.default_rng(seed)
                total = sum(m)
                unit = draw(rng, (samples, total))
                edge = 0.2 * draw(rng, (samples, len(m))) / total
                unc = uncoded_iteration_times(m, unit, edge_comm=edge).mean()
                flat = min(
                    (flat_gc_iteration_times(m, s, unit, edge_comm=edge).mean(), s)
                    for s in range(total)
                )
                best = optimize_hgc(m, unit, edge_comm=edge)
                jn = optimize_hgc(m, unit, edge_comm=edge, method="jncss")
                rows.append(
                    {
                        "model": model,
                        "severity": sev,
                        "shape": shape,
                        "uncoded": float(unc),
                        "flat": float(flat[0]),
                        "flat_s": int(flat[1]),
                        "hgc": best.expected_time,
                        "s_e": best.s_e,
                        "s_w": best.s_w,
                        "jncss": jn.expected_time,
                        "jn_s_e": jn.s_e,
                        "jn_s_w": jn.s_w,
                    }
                )
    return rows


def part_b(seeds: int) -> list[dict]:
    """Training time and final accuracy under plain gossip and EdgeGossip."""
    variants = {
        "gossip": {"sync_mix": (("gossip", 1.0),)},
        "edgegossip, balancing only": {"edgegossip_min_gain": 0.0},
        "edgegossip": {},
    }
    out = []
    sc = get_scenario("edge50-edgegossip")
    for label, ov in variants.items():
        sim = EdgeClusterSim(sc.config(**ov), scenario_id=sc.id)
        policy = make_baseline("least_loaded", EnvSpec.of(sim), seed=0)
        times, acc, jct = [], [], []
        for s in range(seeds):
            ws = eval_workload_seed(10_000 + s, 0)
            sim.reset(ws)
            policy.reset(ws)
            while not (sim.terminated or sim.truncated):
                sim.step(policy.act(sim.obs, sim.mask, sim.state()))
            fin = (sim.status == DONE) & (sim.j_workers > 1)
            times += (sim.finish_slot[fin] - sim.start_slot[fin]).tolist()
            acc += sim.quality[fin].tolist()
            jct.append(sim.episode_metrics()["jct_mean"])
        out.append(
            {
                "variant": label,
                "train_slots": float(np.mean(times)),
                "accuracy": float(np.mean(acc)),
                "jct": float(np.mean(jct)),
                "jobs": len(times),
            }
        )
    return out


def tables(a: list[dict], b: list[dict]) -> str:
    """Markdown for both parts."""
    lines = [
        "Part A: mean seconds per iteration (relative units) and speed-up over uncoded.",
        "",
        "hgc: one worker tolerance for every edge (`optimize_hgc`, greedy); hgc per-edge: "
        "each edge its own (`method='jncss'`).",
        "",
        "| stragglers | severity | edges x workers | uncoded | flat GC (best s) | hgc (s_e, s_w) "
        "| hgc per-edge (s_e, s_w per edge) | hgc speed-up | hgc per-edge speed-up | "
        "flat speed-up |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in a:
        sw = ",".join(map(str, r["jn_s_w"])) if isinstance(r["jn_s_w"], tuple) else r["jn_s_w"]
        lines.append(
            f"| {r['model']} | {r['severity']:g} | {r['shape']} | {r['uncoded']:.3f} | "
            f"{r['flat']:.3f} (s={r['flat_s']}) | {r['hgc']:.3f} ({r['s_e']}, {r['s_w']}) | "
            f"{r['jncss']:.3f} ({r['jn_s_e']}, {sw}) | {r['uncoded'] / r['hgc']:.2f}x | "
            f"{r['uncoded'] / r['jncss']:.2f}x | {r['uncoded'] / r['flat']:.2f}x |"
        )
    het = [r for r in a if r["shape"] == "hetero"]
    worst = min(r["flat"] / r["jncss"] for r in het)
    top = max(a, key=lambda r: r["uncoded"] / r["jncss"])
    lines += [
        "",
        f"Uneven cluster (hetero): hgc per-edge against flat GC's best tolerance, worst case "
        f"{worst:.3f}x (>= 1: never slower). Largest per-edge speed-up over uncoded: "
        f"{top['uncoded'] / top['jncss']:.2f}x ({top['model']}, severity {top['severity']:g}, "
        f"{top['shape']}).",
    ]
    lines += [
        "",
        "Part B: multi-worker jobs on edge50's heterogeneous tiers (least_loaded placement).",
        "",
        "| sync | mean training time (slots) | mean final accuracy | mean JCT (slots) | jobs |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in b:
        lines.append(
            f"| {r['variant']} | {r['train_slots']:.2f} | {r['accuracy']:.4f} | {r['jct']:.2f} "
            f"| {r['jobs']} |"
        )
    g = next(r for r in b if r["variant"] == "gossip")
    e = next(r for r in b if r["variant"] == "edgegossip")
    lines += [
        "",
        f"EdgeGossip vs gossip: training time x{g['train_slots'] / e['train_slots']:.2f} lower, "
        f"final accuracy {100 * (e['accuracy'] - g['accuracy']):+.2f} points.",
    ]
    return "\n".join(lines)


def plot(a: list[dict], path: Path) -> None:
    """Speed-up of hgc and flat GC over uncoded against severity, one line per shape."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, model in zip(axes, ("shifted-exp", "PAI"), strict=True):
        for shape in SHAPES:
            rs = [r for r in a if r["model"] == model and r["shape"] == shape]
            sev = [r["severity"] for r in rs]
            ax.plot(sev, [r["uncoded"] / r["hgc"] for r in rs], "o-", label=f"hgc {shape}")
            if shape == "hetero":
                ax.plot(
                    sev,
                    [r["uncoded"] / r["jncss"] for r in rs],
                    "s:",
                    label="hgc per-edge hetero",
                )
            ax.plot(
                sev, [r["uncoded"] / r["flat"] for r in rs], "x--", alpha=0.6, label=f"flat {shape}"
            )
        ax.set_xscale("log")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xlabel("straggler severity")
        ax.set_ylabel("speed-up over uncoded")
        ax.set_title(f"{model} stragglers", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    """Run both parts; print (and optionally write) the report."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", type=int, default=4000, help="Monte Carlo samples (part A)")
    p.add_argument("--seeds", type=int, default=5, help="workload seeds (part B)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="", help="directory for straggler_coding.{md,png}")
    args = p.parse_args()
    a = part_a(args.samples, args.seed)
    b = part_b(args.seeds)
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"
    text = tables(a, b)
    print(f"# machine: {machine}\n{text}")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "straggler_coding.md").write_text(text + "\n")
        plot(a, out / "straggler_coding.png")
        print(f"# wrote {out}/straggler_coding.md, .png")


if __name__ == "__main__":
    main()
