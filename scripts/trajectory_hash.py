"""Trajectory hashes of the simulator: one SHA-256 per registered scenario and option variant.

Each hash covers a fixed run of a lone simulator under a seeded random masked policy:
observations, masks, global states, rewards, per-step counters, end flags, the graph view
(every 25 steps), random ``resize`` calls (variants that ask for them) and the episode
metrics of every finished episode; ``central:`` cases hash a run of the Gymnasium central
view the same way. Two code versions with the same hashes produce the same
trajectories bit for bit, which is how refactors of the simulator prove they change no
dynamic (``tests/test_trajectory_hash.py`` compares against ``tests/fixtures``).

Usage::

    python scripts/trajectory_hash.py                 # print the hashes
    python scripts/trajectory_hash.py --write FILE    # store them as JSON
    python scripts/trajectory_hash.py --only edge10   # one scenario, all versions (and variants)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

STEPS = 240
"""Decision rounds per hashed run (several episodes on the short-episode variants)."""

VARIANTS: dict[str, tuple[str, dict[str, Any], bool]] = {
    "edge10-v0+reject": ("edge10-v0", {"collision_mode": "reject"}, False),
    "edge10-v0+shared-random": (
        "edge10-v0",
        {"visibility": "shared", "conflict_rule": "random"},
        False,
    ),
    "edge10-v0+shared-fit-reject": (
        "edge10-v0",
        {"visibility": "shared", "conflict_rule": "fit", "collision_mode": "reject"},
        False,
    ),
    "edge10-v0+team-rewards": (
        "edge10-v0",
        {"reward_mode": "team", "accuracy_gain_weight": 2.0, "resource_cost_weight": 0.5},
        False,
    ),
    "edge10-v0+aging": ("edge10-v0", {"priority_aging_slots": 3, "arrival_rate": 0.6}, False),
    "edge10-v0+when-idle": ("edge10-v0", {"advance": "when_idle"}, False),
    "edge10-v0+stragglers-mixed-sync": (
        "edge10-v0",
        {"straggler_scale": 2.0, "sync_mix": (("ps", 0.5), ("allreduce", 0.5))},
        False,
    ),
    "edge10-v0+obs-delay": ("edge10-v0", {"obs_delay": 2}, False),
    "edge10-v0+resize": ("edge10-v0", {}, True),
    "edge10-v0+contention2": (
        "edge10-v0",
        {"contention_exponent": 2.0, "arrival_rate": 0.6},
        False,
    ),
    "edge10-v0+pending3": ("edge10-v0", {"pending_slots": 3}, False),
    "edge10-v0+short-resize": ("edge10-v0", {"max_steps": 40}, True),
    "tapfinger-hetero6-v0+fit-argmax": (
        "tapfinger-hetero6-v0",
        {"conflict_rule": "fit_argmax"},
        False,
    ),
    # the v1 dynamics (measured co-location) under resizes, stale views and shared queues
    "edge10-v1+resize": ("edge10-v1", {}, True),
    "edge10-v1+short-resize": ("edge10-v1", {"max_steps": 40}, True),
    "edge10-v1+obs-delay": ("edge10-v1", {"obs_delay": 2}, False),
    "edge10-v1+shared-random": (
        "edge10-v1",
        {"visibility": "shared", "conflict_rule": "random"},
        False,
    ),
    "edge10-v1+checkpoint3": ("edge10-v1", {"checkpoint_interval": 3, "arrival_rate": 0.3}, False),
    # the measured model's assumption parameters and re-allocation's switch weight
    "edge10-v1+tier-classes-cpu-weight": (
        "edge10-v1",
        {"tier_gpu_classes": (("gpu_server", "v100"),), "cpu_starvation_weight": 2.0},
        False,
    ),
    "edge10-v1+gavel-largest-batch": ("edge10-v1", {"gavel_model_map": "largest_batch"}, False),
    # ResNet-50s on K80s only: crashed jobs restart within the run
    "edge10-v1+restart-scale": (
        "edge10-v1",
        {
            "models": (("imagenet", 1.0),),
            "tier_mix": (("small_server", 1.0),),
            "restart_seconds_scale": 8.0,
        },
        False,
    ),
    # the same crash-prone mix with each round's placements in a random order
    "edge10-v1+crash-order-random": (
        "edge10-v1",
        {
            "models": (("imagenet", 1.0),),
            "tier_mix": (("small_server", 1.0),),
            "crash_order": "random",
        },
        False,
    ),
    # ResNet-50s and ResNet-18s on K80s: a failing pair sometimes shares its GPU with a newer
    # third worker (rare: of the mixes and rates tried, this is the first whose run differs
    # from crash_victim="newest")
    "edge10-v1+crash-victim-in-pair": (
        "edge10-v1",
        {
            "models": (("imagenet", 0.5), ("cifar10", 0.5)),
            "tier_mix": (("small_server", 1.0),),
            "arrival_rate": 0.4,
            "crash_victim": "in_pair",
        },
        False,
    ),
    "edge10-v1+switch-weight-resize": ("edge10-v1", {"switch_weight": 0.5}, True),
    # the original TapFinger code's rules (issue 21), together and the per-type minimum
    "tapfinger-hetero6-v0+original-rules": (
        "tapfinger-hetero6-v0",
        {
            "pending_refill": "on_advance",
            "waiting_charge": "every_viewer",
            "conflict_rule": "fit_argmax",
        },
        False,
    ),
    "tapfinger-hetero6-v0+min-demand": (
        "tapfinger-hetero6-v0",
        {"tapfinger_min_demand": (("IMG", 1.0, 1.0), ("LM", 1.0, 1.0))},
        False,
    ),
}
"""Option variants beyond the registered scenarios: name -> (scenario, overrides, resize)."""


def _feed(h: Any, x: Any) -> None:
    if isinstance(x, np.ndarray):
        h.update(str(x.dtype).encode() + str(x.shape).encode())
        h.update(np.ascontiguousarray(x).tobytes())
    elif isinstance(x, dict):
        for k in sorted(x, key=str):
            h.update(repr(k).encode())
            _feed(h, x[k])
    elif isinstance(x, list | tuple):
        h.update(b"[")
        for v in x:
            _feed(h, v)
        h.update(b"]")
    elif isinstance(x, float | np.floating):
        h.update(float(x).hex().encode() if np.isfinite(x) else repr(float(x)).encode())
    elif isinstance(x, bool | np.bool_):
        h.update(b"T" if x else b"F")
    elif isinstance(x, int | np.integer):
        h.update(str(int(x)).encode())
    else:
        h.update(repr(x).encode())


def trajectory_hash(
    scenario: str, overrides: dict[str, Any] | None = None, resize: bool = False, steps: int = STEPS
) -> str:
    """SHA-256 of a fixed random-policy run of ``scenario`` (see the module docstring)."""
    from edgesched.envs import EdgeClusterSim, make_config

    cfg = make_config(scenario, **(overrides or {}))
    sim = EdgeClusterSim(cfg)
    rng = np.random.default_rng(12345)
    h = hashlib.sha256()
    seed = 7
    sim.reset(seed)
    for i in range(steps):
        _feed(h, [sim.obs, sim.mask, sim.state()])
        if i % 25 == 0:
            _feed(h, sim.graph())
        if resize and cfg.alloc_mode == "scale":
            running = np.sort(sim.running)
            if len(running):
                delta = rng.integers(-1, 2, size=len(running))
                _feed(h, sim.resize(running, delta))
        mask = sim.mask
        act = (rng.random(mask.shape) * mask).argmax(axis=1)
        # one agent in eight proposes any action: invalid ones are deferred and counted
        wild = rng.random(len(act)) < 0.125
        act = np.where(wild, rng.integers(0, mask.shape[1], size=len(act)), act)
        rewards, info = sim.step(act)
        _feed(h, [rewards, info, bool(sim.terminated), bool(sim.truncated)])
        if sim.terminated or sim.truncated:
            _feed(h, sim.episode_metrics())
            seed += 1
            sim.reset(seed)
    _feed(h, sim.episode_metrics())  # the unfinished episode's metrics (right-censored)
    return h.hexdigest()


CENTRAL_STEPS = 1500
"""Decisions per hashed run of the central view (one per queued task, so many per slot)."""


def central_hash(
    scenario: str, overrides: dict[str, Any] | None = None, steps: int = CENTRAL_STEPS
) -> str:
    """SHA-256 of a fixed random-policy run of ``scenario``'s Gymnasium central view.

    Covers observations, action masks, rewards, infos, end flags and the metrics of every
    finished episode; episodes run the multi-agent views' workloads (``workload_seed``).
    """
    from edgesched.envs import EdgeSchedCentralEnv

    env = EdgeSchedCentralEnv(scenario, **(overrides or {}))
    rng = np.random.default_rng(12345)
    h = hashlib.sha256()
    seed = 7
    obs, info = env.reset(options={"workload_seed": seed})
    _feed(h, [obs, info])
    for _ in range(steps):
        mask = env.action_masks()
        act = int((rng.random(mask.shape) * mask).argmax())
        if rng.random() < 0.125:  # any action: an invalid one passes and is counted
            act = int(rng.integers(0, len(mask)))
        obs, reward, term, trunc, info = env.step(act)
        _feed(h, [mask, obs, float(reward), info, bool(term), bool(trunc)])
        if term or trunc:
            _feed(h, env.last_episode_metrics)
            seed += 1
            obs, info = env.reset(options={"workload_seed": seed})
    return h.hexdigest()


CENTRAL_PREFIX = "central:"
"""Cases of the central view: ``central:<versioned id>``."""


def all_cases() -> dict[str, tuple[str, dict[str, Any], bool]]:
    """Every registered version of every scenario (stock parameters) and every option variant.

    Keys are versioned ids (``edge10-v0``): an earlier version keeps its hash after a
    scenario moves on, so its records stay reproducible. ``central:<id>`` cases run the
    central view of each scenario's current version (short episodes, so that several end),
    one with priority aging.
    """
    from edgesched.envs import get_scenario, list_scenarios, scenario_versions

    ids = [s.id for name in list_scenarios() for s in scenario_versions(name)]
    cases = {sid: (sid, {}, False) for sid in ids}
    # short episodes of every scenario: resets and full episode metrics several times
    cases.update({f"{sid}+short": (sid, {"max_steps": 60}, False) for sid in ids})
    cases.update(VARIANTS)
    current = [get_scenario(name).id for name in list_scenarios()]
    short = {"max_slots": 60}
    cases.update({f"{CENTRAL_PREFIX}{sid}": (sid, short, False) for sid in current})
    edge10 = get_scenario("edge10").id
    cases[f"{CENTRAL_PREFIX}{edge10}+aging"] = (edge10, {**short, "priority_aging_slots": 3}, False)
    return cases


def case_hash(case: str) -> str:
    """The hash of case ``case`` of :func:`all_cases` (simulator or central view)."""
    name, overrides, resize = all_cases()[case]
    if case.startswith(CENTRAL_PREFIX):
        return central_hash(name, overrides)
    return trajectory_hash(name, overrides, resize)


def main(argv: list[str] | None = None) -> int:
    """Print (or write) the trajectory hashes; skips scenarios whose data is missing."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--write", type=Path, help="store the hashes in this JSON file")
    p.add_argument("--only", help="only this scenario and its variants")
    args = p.parse_args(argv)
    import edgesched

    out: dict[str, str] = {}
    for case, (name, _, _) in all_cases().items():
        if args.only and args.only not in (name, name.rpartition("-v")[0]):
            continue
        if not all(r.available for r in edgesched.data_requirements(name)):
            print(f"{case:32s} skipped (data missing)", file=sys.stderr)
            continue
        out[case] = case_hash(case)
        print(f"{case:32s} {out[case]}", flush=True)
    if args.write:
        args.write.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
