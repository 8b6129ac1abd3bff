"""Do collisions cost anything? Shielded vs unshielded heuristics under measured co-location.

SROLE's premise is that a collision (two agents placing on one node beyond its capacity)
costs throughput, so a shield that prevents it shortens jobs. This script measures that
premise under each collision model, on the same held-out workloads:

* ``timeshare`` (the v0 rule): an overloaded node time-shares perfectly;
* ``measured`` (``edgesched.envs.colocation``): shared GPUs at Gavel's measured pair
  throughputs (failing pairs crash the newer job), Muri's interleaving multipliers, Synergy's
  CPU curves, host-memory crashes, checkpoint/restart costs, at the scenario's settings;
* the sensitivity sweep of the measured model's assumed parameters, one at a time around
  the scenario's settings: ``unmeasured_gpu_share`` (how well a Jetson-class GPU without
  measurements time-slices; 1.0 by default), ``checkpoint_interval`` (slots of running
  between checkpoints, which sets the work a crash loses; 10 by default; 0: never), the
  measured GPU class that stands in for the ``gpu_server`` tier's T4 (P100 by default,
  ``tier_gpu_classes``) and ``cpu_starvation_weight`` (the exponent of the CPU-starvation
  factor: 0 makes oversubscribed cores free, 2 squares the slowdown; an envelope for the
  CPU model's assumptions of fair sharing and a linear curve below one core),
  ``gavel_model_map`` (``largest_batch``: the three catalog models without a matching
  architecture in Gavel's measurements read at their stand-in's largest measured batch,
  whose shared runs fail far more often; the envelope of the declared model map), and
  other tiers read as a measured GPU class (``tier_gpu_classes``, ``--tier-as``): by
  default the ``jetson`` tier as the K80, whose pairs slow and fail as measured where an
  unmeasured GPU's pairs never fail, and the ``small_server`` tier's K80 as the P100, which
  leaves no catalog pair that can fail, so every crash left is a host-memory overflow;
  and ``restart_seconds_scale`` (a multiplier of Muri's restart seconds, measured on
  datacenter GPUs through assumed stand-ins for four of the six models; 0 makes restarts
  free, 8 makes one cost about a 60 s slot), and ``crash_order`` (``random``: one round's
  placements count as placed in a seeded random order instead of by agent index, so a
  same-round overload no longer always crashes the higher-numbered agent's job), and
  ``crash_victim`` (``in_pair``: on a GPU of three or more workers holding a failing pair,
  the newest worker in a failing pair crashes, not the GPU's newest).

For each (scenario, model, heuristic) it reports the unshielded and the central-shielded
mean JCT over the held-out seeds with 95% t-intervals over seeds, the shield's relative
change, whether the two intervals are disjoint, the 95% interval of the paired per-workload
difference (shielded minus unshielded), and what crashes cost the unshielded heuristic per
episode (crashes, slots of work lost, restart seconds). It changes no registered scenario.

Usage::

    python benchmarks/colocation_study.py                 # edge50-highload and edge50, 5 seeds
    python benchmarks/colocation_study.py --scenarios edge50 --seeds 3
    python benchmarks/colocation_study.py --shares 1 --checkpoints --t4-as --cpu-weights \
        --gavel-maps --tier-as --restart-scales --crash-orders --crash-victims  # no sweep
    python benchmarks/colocation_study.py --out benchmarks/results   # + colocation_study.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

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


def models_to_run(
    shares: list[float],
    checkpoints: list[int],
    t4_as: list[str],
    defaults: Any,
    cpu_weights: tuple[float, ...] = (),
    gavel_maps: tuple[str, ...] = (),
    tier_as: tuple[tuple[str, str], ...] = (),
    restart_scales: tuple[float, ...] = (),
    crash_orders: tuple[str, ...] = (),
    crash_victims: tuple[str, ...] = (),
) -> list[tuple[str, dict[str, Any]]]:
    """The collision models of the study: timeshare, measured, and the one-at-a-time sweep.

    Args:
        shares: ``unmeasured_gpu_share`` values to sweep.
        checkpoints: ``checkpoint_interval`` values to sweep.
        t4_as: measured GPU classes to try for the ``gpu_server`` tier.
        defaults: the scenario's configuration (a swept value equal to it is the
            ``measured`` row, not repeated).
        cpu_weights: ``cpu_starvation_weight`` values to sweep (the CPU model's envelope).
        gavel_maps: ``gavel_model_map`` readings to sweep (the model map's envelope).
        tier_as: ``(tier, class)`` readings of other tiers to try, one row each (a tier's
            pairs then run at, and fail as, that measured class's pairs).
        restart_scales: ``restart_seconds_scale`` values to sweep (the restart cost's
            envelope).
        crash_orders: ``crash_order`` values to sweep (which of one round's placements
            counts as newer, so whose job a same-round overload crashes).
        crash_victims: ``crash_victim`` values to sweep (whose job a failing pair on a GPU
            of three or more workers crashes).

    Returns:
        ``(label, overrides)`` pairs, ``timeshare`` and ``measured`` first.
    """
    from edgesched.envs.colocation import TIER_GPU_CLASS

    out = [
        ("timeshare", {"collision_mode": "timeshare"}),
        ("measured", {"collision_mode": "measured"}),
    ]
    sweeps = (
        ("unmeasured_gpu_share", shares, defaults.unmeasured_gpu_share),
        ("checkpoint_interval", checkpoints, defaults.checkpoint_interval),
        (
            "tier_gpu_classes",
            [(("gpu_server", c),) for c in t4_as],
            (("gpu_server", TIER_GPU_CLASS["gpu_server"]),),
        ),
        (
            "tier_gpu_classes",
            [((t, c),) for t, c in tier_as if c != (TIER_GPU_CLASS[t] or "")],
            None,  # each tier's own default is left out above
        ),
        ("cpu_starvation_weight", cpu_weights, defaults.cpu_starvation_weight),
        ("gavel_model_map", gavel_maps, defaults.gavel_model_map),
        ("restart_seconds_scale", restart_scales, defaults.restart_seconds_scale),
        ("crash_order", crash_orders, defaults.crash_order),
        ("crash_victim", crash_victims, defaults.crash_victim),
    )
    for key, values, default in sweeps:
        for v in values:
            if v == default:
                continue  # that is the measured row
            if key == "tier_gpu_classes" and v[0][0] == "gpu_server":
                label = f"gpu_server T4 as {v[0][1]}"
            elif key == "tier_gpu_classes":
                label = f"{v[0][0]} as {v[0][1]}"
            else:
                label = f"{key}={v}" if isinstance(v, str) else f"{key}={v:g}"
            out.append((f"measured, {label}", {"collision_mode": "measured", key: v}))
    return out


def main() -> None:
    """Print (and optionally write) the shield's effect under each collision model."""
    from edgesched.envs.catalog import hardware_tiers
    from edgesched.envs.colocation import gavel_model_maps
    from edgesched.envs.config_checks import (
        CRASH_ORDERS,
        CRASH_VICTIMS,
        MEASURED_GPU_CLASSES,
    )
    from edgesched.envs.scenarios import get_scenario

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenarios", nargs="+", default=["edge50-highload", "edge50"])
    p.add_argument("--baselines", nargs="+", default=["least_loaded", "random"])
    p.add_argument("--shares", nargs="*", type=float, default=[0.5, 1.5])
    p.add_argument("--checkpoints", nargs="*", type=int, default=[0, 3, 30])
    p.add_argument(
        "--t4-as", nargs="*", default=["k80", "v100"], choices=list(MEASURED_GPU_CLASSES)
    )
    p.add_argument("--cpu-weights", nargs="*", type=float, default=[0.0, 2.0])
    p.add_argument(
        "--gavel-maps", nargs="*", default=["largest_batch"], choices=list(gavel_model_maps())
    )
    p.add_argument(
        "--tier-as",
        nargs="*",
        default=["jetson=k80", "small_server=p100"],
        metavar="TIER=CLASS",
        help="read a hardware tier as a measured GPU class, one row each",
    )
    p.add_argument("--restart-scales", nargs="*", type=float, default=[0.0, 8.0])
    p.add_argument("--crash-orders", nargs="*", default=["random"], choices=list(CRASH_ORDERS))
    p.add_argument("--crash-victims", nargs="*", default=["in_pair"], choices=list(CRASH_VICTIMS))
    p.add_argument("--seeds", type=int, default=5, help="held-out seeds from 10000")
    p.add_argument("--out", default="", help="directory for the results page")
    p.add_argument("--name", default="colocation_study", help="results page name (.md)")
    args = p.parse_args()
    tier_as: list[tuple[str, str]] = []
    for entry in args.tier_as:
        tier, _, cls = entry.partition("=")
        if tier not in hardware_tiers() or cls not in MEASURED_GPU_CLASSES:
            p.error(
                f"--tier-as {entry!r}: need TIER=CLASS with TIER one of "
                f"{sorted(hardware_tiers())} and CLASS one of {list(MEASURED_GPU_CLASSES)}"
            )
        tier_as.append((tier, cls))
    seeds = list(range(10_000, 10_000 + args.seeds))
    rep = Report(args.name, args.out)
    rep.print(f"Held-out seeds {seeds[0]}..{seeds[-1]}, one episode each; JCT in slots.")
    rep.print("")
    rep.print(
        "| scenario | collision model | heuristic | JCT unshielded [95% CI] | "
        "JCT central shield [95% CI] | shield effect | CIs disjoint | paired difference "
        "[95% CI] | crashes | work lost (slots) | restart (s) |"
    )
    rep.print("|---|---|---|---|---|---:|---|---|---:|---:|---:|")
    for name in args.scenarios:
        defaults = get_scenario(name).config()
        sweep = models_to_run(
            args.shares,
            args.checkpoints,
            args.t4_as,
            defaults,
            tuple(args.cpu_weights),
            tuple(args.gavel_maps),
            tuple(tier_as),
            tuple(args.restart_scales),
            tuple(args.crash_orders),
            tuple(args.crash_victims),
        )
        for label, overrides in sweep:
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
                summary = out["none"]["summary"]
                rep.print(
                    f"| {name} | {label} | {base} | {a[0]:.1f} [{a[1]:.1f}, {a[2]:.1f}] | "
                    f"{b[0]:.1f} [{b[1]:.1f}, {b[2]:.1f}] | {100 * (b[0] / a[0] - 1):+.1f}% | "
                    f"{'yes' if disjoint else 'no'} | {d[0]:+.1f} [{d[1]:+.1f}, {d[2]:+.1f}] | "
                    f"{summary.get('crashes', 0.0):.1f} | "
                    f"{summary.get('crash_slots_lost', 0.0):.1f} | "
                    f"{summary.get('restart_seconds', 0.0):.0f} |"
                )
    rep.save()


if __name__ == "__main__":
    main()
