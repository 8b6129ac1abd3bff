"""The batched simulator: copy ``b`` of ``EdgeClusterSim(copies=B)`` is a lone one, bit for bit.

Each test steps a :class:`BatchedSim` and one :class:`EdgeClusterSim` per copy in lockstep,
with the same seeds and the same random joint actions, and requires identical observations,
masks, states, rewards and end flags at every step and identical episode metrics (counters
included) at every episode end. Finished copies restart with fresh seeds, so per-copy resets
(and the re-layout when a workload outgrows the job blocks) are exercised too.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scenario_params
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import edgesched
from edgesched.envs import (
    BatchedSim,
    ConfigError,
    EdgeClusterSim,
    InvalidActionError,
    make_config,
)
from edgesched.envs.topology import build_cluster


class Lockstep:
    """A BatchedSim and its copies' single simulators, checked against each other."""

    def __init__(
        self, cfg, copies: int, seeds: list[int], action_seed: int = 0, resize: bool = False
    ) -> None:
        self.resize = resize
        cluster = build_cluster(cfg)
        self.bs = BatchedSim(cfg, copies, cluster)
        self.singles = [EdgeClusterSim(cfg, cluster) for _ in range(copies)]
        self.bs.reset(seeds=seeds)
        for sim, s in zip(self.singles, seeds, strict=True):
            sim.reset(s)
        self.rng = np.random.default_rng(action_seed)
        self.next_seed = 10_000 + 100 * action_seed
        self.episodes = 0
        self.totals: dict[str, int] = {}
        """Counters summed over the finished episodes (which dynamics the run exercised)."""
        self.check_views()

    def check_views(self) -> None:
        obs, mask, state = self.bs.obs_batched, self.bs.mask_batched, self.bs.state()
        for b, sim in enumerate(self.singles):
            np.testing.assert_array_equal(obs[b], sim.obs, err_msg=f"obs of copy {b}")
            np.testing.assert_array_equal(mask[b], sim.mask, err_msg=f"mask of copy {b}")
            np.testing.assert_array_equal(state[b], sim.state(), err_msg=f"state of copy {b}")

    def reset_copy(self, b: int, seed: int) -> None:
        self.bs.reset_copy(b, seed)
        self.singles[b].reset(seed)

    def resize_running(self) -> None:
        """Random resizes of every copy's running jobs, on both sides (union vs local ids)."""
        jc = self.bs.job_capacity
        for b, sim in enumerate(self.singles):
            local = np.sort(sim.running)
            delta = self.rng.integers(-1, 2, size=len(local))
            for d in (-1, 1):  # the view's resize step, in local ids, is the lone sim's
                np.testing.assert_array_equal(
                    self.bs.view(b).resize_levels(local, d), sim.view().resize_levels(local, d)
                )
            changed = self.bs.resize(local + b * jc, delta)
            np.testing.assert_array_equal(changed, sim.resize(local, delta))
        self.check_views()

    def step(self, masked: bool = True) -> None:
        if self.resize:
            self.resize_running()
        mask = self.bs.mask_batched
        if masked:
            act = (self.rng.random(mask.shape) * mask).argmax(axis=2)
        else:  # any action in range: masked ones are invalid (invalid_action='defer')
            act = self.rng.integers(0, mask.shape[2], size=mask.shape[:2])
        rewards, info = self.bs.step(act)
        for b, sim in enumerate(self.singles):
            r, single_info = sim.step(act[b])
            np.testing.assert_array_equal(rewards[b], r, err_msg=f"rewards of copy {b}")
            for key, value in single_info.items():
                assert info[key][b] == value, (key, b)
            assert info["slot"][b] == sim.t
            assert self.bs.terminated[b] == sim.terminated
            assert self.bs.truncated[b] == sim.truncated
        done = np.flatnonzero(self.bs.terminated | self.bs.truncated).tolist()
        for b in done:
            metrics = self.singles[b].episode_metrics()
            np.testing.assert_equal(self.bs.episode_metrics_of(b), metrics)
            for k in (
                "collisions_proposed",
                "collisions_executed",
                "rejected_placements",
                "task_conflicts",
                "resized_up",
                "resized_down",
                "crashes",
                "shared_gpu_slots",
            ):
                self.totals[k] = self.totals.get(k, 0) + metrics.get(k, 0)
            self.episodes += 1
        # several finished copies restart together (reset_copies); a lone one by reset_copy
        seeds = list(range(self.next_seed, self.next_seed + len(done)))
        self.next_seed += len(done)
        if len(done) == 1:
            self.reset_copy(done[0], seeds[0])
        else:
            self.bs.reset_copies(done, seeds)
            for b, s in zip(done, seeds, strict=True):
                self.singles[b].reset(s)
        self.check_views()

    def run(self, steps: int, masked: bool = True) -> int:
        for _ in range(steps):
            self.step(masked)
        return self.episodes


def _stepped_out(name: str) -> dict:
    # short episodes, so every copy finishes (and restarts) several times
    return {"max_steps": 40, "max_slots": 40} if name.startswith("tapfinger") else {"max_steps": 40}


@pytest.mark.parametrize("name", scenario_params())
def test_every_scenario_matches_single_simulators(name: str) -> None:
    cfg = make_config(name, **_stepped_out(name))
    episodes = Lockstep(cfg, 3, [1, 2, 3]).run(100)
    assert episodes >= 6


@pytest.mark.parametrize(
    ("overrides", "exercised"),
    [
        ({"collision_mode": "reject"}, ("collisions_proposed", "rejected_placements")),
        (
            {"collision_mode": "measured", "arrival_rate": 1.5},
            ("collisions_executed", "shared_gpu_slots", "crashes"),
        ),
        (
            {
                "collision_mode": "measured",
                "crash_order": "random",
                "arrival_rate": 1.5,
                "models": (("imagenet", 0.5), ("cifar10", 0.5)),  # crashes every few episodes
            },
            ("collisions_executed", "crashes"),
        ),
        (
            {
                "collision_mode": "measured",
                "crash_victim": "in_pair",
                "arrival_rate": 1.5,
                "models": (("imagenet", 0.5), ("cifar10", 0.5)),
                "tier_mix": (("small_server", 1.0),),  # K80s, where imagenet pairs fail
            },
            ("collisions_executed", "crashes"),
        ),
        ({"visibility": "shared", "conflict_rule": "random"}, ("task_conflicts",)),
        ({"visibility": "shared", "conflict_rule": "fit_argmax"}, ("task_conflicts",)),
        ({"visibility": "shared", "waiting_charge": "every_viewer"}, ("task_conflicts",)),
        (
            {"visibility": "shared", "conflict_rule": "fit", "collision_mode": "reject"},
            ("task_conflicts", "rejected_placements"),
        ),
        ({"reward_mode": "team", "accuracy_gain_weight": 2.0, "resource_cost_weight": 0.5}, ()),
        ({"priority_aging_slots": 3, "arrival_rate": 0.6}, ()),
        ({"advance": "when_idle"}, ()),
        ({"advance": "when_idle", "pending_slots": 3, "pending_refill": "on_advance"}, ()),
        ({"straggler_scale": 2.0, "sync_mix": (("ps", 0.5), ("allreduce", 0.5))}, ()),
        ({"obs_delay": 3}, ()),
        ({"obs_delay": 2, "advance": "when_idle"}, ()),
        ({"resize": True}, ("resized_down", "resized_up")),
        (
            {"resize": True, "alloc_mode": "grid", "alloc_grid_max": (8, 2), "switch_weight": 0.5},
            ("resized_down", "resized_up"),
        ),
        ({"resize": True, "sync_mix": (("edgegossip", 1.0),)}, ("resized_down",)),
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) if isinstance(o, dict) else "",
)
def test_options_match_single_simulators(overrides: dict, exercised: tuple[str, ...]) -> None:
    overrides = dict(overrides)
    resize = overrides.pop("resize", False)
    cfg = make_config("edge10", max_steps=60, **overrides)
    lock = Lockstep(cfg, 4, [5, 6, 7, 8], resize=resize)
    assert lock.run(200) >= 8
    for counter in exercised:
        assert lock.totals[counter] > 0, counter


def test_invalid_actions_are_deferred_and_counted_per_copy() -> None:
    cfg = make_config("tapfinger-hetero6", invalid_action="defer", max_steps=60)
    lock = Lockstep(cfg, 3, [0, 1, 2])
    lock.run(150, masked=False)
    assert lock.episodes >= 3
    assert sum(lock.bs.counters_of(b).invalid_actions for b in range(3)) > 0


def test_a_larger_workload_lays_the_copies_out_again() -> None:
    cfg = make_config("edge10", max_steps=60)
    sizes = {}
    for seed in range(40):
        sim = EdgeClusterSim(cfg)
        sim.reset(seed)
        sizes[seed] = sim.num_jobs
    small, big = min(sizes, key=sizes.get), max(sizes, key=sizes.get)
    assert sizes[big] > sizes[small]
    lock = Lockstep(cfg, 2, [small, small])
    lock.run(20)  # the first copy keeps its running episode across the re-layout
    capacity = lock.bs.job_capacity
    lock.reset_copy(1, big)
    assert lock.bs.job_capacity == sizes[big] > capacity
    lock.check_views()
    lock.run(100)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    copies=st.integers(1, 4),
    seed=st.integers(0, 10_000),
    advance=st.sampled_from(["every_step", "when_idle"]),
    collision_mode=st.sampled_from(["overload", "reject", "measured", "timeshare"]),
    visibility=st.sampled_from(["home", "shared"]),
    pending_slots=st.integers(1, 3),
    # each further option at its default or another allowed value, so that options are
    # exercised together and not only one at a time (test_options_match_single_simulators)
    extra=st.fixed_dictionaries(
        {},
        optional={
            "obs_delay": st.integers(1, 2),
            "pending_refill": st.just("on_advance"),
            "conflict_rule": st.sampled_from(["random", "fit", "fit_argmax"]),
            "waiting_charge": st.just("every_viewer"),
            "reward_mode": st.just("team"),
            "priority_aging_slots": st.integers(1, 4),
            "straggler_scale": st.just(2.0),
            "switch_weight": st.just(0.5),
            "crash_order": st.just("random"),
            "accuracy_gain_weight": st.just(1.0),
            "resource_cost_weight": st.just(0.5),
        },
    ),
    resize=st.booleans(),
)
def test_random_configurations_match_single_simulators(
    copies: int,
    seed: int,
    advance: str,
    collision_mode: str,
    visibility: str,
    pending_slots: int,
    extra: dict,
    resize: bool,
) -> None:
    cfg = make_config(
        "edge10",
        num_nodes=6,
        neighbors_k=3,
        max_steps=30,
        arrival_rate=0.4,
        advance=advance,
        collision_mode=collision_mode,
        visibility=visibility,
        pending_slots=pending_slots,
        **extra,
    )
    lock = Lockstep(cfg, copies, [seed + b for b in range(copies)], action_seed=seed, resize=resize)
    lock.run(60)


def test_factory_and_views() -> None:
    bs = edgesched.make_batched("tapfinger-hetero6", copies=4)
    bs.reset(seed=3)
    assert bs.obs.shape == (4 * 6, bs.obs_dim)
    assert bs.obs_batched.shape == (4, 6, bs.obs_dim)
    assert bs.mask_batched.shape == (4, 6, bs.num_actions)
    assert np.shares_memory(bs.obs_batched, bs.obs)
    assert bs.scenario_id == "tapfinger-hetero6-v0"
    single = edgesched.make_parallel("tapfinger-hetero6").sim
    single.reset(5)  # reset(seed=3) gives copy b the seed 3 + b
    np.testing.assert_array_equal(bs.obs_batched[2], single.obs)


def test_bad_input_is_rejected_with_its_name() -> None:
    cfg = make_config("edge10")
    with pytest.raises(ConfigError, match=r"copies=0: need an integer >= 1"):
        BatchedSim(cfg, 0)
    bs = BatchedSim(make_config("edge10", max_steps=1), 2)
    with pytest.raises(ValueError, match="seeds has 3 entries; need copies=2"):
        bs.reset(seeds=[1, 2, 3])
    bs.reset(seed=0)
    with pytest.raises(InvalidActionError, match=r"shape \(2, 10\); got shape \(20,\)"):
        bs.step(np.zeros(20, dtype=np.int64))
    with pytest.raises(ValueError, match=r"copies=\[2\]: need distinct indices 0 <= b < copies=2"):
        bs.reset_copy(2, 0)
    with pytest.raises(ValueError, match=r"copies=\[0, 0\]: need distinct"):
        bs.reset_copies([0, 0], [1, 2])
    with pytest.raises(ValueError, match=r"seeds has 1 entries; need one per copy \(2\)"):
        bs.reset_copies([0, 1], [1])
    bs.step(np.zeros((2, 10), dtype=np.int64))  # max_steps=1: both copies are done
    assert bs.truncated.all()
    with pytest.raises(RuntimeError, match=r"copies \[0, 1\] have finished"):
        bs.step(np.zeros((2, 10), dtype=np.int64))
    with pytest.raises(TypeError, match="one clock per copy"):
        _ = bs.t
    with pytest.raises(TypeError, match="one episode per copy: pass b"):
        bs.episode_metrics()
    with pytest.raises(TypeError, match="counters_of"):
        _ = bs.counters


def test_one_copy_is_a_lone_simulator() -> None:
    cfg = make_config("edge10", max_steps=50)
    lone, one = EdgeClusterSim(cfg), EdgeClusterSim(cfg, copies=1)
    lone.reset(4)
    one.reset(seeds=[4])
    rng = np.random.default_rng(0)
    for _ in range(120):
        act = (rng.random(lone.mask.shape) * lone.mask).argmax(axis=1)
        r1, _ = lone.step(act)
        r2, _ = one.step(act[None])
        np.testing.assert_array_equal(r2[0], r1)
        np.testing.assert_array_equal(one.state()[0], lone.state())
        if lone.terminated or lone.truncated:
            assert one.truncated[0] == lone.truncated
            np.testing.assert_equal(one.episode_metrics(0), lone.episode_metrics())
            lone.reset(9)
            one.reset_copy(0, 9)


def test_memory_grows_with_copies_times_nodes_squared() -> None:
    """No array of the batched state is as large as (B*N)**2 (the old tiled link matrices)."""
    copies, n = 64, 50
    bs = BatchedSim(make_config("edge50"), copies)
    bs.reset(seed=0)
    biggest = max((v.size for v in vars(bs).values() if isinstance(v, np.ndarray)), default=0)
    assert biggest < (copies * n) ** 2 // 8
    assert bs.cluster.pair_bw.shape == (n, n)


@given(free=st.lists(st.floats(-3.0, 40.0), min_size=48, max_size=48))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_grid_fit_table_equals_the_direct_comparisons(free: list[float]) -> None:
    """The many-agent grid mask looks fit rows up; they equal comparing every level."""
    # more than 32 agents: the memoized-row path of small simulators is off
    sim = edgesched.make_batched("tapfinger-hetero6", 8)
    sim.reset(seeds=list(range(8)))
    assert sim._fit_table is not None and sim._mask_rows is None
    cap_free = np.zeros((sim.num_agents, 3))
    cap_free[:, 0] = free
    cap_free[:, 1] = np.roll(cap_free[:, 0], 1)
    looked_up = sim._compute_mask(cap_free)
    table, sim._fit_table = sim._fit_table, None
    try:
        direct = sim._compute_mask(cap_free)
    finally:
        sim._fit_table = table
    np.testing.assert_array_equal(looked_up, direct)


@pytest.mark.parametrize("name", ["edge10-v0", "edge10", "edge50"])
@given(data=st.data())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_both_scale_mask_layouts_agree(name: str, data: st.DataObject) -> None:
    """Small simulators compute the scale-level mask agent-axis-first; it equals the other."""
    sim = edgesched.make_parallel(name).sim
    sim.reset(seed=data.draw(st.integers(0, 50), label="seed"))
    rng = np.random.default_rng(data.draw(st.integers(0, 50), label="action_seed"))
    for _ in range(data.draw(st.integers(0, 60), label="steps")):
        sim.step(np.asarray((rng.random(sim.mask.shape) * sim.mask).argmax(axis=1)))
        if sim.terminated or sim.truncated:
            break
    n = sim.num_agents
    # free capacity anywhere from overloaded to generous, memory included
    free = np.asarray(data.draw(st.lists(st.floats(-4.0, 64.0), min_size=3 * n, max_size=3 * n)))
    free = free.reshape(n, 3)
    assert not sim._grid
    small = sim._mask_small
    try:
        for cap in (free, np.full((n, 3), 1e3)):  # the drawn one, and room for every job
            sim._mask_small = True
            first = sim._compute_mask(cap)
            sim._mask_small = False
            np.testing.assert_array_equal(first, sim._compute_mask(cap))
    finally:
        sim._mask_small = small
    # not vacuous: with room everywhere, every pending job has a placement
    np.testing.assert_array_equal(first[:, 1:].any(axis=1), (sim.head >= 0).any(axis=1))


def test_a_simulator_pickled_by_an_earlier_version_resumes_identically():
    """Resumed runs unpickle their simulators: one pickled before the scale-mode mask's
    inputs were renamed (``_inv_need_ext``), its transposed neighbour table added, its
    layout chosen by size, its episode keys made counters and crashes counted by cause must
    continue step for step as the current one does."""
    import pickle

    from edgesched.envs.core import EdgeClusterSim

    sim = edgesched.make_batched("edge50", copies=2)
    sim.reset(seeds=[0, 1])
    rng = np.random.default_rng(0)

    def act(s):
        m = s.mask
        return (rng.random(m.shape) * m).argmax(1).reshape(2, -1)

    for _ in range(20):
        sim.step(act(sim))
    state = pickle.loads(pickle.dumps(sim)).__dict__
    j_min = state["_j_min_ext"]
    inv = np.zeros_like(j_min)
    real = np.isfinite(j_min).all(axis=1)
    inv[real] = 1.0 / np.maximum(j_min[real], 1e-12)  # what earlier versions stored
    state["_inv_need_ext"] = inv
    del state["_scale_need_ext"], state["_nbr_safe_t"], state["_mask_small"]
    del state["_episode_no"], state["uid"]
    state["_cnt"] = {k: v for k, v in state["_cnt"].items() if k != "crashes_memory"}
    old = EdgeClusterSim.__new__(EdgeClusterSim)
    old.__setstate__(state)
    assert old.counters_of(1).crashes_memory == 0  # counted from the restoration on
    keys = [old.view(b).episode_key() for b in range(2)]
    assert len(set(keys)) == 2 and old.uid != sim.uid
    np.testing.assert_array_equal(old._scale_need_ext, sim._scale_need_ext)
    for _ in range(30):
        a = act(sim)
        r_new, _ = sim.step(a)
        r_old, _ = old.step(a)
        np.testing.assert_array_equal(r_old, r_new)
        np.testing.assert_array_equal(old.obs, sim.obs)
        np.testing.assert_array_equal(old.mask, sim.mask)
