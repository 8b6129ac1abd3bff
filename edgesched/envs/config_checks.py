"""Checks of a :class:`~edgesched.envs.config.SimConfig`: allowed values, ranges, sizes.

Kept apart from the dataclass so that its field list stays readable; every error names the
parameter, the value and what is allowed (:class:`~edgesched.envs.errors.ConfigError`).
"""

from __future__ import annotations

import math
from typing import Any

from .catalog import MODEL_REQUIREMENTS, hardware_tiers
from .errors import ConfigError
from .progress import list_progress_models, tapfinger_min_demand

COLLISION_MODES = ("overload", "timeshare", "reject", "measured")
MEASURED_GPU_CLASSES = ("k80", "p100", "v100")
"""GPU classes with co-location measurements (``data/colocation.json``)."""
REWARD_MODES = ("local", "team")
WAITING_CHARGES = ("home", "every_viewer")
TRACE_WINDOW_RULES = ("any_job", "per_job")
PENDING_REFILLS = ("immediate", "on_advance")
ADVANCE_MODES = ("every_step", "when_idle")
VISIBILITY_MODES = ("home", "shared")
INVALID_ACTION_MODES = ("raise", "defer")
TOPOLOGY_KINDS = ("geometric", "eua", "full")
ARRIVAL_SCOPES = ("node", "cluster")
CONFLICT_RULES = ("random", "fit", "fit_argmax")
CRASH_ORDERS = ("agent", "random")
CRASH_VICTIMS = ("newest", "in_pair")
ALLOC_MODES = ("scale", "grid")
TRACE_FORMAT_CHOICES = ("auto", "philly", "pollux", "alibaba")

MAX_EXPECTED_JOBS = 2_000_000
"""Cap on the jobs an episode is expected to draw (:meth:`SimConfig.expected_jobs`). The
simulator draws every arrival of the episode at reset, before ``max_jobs`` truncates them,
so an ``arrival_rate`` near its range's top would otherwise allocate tens of GiB."""
MAX_JOB_ARRAY_BYTES = 4 << 30
"""Cap (4 GiB) on the estimated size of one episode's per-job arrays
(:meth:`SimConfig.job_array_bytes`); grid allocation modes cost about 27 bytes per job and
level, so this bounds jobs times levels as well."""
MAX_NODES = 2_000
"""Largest ``num_nodes``: the topology's dense N x N path matrices and O(N^3) all-pairs
search make larger clusters impractical (registered scenarios reach 500)."""
MAX_ARRIVAL_CELLS = 20_000_000
"""Cap on ``arrival_slots * num_nodes`` under ``arrival_scope='node'``: arrivals are drawn
per (slot, node) cell, four 8-byte arrays of that many cells (640 MB at the cap)."""
EDGEGOSSIP_MAX_MIN_GAIN = 0.1
"""Largest allowed ``edgegossip_min_gain``. The gain per epoch of an S-shaped curve (``conv_k``
> 1) peaks at its inflection: 0.134 for ncf, 0.144 for deepspeech2, 0.155 for bert. A threshold
above a model's peak stops every job of it at the inflection (quality 0.18-0.49), whatever
its target, so the stop no longer measures flattening gains; 0.1 keeps a margin below 0.134."""


CHOICES: dict[str, tuple[str, ...]] = {
    "collision_mode": COLLISION_MODES,
    "reward_mode": REWARD_MODES,
    "waiting_charge": WAITING_CHARGES,
    "advance": ADVANCE_MODES,
    "visibility": VISIBILITY_MODES,
    "invalid_action": INVALID_ACTION_MODES,
    "topology": TOPOLOGY_KINDS,
    "arrival_scope": ARRIVAL_SCOPES,
    "conflict_rule": CONFLICT_RULES,
    "crash_order": CRASH_ORDERS,
    "crash_victim": CRASH_VICTIMS,
    "alloc_mode": ALLOC_MODES,
    "trace_format": TRACE_FORMAT_CHOICES,
    "trace_window_rule": TRACE_WINDOW_RULES,
    "pending_refill": PENDING_REFILLS,
}
"""Fields with a fixed set of allowed values (``progress_model``'s come from its registry)."""

INT_RANGES: dict[str, tuple[int, int]] = {
    # The cluster keeps dense N x N pair matrices and computes all-pairs paths in O(N^3)
    # (Floyd-Warshall): about 20 s and a few hundred MiB at MAX_NODES, hours beyond.
    "num_nodes": (1, MAX_NODES),
    "region_size": (1, 100_000),
    "arrival_slots": (1, 10_000_000),
    "checkpoint_interval": (0, 10_000_000),
    "diurnal_period_slots": (1, 10_000_000),
    "max_jobs": (0, 10_000_000),
    "pending_slots": (1, 1024),
    "priority_aging_slots": (0, 10_000_000),
    "obs_delay": (0, 1000),
    "max_slots": (1, 10_000_000),
    "max_steps": (1, 100_000_000),
    "topology_seed": (0, 2**63 - 1),
}
"""Integer fields and their closed ranges (``neighbors_k``'s depends on ``num_nodes``)."""

FLOAT_RANGES: dict[str, tuple[float, float]] = {
    "trace_window_start_hours": (-1.0, 1e7),
    "switch_weight": (0.0, 1.0),
    "unmeasured_gpu_share": (0.0, 2.0),
    "cpu_starvation_weight": (0.0, 4.0),
    "restart_seconds_scale": (0.0, 100.0),
    "arrival_rate": (0.0, 1e6),
    "diurnal_amplitude": (0.0, 0.999),
    "burst_prob": (0.0, 1.0),
    "burst_mean_slots": (1.0, 1e9),
    "burst_multiplier": (1.0, 1e3),
    "job_size_median_slots": (1e-3, 1e9),
    "job_size_sigma": (0.0, 5.0),
    "max_epochs": (1e-3, 1e9),
    "slot_seconds": (1e-3, 1e9),
    "contention_exponent": (0.0, 10.0),
    "straggler_scale": (0.0, 1e3),
    "straggler_prob_scale": (0.0, 1e3),
    "edgegossip_min_gain": (0.0, EDGEGOSSIP_MAX_MIN_GAIN),
    "collision_penalty": (0.0, 1e9),
    "resource_cost_weight": (0.0, 1e9),
    "accuracy_gain_weight": (0.0, 1e9),
}
"""Number fields (finite, bools rejected) and their closed ranges."""

PAIR_RANGES: dict[str, tuple[float, float]] = {
    "trace_size_clip": (1e-4, 1e4),
    "target_quality": (0.01, 0.999),
    "link_bandwidth_gbps": (1e-6, 1e6),
    "link_latency_ms": (0.0, 1e6),
}
"""``(low, high)`` fields: both ends in the range and ``low <= high``."""

WEIGHTED_LISTS = ("tier_mix", "models", "sync_mix", "workers_dist")
"""Fields that are non-empty lists of ``(name, weight)`` with a positive total weight."""


def validate(cfg: Any) -> None:
    """Check every value; raise :class:`ConfigError` naming the first bad one."""
    for name, allowed in CHOICES.items():
        _choice(name, getattr(cfg, name), allowed)
    _choice("progress_model", cfg.progress_model, tuple(list_progress_models()))
    for name, (lo, hi) in INT_RANGES.items():
        _int_range(name, getattr(cfg, name), lo, hi)
    _int_range("neighbors_k", cfg.neighbors_k, 0, max(cfg.num_nodes - 1, 0))
    for name, (lo, hi) in FLOAT_RANGES.items():
        _float_range(name, getattr(cfg, name), lo, hi)
    for name, (lo, hi) in PAIR_RANGES.items():
        _pair(name, getattr(cfg, name), lo, hi)
    for name in WEIGHTED_LISTS:
        _weights(name, getattr(cfg, name))
    names = {name for name, _ in cfg.models}
    for entry in cfg.tapfinger_min_demand:
        ok = len(entry) == 3 and entry[0] in names and min(entry[1:]) >= 0 and max(entry[1:]) > 0
        if not ok:
            raise ConfigError(
                f"tapfinger_min_demand entry {entry!r}: need (type, cpu, gpu) with a type "
                f"of models {sorted(names)} and cpu, gpu >= 0, not both 0"
            )
    if not isinstance(cfg.trace_path, str):
        raise ConfigError(f"trace_path={cfg.trace_path!r}: need a file path (string)")
    if not isinstance(cfg.link_bandwidth_graph, str):
        raise ConfigError(
            f"link_bandwidth_graph={cfg.link_bandwidth_graph!r}: need a Topology Zoo "
            "graph name (string), e.g. 'Aarnet'"
        )
    from .colocation import gavel_model_maps  # reads the packaged table: only when checked

    if cfg.gavel_model_map not in gavel_model_maps():
        raise ConfigError(
            f"gavel_model_map={cfg.gavel_model_map!r} is not allowed; use one of "
            f"{list(gavel_model_maps())}"
        )
    for w, _ in cfg.workers_dist:
        _int_range("workers_dist (worker count)", w, 1, 64)
    if not cfg.priority_probs or any(p < 0 for p in cfg.priority_probs):
        raise ConfigError(
            f"priority_probs={cfg.priority_probs!r}: need one or more non-negative "
            "probabilities, one per priority class"
        )
    if not math.isclose(sum(cfg.priority_probs), 1.0, abs_tol=1e-6):
        raise ConfigError(f"priority_probs={cfg.priority_probs!r} must sum to 1")
    if not cfg.alloc_scales or any(s < 1.0 for s in cfg.alloc_scales):
        raise ConfigError(
            f"alloc_scales={cfg.alloc_scales!r}: need one or more multipliers >= 1.0 "
            "(allocations below the minimum demand make no progress)"
        )
    if len(cfg.alloc_grid_max) != 2 or min(cfg.alloc_grid_max) < 1:
        raise ConfigError(
            f"alloc_grid_max={cfg.alloc_grid_max!r}: need (max_cpu, max_gpu), both >= 1"
        )
    if cfg.custom_capacities:
        if len(cfg.custom_capacities) != cfg.num_nodes:
            raise ConfigError(
                f"custom_capacities has {len(cfg.custom_capacities)} entries; "
                f"num_nodes={cfg.num_nodes} requires exactly that many (cpu, gpu, mem)"
            )
        for cap in cfg.custom_capacities:
            if len(cap) != 3 or min(cap) <= 0:
                raise ConfigError(f"custom_capacities entry {cap!r}: need (cpu, gpu, mem), all > 0")
        if cfg.custom_gpu_classes and len(cfg.custom_gpu_classes) != cfg.num_nodes:
            raise ConfigError(
                f"custom_gpu_classes has {len(cfg.custom_gpu_classes)} entries; "
                f"num_nodes={cfg.num_nodes} requires exactly that many"
            )
        bad = [c for c in cfg.custom_gpu_classes if c not in ("", *MEASURED_GPU_CLASSES)]
        if bad:
            raise ConfigError(
                f"custom_gpu_classes={cfg.custom_gpu_classes!r}: {bad} unknown; allowed: "
                f"{list(MEASURED_GPU_CLASSES)} or '' (unmeasured)"
            )
        if cfg.custom_speeds and len(cfg.custom_speeds) != cfg.num_nodes:
            raise ConfigError(
                f"custom_speeds has {len(cfg.custom_speeds)} entries; "
                f"num_nodes={cfg.num_nodes} requires exactly that many"
            )
    tiers = hardware_tiers()
    for entry in cfg.tier_gpu_classes:
        if len(entry) != 2 or entry[0] not in tiers or entry[1] not in ("", *MEASURED_GPU_CLASSES):
            raise ConfigError(
                f"tier_gpu_classes entry {tuple(entry)!r}: need (tier, class) with tier one of "
                f"{sorted(tiers)} and class one of {list(MEASURED_GPU_CLASSES)} or '' "
                "(unmeasured)"
            )
    if cfg.progress_model == "tapfinger" and cfg.alloc_mode != "grid":
        raise ConfigError(
            "progress_model='tapfinger' requires alloc_mode='grid' (TapFinger allocates "
            f"absolute CPU/GPU counts); got alloc_mode={cfg.alloc_mode!r}"
        )
    check_allocations_fit(cfg)
    check_workload_size(cfg)


def check_workload_size(cfg: Any) -> None:
    """Reject workloads whose arrays would not fit in memory, before anything is drawn."""
    if cfg.arrival_scope == "node" and cfg.arrival_slots * cfg.num_nodes > MAX_ARRIVAL_CELLS:
        raise ConfigError(
            f"arrival_slots={cfg.arrival_slots} x num_nodes={cfg.num_nodes} = "
            f"{cfg.arrival_slots * cfg.num_nodes:,} (slot, node) arrival cells; the limit "
            f"is {MAX_ARRIVAL_CELLS:,} under arrival_scope='node': lower arrival_slots or "
            "use arrival_scope='cluster'"
        )
    jobs = cfg.expected_jobs()
    how = (
        f"arrival_rate={cfg.arrival_rate!r} x arrival_slots={cfg.arrival_slots}"
        + (f" x num_nodes={cfg.num_nodes}" if cfg.arrival_scope == "node" else "")
        + " x the diurnal and burst modulation"
    )
    if jobs > MAX_EXPECTED_JOBS:
        raise ConfigError(
            f"arrival_rate={cfg.arrival_rate!r} implies about {jobs:,.0f} jobs per episode "
            f"({how}; every arrival is drawn before max_jobs truncates them); the limit is "
            f"{MAX_EXPECTED_JOBS:,} expected jobs: need arrival_rate <= "
            f"{cfg.arrival_rate * MAX_EXPECTED_JOBS / jobs:.6g} or fewer arrival_slots"
        )
    size = cfg.job_array_bytes()
    if size > MAX_JOB_ARRAY_BYTES:
        raise ConfigError(
            f"arrival_rate={cfg.arrival_rate!r} with {cfg.num_alloc_levels()} allocation "
            f"levels implies about {size / 2**30:.1f} GiB of per-job arrays ({how}, "
            f"max_jobs={cfg.max_jobs}); the limit is {MAX_JOB_ARRAY_BYTES / 2**30:g} GiB: "
            "lower arrival_rate, arrival_slots or max_jobs, or use fewer allocation levels"
        )


def check_allocations_fit(cfg: Any) -> None:
    """Every model must fit on some node at its smallest allocation level.

    A job whose smallest allocation no node can host never gets a feasible placement: it
    waits until truncation and its agent can only defer. Nodes are the entries of
    ``custom_capacities`` or the tiers of ``tier_mix`` with positive weight (any node may
    be drawn from those). Models or tiers unknown here are reported when the simulator is
    built; so are models whose minimum demand exceeds every node (an error of ``models``
    or the nodes, not of the allocation levels).
    """
    if cfg.custom_capacities:
        nodes = [tuple(float(v) for v in cap) for cap in cfg.custom_capacities]
        where = "custom_capacities"
    else:
        tiers = hardware_tiers()
        nodes = [
            (tiers[t].cpu, tiers[t].gpu, tiers[t].mem)
            for t, w in cfg.tier_mix
            if t in tiers and w > 0
        ]
        where = "the tiers of tier_mix"
    if not nodes:
        return
    if cfg.progress_model == "tapfinger":
        names = tuple(name for name, _ in cfg.models)
        given = {n: (c, g) for n, c, g in cfg.tapfinger_min_demand}
        demand = dict(zip(names, map(tuple, tapfinger_min_demand(names, given)), strict=True))
    else:
        demand = {
            name: tuple(float(MODEL_REQUIREMENTS[name][f"min_{r}"]) for r in ("cpu", "gpu", "mem"))
            for name, _ in cfg.models
            if name in MODEL_REQUIREMENTS
        }
    eps = 1e-9  # the simulator's own tolerance for "fits"
    if cfg.alloc_mode == "grid":
        cmax, gmax = cfg.alloc_grid_max
        short = {n: d for n, d in demand.items() if d[0] > cmax + eps or d[1] > gmax + eps}
        if short:
            need = (max(d[0] for d in short.values()), max(d[1] for d in short.values()))
            raise ConfigError(
                f"alloc_grid_max={cfg.alloc_grid_max!r}: no grid level reaches the minimum "
                f"(cpu, gpu) demand of model(s) {short}, so their jobs could never be "
                f"placed; need alloc_grid_max >= ({math.ceil(need[0])}, "
                f"{math.ceil(need[1])}) with these models"
            )
        return

    def largest_scale(d: tuple[float, float, float]) -> float:
        """Largest multiplier of (cpu, gpu) at which some node hosts one worker."""
        best = 0.0
        for cpu, gpu, mem in nodes:
            if d[2] > mem + eps:  # memory is not scaled
                continue
            by_cpu = cpu / d[0] if d[0] > 0 else math.inf
            by_gpu = gpu / d[1] if d[1] > 0 else math.inf
            best = max(best, min(by_cpu, by_gpu))
        return best

    limit = {n: largest_scale(d) for n, d in demand.items()}
    fits_at_all = {n: s for n, s in limit.items() if s >= 1.0 - eps}
    smallest = min(cfg.alloc_scales)
    bad = [n for n, s in fits_at_all.items() if smallest > s * (1 + eps)]
    if bad:
        need = ", ".join(
            f"{n} (cpu {demand[n][0] * smallest:g}, gpu {demand[n][1] * smallest:g})" for n in bad
        )
        raise ConfigError(
            f"alloc_scales={cfg.alloc_scales!r}: at the smallest level {smallest:g} no node "
            f"of {where} can host one worker of {need}, so those jobs could never be "
            "placed; with these models and nodes the smallest scale must lie in "
            f"[1.0, {min(fits_at_all.values()):g}]"
        )


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{name}={value!r} is not allowed; choose one of {list(allowed)}")


def _int_range(name: str, value: Any, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int,)) or not lo <= value <= hi:
        raise ConfigError(f"{name}={value!r} is out of range; need an integer in [{lo}, {hi}]")


def _float_range(name: str, value: Any, lo: float, hi: float) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not lo <= value <= hi:
        raise ConfigError(f"{name}={value!r} is out of range; need a number in [{lo}, {hi}]")


def _pair(name: str, value: Any, lo: float, hi: float) -> None:
    if (
        not isinstance(value, tuple)
        or len(value) != 2
        or not all(isinstance(v, (int, float)) and lo <= v <= hi for v in value)
        or value[0] > value[1]
    ):
        raise ConfigError(f"{name}={value!r}: need (low, high) with {lo} <= low <= high <= {hi}")


def _weights(name: str, value: Any) -> None:
    try:
        ok = len(value) > 0 and all(len(item) == 2 and item[1] >= 0 for item in value)
        ok = ok and sum(item[1] for item in value) > 0
    except TypeError:
        ok = False
    if not ok:
        raise ConfigError(
            f"{name}={value!r}: need a non-empty list of (name, weight) pairs with "
            "non-negative weights and a positive sum"
        )
