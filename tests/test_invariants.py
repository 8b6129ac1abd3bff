"""Property-based invariants of the simulator core (DESIGN §8).

The simulator is driven through its array fast path with random joint actions drawn from the
mask (mostly feasible placements, so collisions happen), all-defer rounds and deliberately
colliding rounds (several agents placing on one common neighbour). After every step we check,
with plain Python recomputations independent of the simulator's vectorized code:

* free resources never negative except under ``collision_mode='overload'``, where a node only
  goes over capacity in a step in which two or more agents placed on it;
* job conservation (arrived = done + running + queued) and no lost or resurrected job;
* ``used`` equals the sum of the allocations of placed workers of unfinished jobs;
* the clock is monotone, advances by at most one slot per step, exactly one under
  ``advance='every_step'`` and exactly when nobody places under ``'when_idle'``;
* the mask marks exactly the feasible actions.

Further: identical seeds give identical trajectories; different seeds give different workloads;
the default reward sums to minus the total job completion time (Little's law).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import needs_scenario_data
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgesched.envs import EdgeClusterSim, make_config, make_parallel
from edgesched.envs.core import DONE, NOT_ARRIVED, QUEUED, RUNNING
from edgesched.envs.metrics import MEASURED_METRICS
from edgesched.envs.view import ClusterView

TOL = 1e-9
"""Tolerance of the capacity comparisons (the simulator's mask uses the same)."""


# ---------------------------------------------------------------------------- strategies
@st.composite
def edge_configs(draw: st.DrawFn) -> dict[str, Any]:
    """Small variants of edge10 (profile progress, scaled allocations)."""
    n = draw(st.integers(3, 10))
    return {
        "scenario": "edge10",
        "num_nodes": n,
        "neighbors_k": min(4, n - 1),
        "region_size": draw(st.integers(2, 5)),
        "max_slots": 40,
        "max_steps": 80,
        "arrival_rate": draw(st.sampled_from([0.05, 0.2, 0.5])),
        "arrival_slots": 30,
        "collision_mode": draw(st.sampled_from(["overload", "reject", "measured"])),
        "advance": draw(st.sampled_from(["every_step", "when_idle"])),
        "pending_slots": draw(st.integers(1, 3)),
        "obs_delay": draw(st.integers(0, 3)),
        "visibility": draw(st.sampled_from(["home", "shared"])),
        "alloc_scales": draw(st.sampled_from([(1.0,), (1.0, 2.0), (1.0, 1.5, 3.0)])),
        "topology_seed": draw(st.integers(0, 3)),
        "priority_aging_slots": draw(st.sampled_from([0, 0, 3])),
        # measured mode: how much a crash loses, and the model map with the most failing pairs
        "checkpoint_interval": draw(st.sampled_from([10, 0, 3])),
        "gavel_model_map": draw(st.sampled_from(["declared", "largest_batch"])),
        "restart_seconds_scale": draw(st.sampled_from([1.0, 0.0, 8.0])),
        # whose job a crash takes: the round's order, and the victim on a crowded GPU
        "crash_order": draw(st.sampled_from(["agent", "random"])),
        "crash_victim": draw(st.sampled_from(["newest", "in_pair"])),
    }


@st.composite
def tapfinger_configs(draw: st.DrawFn) -> dict[str, Any]:
    """tapfinger-hetero6 (grid allocations, shared visibility, when_idle) kept short."""
    return {
        "scenario": "tapfinger-hetero6",
        "max_slots": 12,
        "max_steps": 40,
        "max_jobs": 60,
        "arrival_rate": draw(st.sampled_from([2.0, 6.0])),
        "collision_mode": draw(st.sampled_from(["overload", "reject"])),
        "advance": draw(st.sampled_from(["every_step", "when_idle"])),
        "pending_refill": draw(st.sampled_from(["immediate", "on_advance"])),
        "pending_slots": draw(st.integers(1, 3)),
        "obs_delay": draw(st.integers(0, 3)),
        "visibility": draw(st.sampled_from(["home", "shared"])),
        "alloc_grid_max": draw(st.sampled_from([(4, 4), (8, 8)])),
    }


@st.composite
def edge_grid_configs(draw: st.DrawFn) -> dict[str, Any]:
    """edge10 variants with absolute (cpu, gpu) grid allocations and the profiled models,
    whose memory demand the grid's levels do not include (memory must still be masked)."""
    params = draw(edge_configs())
    params.pop("alloc_scales")
    n = params["num_nodes"]
    # memory scarce next to cpu/gpu (the models need 4-16), so it is what binds
    mem = draw(st.lists(st.sampled_from([16.0, 20.0, 32.0]), min_size=n, max_size=n))
    return {
        **params,
        "alloc_mode": "grid",
        "alloc_grid_max": draw(st.sampled_from([(4, 1), (8, 2), (16, 4)])),
        "custom_capacities": tuple((32.0, 4.0, m) for m in mem),
    }


TRACES = Path(__file__).parent / "fixtures" / "traces"


@st.composite
def trace_configs(draw: st.DrawFn) -> dict[str, Any]:
    """edge10 variants driven by a trace fixture of each format (random or fixed windows)."""
    params = draw(edge_configs())
    params.pop("arrival_rate")
    trace = draw(st.sampled_from(["philly_busy.csv", "pollux_small.csv", "alibaba_small.csv"]))
    return {
        **params,
        "trace_path": str(TRACES / trace),
        "arrival_rate": draw(st.sampled_from([0.2, 1.0])),
        "trace_window_start_hours": draw(st.sampled_from([-1.0, 0.0])),
        "trace_window_rule": draw(st.sampled_from(["any_job", "per_job"])),
        "trace_drop_never_ran": draw(st.booleans()),
        "trace_fractional_gpus": draw(st.booleans()),
    }


@st.composite
def melbourne_configs(draw: st.DrawFn) -> dict[str, Any]:
    """The first 8-20 real Melbourne sites with AARNet link capacities."""
    n = draw(st.integers(8, 20))
    return {
        "scenario": "melbourne125",
        "num_nodes": n,
        "neighbors_k": draw(st.integers(2, 6)),
        "max_slots": 30,
        "max_steps": 60,
        "arrival_rate": 0.2,
        "arrival_slots": 20,
        "collision_mode": draw(st.sampled_from(["overload", "reject", "measured"])),
        "topology_seed": draw(st.integers(0, 3)),
    }


any_config = st.one_of(edge_configs(), edge_grid_configs(), tapfinger_configs(), trace_configs())


def build(params: dict[str, Any]) -> EdgeClusterSim:
    p = dict(params)
    return EdgeClusterSim(make_config(p.pop("scenario"), **p))


# ---------------------------------------------------------------------------- policies
def random_feasible(sim: EdgeClusterSim, rng: np.random.Generator, p_place: float) -> np.ndarray:
    """Each agent picks a uniformly random feasible placement with probability p_place."""
    a = np.zeros(sim.num_agents, dtype=np.int64)
    for i in range(sim.num_agents):
        feas = np.flatnonzero(sim.mask[i, 1:]) + 1
        if len(feas) and rng.random() < p_place:
            a[i] = rng.choice(feas)
    return a


def colliding(sim: EdgeClusterSim, rng: np.random.Generator) -> np.ndarray:
    """Every agent that can reach a common target node places its biggest feasible task on it.

    The target is the node reachable by the most agents that have something to place.
    """
    nbrs = sim.cluster.neighbors
    has_job = (sim.head >= 0).any(axis=1)
    reach = np.zeros(sim.num_agents, dtype=np.int64)
    for i in np.flatnonzero(has_job):
        for x in nbrs[i]:
            if x >= 0:
                reach[x] += 1
    best = np.flatnonzero(reach == reach.max())
    target = int(rng.choice(best))
    a = np.zeros(sim.num_agents, dtype=np.int64)
    for i in range(sim.num_agents):
        ks = np.flatnonzero(nbrs[i] == target)
        if not len(ks):
            continue
        k = int(ks[0])
        choices = [
            int(sim.encode(s, k, lv))
            for s in range(sim.pending_slots)
            for lv in range(sim.num_levels)
        ]
        feas = [c for c in choices if sim.mask[i, c]]
        if feas:
            # largest allocation level first: the surest way to exceed the target jointly
            a[i] = max(feas, key=lambda c: (int(sim.decode(np.array([c]))[2][0]), -c))
    return a


def conflicting(sim: EdgeClusterSim, rng: np.random.Generator) -> np.ndarray:
    """Every agent that sees the most widely visible pending job places it (task conflict
    under shared visibility), with a random feasible target and level."""
    a = np.zeros(sim.num_agents, dtype=np.int64)
    jobs = sim.head[sim.head >= 0]
    if not len(jobs):
        return a
    ids, counts = np.unique(jobs, return_counts=True)
    job = int(rng.choice(ids[counts == counts.max()]))
    per_slot = sim.k1 * sim.num_levels
    for i in range(sim.num_agents):
        slots = np.flatnonzero(sim.head[i] == job)
        if not len(slots):
            continue
        s = int(slots[0])
        feas = np.flatnonzero(sim.mask[i, 1 + s * per_slot : 1 + (s + 1) * per_slot])
        if len(feas):
            a[i] = 1 + s * per_slot + int(rng.choice(feas))
    return a


def joint_action(sim: EdgeClusterSim, rng: np.random.Generator) -> np.ndarray:
    u = rng.random()
    if u < 0.15:
        return np.zeros(sim.num_agents, dtype=np.int64)
    if u < 0.35:
        return colliding(sim, rng)
    if u < 0.5:
        return conflicting(sim, rng)
    return random_feasible(sim, rng, p_place=float(rng.choice([0.3, 0.7, 1.0])))


# ---------------------------------------------------------------------------- checks
def expected_mask(sim: EdgeClusterSim) -> list[list[bool]]:
    """The feasible actions, recomputed with plain Python loops from the definition."""
    free = (sim.capacity - sim.used).tolist()
    head = sim.head.tolist()
    nbrs = sim.cluster.neighbors.tolist()
    k1, lv_n, slots = sim.k1, sim.num_levels, sim.pending_slots
    out = []
    for i in range(sim.num_agents):
        row = [True]  # defer is always allowed
        for s in range(slots):
            job = head[i][s]
            alloc = sim.j_alloc[job].tolist() if job >= 0 else None
            jmin = sim.j_min[job].tolist() if job >= 0 else None
            for k in range(k1):
                tgt = nbrs[i][k]
                for lv in range(lv_n):
                    ok = job >= 0 and tgt >= 0
                    if ok:
                        al = alloc[lv]
                        ok = all(al[r] >= jmin[r] - TOL for r in range(3)) and all(
                            al[r] <= free[tgt][r] + TOL for r in range(3)
                        )
                    row.append(ok)
        out.append(row)
    return out


def check_mask(sim: EdgeClusterSim) -> None:
    assert sim.mask.shape == (sim.num_agents, sim.num_actions)
    assert sim.mask.dtype == bool
    exp = expected_mask(sim)
    got = sim.mask.tolist()
    for i in range(sim.num_agents):
        if got[i] != exp[i]:
            diff = [a for a in range(sim.num_actions) if got[i][a] != exp[i][a]]
            a = diff[0]
            raise AssertionError(
                f"mask of agent {i} wrong at actions {diff[:10]}: action {a} decodes to "
                f"{[int(x[0]) for x in sim.decode(np.array([a]))]}, mask {got[i][a]}, "
                f"expected {exp[i][a]}"
            )


def recompute_used(sim: EdgeClusterSim) -> np.ndarray:
    used = np.zeros((sim.num_agents, 3))
    for j in range(sim.num_jobs):
        if sim.status[j] in (QUEUED, RUNNING):
            for w in range(sim.max_workers):
                node = int(sim.w_node[j, w])
                if node >= 0:
                    used[node] += sim.w_alloc[j, w]
    return used


def check_jobs(sim: EdgeClusterSim, prev_status: np.ndarray, crashes: int = 0) -> None:
    st_ = sim.status
    assert set(np.unique(st_).tolist()) <= {NOT_ARRIVED, QUEUED, RUNNING, DONE}
    c = sim.job_counts()
    assert c["arrived"] == c["done"] + c["running"] + c["queued"], c
    # every job whose arrival slot has come has arrived, and no other
    assert c["arrived"] == int((sim.j_arrival <= sim.t).sum()), (c, sim.t)
    assert c["running"] == len(sim.running) == len(set(sim.running.tolist()))
    assert set(sim.running.tolist()) == set(np.flatnonzero(st_ == RUNNING).tolist())
    # nothing goes backwards (a done job never reappears), except that a crashed job
    # (collision_mode='measured') returns from running to its queues, back at its checkpoint
    # (one placed in this very step crashes without ever showing as running)
    back = np.flatnonzero(st_ < prev_status)
    assert len(back) <= crashes, (back, crashes)
    assert (prev_status[back] == RUNNING).all() and (st_[back] == QUEUED).all()
    assert (sim.progress[back] == sim.ckpt_progress[back]).all()
    # every queued job sits in a queue; queues hold only queued jobs
    q_agents, q_jobs = sim.queued_pairs()
    assert set(q_jobs.tolist()) == set(np.flatnonzero(st_ == QUEUED).tolist())
    if sim.cfg.visibility == "home":
        assert (q_agents == sim.j_home[q_jobs]).all()
        assert len(q_jobs) == len(set(q_jobs.tolist()))
    # worker counts match the status
    placed = (sim.w_node >= 0).sum(axis=1)
    queued = st_ == QUEUED
    running_or_done = (st_ == RUNNING) | (st_ == DONE)
    assert (placed[queued] < sim.j_workers[queued]).all()
    assert (placed[running_or_done] == sim.j_workers[running_or_done]).all()
    assert (placed[st_ == NOT_ARRIVED] == 0).all()
    assert (sim.placed[: sim.num_jobs] == placed).all()


def run_and_check(params: dict[str, Any], seed: int, policy_seed: int) -> dict[str, Any]:
    sim = build(params)
    sim.reset(seed)
    rng = np.random.default_rng(policy_seed)
    cfg = sim.cfg
    overload = cfg.collision_mode in ("overload", "timeshare", "measured")  # all admitted
    check_mask(sim)
    check_jobs(sim, np.zeros_like(sim.status))
    stats: dict[str, Any] = {"steps": 0, "over_capacity_steps": 0}
    while not (sim.terminated or sim.truncated):
        if len(sim.running) and rng.random() < 0.3:
            # RLPTO's elastic resizing: never pushes a node over capacity, keeps `used` exact
            jobs = rng.permutation(sim.running)[: rng.integers(1, len(sim.running) + 1)]
            over0 = ((sim.capacity - sim.used) < -TOL).any(axis=1)
            sim.resize(jobs, rng.integers(-1, 2, size=len(jobs)))
            np.testing.assert_allclose(sim.used, recompute_used(sim), atol=1e-6)
            assert not ((((sim.capacity - sim.used) < -TOL).any(axis=1)) & ~over0).any()
            check_mask(sim)
        a = joint_action(sim, rng)
        used0, t0, status0 = sim.used.copy(), sim.t, sim.status.copy()
        crashes0 = sim.counters.crashes
        measured0 = {k: getattr(sim.counters, k) for k in MEASURED_METRICS}
        assert all(sim.mask[i, a[i]] for i in range(sim.num_agents))  # policy sanity
        rewards, info = sim.step(a)
        stats["steps"] += 1
        assert rewards.shape == (sim.num_agents,)
        assert np.isfinite(rewards).all()
        # --- resources
        free = sim.capacity - sim.used
        assert (sim.used >= -TOL).all(), sim.used
        np.testing.assert_allclose(sim.used, recompute_used(sim), atol=1e-6)
        over = (free < -TOL).any(axis=1)
        if not overload:
            assert not over.any(), (np.flatnonzero(over), sim.used, sim.capacity)
            assert sim.counters.collisions_executed == 0
        else:
            assert sim.counters.rejected == 0
            if over.any():
                stats["over_capacity_steps"] += 1
            # a node may only go (further) over capacity if >= 2 agents placed on it now
            grew = (sim.used > used0 + TOL).any(axis=1)
            proposals = np.zeros(sim.num_agents, dtype=np.int64)
            for i in np.flatnonzero(a > 0):
                _, k, _ = sim.decode(a[i : i + 1])
                proposals[sim.cluster.neighbors[i, int(k[0])]] += 1
            for node in np.flatnonzero(over & grew):
                assert proposals[node] >= 2, (node, proposals, sim.used[node], sim.capacity[node])
                assert info["collisions"] >= 1
        # --- clock
        dt = sim.t - t0
        assert dt in (0, 1), dt
        assert info["slot"] == sim.t
        if cfg.advance == "every_step":
            assert dt == 1
        else:
            assert dt == (1 if (a == 0).all() else 0), (dt, a)
        assert info["advanced"] == (dt == 1)
        # --- jobs and mask
        check_jobs(sim, status0, sim.counters.crashes - crashes0)
        check_mask(sim)
        check_measured_counters(sim, measured0)
        per_node = ClusterView(sim).node_overload_slots
        assert per_node.sum() == sim.counters.overload_node_slots
        assert (per_node <= sim.t + 1).all()
    stats["counters"] = sim.counters
    return stats


def check_measured_counters(sim: EdgeClusterSim, before: dict[str, int]) -> None:
    """The co-location counters only grow, only in ``measured`` mode, and a step's work lost
    and restart time come only with its crashes (each losing less than a checkpoint
    interval of running, the running since the last checkpoint)."""
    now = {k: getattr(sim.counters, k) for k in MEASURED_METRICS}
    delta = {k: now[k] - before[k] for k in MEASURED_METRICS}
    assert all(d >= 0 for d in delta.values()), delta
    # every crash has one cause: host memory or a failing GPU pair
    causes = sim.view().crashes_by_cause()
    assert min(causes.values()) >= 0 and sum(causes.values()) == now["crashes"], causes
    if sim.cfg.collision_mode != "measured":
        assert not any(now.values()), now
        return
    if delta["crashes"] == 0:
        assert delta["crash_slots_lost"] == delta["restart_seconds"] == 0, delta
    interval = sim.cfg.checkpoint_interval
    if interval:
        assert delta["crash_slots_lost"] <= delta["crashes"] * (interval - 1), delta
    # a job's checkpoint never runs ahead of its progress
    live = (sim.status == QUEUED) | (sim.status == RUNNING)
    assert (sim.ckpt_progress[live] <= sim.progress[live] + 1e-9).all()


# ---------------------------------------------------------------------------- tests
SEEDS = st.integers(0, 2**32 - 1)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=edge_configs(), seed=SEEDS, policy_seed=st.integers(0, 2**16))
def test_invariants_hold_every_step_edge(
    params: dict[str, Any], seed: int, policy_seed: int
) -> None:
    run_and_check(params, seed, policy_seed)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=edge_grid_configs(), seed=SEEDS, policy_seed=st.integers(0, 2**16))
def test_invariants_hold_every_step_edge_grid(
    params: dict[str, Any], seed: int, policy_seed: int
) -> None:
    run_and_check(params, seed, policy_seed)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=tapfinger_configs(), seed=SEEDS, policy_seed=st.integers(0, 2**16))
def test_invariants_hold_every_step_tapfinger(
    params: dict[str, Any], seed: int, policy_seed: int
) -> None:
    run_and_check(params, seed, policy_seed)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=trace_configs(), seed=SEEDS, policy_seed=st.integers(0, 2**16))
def test_invariants_hold_every_step_trace_driven(
    params: dict[str, Any], seed: int, policy_seed: int
) -> None:
    run_and_check(params, seed, policy_seed)


@needs_scenario_data("melbourne125")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=melbourne_configs(), seed=SEEDS, policy_seed=st.integers(0, 2**16))
def test_invariants_hold_every_step_melbourne(
    params: dict[str, Any], seed: int, policy_seed: int
) -> None:
    run_and_check(params, seed, policy_seed)


EDGE_BUSY = {
    "scenario": "edge10",
    "max_slots": 40,
    "max_steps": 80,
    "arrival_rate": 0.5,
    "arrival_slots": 30,
}


def test_driver_produces_measured_crashes() -> None:
    """The driver crashes jobs under ``measured`` (else its crash checks would be vacuous)."""
    # ResNet-50 (imagenet) shares a K80 (small_server) with itself only by crashing
    params = {
        **EDGE_BUSY,
        "collision_mode": "measured",
        "models": (("imagenet", 1.0),),
        "tier_mix": (("small_server", 1.0),),
    }
    stats = run_and_check(params, seed=1, policy_seed=1)
    c = stats["counters"]
    assert c.crashes > 0 and c.restart_seconds > 0, c
    # both causes, so the per-cause check above is not vacuous
    assert 0 < c.crashes_memory < c.crashes, c


def test_driver_produces_overload_collisions() -> None:
    """The driver exercises overloads (else the overload checks above would be vacuous)."""
    stats = run_and_check({**EDGE_BUSY, "collision_mode": "overload"}, seed=1, policy_seed=1)
    assert stats["over_capacity_steps"] > 0


@pytest.mark.parametrize(
    ("params", "counter"),
    [
        ({**EDGE_BUSY, "collision_mode": "reject"}, "rejected"),
        ({**EDGE_BUSY, "collision_mode": "overload"}, "collisions_executed"),
        ({**EDGE_BUSY, "visibility": "shared"}, "task_conflicts"),
        ({"scenario": "tapfinger-hetero6", "max_jobs": 60, "max_steps": 60}, "task_conflicts"),
    ],
)
def test_driver_produces_collisions_and_conflicts(params: dict[str, Any], counter: str) -> None:
    stats = run_and_check(params, seed=2, policy_seed=2)
    assert stats["steps"] > 10
    assert getattr(stats["counters"], counter) > 0, stats["counters"]


def _assert_same(x: Any, y: Any, path: str = "") -> None:
    if isinstance(x, dict):
        assert isinstance(y, dict) and x.keys() == y.keys(), path
        for k in x:
            _assert_same(x[k], y[k], f"{path}.{k}")
    elif isinstance(x, (list, tuple)):
        assert type(x) is type(y) and len(x) == len(y), path
        for i, (u, v) in enumerate(zip(x, y, strict=True)):
            _assert_same(u, v, f"{path}[{i}]")
    elif isinstance(x, np.ndarray):
        assert isinstance(y, np.ndarray) and x.dtype == y.dtype, path
        np.testing.assert_array_equal(x, y, err_msg=path)
    elif isinstance(x, float) and np.isnan(x):
        assert isinstance(y, float) and np.isnan(y), path
    else:
        assert x == y, (path, x, y)


def _pz_trajectory(params: dict[str, Any], seed: int, policy_seed: int) -> list[Any]:
    p = dict(params)
    env = make_parallel(p.pop("scenario"), **p)
    obs, infos = env.reset(seed=seed)
    traj: list[Any] = [(obs, infos)]
    rng = np.random.default_rng(policy_seed)
    while env.agents:
        a = joint_action(env.sim, rng)
        acts = {f"node_{i}": int(a[i]) for i in range(len(a))}
        traj.append(env.step(acts))
    traj.append(env.state())
    return traj


@settings(max_examples=20, deadline=None)
@given(params=any_config, seed=st.integers(0, 2**32 - 1), policy_seed=st.integers(0, 2**16))
def test_identical_seeds_identical_trajectories(
    params: dict[str, Any], seed: int, policy_seed: int
) -> None:
    t1 = _pz_trajectory(params, seed, policy_seed)
    t2 = _pz_trajectory(params, seed, policy_seed)
    assert len(t1) == len(t2)
    _assert_same(t1, t2)


def _workload(params: dict[str, Any], seed: int) -> tuple[np.ndarray, ...]:
    sim = build(params)
    sim.reset(seed)
    return (sim.j_arrival, sim.j_home, sim.j_model, sim.j_workers, sim.j_prio, sim.j_target)


@settings(max_examples=25, deadline=None)
@given(
    params=st.one_of(edge_configs(), tapfinger_configs()),
    seeds=st.lists(st.integers(0, 2**32 - 1), min_size=2, max_size=2, unique=True),
)
def test_seeds_fix_the_workload(params: dict[str, Any], seeds: list[int]) -> None:
    # enough jobs that two independent draws cannot coincide
    params = {**params, "arrival_rate": 6.0 if params["scenario"] != "edge10" else 0.5}
    w1, w1b, w2 = (
        _workload(params, seeds[0]),
        _workload(params, seeds[0]),
        _workload(params, seeds[1]),
    )
    for x, y in zip(w1, w1b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert len(w1[0]) > 5 and len(w2[0]) > 5
    assert any(x.shape != y.shape or not np.array_equal(x, y) for x, y in zip(w1, w2, strict=True))


# ---------------------------------------------------------------------------- Little's law
def greedy(sim: EdgeClusterSim) -> np.ndarray:
    """Deterministic: each agent takes its lowest-numbered feasible placement."""
    a = np.zeros(sim.num_agents, dtype=np.int64)
    for i in range(sim.num_agents):
        feas = np.flatnonzero(sim.mask[i, 1:])
        if len(feas):
            a[i] = feas[0] + 1
    return a


def total_jct_slots(sim: EdgeClusterSim) -> int:
    """Sum over arrived jobs of (finish or now) - arrival: completed plus censored time."""
    arrived = sim.status != NOT_ARRIVED
    end = np.where(sim.status == DONE, sim.finish_slot, sim.t)
    return int((end - sim.j_arrival)[arrived].sum())


def _episode_return(
    scenario: str, run_to_end: bool, **overrides: Any
) -> tuple[float, EdgeClusterSim]:
    sim = EdgeClusterSim(make_config(scenario, **overrides))
    sim.reset(3)
    total = 0.0
    while not (sim.terminated or sim.truncated):
        rewards, _ = sim.step(greedy(sim))
        total += float(rewards.sum())
    assert sim.terminated == run_to_end, (sim.terminated, sim.truncated, sim.job_counts())
    np.testing.assert_allclose(sim.return_sum.sum(), total)
    return total, sim


LITTLE_CASES = {
    "edge10-home-local": ("edge10", {}),
    "edge10-home-team": ("edge10", {"reward_mode": "team"}),
    "edge10-reject": ("edge10", {"collision_mode": "reject", "pending_slots": 2}),
    "edge10-shared": ("edge10", {"visibility": "shared"}),
    "tapfinger-home-when-idle": ("tapfinger-hetero6", {"visibility": "home"}),
    "tapfinger-shared-when-idle": ("tapfinger-hetero6", {}),
}


@pytest.mark.parametrize("case", list(LITTLE_CASES))
def test_return_is_minus_total_jct_littles_law(case: str) -> None:
    scenario, extra = LITTLE_CASES[case]
    if scenario == "edge10":
        ov = {"arrival_slots": 60, "max_slots": 5000, "max_steps": 100_000, **extra}
    else:
        ov = {"max_jobs": 60, "max_slots": 5000, "max_steps": 100_000, **extra}
    total, sim = _episode_return(scenario, run_to_end=True, **ov)
    c = sim.job_counts()
    assert c["done"] == c["arrived"] == sim.num_jobs > 10
    assert total == pytest.approx(-total_jct_slots(sim), abs=1e-6)


def test_return_counts_censored_time_of_unfinished_jobs() -> None:
    total, sim = _episode_return(
        "edge10", run_to_end=False, arrival_rate=0.3, arrival_slots=60, max_slots=25
    )
    c = sim.job_counts()
    assert c["running"] + c["queued"] > 0  # some jobs are censored
    assert total == pytest.approx(-total_jct_slots(sim), abs=1e-6)


@pytest.mark.parametrize("bound", [None, 0])
def test_memoized_mask_rows_equal_the_direct_mask(bound: int | None) -> None:
    """tapfinger-hetero6 builds its mask from memoized agent rows; they must equal the
    direct computation every step, also when the memo is cleared at every step (bound 0)."""
    sim = build({"scenario": "tapfinger-hetero6", "max_jobs": 120})
    assert sim._mask_rows is not None  # the memoized path is the one under test
    direct = build({"scenario": "tapfinger-hetero6", "max_jobs": 120})
    direct._mask_rows = None  # the vectorized computation, no memo
    if bound is not None:
        sim._mask_rows_max = bound
    sim.reset(seed=3)
    direct.reset(seed=3)
    rng = np.random.default_rng(0)
    steps = 0
    while not (sim.terminated or sim.truncated):
        np.testing.assert_array_equal(sim.mask, direct.mask)
        a = random_feasible(sim, rng, p_place=0.7)
        sim.step(a)
        direct.step(a)
        steps += 1
    assert steps > 100
    assert bound is None or len(sim._mask_rows) <= sim.num_agents
