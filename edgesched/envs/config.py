"""Scenario parameters: one validated, immutable dataclass for every knob of the simulator.

Every field has a documented meaning and an allowed range. ``SimConfig.from_dict`` rejects
unknown keys and out-of-range values with an error that names the key, the value and what is
allowed, so a typo in a Hydra override or a ``make_parallel(..., **overrides)`` call fails at
construction instead of silently changing nothing.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Mapping
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
CONFLICT_RULES = ("random", "fit")
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


@dataclasses.dataclass(frozen=True)
class SimConfig:
    """All parameters of one scenario.

    Attributes are grouped as in DESIGN §3. Defaults describe a small mixed-tier edge cluster;
    the named scenarios in :mod:`edgesched.envs.scenarios` override what they need.
    """

    # --- cluster -------------------------------------------------------------------------
    num_nodes: int = 10
    """Number of edge nodes (= agents)."""
    tier_mix: tuple[tuple[str, float], ...] = (
        ("jetson", 0.3),
        ("small_server", 0.4),
        ("gpu_server", 0.3),
    )
    """Hardware tiers (names from :data:`edgesched.envs.catalog.HARDWARE_TIERS`) and weights."""
    custom_capacities: tuple[tuple[float, float, float], ...] = ()
    """If non-empty, exact (cpu, gpu, mem) per node, overriding ``tier_mix`` (TapFinger)."""
    custom_speeds: tuple[float, ...] = ()
    """Speed factor per node when ``custom_capacities`` is used (default 1.0 each)."""
    custom_gpu_classes: tuple[str, ...] = ()
    """With ``custom_capacities``: each node's measured GPU class for
    ``collision_mode='measured'`` (``k80``, ``p100``, ``v100``, or ``""`` for unmeasured);
    empty: every custom node is unmeasured."""
    topology: str = "geometric"
    """``geometric`` (random geometric graph), ``eua`` (Melbourne sites) or ``full``."""
    topology_seed: int = 0
    """Seed of the static cluster (tiers, positions, links); workloads use the episode seed."""
    neighbors_k: int = 4
    """K: each agent may place on itself and its K nearest reachable nodes."""
    region_size: int = 10
    """Approximate number of nodes per region (regional shields)."""
    link_bandwidth_gbps: tuple[float, float] = (1.0, 10.0)
    """Range of per-link bandwidth in Gbit/s (uniform in log-space)."""
    link_latency_ms: tuple[float, float] = (1.0, 10.0)
    """Range of per-link latency in milliseconds (grows with distance)."""
    link_bandwidth_graph: str = ""
    """If set, the name of a Topology Zoo graph (e.g. ``Aarnet``, read from the real-data
    folder's ``topology-zoo/gml.tar.gz``) whose measured link capacities the link bandwidths
    are resampled from, instead of the ``link_bandwidth_gbps`` range."""

    # --- workload ------------------------------------------------------------------------
    arrival_rate: float = 0.05
    """Base Poisson rate of job arrivals per node per slot (``arrival_scope=node``) or per slot
    (``cluster``). The diurnal and burst modulation multiply it, so an episode's mean rate is
    higher: x1.31 with the edge scenarios' settings (the sinusoid starts at phase 0 and rises
    over their 200 arrival slots; bursts triple the rate about 10% of the time). Trace-driven
    workloads are rescaled to exactly this long-run rate."""
    arrival_scope: str = "node"
    """``node``: Poisson per node, home = that node. ``cluster``: one Poisson stream."""
    diurnal_amplitude: float = 0.3
    """Relative amplitude of the sinusoidal daily modulation of the arrival rate, in [0, 1)."""
    diurnal_period_slots: int = 1440
    """Period of the diurnal modulation in slots (1440 slots of 60 s = one day)."""
    burst_prob: float = 0.01
    """Per-slot probability that a burst starts (cluster-wide)."""
    burst_mean_slots: float = 10.0
    """Mean burst duration in slots (geometric)."""
    burst_multiplier: float = 3.0
    """Arrival-rate multiplier while a burst lasts."""
    arrival_slots: int = 200
    """Slots during which jobs arrive; afterwards the cluster drains."""
    max_jobs: int = 0
    """Cap on jobs per episode (0 = no cap). TapFinger uses 384."""
    trace_path: str = ""
    """If set, arrivals, GPU counts and job sizes come from this job trace instead of the
    Poisson model (:mod:`edgesched.envs.workloads`); relative paths are also looked up in the
    real-data folder. ``arrival_rate`` then sets the long-run rate the trace is rescaled to;
    the diurnal and burst parameters are not used (the trace has its own)."""
    trace_format: str = "auto"
    """``auto`` (detect from the header), ``philly``, ``pollux`` or ``alibaba``."""
    trace_window_start_hours: float = -1.0
    """Trace replay window: < 0 draws each episode's start from the trace (seeded); >= 0
    replays the window starting that many hours after the trace's first submission."""
    trace_size_clip: tuple[float, float] = (0.05, 20.0)
    """Bounds of a trace job's size relative to the trace's median job."""
    trace_window_rule: str = "any_job"
    """How a random replay window is drawn (``trace_window_start_hours < 0``): ``any_job``
    (v0), uniform over the trace's span, redrawn while empty; ``per_job``, around a job drawn
    uniformly (the window starts up to one window length before it), so windows fall where
    the trace has jobs in proportion to how many it has there."""
    trace_drop_never_ran: bool = False
    """Drop trace records that never ran (an Alibaba pod never scheduled, a Philly job of
    zero duration) instead of replaying them as submitted jobs (v0 keeps them)."""
    models: tuple[tuple[str, float], ...] = (
        ("cifar10", 0.25),
        ("imagenet", 0.1),
        ("bert", 0.15),
        ("deepspeech2", 0.15),
        ("ncf", 0.2),
        ("yolov3", 0.15),
    )
    """Model catalog entries and their sampling weights."""
    workers_dist: tuple[tuple[int, float], ...] = ((1, 0.5), (2, 0.3), (4, 0.2))
    """Distribution of data-parallel workers per job."""
    priority_probs: tuple[float, ...] = (0.2, 0.5, 0.3)
    """Probabilities of priority classes 0 (highest) .. P-1."""
    sync_mix: tuple[tuple[str, float], ...] = (("ps", 0.4), ("allreduce", 0.4), ("gossip", 0.2))
    """Synchronization schemes and their sampling weights (names from the sync registry)."""
    job_size_median_slots: float = 6.0
    """Median time (slots) one reference worker needs to reach 90% of the model's quality."""
    job_size_sigma: float = 0.8
    """Log-normal sigma of job sizes (heavy tail, as in Philly durations)."""
    target_quality: tuple[float, float] = (0.85, 0.97)
    """Range of per-job target normalized quality (uniform)."""
    max_epochs: float = 15.0
    """Epoch limit; an epoch is a tenth of the samples a job needs for 90% quality."""
    priority_aging_slots: int = 0
    """Starvation protection: a queued job moves up one priority class (towards 0) for
    every this many slots it has waited; 0 keeps strict priority (a low class can starve)."""
    visibility: str = "home"
    """``home``: a job is queued at its home agent. ``shared``: at a random subset of agents."""
    conflict_rule: str = "random"
    """Winner of a task conflict under ``shared``: ``random`` or ``fit`` (TapFinger's fit)."""
    tapfinger_min_demand: tuple[tuple[str, float, float], ...] = ()
    """``progress_model='tapfinger'``: (type, cpu, gpu) minimum requirements per task type
    (the original code's per-type ``job_min_requirement``); types not listed need the
    constant (2 cores, 1 GPU)."""
    progress_model: str = "profile"
    """``profile``: measured throughput/convergence. ``tapfinger``: DESIGN §4.4 formulas."""

    # --- execution -----------------------------------------------------------------------
    slot_seconds: float = 60.0
    """Length of one slot in seconds."""
    contention_exponent: float = 1.0
    """Overloaded node slows its tasks by ``oversubscription ** contention_exponent``."""
    straggler_scale: float = 1.0
    """Multiplies the heavy-tailed straggler excess; 0 disables stragglers."""
    straggler_prob_scale: float = 1.0
    """Multiplies the probability that a worker straggles in a slot (capped at 1)."""
    edgegossip_min_gain: float = 0.01
    """``edgegossip`` jobs stop once their accuracy gain per epoch, past the curve's
    inflection, falls below this (0.01 = 1 point per epoch); 0 turns the stop off. At most
    :data:`EDGEGOSSIP_MAX_MIN_GAIN` (0.1): larger thresholds stop jobs at their curve's
    inflection whatever their target."""

    # --- decisions -----------------------------------------------------------------------
    alloc_mode: str = "scale"
    """``scale``: allocation = minimum demand x ``alloc_scales``. ``grid``: absolute grid."""
    alloc_scales: tuple[float, ...] = (1.0, 2.0, 4.0)
    """Multipliers of (cpu, gpu) minimum demand offered as allocation levels. The smallest must
    let some node (a tier of ``tier_mix`` with positive weight, or an entry of
    ``custom_capacities``) host one worker of every model in ``models``."""
    alloc_grid_max: tuple[int, int] = (16, 16)
    """Grid mode: largest CPU and GPU count per task (grid is 0..max x 0..max, (0,0) = skip)."""
    pending_refill: str = "immediate"
    """How an agent's pending slots fill: ``immediate`` (v0), always the first
    ``pending_slots`` jobs of its queue; ``on_advance`` (the original TapFinger code), slots
    keep their jobs, a slot freed by a placement stays empty until the clock advances, and
    then new arrivals take empty slots before the rest of the queue refills them."""
    pending_slots: int = 1
    """Tasks an agent may choose among (1 = always the head of its queue)."""
    collision_mode: str = "overload"
    """``timeshare`` (``overload`` is its v0 name): accept all; an overloaded node time-shares
    perfectly, slowing its tasks by ``oversubscription ** contention_exponent``.
    ``measured``: accept all; shared GPUs, oversubscribed cores and memory cost what public
    measurements say, and failing pairs or memory overflow crash jobs
    (:mod:`edgesched.envs.colocation`). ``reject``: per node, visit the placements in random
    order and admit each that still fits (first fit; a placement that does not fit is
    rejected and later ones are still tried)."""
    switch_weight: float = 1.0
    """A slot in which a running job's allocation changed (``resize``) makes this fraction of
    its progress: the cost of stopping and restarting its workers on the new allocation
    (TapFinger's ``switch_weight``; 1 = free, the v0 behaviour)."""
    checkpoint_interval: int = 10
    """``measured``: a running job checkpoints every this many slots of running; a crash
    loses the progress since (0: never, a crash restarts from scratch). Assumed: 10 slots."""
    unmeasured_gpu_share: float = 1.0
    """``measured``: on GPUs without measurements (Jetson-class boards, custom capacities),
    each of ``k`` workers sharing a GPU runs at ``unmeasured_gpu_share / (k * m_k)`` of its
    speed alone (time-slicing with Muri's interleaving multiplier ``m_k``; assumed)."""
    advance: str = "every_step"
    """``every_step``: clock advances every step. ``when_idle``: only when nobody places."""
    obs_delay: int = 0
    """Neighbours' load in observations is this many slots old. The action mask stays current
    (it is exactly the feasible set), so staleness hides load trends and the other agents'
    concurrent choices, not which single placement fits now."""
    invalid_action: str = "defer"
    """``defer`` (default): an out-of-range or masked action defers and is counted (per step
    in ``info['invalid_actions']``, per episode in the metrics), the convention of PettingZoo
    tooling that samples without the mask. ``raise``: strict, raise ``InvalidActionError``
    and leave the simulator unchanged (leaderboard evaluation runs strict)."""
    max_slots: int = 400
    """Truncation: episode ends after this many slots."""
    max_steps: int = 5000
    """Truncation: episode ends after this many decision rounds (matters for ``when_idle``)."""

    # --- rewards -------------------------------------------------------------------------
    reward_mode: str = "local"
    """``local``: each agent pays for its own jobs. ``team``: each pays for all jobs / N."""
    waiting_charge: str = "home"
    """Who pays for a queued job each slot under ``visibility='shared'``: ``home``, its home
    agent only (so the summed reward is minus the total JCT, Little's law), or
    ``every_viewer``, every agent whose queue holds it (the original TapFinger code's
    per-agent reward; the sum then over-counts shared jobs)."""
    collision_penalty: float = 0.0
    """Penalty per collision an agent's placement took part in."""
    resource_cost_weight: float = 0.0
    """Per-slot cost of the agent's allocated resources: per worker of its running jobs,
    CPUs / the largest node's CPUs + GPUs / the largest node's GPUs, summed (may exceed 1)."""
    accuracy_gain_weight: float = 0.0
    """Reward per unit gain of normalized quality of the agent's jobs."""

    # --- data ----------------------------------------------------------------------------
    data_dir: str = ""
    """Folder with the real data sets (read by ``topology=eua``, ``link_bandwidth_graph`` and
    relative ``trace_path`` files); default: auto-detect."""

    @classmethod
    def field_names(cls) -> list[str]:
        """Return the names of all parameters."""
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, params: Mapping[str, Any]) -> SimConfig:
        """Build a validated config, rejecting unknown keys with close-match suggestions.

        Args:
            params: parameter names and values; sequences are converted to tuples.

        Returns:
            The validated configuration.

        Raises:
            ConfigError: a key is unknown or a value is out of range.
        """
        names = cls.field_names()
        clean: dict[str, Any] = {}
        for key, value in params.items():
            if key not in names:
                close = difflib.get_close_matches(key, names, n=3)
                hint = f" Did you mean {close}?" if close else ""
                raise ConfigError(
                    f"unknown scenario parameter {key!r} (value {value!r}).{hint} "
                    f"Allowed parameters: {', '.join(names)}"
                )
            clean[key] = _freeze(value)
        cfg = cls(**clean)
        cfg.validate()
        return cfg

    def replace(self, **overrides: Any) -> SimConfig:
        """Return a validated copy with ``overrides`` applied (same checks as ``from_dict``)."""
        merged = dataclasses.asdict(self)
        merged.update(overrides)
        return SimConfig.from_dict(merged)

    def validate(self) -> None:
        """Check every value; raise :class:`ConfigError` naming the first bad one."""
        _choice("collision_mode", self.collision_mode, COLLISION_MODES)
        _choice("reward_mode", self.reward_mode, REWARD_MODES)
        _choice("waiting_charge", self.waiting_charge, WAITING_CHARGES)
        _choice("advance", self.advance, ADVANCE_MODES)
        _choice("visibility", self.visibility, VISIBILITY_MODES)
        _choice("invalid_action", self.invalid_action, INVALID_ACTION_MODES)
        _choice("topology", self.topology, TOPOLOGY_KINDS)
        _choice("arrival_scope", self.arrival_scope, ARRIVAL_SCOPES)
        _choice("progress_model", self.progress_model, tuple(list_progress_models()))
        names = {name for name, _ in self.models}
        for entry in self.tapfinger_min_demand:
            ok = (
                len(entry) == 3 and entry[0] in names and min(entry[1:]) >= 0 and max(entry[1:]) > 0
            )
            if not ok:
                raise ConfigError(
                    f"tapfinger_min_demand entry {entry!r}: need (type, cpu, gpu) with a type "
                    f"of models {sorted(names)} and cpu, gpu >= 0, not both 0"
                )
        _choice("conflict_rule", self.conflict_rule, CONFLICT_RULES)
        _choice("alloc_mode", self.alloc_mode, ALLOC_MODES)
        _choice("trace_format", self.trace_format, TRACE_FORMAT_CHOICES)
        if not isinstance(self.trace_path, str):
            raise ConfigError(f"trace_path={self.trace_path!r}: need a file path (string)")
        if not isinstance(self.link_bandwidth_graph, str):
            raise ConfigError(
                f"link_bandwidth_graph={self.link_bandwidth_graph!r}: need a Topology Zoo "
                "graph name (string), e.g. 'Aarnet'"
            )
        _float_range("trace_window_start_hours", self.trace_window_start_hours, -1.0, 1e7)
        _choice("trace_window_rule", self.trace_window_rule, TRACE_WINDOW_RULES)
        _pair("trace_size_clip", self.trace_size_clip, 1e-4, 1e4)
        # The cluster keeps dense N x N pair matrices and computes all-pairs paths in O(N^3)
        # (Floyd-Warshall): about 20 s and a few hundred MiB at MAX_NODES, hours beyond.
        _int_range("num_nodes", self.num_nodes, 1, MAX_NODES)
        _int_range("neighbors_k", self.neighbors_k, 0, max(self.num_nodes - 1, 0))
        _int_range("region_size", self.region_size, 1, 100_000)
        _int_range("arrival_slots", self.arrival_slots, 1, 10_000_000)
        _int_range("checkpoint_interval", self.checkpoint_interval, 0, 10_000_000)
        _float_range("switch_weight", self.switch_weight, 0.0, 1.0)
        _float_range("unmeasured_gpu_share", self.unmeasured_gpu_share, 0.0, 2.0)
        _int_range("diurnal_period_slots", self.diurnal_period_slots, 1, 10_000_000)
        _int_range("max_jobs", self.max_jobs, 0, 10_000_000)
        _int_range("pending_slots", self.pending_slots, 1, 1024)
        _choice("pending_refill", self.pending_refill, PENDING_REFILLS)
        _int_range("priority_aging_slots", self.priority_aging_slots, 0, 10_000_000)
        _int_range("obs_delay", self.obs_delay, 0, 1000)
        _int_range("max_slots", self.max_slots, 1, 10_000_000)
        _int_range("max_steps", self.max_steps, 1, 100_000_000)
        _int_range("topology_seed", self.topology_seed, 0, 2**63 - 1)
        _float_range("arrival_rate", self.arrival_rate, 0.0, 1e6)
        _float_range("diurnal_amplitude", self.diurnal_amplitude, 0.0, 0.999)
        _float_range("burst_prob", self.burst_prob, 0.0, 1.0)
        _float_range("burst_mean_slots", self.burst_mean_slots, 1.0, 1e9)
        _float_range("burst_multiplier", self.burst_multiplier, 1.0, 1e3)
        _float_range("job_size_median_slots", self.job_size_median_slots, 1e-3, 1e9)
        _float_range("job_size_sigma", self.job_size_sigma, 0.0, 5.0)
        _float_range("max_epochs", self.max_epochs, 1e-3, 1e9)
        _float_range("slot_seconds", self.slot_seconds, 1e-3, 1e9)
        _float_range("contention_exponent", self.contention_exponent, 0.0, 10.0)
        _float_range("straggler_scale", self.straggler_scale, 0.0, 1e3)
        _float_range("straggler_prob_scale", self.straggler_prob_scale, 0.0, 1e3)
        _float_range("edgegossip_min_gain", self.edgegossip_min_gain, 0.0, EDGEGOSSIP_MAX_MIN_GAIN)
        _float_range("collision_penalty", self.collision_penalty, 0.0, 1e9)
        _float_range("resource_cost_weight", self.resource_cost_weight, 0.0, 1e9)
        _float_range("accuracy_gain_weight", self.accuracy_gain_weight, 0.0, 1e9)
        _pair("target_quality", self.target_quality, 0.01, 0.999)
        _pair("link_bandwidth_gbps", self.link_bandwidth_gbps, 1e-6, 1e6)
        _pair("link_latency_ms", self.link_latency_ms, 0.0, 1e6)
        _weights("tier_mix", self.tier_mix)
        _weights("models", self.models)
        _weights("sync_mix", self.sync_mix)
        _weights("workers_dist", self.workers_dist)
        for w, _ in self.workers_dist:
            _int_range("workers_dist (worker count)", w, 1, 64)
        if not self.priority_probs or any(p < 0 for p in self.priority_probs):
            raise ConfigError(
                f"priority_probs={self.priority_probs!r}: need one or more non-negative "
                "probabilities, one per priority class"
            )
        if not math.isclose(sum(self.priority_probs), 1.0, abs_tol=1e-6):
            raise ConfigError(f"priority_probs={self.priority_probs!r} must sum to 1")
        if not self.alloc_scales or any(s < 1.0 for s in self.alloc_scales):
            raise ConfigError(
                f"alloc_scales={self.alloc_scales!r}: need one or more multipliers >= 1.0 "
                "(allocations below the minimum demand make no progress)"
            )
        if len(self.alloc_grid_max) != 2 or min(self.alloc_grid_max) < 1:
            raise ConfigError(
                f"alloc_grid_max={self.alloc_grid_max!r}: need (max_cpu, max_gpu), both >= 1"
            )
        if self.custom_capacities:
            if len(self.custom_capacities) != self.num_nodes:
                raise ConfigError(
                    f"custom_capacities has {len(self.custom_capacities)} entries; "
                    f"num_nodes={self.num_nodes} requires exactly that many (cpu, gpu, mem)"
                )
            for cap in self.custom_capacities:
                if len(cap) != 3 or min(cap) <= 0:
                    raise ConfigError(
                        f"custom_capacities entry {cap!r}: need (cpu, gpu, mem), all > 0"
                    )
            if self.custom_gpu_classes and len(self.custom_gpu_classes) != self.num_nodes:
                raise ConfigError(
                    f"custom_gpu_classes has {len(self.custom_gpu_classes)} entries; "
                    f"num_nodes={self.num_nodes} requires exactly that many"
                )
            bad = [c for c in self.custom_gpu_classes if c not in ("", *MEASURED_GPU_CLASSES)]
            if bad:
                raise ConfigError(
                    f"custom_gpu_classes={self.custom_gpu_classes!r}: {bad} unknown; allowed: "
                    f"{list(MEASURED_GPU_CLASSES)} or '' (unmeasured)"
                )
            if self.custom_speeds and len(self.custom_speeds) != self.num_nodes:
                raise ConfigError(
                    f"custom_speeds has {len(self.custom_speeds)} entries; "
                    f"num_nodes={self.num_nodes} requires exactly that many"
                )
        if self.progress_model == "tapfinger" and self.alloc_mode != "grid":
            raise ConfigError(
                "progress_model='tapfinger' requires alloc_mode='grid' (TapFinger allocates "
                f"absolute CPU/GPU counts); got alloc_mode={self.alloc_mode!r}"
            )
        self._check_allocations_fit()
        self._check_workload_size()

    # ------------------------------------------------------------------ derived sizes
    def num_alloc_levels(self) -> int:
        """Number of allocation levels per placement (``alloc_scales`` or the grid's size)."""
        if self.alloc_mode == "grid":
            cmax, gmax = self.alloc_grid_max
            return (cmax + 1) * (gmax + 1) - 1  # (0, 0) is the defer action
        return len(self.alloc_scales)

    def expected_jobs(self) -> float:
        """Upper estimate of the jobs one episode draws, before ``max_jobs`` truncates them.

        ``arrival_rate * arrival_slots`` (times ``num_nodes`` under ``arrival_scope='node'``),
        times the largest mean the modulation can have: ``1 + diurnal_amplitude`` for the
        sinusoid and ``1 + min(1, burst_prob * burst_mean_slots) * (burst_multiplier - 1)``
        for bursts. Trace-driven workloads are rescaled to ``arrival_rate`` and counted alike.
        """
        streams = self.num_nodes if self.arrival_scope == "node" else 1
        burst = 1.0 + min(1.0, self.burst_prob * self.burst_mean_slots) * (
            self.burst_multiplier - 1.0
        )
        return (
            self.arrival_rate
            * self.arrival_slots
            * streams
            * (1.0 + self.diurnal_amplitude)
            * burst
        )

    def job_array_bytes(self) -> float:
        """Estimated bytes of one episode's per-job arrays (:meth:`expected_jobs` jobs).

        About 640 bytes per job plus 27 per job and allocation level (measured with
        ``tracemalloc`` on edge10 and tapfinger-hetero6), plus 17 per job and node under
        ``visibility='shared'`` (each job draws a random order of all agents).
        """
        jobs = self.expected_jobs()
        if self.max_jobs:
            jobs = min(jobs, float(self.max_jobs))
        per_job = 640.0 + 27.0 * self.num_alloc_levels()
        if self.visibility == "shared":
            per_job += 17.0 * self.num_nodes
        return jobs * per_job

    def _check_workload_size(self) -> None:
        """Reject workloads whose arrays would not fit in memory, before anything is drawn."""
        if self.arrival_scope == "node" and self.arrival_slots * self.num_nodes > MAX_ARRIVAL_CELLS:
            raise ConfigError(
                f"arrival_slots={self.arrival_slots} x num_nodes={self.num_nodes} = "
                f"{self.arrival_slots * self.num_nodes:,} (slot, node) arrival cells; the limit "
                f"is {MAX_ARRIVAL_CELLS:,} under arrival_scope='node': lower arrival_slots or "
                "use arrival_scope='cluster'"
            )
        jobs = self.expected_jobs()
        how = (
            f"arrival_rate={self.arrival_rate!r} x arrival_slots={self.arrival_slots}"
            + (f" x num_nodes={self.num_nodes}" if self.arrival_scope == "node" else "")
            + " x the diurnal and burst modulation"
        )
        if jobs > MAX_EXPECTED_JOBS:
            raise ConfigError(
                f"arrival_rate={self.arrival_rate!r} implies about {jobs:,.0f} jobs per episode "
                f"({how}; every arrival is drawn before max_jobs truncates them); the limit is "
                f"{MAX_EXPECTED_JOBS:,} expected jobs: need arrival_rate <= "
                f"{self.arrival_rate * MAX_EXPECTED_JOBS / jobs:.6g} or fewer arrival_slots"
            )
        size = self.job_array_bytes()
        if size > MAX_JOB_ARRAY_BYTES:
            raise ConfigError(
                f"arrival_rate={self.arrival_rate!r} with {self.num_alloc_levels()} allocation "
                f"levels implies about {size / 2**30:.1f} GiB of per-job arrays ({how}, "
                f"max_jobs={self.max_jobs}); the limit is {MAX_JOB_ARRAY_BYTES / 2**30:g} GiB: "
                "lower arrival_rate, arrival_slots or max_jobs, or use fewer allocation levels"
            )

    def _check_allocations_fit(self) -> None:
        """Every model must fit on some node at its smallest allocation level.

        A job whose smallest allocation no node can host never gets a feasible placement: it
        waits until truncation and its agent can only defer. Nodes are the entries of
        ``custom_capacities`` or the tiers of ``tier_mix`` with positive weight (any node may
        be drawn from those). Models or tiers unknown here are reported when the simulator is
        built; so are models whose minimum demand exceeds every node (an error of ``models``
        or the nodes, not of the allocation levels).
        """
        if self.custom_capacities:
            nodes = [tuple(float(v) for v in cap) for cap in self.custom_capacities]
            where = "custom_capacities"
        else:
            tiers = hardware_tiers()
            nodes = [
                (tiers[t].cpu, tiers[t].gpu, tiers[t].mem)
                for t, w in self.tier_mix
                if t in tiers and w > 0
            ]
            where = "the tiers of tier_mix"
        if not nodes:
            return
        if self.progress_model == "tapfinger":
            # lazy: core imports this module

            names = tuple(name for name, _ in self.models)
            given = {n: (c, g) for n, c, g in self.tapfinger_min_demand}
            demand = dict(zip(names, map(tuple, tapfinger_min_demand(names, given)), strict=True))
        else:
            demand = {
                name: tuple(
                    float(MODEL_REQUIREMENTS[name][f"min_{r}"]) for r in ("cpu", "gpu", "mem")
                )
                for name, _ in self.models
                if name in MODEL_REQUIREMENTS
            }
        eps = 1e-9  # the simulator's own tolerance for "fits"
        if self.alloc_mode == "grid":
            cmax, gmax = self.alloc_grid_max
            short = {n: d for n, d in demand.items() if d[0] > cmax + eps or d[1] > gmax + eps}
            if short:
                need = (max(d[0] for d in short.values()), max(d[1] for d in short.values()))
                raise ConfigError(
                    f"alloc_grid_max={self.alloc_grid_max!r}: no grid level reaches the minimum "
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
        smallest = min(self.alloc_scales)
        bad = [n for n, s in fits_at_all.items() if smallest > s * (1 + eps)]
        if bad:
            need = ", ".join(
                f"{n} (cpu {demand[n][0] * smallest:g}, gpu {demand[n][1] * smallest:g})"
                for n in bad
            )
            raise ConfigError(
                f"alloc_scales={self.alloc_scales!r}: at the smallest level {smallest:g} no node "
                f"of {where} can host one worker of {need}, so those jobs could never be "
                "placed; with these models and nodes the smallest scale must lie in "
                f"[1.0, {min(fits_at_all.values()):g}]"
            )


def _freeze(value: Any) -> Any:
    """Turn lists (e.g. from YAML) into tuples so configs stay hashable and immutable."""
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, Mapping):
        return tuple((k, _freeze(v)) for k, v in value.items())
    return value


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
