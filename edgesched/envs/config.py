"""Scenario parameters: one validated, immutable dataclass for every knob of the simulator.

Every field has a documented meaning and an allowed range. ``SimConfig.from_dict`` rejects
unknown keys and out-of-range values with an error that names the key, the value and what is
allowed, so a typo in a Hydra override or a ``make_parallel(..., **overrides)`` call fails at
construction instead of silently changing nothing.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

# the allowed values and limits live with the checks; re-exported here, where users look
from .config_checks import (
    ADVANCE_MODES,
    ALLOC_MODES,
    ARRIVAL_SCOPES,
    COLLISION_MODES,
    CONFLICT_RULES,
    CRASH_ORDERS,
    CRASH_VICTIMS,
    EDGEGOSSIP_MAX_MIN_GAIN,
    INVALID_ACTION_MODES,
    MAX_ARRIVAL_CELLS,
    MAX_EXPECTED_JOBS,
    MAX_JOB_ARRAY_BYTES,
    MAX_NODES,
    MEASURED_GPU_CLASSES,
    PENDING_REFILLS,
    REWARD_MODES,
    TOPOLOGY_KINDS,
    TRACE_FORMAT_CHOICES,
    TRACE_WINDOW_RULES,
    VISIBILITY_MODES,
    WAITING_CHARGES,
    validate,
)
from .errors import ConfigError

__all__ = [
    "ADVANCE_MODES",
    "ALLOC_MODES",
    "ARRIVAL_SCOPES",
    "COLLISION_MODES",
    "CONFLICT_RULES",
    "CRASH_ORDERS",
    "CRASH_VICTIMS",
    "EDGEGOSSIP_MAX_MIN_GAIN",
    "INVALID_ACTION_MODES",
    "MAX_ARRIVAL_CELLS",
    "MAX_EXPECTED_JOBS",
    "MAX_JOB_ARRAY_BYTES",
    "MAX_NODES",
    "MEASURED_GPU_CLASSES",
    "PENDING_REFILLS",
    "REWARD_MODES",
    "TOPOLOGY_KINDS",
    "TRACE_FORMAT_CHOICES",
    "TRACE_WINDOW_RULES",
    "VISIBILITY_MODES",
    "WAITING_CHARGES",
    "ConfigError",
    "SimConfig",
]


@dataclasses.dataclass(frozen=True)
class SimConfig:
    """All parameters of one scenario.

    Attributes are grouped by part of the model (the README's "The model in one page").
    Defaults describe a small mixed-tier edge cluster; the named scenarios in
    :mod:`edgesched.envs.scenarios` override what they need.
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
    tier_gpu_classes: tuple[tuple[str, str], ...] = ()
    """``collision_mode='measured'``: ``(tier, class)`` pairs that replace a hardware tier's
    measured GPU class (``k80``, ``p100``, ``v100``, or ``""`` for unmeasured) in
    :data:`edgesched.envs.colocation.TIER_GPU_CLASS`; tiers not named keep theirs. A
    sensitivity knob for the declared mapping (for example the ``gpu_server`` tier's T4,
    equated with the P100 by default; ``benchmarks/colocation_study.py --t4-as``)."""
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
    trace_fractional_gpus: bool = False
    """A trace job asking for part of one GPU (an Alibaba pod's ``gpu_milli`` below 1000)
    becomes one worker that holds that fraction of a GPU, so such workers share GPUs (under
    ``collision_mode='measured'`` at the measured pair rates); off (v0), it holds a whole
    GPU. Its speed alone on a GPU is its model's one-GPU speed (assumed: a GPU-sharing pod
    is not throttled while nothing shares its GPU)."""
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
    """Winner of a task conflict under ``shared``: ``random``; ``fit``, drawn in proportion
    to the softmax of TapFinger's resource fit; or ``fit_argmax``, the original TapFinger
    code's rule: the largest weight x fit wins, the weight being the learned policy's
    pointer probability passed as ``EdgeClusterSim.step(actions, conflict_weights=...)``
    (1 without it)."""
    tapfinger_min_demand: tuple[tuple[str, float, float], ...] = ()
    """``progress_model='tapfinger'``: (type, cpu, gpu) minimum requirements per task type
    (the original code's per-type ``job_min_requirement``); types not listed need the
    constant (2 cores, 1 GPU), which is also what the original's six-agent setting gives
    both types (:data:`edgesched.envs.progress.TAPFINGER_MIN_DEMAND`)."""
    progress_model: str = "profile"
    """``profile``: measured throughput/convergence. ``tapfinger``: the original
    TapFinger environment's formulas (:mod:`edgesched.envs.progress`)."""

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
    crash_order: str = "agent"
    """``measured``: which of one round's placements counts as newer when they share a GPU or
    overflow a node's memory (the newer one's job crashes). ``agent`` (v1): in agent-index
    order, so a same-round overload always crashes the higher-numbered agent's job, and under
    local rewards that agent bears the crashes; ``random``: a seeded random order within each
    copy's round, so no agent index is favoured (drawn from a generator of its own, so the
    workload and every other random draw stay those of ``agent``). The central view places
    one task per call, so there the order is always its decisions' order."""
    crash_victim: str = "newest"
    """``measured``: whose job crashes when a GPU held by three or more workers holds a
    failing pair. ``newest`` (v1): the GPU's newest worker, even one outside the failing
    pair (assumed), and then the pair's newer one if the pair still fails, so such a GPU
    can lose a job that fits with every other; ``in_pair``: the newest worker that is in a
    failing pair (the newer of a lone failing pair, as on a GPU shared by two)."""
    checkpoint_interval: int = 10
    """``measured``: a running job checkpoints every this many slots of running; a crash
    loses the progress since (0: never, a crash restarts from scratch). Assumed: 10 slots."""
    unmeasured_gpu_share: float = 1.0
    """``measured``: on GPUs without measurements (Jetson-class boards, custom capacities),
    each of ``k`` workers sharing a GPU runs at ``unmeasured_gpu_share / (k * m_k)`` of its
    speed alone (time-slicing with Muri's interleaving multiplier ``m_k``; assumed)."""
    cpu_starvation_weight: float = 1.0
    """``measured``: exponent of the CPU-starvation factor (the model's measured throughput
    at its fair share of an oversubscribed node's cores over that at its allocation): 1 is
    the measured curve; 0 makes oversubscribed cores free, 2 squares the slowdown. A
    sensitivity knob for the assumptions of the CPU model (fair sharing by the OS, the
    curve's linear extension below one core, independence from GPU sharing), swept by
    ``benchmarks/colocation_study.py --cpu-weights``."""
    restart_seconds_scale: float = 1.0
    """``measured``: multiplier of a crashed job's restart seconds (Muri's profiled start-up
    overheads, 4-10 s for the catalog's models, measured on datacenter GPUs and read through
    assumed stand-ins for four of the six; an edge board may start slower). 1 is the
    measurement; a sensitivity knob swept by ``benchmarks/colocation_study.py
    --restart-scales``."""
    gavel_model_map: str = "declared"
    """``measured``: which reading of the assumed catalog-model -> Gavel-job entries sets the
    shared-GPU pair rates: ``declared`` (the nearest batch size of the nearest architecture)
    or ``largest_batch`` (those entries at their stand-in architecture's largest measured
    batch, the most memory-hungry reading; a sensitivity knob swept by
    ``benchmarks/colocation_study.py --gavel-maps``)."""
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
        validate(self)

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


def _freeze(value: Any) -> Any:
    """Turn lists (e.g. from YAML) into tuples so configs stay hashable and immutable."""
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, Mapping):
        return tuple((k, _freeze(v)) for k, v in value.items())
    return value
