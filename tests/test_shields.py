"""Collision shields: safety properties (hypothesis), the arbitration rule, the regional
protocol's guarantees, the PettingZoo wrapper, and the SROLE learner's penalty."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scenarios_with_data
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pettingzoo.test import parallel_api_test
from test_invariants import colliding

import edgesched
from edgesched.envs.core import EdgeClusterSim
from edgesched.envs.scenarios import get_scenario
from edgesched.shields import (
    CentralShield,
    RegionalShield,
    ShieldedParallelEnv,
    list_shields,
    make_shield,
)
from edgesched.shields.base import EPS, arbitrate, colliding_nodes

# scenarios whose real data is missing here are left out (the registry says which need it)
SCENARIOS = [s for s in scenarios_with_data() if s != "edge500"]


def _sim(name: str, seed: int, warm: int) -> EdgeClusterSim:
    """A simulator mid-episode: ``warm`` rounds of random feasible placements."""
    sc = get_scenario(name)
    sim = EdgeClusterSim(sc.config(max_slots=60, max_steps=400), scenario_id=sc.id)
    sim.reset(seed)
    rng = np.random.default_rng(seed)
    for _ in range(warm):
        if sim.terminated or sim.truncated:
            break
        sim.step(_random_actions(sim, rng))
    return sim


def _random_actions(sim: EdgeClusterSim, rng: np.random.Generator) -> np.ndarray:
    # a random feasible action per agent, placements strongly preferred so collisions occur
    score = rng.random(sim.mask.shape) + sim.mask * 1.0
    score[:, 0] = 0.5 + 0.5 * rng.random(sim.num_agents) * 0.2
    score[~sim.mask] = -1.0
    return score.argmax(axis=1)


def _demand(sim: EdgeClusterSim, actions: np.ndarray, agents_mask=None) -> np.ndarray:
    n = sim.num_agents
    agents = np.flatnonzero(actions > 0)
    if agents_mask is not None:
        agents = agents[agents_mask[agents]]
    slot, k, level = sim.decode(actions[agents])
    targets = sim.cluster.neighbors[agents, k]
    alloc = sim.j_alloc[sim.head[agents, slot], level]
    d = np.zeros((n, 3))
    np.add.at(d, targets, alloc)
    return d, targets, alloc


def _collisions(sim: EdgeClusterSim, actions: np.ndarray) -> int:
    _, t, a = _demand(sim, actions)
    return int(colliding_nodes(t, a, sim.capacity - sim.used).sum())


case = st.tuples(
    st.sampled_from(SCENARIOS),
    st.integers(0, 2**31 - 1),
    st.integers(0, 40),
    st.integers(0, 2**31 - 1),
    st.booleans(),
    st.booleans(),
)


def _proposal(sim: EdgeClusterSim, rng: np.random.Generator, aimed: bool) -> np.ndarray:
    """Random feasible actions, or (``aimed``) every agent that can at one common node, so
    that a good share of the examples collide (random proposals rarely do on big clusters)."""
    return colliding(sim, rng) if aimed else _random_actions(sim, rng)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case)
def test_central_shield_never_admits_a_collision(c):
    name, seed, warm, aseed, with_prefs, aimed = c
    sim = _sim(name, seed, warm)
    if sim.terminated or sim.truncated:
        return
    rng = np.random.default_rng(aseed)
    proposal = _proposal(sim, rng, aimed)
    prefs = np.where(sim.mask, rng.random(sim.mask.shape), 0.0) if with_prefs else None
    res = CentralShield(sim)(proposal, prefs)
    out = res.actions
    assert sim.mask[np.arange(sim.num_agents), out].all(), "the shield chose a masked action"
    free = sim.capacity - sim.used
    demand, targets, _ = _demand(sim, out)
    placed = np.bincount(targets, minlength=sim.num_agents) >= 1
    # no node gets more than its free capacity from >= 2 placements (a single placement
    # always fits by the mask), so no node is overloaded that was not already
    assert not ((demand > free + EPS).any(axis=1) & placed).any()
    assert _collisions(sim, out) == 0 == res.residual_collisions
    assert res.proposed_collisions == _collisions(sim, proposal)
    assert res.interventions == int((out != proposal).sum())
    if res.proposed_collisions == 0:
        assert np.array_equal(out, proposal), "a collision-free proposal must pass unchanged"
    # the shield never moves an agent that did not take part in a collision
    moved = out != proposal
    assert not (moved & ~res.collision_agents).any()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case, st.integers(1, 3), st.sampled_from(["optimistic", "conservative"]))
def test_regional_shield_never_admits_an_intra_region_collision(c, rounds, boundary):
    name, seed, warm, aseed, with_prefs, aimed = c
    sim = _sim(name, seed, warm)
    if sim.terminated or sim.truncated:
        return
    rng = np.random.default_rng(aseed)
    proposal = _proposal(sim, rng, aimed)
    prefs = np.where(sim.mask, rng.random(sim.mask.shape), 0.0) if with_prefs else None
    res = RegionalShield(sim, rounds=rounds, boundary=boundary)(proposal, prefs)
    out = res.actions
    assert sim.mask[np.arange(sim.num_agents), out].all()
    free = sim.capacity - sim.used
    region = sim.cluster.region
    for r in range(sim.cluster.num_regions):
        demand, targets, _ = _demand(sim, out, agents_mask=region == r)
        own = (region == r) & (np.bincount(targets, minlength=sim.num_agents) > 0)
        # (a node overloaded before this round has negative free room; only nodes that
        # receive placements count)
        assert not (demand[own] > free[own] + EPS).any(), f"intra-region collision in {r}"
    assert res.residual_collisions == _collisions(sim, out)  # slips are measured, not hidden
    if boundary == "conservative":
        assert res.residual_collisions == 0
    if res.proposed_collisions == 0:
        assert np.array_equal(out, proposal)
    assert res.rounds <= rounds


def test_arbitration_admits_by_preference_and_moves_the_loser_to_its_next_choice():
    # node 0 has room for one of two 1-cpu placements; higher preference wins
    room = np.array([[1.0, 0.0, 4.0], [4.0, 0.0, 8.0]])
    targets = np.array([0, 0, 1])
    alloc = np.array([[1.0, 0.0, 1.0], [1.0, 0.0, 1.0], [2.0, 0.0, 1.0]])
    assert arbitrate(targets, alloc, np.array([0.2, 0.9, 0.5]), room).tolist() == [
        False,
        True,
        True,
    ]
    # equal preference: lower index first; a node whose proposals fit admits them all
    assert arbitrate(targets, alloc, np.array([0.5, 0.5, 0.5]), room).tolist() == [
        True,
        False,
        True,
    ]
    room[0, 0] = 2.0
    assert arbitrate(targets, alloc, np.array([0.2, 0.9, 0.5]), room).all()


def _reference_central_shield(sim: EdgeClusterSim, proposal: np.ndarray, prefs: np.ndarray):
    """The central shield's rule in plain Python, written from its documentation.

    Per node, proposals are admitted in preference order (ties: lower agent index) while
    they fit the node's remaining room; the first that does not fit and every later one
    are denied. A denied agent takes its most preferred feasible action it has not tried
    that fits the room left after this pass, or defers if deferring ranks at least as high
    or nothing fits; the new proposals are arbitrated again, until nobody is denied.
    """
    n, na = sim.num_agents, sim.num_actions
    room = (sim.capacity - sim.used).tolist()
    mask = sim.mask.tolist()

    def placement(i: int, a: int) -> tuple[int, list[float]]:
        s, k, lv = (int(x[0]) for x in sim.decode(np.array([a])))
        return int(sim.cluster.neighbors[i, k]), sim.j_alloc[sim.head[i, s], lv].tolist()

    def fits(al: list[float], r: list[float]) -> bool:
        return all(al[x] <= r[x] + EPS for x in range(3))

    act = [int(a) for a in proposal]
    if _collisions(sim, proposal) == 0:
        return act
    tried: set[tuple[int, int]] = set()
    active = [i for i in range(n) if act[i] > 0]
    while active:
        by_node: dict[int, list[tuple[float, int, list[float]]]] = {}
        for i in active:
            tgt, al = placement(i, act[i])
            by_node.setdefault(tgt, []).append((-prefs[i][act[i]], i, al))
        denied = []
        for node in sorted(by_node):
            blocked = False
            for _, i, al in sorted(by_node[node]):
                if not blocked and fits(al, room[node]):
                    room[node] = [room[node][x] - al[x] for x in range(3)]
                else:
                    blocked = True
                    denied.append(i)
        for i in denied:
            tried.add((i, act[i]))
        for i in sorted(denied):
            best, best_p = 0, -np.inf
            for a in range(1, na):
                if not mask[i][a] or (i, a) in tried:
                    continue
                tgt, al = placement(i, a)
                if fits(al, room[tgt]) and prefs[i][a] > best_p:
                    best, best_p = a, prefs[i][a]
            act[i] = best if best and best_p >= prefs[i][0] else 0
        active = [i for i in denied if act[i] > 0]
    return act


@pytest.mark.parametrize("name", ["edge10", "edge50"])
def test_central_shield_matches_its_rule_written_out(name):
    """Exact joint actions against the plain-Python rule, on rounds that do collide.

    (tapfinger-hetero6 has no collisions to shield: each agent places on its own node.)
    """
    sim = _sim(name, 3, 5)
    rng = np.random.default_rng(0)
    moved = 0
    for _ in range(40):
        proposal = colliding(sim, rng) if rng.random() < 0.7 else _random_actions(sim, rng)
        prefs = np.where(sim.mask, rng.random(sim.mask.shape), -np.inf)
        prefs[:, 0] = rng.random(sim.num_agents) * 0.3  # deferring ranks low, not last
        prefs[np.arange(sim.num_agents), proposal] = 2.0  # the proposal ranks first
        res = CentralShield(sim)(proposal, prefs)
        assert res.actions.tolist() == _reference_central_shield(sim, proposal, prefs)
        moved += res.interventions
        sim.step(res.actions)
        if sim.truncated or sim.terminated:
            sim.reset(int(rng.integers(1000)))
    assert moved >= 5  # denials and re-plans did happen


def test_shielded_random_policy_on_edge50_executes_no_collision():
    env = ShieldedParallelEnv(edgesched.make_parallel("edge50", max_slots=120), "central")
    raw = edgesched.make_parallel("edge50", max_slots=120)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=5)
    raw.reset(seed=5)
    while env.agents:
        actions = {}
        for a, o in obs.items():
            feasible = np.flatnonzero(o["action_mask"])
            actions[a] = int(rng.choice(feasible))
        obs, _, _, _, _ = env.step(actions)
    ep = env.last_episode_metrics
    assert ep["collisions_executed"] == 0
    assert env.unwrapped.sim.counters.collisions_proposed == 0  # nothing collided at the env
    assert ep["collisions_proposed"] > 0, "the random proposals must collide for this to test"
    assert ep["shield_interventions"] > 0


@pytest.mark.parametrize("shield", ["central", "regional"])
def test_wrapper_passes_the_pettingzoo_parallel_api_test(shield):
    env = edgesched.make_parallel("edge10", max_slots=40, invalid_action="defer")
    parallel_api_test(ShieldedParallelEnv(env, shield), num_cycles=100)


def test_registry_and_errors():
    assert list_shields() == ["central", "none", "regional"]
    sim = _sim("edge10", 0, 0)
    assert make_shield("none", sim) is None
    with pytest.raises(KeyError, match="registered shields"):
        make_shield("centre", sim)
    with pytest.raises(ValueError, match="rounds"):
        make_shield("regional", sim, rounds=0)
    with pytest.raises(ValueError, match="boundary"):
        make_shield("regional", sim, boundary="lax")
    with pytest.raises(ValueError, match="shape"):
        CentralShield(sim)(np.zeros(3, np.int64))


def test_regional_protocol_counts_messages_and_is_cheaper_per_shield_at_scale():
    sc = get_scenario("edge100")
    sim = EdgeClusterSim(sc.config(), scenario_id=sc.id)
    sim.reset(1)
    central, regional = CentralShield(sim), RegionalShield(sim)
    rng = np.random.default_rng(1)
    c_msgs = r_busiest = r_inter = 0
    for _ in range(40):
        a = _random_actions(sim, rng)
        rc, rr = central(a), regional(a)
        assert rc.messages == 2 * int((a > 0).sum())
        c_msgs += rc.max_messages_per_shield
        r_busiest += rr.max_messages_per_shield
        r_inter += rr.shield_messages
        assert rr.messages == 2 * int((a > 0).sum()) + rr.shield_messages
        sim.step(rc.actions)
    assert r_inter > 0, "boundary claims must trigger shield-to-shield messages"
    assert r_busiest < c_msgs  # load on the busiest shield


def test_srole_learner_pays_the_penalty_for_proposed_collisions():
    torch = pytest.importorskip("torch")
    from omegaconf import OmegaConf

    from edgesched.algos import make_trainer
    from edgesched.algos.common import VecSim
    from edgesched.experiment.schema import AlgoConfig
    from edgesched.policy import EnvSpec

    sc = get_scenario("edge50-highload")
    cfg = sc.config(max_slots=60)
    rewards = {}
    logs = {}
    for pen in (0.0, 5.0):
        torch.manual_seed(0)
        # the post-posed form (the preemptive default leaves no proposal colliding), with
        # the rule that charges every collided agent (test_srole_shielding: only changed)
        algo = OmegaConf.structured(
            AlgoConfig(
                name="srole",
                collision_penalty=pen,
                shield_training="postposed",
                penalize="collided",
            )
        )
        vec = VecSim(cfg, 2, seed=3, scenario_id=sc.id)
        trainer = make_trainer("srole", algo, EnvSpec.of(vec.sim), 3, "central")
        batch = trainer.collect(vec, 24)
        rewards[pen], logs[pen] = batch["rewards"], batch["log"]
    assert logs[0.0]["collisions_proposed_per_step"] > 0
    assert logs[0.0]["collisions_executed_per_step"] == 0
    hits = logs[5.0]["collision_agents_per_step"] * 24 * 2
    assert hits > 0
    assert float((rewards[0.0] - rewards[5.0]).sum()) == pytest.approx(5.0 * hits, rel=1e-5)


def test_shielded_heuristic_record_reproduces_under_validate(tmp_path):
    pytest.importorskip("torch")
    from edgesched.experiment import evaluate_baseline
    from edgesched.leaderboard.records import load_records
    from edgesched.leaderboard.validate import validate_records

    out = tmp_path / "results" / "shielded.jsonl"
    out.parent.mkdir()
    summary = evaluate_baseline(
        "least_loaded", "edge10", {"max_slots": 60}, [10_000, 10_001], 1, str(tmp_path / "r.json")
    )
    plain = evaluate_baseline(
        "least_loaded", "edge10", {"max_slots": 60}, [10_000, 10_001], 1, str(tmp_path / "p.json")
    )
    shielded = evaluate_baseline(
        "least_loaded",
        "edge10",
        {"max_slots": 60},
        [10_000, 10_001],
        1,
        str(tmp_path / "s.json"),
        shield="central",
    )
    assert summary == plain
    assert plain["collisions_executed"] > 0, "least_loaded must collide here for this to test"
    assert shielded["collisions_executed"] == 0
    assert shielded["collisions_proposed"] > 0 and shielded["shield_interventions"] > 0
    out.write_text((tmp_path / "s.json").read_text().replace("\n", "") + "\n")
    records = load_records([out.parent], [])
    assert records[0].data["shield"] == "central"
    report = validate_records(records, tmp_path)
    assert not report.mismatches and not report.skipped


SHIELD_VARIANTS = [
    ("central", {}),
    ("regional", {"rounds": 1}),
    ("regional", {"rounds": 2}),
    ("regional", {"rounds": 1, "boundary": "conservative"}),
]


@pytest.mark.parametrize("name", ["edge10", "edge50"])
@pytest.mark.parametrize(("shield", "kwargs"), SHIELD_VARIANTS)
def test_batched_shield_equals_a_lone_shield_per_copy(name, shield, kwargs):
    """Lockstep: one shield over B copies decides, copy by copy, what a shield bound to
    that copy alone decides (actions and every count; timed or not), as the copies run."""
    copies = 4
    sc = get_scenario(name)
    sim = EdgeClusterSim(sc.config(max_slots=60, max_steps=400), copies=copies)
    sim.reset(seeds=[11, 12, 13, 14])
    batch = make_shield(shield, sim.batch_view(), **kwargs)
    lone = [make_shield(shield, sim.view(b), **kwargs) for b in range(copies)]
    assert batch.num_copies == copies and lone[0].num_copies == 1
    rng = np.random.default_rng(5)
    seen = dict.fromkeys(("interventions", "rounds", "residual_collisions", "invalid"), 0)
    uneven = 0  # rounds in which the copies used different numbers of shield rounds
    for step in range(40):
        mask = sim.mask_batched
        score = rng.random(mask.shape) + mask
        score[..., 0] = 0.5 + 0.1 * rng.random(mask.shape[:2])
        a = score.argmax(-1)
        a[0, 0] = sim.num_actions - 1 if not mask[0, 0, -1] else a[0, 0]  # an invalid one
        prefs = None
        if step % 2:
            prefs = np.where(mask, rng.random(mask.shape), -np.inf)
            prefs[..., 0] = 0.3 * rng.random(mask.shape[:2])
        untimed = batch.shield_batch(a, prefs, timed=False)
        timed = batch.shield_batch(a, prefs, timed=True)
        for b in range(copies):
            want = lone[b].shield(a[b], None if prefs is None else prefs[b])
            for got in (untimed.of(b), timed.of(b)):
                np.testing.assert_array_equal(got.actions, want.actions)
                np.testing.assert_array_equal(got.collision_agents, want.collision_agents)
                for k in untimed.COUNTS:
                    assert getattr(got, k) == getattr(want, k), (step, b, k)
                assert got.network_ms == pytest.approx(want.network_ms)
            for k in seen:
                seen[k] += getattr(want, k)
        assert untimed.compute_s == untimed.compute_total_s > 0
        uneven += len(set(untimed.rounds.tolist())) > 1
        sim.step(untimed.actions)
        done = np.flatnonzero(sim.terminated | sim.truncated)
        if len(done):
            sim.reset_copies(done.tolist(), [200 + step + int(d) for d in done])
    # the rounds that matter happened: denials, invalid proposals, and (regional) messages
    assert seen["interventions"] > 10 and seen["invalid"] > 0
    if shield == "regional":
        # per-copy round budgets were exercised: copies of one call spent different rounds
        assert seen["rounds"] > 0 and uneven > 0


def test_a_shield_over_several_copies_refuses_one_copys_actions():
    sim = EdgeClusterSim(get_scenario("edge10").config(), copies=2)
    sim.reset(seeds=[0, 1])
    sh = make_shield("central", sim.batch_view())
    with pytest.raises(TypeError, match="shield_batch"):
        sh.shield(np.zeros(10, np.int64))
    with pytest.raises(ValueError, match=r"\(B, N\) = \(2, 10\)"):
        sh.shield_batch(np.zeros(10, np.int64))
    with pytest.raises(ValueError, match=r"prefs must have shape \(B, N, A\)"):
        sh.shield_batch(np.zeros((2, 10), np.int64), np.zeros((2, 10)))
