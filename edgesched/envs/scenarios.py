"""The scenario registry: named, versioned parameter sets.

Any change to a scenario's dynamics or parameters bumps its ``version`` and adds a line to its
``history``; results carry ``name-vK`` so numbers from different versions are never mixed.

Version history (all scenarios):
    v0 (edgesched 0.1.0): first release.
    melbourne125 v1: link bandwidths resampled from AARNet's measured capacities.
    Edge scenarios v1 (melbourne125 v2): ``collision_mode='measured'`` (co-location costs
        measured by Gavel, Synergy and Muri: shared GPUs slow or crash jobs, starved CPUs
        slow them) and ``pending_slots=4`` (agents choose among the first four jobs of
        their queue); edge50-trace v1 also sets ``trace_fractional_gpus`` (a part-GPU pod is
        a shared-GPU worker). The TapFinger scenarios keep v0: their progress model has no
        measured co-location and they already offer ten pending slots.
    edge50-trace v2: each episode's replay window is drawn around a uniformly drawn job
        (``trace_window_rule='per_job'``) and records that never ran are dropped
        (``trace_drop_never_ran``), so a trace active in part of its span does not yield
        mostly near-empty episodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import SimConfig


@dataclass(frozen=True)
class Scenario:
    """A registered scenario.

    Attributes:
        name: registry key, e.g. ``edge50``.
        version: integer bumped on any change to dynamics or parameters.
        description: one paragraph: what the scenario stands for and why.
        params: overrides of :class:`SimConfig` defaults.
        history: one line per version.
        data: names of the real public data files (:data:`edgesched.data.DATA_FILES`) the
            scenario reads; empty for synthetic scenarios. See :func:`data_requirements`.
    """

    name: str
    version: int
    description: str
    params: Mapping[str, Any] = field(default_factory=dict)
    history: tuple[str, ...] = ("v0: first release.",)
    data: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        """Versioned id, e.g. ``edge50-v0``."""
        return f"{self.name}-v{self.version}"

    @property
    def gym_id(self) -> str:
        """Gymnasium id of the central view, e.g. ``edgesched/Edge50-v0``."""
        camel = "".join(part[:1].upper() + part[1:] for part in self.name.split("-"))
        return f"edgesched/{camel}-v{self.version}"

    def config(self, **overrides: Any) -> SimConfig:
        """Validated configuration of this scenario with ``overrides`` applied."""
        merged = {**self.params, **overrides}
        return SimConfig.from_dict(merged)


_REGISTRY: dict[str, Scenario] = {}
"""The latest version of each scenario, by name."""
_VERSIONS: dict[str, dict[int, Scenario]] = {}
"""Every registered version of each scenario: records of an earlier version keep resolving
by their versioned id (``edge50-v0``) after the name moves on to a new version."""


def register_scenario(scenario: Scenario) -> Scenario:
    """Add a scenario, or a new version of one; parameters are validated now.

    A new version of a registered name must be the next integer; the name then resolves to
    it, and every earlier version stays available by its versioned id.

    Raises:
        ValueError: the version is taken or not the next one, or ``data`` names an
            unregistered data file.
    """
    from ..data import DATA_FILES, note_scenario_data

    known = _VERSIONS.get(scenario.name, {})
    if scenario.version in known:
        raise ValueError(f"scenario {scenario.id!r} is already registered")
    if known and scenario.version != max(known) + 1:
        raise ValueError(
            f"scenario {scenario.id!r}: the next version of {scenario.name!r} is "
            f"v{max(known) + 1} (registered: {sorted(known)})"
        )
    if known and len(scenario.history) != scenario.version + 1:
        raise ValueError(
            f"scenario {scenario.id!r}: history has {len(scenario.history)} lines; need one "
            f"per version (v0..v{scenario.version})"
        )
    unknown = [d for d in scenario.data if d not in DATA_FILES]
    if unknown:
        raise ValueError(
            f"scenario {scenario.name!r}: data={scenario.data!r} names unregistered data "
            f"{unknown}; registered data: {sorted(DATA_FILES)}"
        )
    cfg = SimConfig.from_dict(dict(scenario.params))
    # Scenario.data is what decides which tests skip without data and what `fetch` is told
    # to get, so it must cover every real-data file the parameters read.
    undeclared = sorted(_data_read_by(cfg) - set(scenario.data))
    if undeclared:
        raise ValueError(
            f"scenario {scenario.name!r}: data={scenario.data!r} leaves out {undeclared}, "
            "which its parameters read; list them in data="
        )
    _REGISTRY[scenario.name] = scenario
    _VERSIONS.setdefault(scenario.name, {})[scenario.version] = scenario
    note_scenario_data(scenario.name, scenario.data)
    return scenario


def _data_read_by(cfg: SimConfig) -> set[str]:
    """Names of the registered data files that a configuration reads from the data folder.

    A relative ``trace_path`` that is no registered file is left out: it may be a file of
    the user's own, relative to the working directory.
    """
    from ..data import data_file_for_path
    from .topology import EUA_SITES, TOPOLOGY_ZOO

    paths = []
    if cfg.topology == "eua":
        paths.append(EUA_SITES)
    if cfg.link_bandwidth_graph:
        paths.append(TOPOLOGY_ZOO)
    if cfg.trace_path and not Path(cfg.trace_path).is_absolute():
        paths.append(cfg.trace_path)
    return {e.name for e in map(data_file_for_path, paths) if e is not None}


def get_scenario(name: str) -> Scenario:
    """Look up a scenario by name (``edge50``) or versioned id (``edge50-v0``).

    Raises:
        KeyError: unknown name, listing the registered ones.
    """
    if name in _REGISTRY:
        return _REGISTRY[name]
    for versions in _VERSIONS.values():
        for s in versions.values():
            if name == s.id:
                return s
    import difflib

    close = difflib.get_close_matches(name, list(_REGISTRY), n=3)
    hint = f" Did you mean {close}?" if close else ""
    raise KeyError(f"unknown scenario {name!r}.{hint} Registered scenarios: {sorted(_REGISTRY)}")


def scenario_config(
    scenario: str | SimConfig, overrides: Mapping[str, Any]
) -> tuple[Scenario | None, SimConfig]:
    """The views' argument: a scenario name or id, or a ready configuration, plus overrides.

    Returns:
        ``(scenario, config)``: the registered scenario (``None`` for a bare configuration)
        and its validated configuration with ``overrides`` applied.
    """
    if isinstance(scenario, SimConfig):
        return None, scenario.replace(**overrides) if overrides else scenario
    s = get_scenario(scenario)
    return s, s.config(**overrides)


def list_scenarios() -> list[str]:
    """Names of all registered scenarios, sorted (each name resolves to its latest version)."""
    return sorted(_REGISTRY)


def scenario_versions(name: str) -> list[Scenario]:
    """Every registered version of scenario ``name``, oldest first.

    Raises:
        KeyError: unknown name.
    """
    if name not in _VERSIONS:
        raise KeyError(f"unknown scenario {name!r}; registered scenarios: {sorted(_REGISTRY)}")
    return [s for _, s in sorted(_VERSIONS[name].items())]


@dataclass(frozen=True)
class DataRequirement:
    """One real data file a scenario reads, and where it is (if anywhere).

    Attributes:
        name: data-registry entry (``python -m edgesched.data fetch --only NAME``).
        path: its path relative to the real-data folder.
        location: the file in the real-data folder in effect, ``None`` when missing.
    """

    name: str
    path: str
    location: Path | None

    @property
    def available(self) -> bool:
        """Whether the file is there (checksums: ``python -m edgesched.data status``)."""
        return self.location is not None


def data_requirements(name: str, data_dir: str = "") -> tuple[DataRequirement, ...]:
    """The real data files scenario ``name`` reads and whether each is available.

    Looks in the real-data folder that the scenario would use (see
    :func:`edgesched.data.find_data_dir`); empty for synthetic scenarios. A
    scenario can be made when every entry is :attr:`~DataRequirement.available`; the
    missing ones are fetched with ``python -m edgesched.data fetch --only NAME ...``.

    Args:
        name: scenario name or versioned id.
        data_dir: the ``data_dir`` parameter the scenario would get (default: auto-detect).

    Raises:
        KeyError: unknown scenario.
    """
    from ..data import get_data_file
    from .topology import find_data_dir

    needs = get_scenario(name).data
    folder = find_data_dir(data_dir) if needs else None
    out = []
    for d in needs:
        path = get_data_file(d).path
        loc = folder / path if folder is not None else None
        out.append(DataRequirement(d, path, loc if loc is not None and loc.is_file() else None))
    return tuple(out)


def make_config(name: str, **overrides: Any) -> SimConfig:
    """Validated configuration of scenario ``name`` with ``overrides``.

    Raises:
        KeyError: unknown scenario.
        ConfigError: unknown or out-of-range parameter.
    """
    return get_scenario(name).config(**overrides)


# ---------------------------------------------------------------------------- edge clusters
_EDGE_COMMON: dict[str, Any] = dict(
    topology="geometric",
    collision_mode="overload",
    arrival_slots=200,
    max_slots=400,
    max_steps=400,
)


def _edge(n: int, k: int, region: int, rate: float, **extra: Any) -> dict[str, Any]:
    return {
        **_EDGE_COMMON,
        "num_nodes": n,
        "neighbors_k": k,
        "region_size": region,
        "arrival_rate": rate,
        **extra,
    }


V1_EDGE: dict[str, Any] = dict(collision_mode="measured", pending_slots=4)
"""What every edge scenario's v1 changes. ``measured``: co-location costs from public
measurements instead of perfect time-sharing (:mod:`edgesched.envs.colocation`). Four pending
slots: with one, FIFO, SJF and least-loaded placement were the same rule; from two slots on
the heuristics differ, eight gained nothing over four in decisions that matter while
costing more observation and action width (``benchmarks/results/pending_slots_study.md``)."""
V1_HISTORY = (
    "v1: collision_mode='measured' (co-location costs measured by Gavel, Synergy and "
    "Muri instead of perfect time-sharing) and pending_slots=4 (task choice among the "
    "first four queued jobs); v0's dynamics stay available as collision_mode='timeshare', "
    "pending_slots=1."
)
V1_NOTE = (
    " v1: sharing a GPU runs jobs at their measured pair throughputs or crashes the newer "
    "one; starved CPUs slow jobs along their measured curves; agents choose among four "
    "pending jobs."
)


def _register_v0_v1(
    name: str,
    description: str,
    params: dict[str, Any],
    data: tuple[str, ...] = (),
    v1_extra: dict[str, Any] | None = None,
    v1_history: str = V1_HISTORY,
) -> None:
    """Register an edge scenario's v0 (as first released) and its v1 (:data:`V1_EDGE`)."""
    register_scenario(Scenario(name, 0, description, params, data=data))
    register_scenario(
        Scenario(
            name,
            1,
            description + V1_NOTE,
            {**params, **V1_EDGE, **(v1_extra or {})},
            history=("v0: first release.", v1_history),
            data=data,
        )
    )


EDGE_RATE = 0.03
"""Base jobs per node per slot in the edge scenarios; with the diurnal ramp and bursts the
episode mean is 1.31x that (edge50: 406 jobs per episode on average). At this rate a greedy
least-loaded placement at the minimum allocation keeps queues stable on edge50 while
simultaneous placements still collide tens of times per episode; the high-load variant
doubles it and queues build up."""

for _n, _k, _r in ((10, 4, 5), (50, 6, 10), (100, 8, 10), (500, 8, 10)):
    _register_v0_v1(
        f"edge{_n}",
        f"{_n} mixed-tier edge nodes (Jetson-class boards, small and GPU edge servers) on "
        f"a random geometric graph; each agent places on itself and its {_k} nearest "
        f"nodes; regions of about {_r} nodes; Poisson arrivals with diurnal and burst "
        "modulation; Pollux-profile model catalog; PAI-fitted stragglers; v0: collisions "
        "overload the target node, which time-shares perfectly.",
        _edge(_n, _k, _r, EDGE_RATE),
    )

_register_v0_v1(
    "edge50-highload",
    "edge50 with twice the arrival rate: queues build up and collisions are frequent.",
    _edge(50, 6, 10, 2 * EDGE_RATE),
)
_register_v0_v1(
    "edge50-stragglers",
    "edge50 with heavy stragglers: a worker is delayed in 75% of slots instead of 50%, "
    "and each delay is three times as long as fitted from the PAI trace.",
    _edge(50, 6, 10, EDGE_RATE, straggler_scale=3.0, straggler_prob_scale=1.5),
)
_register_v0_v1(
    "edge50-stale",
    "edge50 where neighbours' load is observed 5 slots late (stale gossip of state).",
    _edge(50, 6, 10, EDGE_RATE, obs_delay=5),
)
_register_v0_v1(
    "edge50-hgc",
    "edge50-stragglers where every job synchronizes with hierarchical gradient coding "
    "(sync 'hgc': workers grouped in pairs under edge aggregators, tolerances chosen "
    "for the scenario's straggler model; Tang et al., 2024).",
    _edge(
        50,
        6,
        10,
        EDGE_RATE,
        straggler_scale=3.0,
        straggler_prob_scale=1.5,
        sync_mix=(("hgc", 1.0),),
    ),
)
_register_v0_v1(
    "edge50-edgegossip",
    "edge50 where every job trains with EdgeGossip (sync 'edgegossip': gossip averaging, "
    "data shares balanced to worker speed across the heterogeneous tiers, accuracy-aware "
    "stop; Han et al., TPDS 2021).",
    _edge(50, 6, 10, EDGE_RATE, sync_mix=(("edgegossip", 1.0),)),
)
_MELBOURNE_DESCRIPTION = (
    "125 edge servers at the real EUA base-station sites of Melbourne CBD (Lai et al., "
    "ICSOC'18; MIT, site data ACMA terms); links between sites within the smallest "
    "radius that connects them, regions by k-means over the site positions; link "
    "bandwidths resampled from the measured link capacities of AARNet, Australia's "
    "research backbone (Topology Zoo, Knight et al., JSAC'11; CC BY 4.0): 155 Mbit/s to "
    "10 Gbit/s. Needs the real-data folder (data_dir or $EDGESCHED_DATA_DIR)."
)
_MELBOURNE = _edge(125, 6, 10, EDGE_RATE, topology="eua", link_bandwidth_graph="Aarnet")
_MELBOURNE_HISTORY = (
    "v0: first release; bandwidths log-uniform in 1-10 Gbit/s.",
    "v1: bandwidths resampled from AARNet's link capacities (Topology Zoo).",
)
register_scenario(
    Scenario(
        "melbourne125",
        1,
        _MELBOURNE_DESCRIPTION,
        _MELBOURNE,
        history=_MELBOURNE_HISTORY,
        data=("eua-melbcbd", "topology-zoo"),
    )
)
register_scenario(
    Scenario(
        "melbourne125",
        2,
        _MELBOURNE_DESCRIPTION + V1_NOTE.replace(" v1:", " v2:"),
        {**_MELBOURNE, **V1_EDGE},
        history=(*_MELBOURNE_HISTORY, V1_HISTORY.replace("v1:", "v2:", 1)),
        data=("eua-melbcbd", "topology-zoo"),
    )
)

# ---------------------------------------------------------------------------- TapFinger
_TAPFINGER: dict[str, Any] = dict(
    num_nodes=6,
    custom_capacities=((4, 4, 1), (8, 8, 1), (12, 12, 1), (16, 16, 1), (24, 24, 1), (32, 32, 1)),
    topology="full",
    neighbors_k=0,
    region_size=6,
    arrival_scope="cluster",
    arrival_rate=6.0,
    diurnal_amplitude=0.0,
    burst_prob=0.0,
    arrival_slots=1000,
    max_jobs=384,
    models=(("IMG", 0.5), ("LM", 0.5)),
    workers_dist=((1, 1.0),),
    priority_probs=(1.0,),
    sync_mix=(("ps", 1.0),),
    visibility="shared",
    conflict_rule="fit",
    progress_model="tapfinger",
    alloc_mode="grid",
    alloc_grid_max=(16, 16),
    pending_slots=10,
    collision_mode="reject",
    advance="when_idle",
    straggler_scale=0.0,
    max_slots=1000,
    max_steps=20000,
)

register_scenario(
    Scenario(
        "tapfinger-hetero6",
        0,
        "Re-creation of TapFinger's heterogeneous 6-cluster setting (Li et al., INFOCOM'23): "
        "agents are clusters with (CPU, GPU) = (4,4) .. (32,32); 384 tasks, "
        "Poisson(6) per slot; IMG/LM tasks, each visible to k ~ U{1..6} agents; 10 pending "
        "slots; 0..16 CPU x 0..16 GPU allocation grid with minimum (2, 1); IMG progresses "
        "0.25 per slot, LM tanh(g/16) sqrt(1.2 - p); the clock advances only when no agent "
        "places; conflicts won in proportion to the resource-fit softmax.",
        _TAPFINGER,
    )
)
register_scenario(
    Scenario(
        "tapfinger-hetero6-lam2",
        0,
        "tapfinger-hetero6 with Poisson(2) arrivals per slot (TapFinger's low-load config).",
        {**_TAPFINGER, "arrival_rate": 2.0},
    )
)
