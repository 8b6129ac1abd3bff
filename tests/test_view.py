"""The read-only cluster view (envs/view.py): it cannot change the simulator, it says what
the simulator holds, its collision test is the simulator's, and no module outside
edgesched/envs reads a private attribute of a simulator."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import scenario_params

import edgesched
from edgesched.envs import EdgeSchedCentralEnv, make_config
from edgesched.envs.core import (
    DONE,
    NODE_FEATURES,
    QUEUED,
    RUNNING,
    EdgeClusterSim,
    InvalidActionError,
)
from edgesched.envs.view import (
    CAPACITY_EPS,
    CentralObsLayout,
    ClusterView,
    ObsLayout,
    colliding_nodes,
)
from edgesched.policy import EnvSpec

READONLY_ARRAYS = (
    "capacity",
    "used",
    "inv_capacity",
    "neighbors",
    "regions",
    "boundary",
    "pending",
    "queue_lengths",
    "alloc_table",
    "job_arrival",
    "job_priority",
    "job_workers",
    "job_x90",
    "job_max_samples",
    "job_status",
    "running",
    "job_quality",
    "job_progress",
    "job_start_slot",
    "worker_nodes",
    "worker_alloc",
    "worker_levels",
    "mask",
)
"""Properties that are read-only views of the simulator's arrays."""


def _random_actions(sim: EdgeClusterSim, rng: np.random.Generator) -> np.ndarray:
    """A random feasible action per agent (uniform over the mask, as in test_batched)."""
    return (rng.random(sim.mask.shape) * sim.mask).argmax(axis=1)


def _placing_actions(sim: EdgeClusterSim, rng: np.random.Generator) -> np.ndarray:
    """A random feasible action per agent, placements strongly preferred (collisions)."""
    score = rng.random(sim.mask.shape) + sim.mask * 1.0
    score[:, 0] = 0.5 + 0.1 * rng.random(sim.num_agents)
    score[~sim.mask] = -1.0
    return score.argmax(axis=1)


def _sim(name: str, seed: int, steps: int, **overrides) -> EdgeClusterSim:
    """A simulator of ``name`` after ``steps`` random masked steps (short episodes)."""
    cfg = make_config(name, max_steps=400, **overrides)
    sim = EdgeClusterSim(cfg, scenario_id=name)
    sim.reset(seed)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        if sim.terminated or sim.truncated:
            break
        sim.step(_placing_actions(sim, rng))
    return sim


@pytest.fixture(scope="module")
def busy() -> EdgeClusterSim:
    """edge10 mid-episode: jobs queued, running and done."""
    sim = _sim("edge10", 3, 120)
    assert len(sim.running) and (sim.status == QUEUED).any()
    return sim


# ---------------------------------------------------------------------------- read-only
@pytest.mark.parametrize("name", READONLY_ARRAYS)
def test_view_arrays_refuse_writes(busy: EdgeClusterSim, name: str) -> None:
    a = getattr(ClusterView(busy), name)
    assert isinstance(a, np.ndarray)
    assert not a.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        a[...] = 0


@pytest.mark.parametrize("name", READONLY_ARRAYS)
def test_view_attributes_cannot_be_rebound_and_are_documented(
    busy: EdgeClusterSim, name: str
) -> None:
    view = ClusterView(busy)
    before = getattr(view, name).copy()
    with pytest.raises(AttributeError):
        setattr(view, name, np.zeros_like(before))
    np.testing.assert_array_equal(getattr(view, name), before)
    assert "read-only" in (getattr(ClusterView, name).__doc__ or "")


def test_fresh_arrays_and_pairs_do_not_reach_the_simulator(busy: EdgeClusterSim) -> None:
    view = ClusterView(busy)
    used, free0 = busy.used.copy(), view.free.copy()
    free = view.free
    free[...] = -1.0
    np.testing.assert_array_equal(view.free, free0)
    np.testing.assert_array_equal(busy.used, used)
    table = busy.j_alloc.copy()
    got = view.alloc(np.arange(view.num_jobs), np.zeros(view.num_jobs, np.int64))
    got[...] = -1.0
    np.testing.assert_array_equal(busy.j_alloc, table)
    q = view.queued
    q[...] = False
    assert view.queued.any()
    for a in view.queued_pairs():
        with pytest.raises(ValueError, match="read-only"):
            a[...] = 0


def test_episode_keys_never_recur_and_survive_pickling() -> None:
    """Keys were ids of workload objects: a third episode could reuse the first one's freed
    address, and an unpickled copy got a new key, so a resumed RLPTO run's forecasts
    depended on the heap's layout (a flaky test under xdist)."""
    import pickle

    sim = EdgeClusterSim(make_config("edge10", max_steps=400), scenario_id="edge10", copies=3)
    keys = []
    for s in range(5):
        sim.reset(s)
        keys += [ClusterView(sim, b).episode_key() for b in range(3)]
        sim.reset_copy(1, 100 + s)  # one copy alone: only its key changes
        keys.append(ClusterView(sim, 1).episode_key())
    assert len(set(keys)) == len(keys)
    twin = pickle.loads(pickle.dumps(sim))
    for b in range(3):
        assert ClusterView(twin, b).episode_key() == ClusterView(sim, b).episode_key()
    twin.reset(9)
    assert ClusterView(twin, 0).episode_key() not in keys


def test_a_view_follows_the_simulator_across_steps_and_resets() -> None:
    sim = _sim("edge10", 1, 0)
    view = ClusterView(sim)
    key = view.episode_key()
    rng = np.random.default_rng(0)
    for _ in range(30):
        sim.step(_placing_actions(sim, rng))
        np.testing.assert_array_equal(view.used, sim.used)
        assert view.clock == sim.t
        assert view.episode_key() == key
    sim.reset(2)
    assert view.episode_key() != key
    np.testing.assert_array_equal(view.job_arrival, sim.j_arrival)
    assert not view.used.any()


# ---------------------------------------------------------------------------- values
@pytest.mark.parametrize("name", scenario_params())
def test_view_values_equal_the_simulator_state(name: str) -> None:
    sim = _sim(name, 7, 0, max_slots=40)
    rng = np.random.default_rng(7)
    view = ClusterView(sim)
    for step in range(40):
        if sim.terminated or sim.truncated:
            break
        if step % 8 == 0:
            _check_values(sim, view)
        sim.step(_random_actions(sim, rng))
    _check_values(sim, view)


def _check_values(sim: EdgeClusterSim, view: ClusterView) -> None:
    eq = np.testing.assert_array_equal
    n = sim.num_agents
    assert (view.num_agents, view.num_actions, view.num_levels) == (
        n,
        sim.num_actions,
        sim.num_levels,
    )
    assert (view.k1, view.pending_slots, view.num_jobs, view.num_priorities) == (
        sim.k1,
        sim.pending_slots,
        sim.num_jobs,
        sim.num_priorities,
    )
    assert view.num_models == sim.num_models and view.job_features == sim.job_features
    assert view.max_workers == sim.w_level.shape[1]
    assert view.config is sim.cfg and view.cluster is sim.cluster and view.clock == sim.t
    # capacity and load
    eq(view.capacity, sim.capacity)
    eq(view.used, sim.used)
    eq(view.free, sim.capacity - sim.used)
    cap = sim.capacity
    eq(view.inv_capacity, np.divide(1.0, cap, out=np.zeros_like(cap), where=cap > 0))
    eq(view.neighbors, sim.cluster.neighbors)
    eq(view.regions, sim.cluster.region)
    eq(view.boundary, sim.cluster.boundary)
    assert view.num_regions == sim.cluster.num_regions
    assert view.occupied_share() == sim.occupied_share()
    # the allocations of unfinished jobs' workers are what the nodes have in use
    placed = (view.worker_nodes >= 0) & (view.job_status != DONE)[:, None]
    used = np.zeros((n, 3))
    np.add.at(used, view.worker_nodes[placed], view.worker_alloc[placed])
    np.testing.assert_allclose(used, view.used, atol=1e-9)
    # queues: each agent's pending slots are the head of its queue, in queue order
    eq(view.pending, sim.head)
    eq(view.queue_lengths, sim.qlen)
    agents, jobs = view.queued_pairs()
    for a in range(n):
        mine = jobs[agents == a][: view.pending_slots]
        eq(view.pending[a, : len(mine)], mine)
        assert (view.pending[a, len(mine) :] == -1).all()
    assert set(jobs.tolist()) <= set(np.flatnonzero(view.queued).tolist())
    # jobs
    eq(view.queued, sim.status == QUEUED)
    eq(np.sort(view.running), np.flatnonzero(view.job_status == RUNNING))
    for mine, theirs in [
        (view.alloc_table, sim.j_alloc),
        (view.job_arrival, sim.j_arrival),
        (view.job_priority, sim.j_prio),
        (view.job_workers, sim.j_workers),
        (view.job_x90, sim.j_x90),
        (view.job_max_samples, sim.j_max_samples),
        (view.job_status, sim.status),
        (view.running, sim.running),
        (view.job_quality, sim.quality),
        (view.job_progress, sim.progress),
        (view.job_start_slot, sim.start_slot),
        (view.worker_nodes, sim.w_node),
        (view.worker_alloc, sim.w_alloc),
        (view.worker_levels, sim.w_level),
        (view.mask, sim.mask),
    ]:
        eq(mine, theirs)
    if view.num_jobs:
        jobs = np.arange(view.num_jobs)[:, None]
        levels = np.arange(view.num_levels)[None, :]
        eq(view.alloc(jobs, levels), sim.j_alloc)
    # observation layout: blocks cover the observation; fields mean what they say
    lay = view.obs_layout
    obs = sim.obs
    assert lay.targets.stop == sim.obs_dim == obs.shape[1]
    spec = EnvSpec.of(sim)
    sl = spec.obs_slices()
    assert (lay.node, lay.time, lay.jobs, lay.targets) == (
        sl["own"],
        sl["time"],
        sl["jobs"],
        sl["targets"],
    )
    assert lay.queue == sl["queue"].start and lay.target_width == NODE_FEATURES + 3
    # the own node block is current even under obs_delay (only the targets' are stale)
    free_frac = (view.free * view.inv_capacity).astype(np.float32)
    eq(obs[:, lay.node][:, lay.node_free], free_frac)
    jf = obs[:, lay.jobs].reshape(n, lay.pending_slots, lay.job_width)
    present = view.pending >= 0
    eq(jf[..., lay.job_present] == 1.0, present)
    if present.any():
        head = view.pending[present]
        eq(jf[present][:, lay.job_priority].argmax(-1), view.job_priority[head])
        eq(jf[present][:, lay.job_model].argmax(-1), sim.j_model[head])
        assert lay.job_model.stop - lay.job_model.start == sim.num_models
    tg = obs[:, lay.targets].reshape(n, lay.num_targets, lay.target_width)
    eq(tg[..., lay.link][..., 0] == 1.0, view.neighbors >= 0)


def test_central_layout_covers_the_central_observation() -> None:
    env = EdgeSchedCentralEnv("edge10")
    obs, _ = env.reset(seed=0)
    sim = env.unwrapped.sim
    lay = CentralObsLayout.build(sim.job_features, sim.num_agents)
    assert lay.nodes.stop + 3 == obs.shape[0]
    nodes = obs[lay.nodes].reshape(sim.num_agents, lay.node_width)
    view = ClusterView(sim)
    free_frac = (view.free * view.inv_capacity).astype(np.float32)
    eq_lay = view.obs_layout
    np.testing.assert_array_equal(nodes[:, eq_lay.node_free], free_frac)


def test_layout_of_a_spec_is_the_layout_of_its_simulator() -> None:
    from edgesched.baselines.heuristics import obs_layout

    for name, over in [("edge10", {}), ("edge10", {"pending_slots": 3}), ("tapfinger-hetero6", {})]:
        sim = EdgeClusterSim(make_config(name, **over))
        assert obs_layout(EnvSpec.of(sim)) == ClusterView(sim).obs_layout
    assert isinstance(ObsLayout.build(2, 5, 17, 3), ObsLayout)


# ---------------------------------------------------------------------------- actions
@pytest.mark.parametrize("over", [{}, {"pending_slots": 3}, {"alloc_mode": "grid"}])
def test_encode_decode_round_trip(over: dict) -> None:
    sim = EdgeClusterSim(make_config("edge10", **over))
    view = ClusterView(sim)
    acts = np.arange(1, view.num_actions)
    slot, k, level = view.decode(acts)
    assert ((slot >= 0) & (slot < view.pending_slots)).all()
    assert ((k >= 0) & (k < view.k1)).all()
    assert ((level >= 0) & (level < view.num_levels)).all()
    np.testing.assert_array_equal(view.encode(slot, k, level), acts)
    # every (slot, target, level) triple is one action
    assert len({(a, b, c) for a, b, c in zip(slot, k, level, strict=True)}) == len(acts)


def test_check_actions_defers_and_marks_invalid_ones() -> None:
    sim = _sim("edge10", 4, 20)
    view = ClusterView(sim)
    acts = np.zeros(view.num_agents, np.int64)
    acts[0] = view.num_actions  # out of range
    before = sim.counters.invalid_actions
    out = view.check_actions(acts)
    assert out[0] == 0 and view.invalid_mask is not None and view.invalid_mask[0]
    assert view.invalid_mask.sum() == 1 and sim.counters.invalid_actions == before + 1
    view.check_actions(np.zeros(view.num_agents, np.int64))
    assert view.invalid_mask is None
    strict = EdgeClusterSim(make_config("edge10", invalid_action="raise"))
    strict.reset(0)
    with pytest.raises(InvalidActionError):
        ClusterView(strict).check_actions(acts)


# ---------------------------------------------------------------------------- collisions
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_colliding_nodes_is_the_simulators_collision_test(seed: int) -> None:
    sim = EdgeClusterSim(make_config("edge10", max_steps=300))
    sim.reset(seed)
    view = ClusterView(sim)
    rng = np.random.default_rng(seed)
    total = 0
    while not (sim.terminated or sim.truncated):
        acts = _placing_actions(sim, rng)
        agents = np.flatnonzero(acts > 0)
        slot, k, level = view.decode(acts[agents])
        targets = view.neighbors[agents, k]
        alloc = view.alloc(view.pending[agents, slot], level)
        expected = view.colliding_nodes(targets, alloc)
        np.testing.assert_array_equal(expected, colliding_nodes(targets, alloc, view.free))
        _, info = sim.step(acts)
        assert info["collisions"] == int(expected.sum())
        total += info["collisions"]
    assert total > 0  # the test saw collisions


def test_colliding_nodes_definition() -> None:
    free = np.array([[2.0, 1.0, 4.0], [2.0, 1.0, 4.0], [0.5, 0.0, 1.0]])
    alloc = np.array([[1.0, 0.5, 1.0], [1.0, 0.5, 1.0], [1.0, 1.0, 1.0], [1.5, 0.0, 0.0]])
    # node 0: two placements that fit exactly; node 1: two that together exceed its CPUs;
    # node 2: one that does not fit alone (the mask's business, not a collision)
    got = colliding_nodes(np.array([0, 0, 1, 1, 2]), np.vstack([alloc, alloc[2]]), free)
    np.testing.assert_array_equal(got, [False, True, False])
    got = colliding_nodes(np.array([0, 0]), alloc[:2] + CAPACITY_EPS / 2, free)
    np.testing.assert_array_equal(got, [False, False, False])
    got = colliding_nodes(np.array([0, 0]), alloc[:2] + 1e-6, free)
    np.testing.assert_array_equal(got, [True, False, False])


# ---------------------------------------------------------------------------- boundary
PACKAGE = Path(edgesched.__file__).resolve().parent
CHECKOUT = Path(__file__).resolve().parents[1]
SIM_NAME = re.compile(r"(?:sim|sims\[.*\]|simulator|batch|batched)$")
"""Source text of an expression that names a simulator (``sim``, ``self.sim``,
``env.unwrapped.sim``, ``vec.sims[i]``, ``simulator``, a ``batch`` of copies, ...)."""


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_sim_reads(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every ``<simulator>._name`` (not dunder) in ``source``.

    Also ``getattr``/``setattr``/``hasattr`` of a simulator with a literal private name.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            if _private(node.attr) and SIM_NAME.search(ast.unparse(node.value)):
                found.append((node.lineno, node.col_offset, ast.unparse(node)))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and SIM_NAME.search(ast.unparse(node.args[0]))
        ):
            found.append((node.lineno, node.col_offset, ast.unparse(node)))
    return [(line, text) for line, _, text in sorted(found)]


@pytest.mark.parametrize(
    "name,over",
    [("edge10", {}), ("tapfinger-hetero6", {}), ("edge10", {"alloc_mode": "grid"})],
)
def test_resize_levels_are_where_resize_moves_the_workers(name: str, over: dict) -> None:
    import copy

    sim = EdgeClusterSim(make_config(name, **over))
    sim.reset(1)
    rng = np.random.default_rng(1)
    view = ClusterView(sim)
    for _ in range(60):  # random valid placements until a few jobs run
        sim.step(np.array([rng.choice(np.flatnonzero(m)) for m in sim.mask]))
        if len(view.running) >= 3:
            break
    jobs = np.asarray(view.running)
    assert len(jobs) >= 1
    carried_out = 0
    for d in (-1, 1):
        levels = view.resize_levels(jobs, d)
        assert levels.shape == (len(jobs), view.max_workers)
        for i, j in enumerate(jobs):
            w = int(view.job_workers[j])
            assert (levels[i, w:] == -1).all()
            other = copy.deepcopy(sim)
            if other.resize(np.array([j]), np.array([d]))[0]:
                carried_out += 1
                np.testing.assert_array_equal(other.w_level[j, :w], levels[i, :w])
            else:  # refused: no worker can move, or the nodes have no room to grow
                moved = (levels[i, :w] != view.worker_levels[j, :w]).any()
                assert not moved or d == 1
    assert carried_out > 0  # the comparison was made on real moves
    with pytest.raises(ValueError, match="delta=0"):
        view.resize_levels(jobs, 0)


def test_the_scanner_finds_private_reads() -> None:
    src = (
        "sim._a\nself.sim._b(1)\nvec.sims[i]._c\nenv.unwrapped.sim._d = 1\n"
        "sim.__class__\nself._sim\nsim.public\nsimulation._e\nview._f\n"
        "getattr(sim, '_g')\nhasattr(self.sim, '__len__')\nsimulator._h\nbatch._i\n"
        "getattr(view, '_j')\n"
    )
    assert [t for _, t in private_sim_reads(src)] == [
        "sim._a",
        "self.sim._b",
        "vec.sims[i]._c",
        "env.unwrapped.sim._d",
        "getattr(sim, '_g')",
        "simulator._h",
        "batch._i",
    ]


READERS_IN_ENVS = ("central.py", "central_core.py")
"""Modules inside ``edgesched/envs`` that are consumers of the simulator, not part of it: the
Gymnasium central view and its batched core read through the views too."""


def _modules_outside_envs() -> list[Path]:
    """The package's modules but ``edgesched/envs`` (except its reader modules), and the
    checkout's scripts if present."""
    paths = [
        p
        for p in PACKAGE.rglob("*.py")
        if p.relative_to(PACKAGE).parts[0] != "envs" or p.name in READERS_IN_ENVS
    ]
    if (CHECKOUT / "edgesched").resolve() == PACKAGE:  # an editable install: its checkout
        for folder in ("benchmarks", "scripts"):
            paths += (CHECKOUT / folder).rglob("*.py")
        paths += [p for p in (CHECKOUT / "train.py", CHECKOUT / "evaluate.py") if p.is_file()]
    return sorted(paths)


def test_no_module_outside_envs_reads_a_private_attribute_of_the_simulator() -> None:
    offenders = []
    for path in _modules_outside_envs():
        rel = path.relative_to(PACKAGE.parent)
        for line, text in private_sim_reads(path.read_text()):
            offenders.append(f"{rel}:{line}: {text}")
    assert not offenders, "read the simulator through ClusterView:\n" + "\n".join(offenders)


def test_node_overload_slots_split_each_copys_overload_count() -> None:
    """Per copy, the per-node counts sum to the copy's overload_node_slots; reset clears."""
    sim = EdgeClusterSim(
        make_config("edge10", collision_mode="overload", arrival_rate=0.5, max_slots=40),
        copies=2,
    )
    sim.reset(seeds=[1, 2])
    rng = np.random.default_rng(0)
    while not (sim.terminated | sim.truncated).any():
        mask = sim.mask
        act = (rng.random(mask.shape) * mask).argmax(axis=1)
        sim.step(act.reshape(2, -1))
    totals = [sim.counters_of(b).overload_node_slots for b in range(2)]
    assert min(totals) > 0  # else the check below is vacuous
    for b in range(2):
        per_node = ClusterView(sim, copy=b).node_overload_slots
        assert per_node.shape == (sim.agents_per_copy,)
        assert per_node.sum() == totals[b]
    sim.reset_copies(np.array([0]), [3])
    assert ClusterView(sim, copy=0).node_overload_slots.sum() == 0
    assert ClusterView(sim, copy=1).node_overload_slots.sum() == totals[1]


# ---------------------------------------------------------------------------- batch view
@pytest.mark.parametrize("name", ["edge10", "edge50", "tapfinger-hetero6"])
def test_batch_view_rows_are_the_copies_views(name: str) -> None:
    """Row ``b`` of every BatchView array is what ``sim.view(b)`` shows, as the copies run."""
    from edgesched.envs.batch_view import BatchView

    b = 3
    sim = EdgeClusterSim(make_config(name, max_slots=40), copies=b)
    sim.reset(seeds=[5, 6, 7])
    rng = np.random.default_rng(2)
    bv = sim.batch_view()
    eq = np.testing.assert_array_equal
    for step in range(25):
        if step % 6 == 0:
            assert (bv.num_copies, bv.num_agents, bv.num_actions) == (
                b,
                sim.agents_per_copy,
                sim.num_actions,
            )
            slot, _, lvl = bv.decode(np.arange(1, bv.num_actions))
            for c in range(b):
                view = sim.view(c)
                eq(bv.free[c], view.free)
                eq(bv.mask[c], view.mask)
                eq(bv.inv_capacity[c], view.inv_capacity)
                eq(bv.pending[c], view.pending)
                jobs = np.maximum(view.pending[:, slot], 0)
                eq(bv.alloc(c, jobs, lvl), view.alloc(jobs, lvl))
                one = BatchView(sim, copy=c)  # one copy as a one-copy batch
                eq(one.pending[0], view.pending)
                eq(one.alloc(0, jobs, lvl), view.alloc(jobs, lvl))
                eq(view.batch_view().free[0], view.free)
                eq(bv.view(c).mask, view.mask)
            eq(bv.neighbors, sim.cluster.neighbors)
            eq(bv.regions, sim.cluster.region)
        score = rng.random(sim.mask_batched.shape) * sim.mask_batched
        sim.step(score.argmax(-1))
        done = np.flatnonzero(sim.terminated | sim.truncated)
        if len(done):
            sim.reset_copies(done.tolist(), [100 + step + int(d) for d in done])
    with pytest.raises(ValueError, match="copy=3"):
        BatchView(sim, copy=3)
    with pytest.raises(ValueError, match="b=5"):
        bv.view(5)
    for arr in (bv.mask, bv.inv_capacity, bv.neighbors, bv.regions):
        with pytest.raises(ValueError):
            arr[...] = 0


def test_observation_blocks_and_job_reads_of_a_copy_are_the_simulators() -> None:
    """The reads the central view builds on (features, home agents, allowed levels, queue
    order), per copy of a batched simulator, equal the simulator's own rows."""
    sim = EdgeClusterSim(make_config("edge50", max_slots=40), copies=3)
    sim.reset(seeds=[1, 2, 3])
    rng = np.random.default_rng(0)
    for _ in range(12):
        sim.step((rng.random(sim.mask_batched.shape) * sim.mask_batched).argmax(-1))
    n, jc = sim.agents_per_copy, sim.job_capacity
    eq = np.testing.assert_array_equal
    for b in range(3):
        view = sim.view(b)
        rows = slice(b * n, (b + 1) * n)
        jobs = np.arange(view.num_jobs)
        eq(view.node_feature_rows(), sim._node_features()[rows])
        eq(view.time_features(), sim._time_features()[b * n])
        pending = view.pending
        eq(view.job_feature_rows(pending), sim._job_features(sim.head[rows]))
        assert (view.job_feature_rows(np.array([-1])) == 0).all()  # an empty slot
        eq(view.job_home, sim.j_home[b * jc + jobs] - b * n)
        eq(view.alloc_allowed, sim.j_alloc_ok[b * jc + jobs])
        queued = np.flatnonzero(view.queued)
        assert len(queued) > 0
        eq(np.argsort(view.queue_key(queued)), np.argsort(sim.j_key_of(queued + b * jc)))


@pytest.mark.parametrize("name", ["edge10", "tapfinger-hetero6"])
def test_lone_batch_view_job_reads_equal_a_batched_copys(name: str) -> None:
    """A lone simulator's BatchView skips the copy-id arithmetic (its local ids are its own):
    its per-(copy, job) reads equal those of the same copy in a batched simulator."""
    lone = EdgeClusterSim(make_config(name, max_slots=30))
    lone.reset(seed=8)
    many = EdgeClusterSim(make_config(name, max_slots=30), copies=3)
    many.reset(seeds=[3, 8, 4])
    rng = np.random.default_rng(1)
    eq = np.testing.assert_array_equal
    from edgesched.envs.batch_view import BatchView

    one, mid = lone.batch_view(), BatchView(many, copy=1)
    for _ in range(10):
        jobs = np.arange(lone.view().num_jobs)
        for j in (jobs, jobs[::-1][:5], np.array([-1, 0])):
            zero = np.zeros_like(j)
            eq(one.job_feature_rows(zero, j), mid.job_feature_rows(zero, j))
            ok = j[j >= 0]
            eq(one.job_home(zero[: len(ok)], ok), mid.job_home(zero[: len(ok)], ok))
            eq(one.job_status(zero[: len(ok)], ok), mid.job_status(zero[: len(ok)], ok))
            for got, want in zip(
                one.alloc_options(zero[: len(ok)], ok),
                mid.alloc_options(zero[: len(ok)], ok),
                strict=True,
            ):
                eq(got, want)
        score = rng.random(lone.mask.shape) * lone.mask
        lone.step(score.argmax(-1))
        joint = np.zeros(many.mask_batched.shape[:2], dtype=np.int64)  # (B, N)
        joint[1] = score.argmax(-1)  # the other copies defer
        many.step(joint)
