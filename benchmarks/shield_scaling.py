"""Shield scalability (issue 5): central vs regional shields, edge10 to edge500.

For each scenario and workload seed, a heuristic proposes every round (``least_loaded`` by
default: each agent picks its least-loaded feasible target, so simultaneous proposals
collide, as in SROLE's setting). Both shields decide on the *same* proposal each round; the
central shield's joint action is executed so both see identical states. Per round we record:

* ``latency``: measured compute time of the decision on its critical path (the regional
  shields run concurrently, so per protocol phase the slowest shield counts);
* ``total``: compute summed over all shields (what one machine simulating them pays);
* ``network``: modelled message latency, from the topology's fastest-path latencies (agents
  to their shield and back; per coordination round, shield to shield and back);
* messages per round (agents <-> shields and shield <-> shield), messages handled by the
  busiest shield, coordination rounds, interventions and boundary collisions the regional
  protocol let through.

Usage::

    python benchmarks/shield_scaling.py                      # edge10/50/100/500, 3 seeds
    python benchmarks/shield_scaling.py --scenarios edge10 edge50 --rounds 100 --seeds 1
    python benchmarks/shield_scaling.py --out benchmarks/results   # also write .md/.csv/.png
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
from pathlib import Path

import numpy as np

from edgesched.baselines import make_baseline
from edgesched.envs.core import EdgeClusterSim
from edgesched.envs.scenarios import get_scenario
from edgesched.policy import EnvSpec
from edgesched.shields import CentralShield, RegionalShield

FIELDS = (
    "latency_ms",
    "latency_p95_ms",
    "total_ms",
    "network_ms",
    "messages",
    "inter_messages",
    "busiest_shield_messages",
    "rounds",
    "interventions",
    "proposed_collisions",
    "residual_collisions",
)


def measure(name: str, seeds: list[int], rounds: int, policy: str) -> dict[str, dict[str, float]]:
    """Per-round means of both shields over ``rounds`` decision rounds per seed."""
    sc = get_scenario(name)
    sim = EdgeClusterSim(sc.config(), scenario_id=sc.id)
    heuristic = make_baseline(policy, EnvSpec.of(sim), seed=0)
    shields = {"central": CentralShield(sim), "regional": RegionalShield(sim)}
    rows: dict[str, list[list[float]]] = {k: [] for k in shields}
    for seed in seeds:
        sim.reset(seed)
        heuristic.reset(seed)
        # start from a loaded cluster: the first slots of an episode have empty queues
        for _ in range(rounds):
            if sim.terminated or sim.truncated:
                break
            a, prefs = heuristic.act_with_preferences(sim.obs, sim.mask, sim.state())
            results = {k: s(a, prefs) for k, s in shields.items()}
            for k, r in results.items():
                rows[k].append(
                    [
                        1e3 * r.compute_s,
                        1e3 * r.compute_total_s,
                        r.network_ms,
                        r.messages,
                        r.shield_messages,
                        r.max_messages_per_shield,
                        r.rounds,
                        r.interventions,
                        r.proposed_collisions,
                        r.residual_collisions,
                    ]
                )
            sim.step(results["central"].actions)
    out = {}
    for k, r in rows.items():
        arr = np.array(r)
        out[k] = {
            "latency_ms": float(arr[:, 0].mean()),
            "latency_p95_ms": float(np.percentile(arr[:, 0], 95)),
            "total_ms": float(arr[:, 1].mean()),
            "network_ms": float(arr[:, 2].mean()),
            "messages": float(arr[:, 3].mean()),
            "inter_messages": float(arr[:, 4].mean()),
            "busiest_shield_messages": float(arr[:, 5].mean()),
            "rounds": float(arr[:, 6].mean()),
            "interventions": float(arr[:, 7].mean()),
            "proposed_collisions": float(arr[:, 8].mean()),
            "residual_collisions": float(arr[:, 9].sum()),
        }
    out["_meta"] = {
        "nodes": sim.num_agents,
        "regions": sim.cluster.num_regions,
        "steps": len(rows["central"]),
    }
    return out


def table(results: dict[str, dict]) -> str:
    """Markdown table of the measured figures."""
    lines = [
        "| scenario | nodes | regions | shield | latency ms (mean / p95) | all shields ms | "
        "network ms | msgs/step | shield-shield msgs | busiest shield msgs | rounds | "
        "interventions | proposed coll. | boundary slips (total) |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, res in results.items():
        meta = res["_meta"]
        for k in ("central", "regional"):
            r = res[k]
            lines.append(
                f"| {name} | {meta['nodes']} | {meta['regions']} | {k} | "
                f"{r['latency_ms']:.3f} / {r['latency_p95_ms']:.3f} | {r['total_ms']:.3f} | "
                f"{r['network_ms']:.1f} | {r['messages']:.1f} | {r['inter_messages']:.1f} | "
                f"{r['busiest_shield_messages']:.1f} | {r['rounds']:.2f} | "
                f"{r['interventions']:.2f} | {r['proposed_collisions']:.2f} | "
                f"{r['residual_collisions']:.0f} |"
            )
    return "\n".join(lines)


def plot(results: dict[str, dict], path: Path) -> None:
    """Latency and busiest-shield messages against cluster size (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nodes = [r["_meta"]["nodes"] for r in results.values()]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for k, style in (("central", "o-"), ("regional", "s-")):
        axes[0].plot(nodes, [r[k]["latency_ms"] for r in results.values()], style, label=k)
        axes[1].plot(
            nodes,
            [r[k]["latency_ms"] + r[k]["network_ms"] for r in results.values()],
            style,
            label=k,
        )
        axes[2].plot(
            nodes, [r[k]["busiest_shield_messages"] for r in results.values()], style, label=k
        )
    titles = (
        "compute latency per step (ms)",
        "compute + modelled network (ms)",
        "messages at the busiest shield / step",
    )
    for ax, title in zip(axes, titles, strict=True):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("nodes")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    """Run the study and print the table (optionally write .md, .csv and .png)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenarios", nargs="+", default=["edge10", "edge50", "edge100", "edge500"])
    p.add_argument("--seeds", type=int, default=3, help="workload seeds per scenario")
    p.add_argument("--rounds", type=int, default=300, help="decision rounds per seed")
    p.add_argument("--policy", default="least_loaded", help="registered baseline proposing")
    p.add_argument("--out", default="", help="directory for shield_scaling.{md,csv,png}")
    args = p.parse_args()
    results = {
        name: measure(name, list(range(args.seeds)), args.rounds, args.policy)
        for name in args.scenarios
    }
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"
    text = table(results)
    print(f"# shield scaling ({args.policy} proposals, {args.seeds} seeds x {args.rounds} rounds)")
    print(f"# machine: {machine}, Python {platform.python_version()}")
    print(text)
    names = list(results)
    if len(names) >= 2:
        first, last = results[names[0]], results[names[-1]]
        size = last["_meta"]["nodes"] / first["_meta"]["nodes"]
        for k in ("central", "regional"):
            growth = last[k]["latency_ms"] / first[k]["latency_ms"]
            print(
                f"# {k}: latency x{growth:.2f} from {names[0]} to {names[-1]} (nodes x{size:.0f})"
            )
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "shield_scaling.md").write_text(
            f"Shield scaling: {args.policy} proposals, {args.seeds} seeds x {args.rounds} "
            f"rounds; {machine}.\n\n{text}\n"
        )
        with open(out / "shield_scaling.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["scenario", "nodes", "regions", "shield", *FIELDS])
            for name, res in results.items():
                for k in ("central", "regional"):
                    w.writerow(
                        [name, res["_meta"]["nodes"], res["_meta"]["regions"], k]
                        + [f"{res[k][f]:.6g}" for f in FIELDS]
                    )
        plot(results, out / "shield_scaling.png")
        print(f"# wrote {out}/shield_scaling.md, .csv, .png")


if __name__ == "__main__":
    main()
