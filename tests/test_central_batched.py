"""The central view's batched core: B heads stepped together equal B lone heads."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from edgesched.envs import make_config
from edgesched.envs.central import EdgeSchedCentralEnv
from edgesched.envs.central_core import LONE_ROWS, CentralHeads
from edgesched.envs.core import InvalidActionError


def _lockstep(name: str, copies: int, steps: int, invalid_every: int = 0, **over) -> int:
    """Step ``copies`` batched heads beside lone views on the same workloads; return ends."""
    cfg = make_config(name, **over)
    heads = CentralHeads(cfg, copies=copies)
    lone = [EdgeSchedCentralEnv(cfg) for _ in range(copies)]
    seeds = [11 + 7 * b for b in range(copies)]
    heads.reset(seeds)
    for env, s in zip(lone, seeds, strict=True):
        env.reset(options={"workload_seed": s})
    next_seed, ends = 100, 0
    rng = np.random.default_rng(0)
    for i in range(steps):
        obs, masks = heads.observations(), heads.masks()
        for b, env in enumerate(lone):
            np.testing.assert_array_equal(masks[b], env.action_masks())
            np.testing.assert_array_equal(obs[b], env.heads.observations()[0])
        acts = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        if invalid_every and i % invalid_every == 0:
            acts[i % copies] = heads.num_actions + 3  # out of range: deferred and counted
        rewards, info = heads.step(acts)
        for b, env in enumerate(lone):
            _, r, term, trunc, linfo = env.step(int(acts[b]))
            assert rewards[b] == r
            assert {k: int(v[b]) for k, v in info.items()} == linfo
            assert (bool(heads.end_flags()[0][b]), bool(heads.end_flags()[1][b])) == (term, trunc)
        done = np.flatnonzero(heads.ended)
        if len(done):
            ends += len(done)
            for b in done.tolist():
                m = heads.episode_metrics(b)
                np.testing.assert_equal(m, lone[b].last_episode_metrics)
                lone[b].reset(options={"workload_seed": next_seed + b})
            heads.reset_copies(done, [next_seed + b for b in done.tolist()])
            next_seed += 10
    return ends


@pytest.mark.parametrize(
    ("name", "over"),
    [
        ("edge10", {"max_slots": 12, "arrival_rate": 0.6}),
        ("edge10", {"max_slots": 8, "priority_aging_slots": 2, "arrival_rate": 0.8}),
        ("edge50", {"max_slots": 6}),
        ("edge10", {"max_slots": 10, "pending_refill": "on_advance", "collision_mode": "reject"}),
        ("tapfinger-hetero6", {"max_slots": 8}),
    ],
)
def test_batched_heads_equal_lone_heads(name, over):
    ends = _lockstep(name, copies=3, steps=600, invalid_every=13, **over)
    assert ends >= 2  # episodes ended and copies restarted inside the run


def test_a_lone_head_reads_its_rounds_rows_as_the_batched_path_computes_them():
    """A lone head's rows of the next jobs (computed together) equal the batched path's.

    The batched heads compute each decision's row alone; a lone head computes rows of
    several jobs of its round at once (1, 4, then ``LONE_ROWS``) and keeps them until a
    placement. Rounds here are longer than that (a loaded edge10) and the policy mostly
    passes, so decisions read full chunks and walk past their ends, and its placements
    (multi-worker jobs stay current) land inside chunks.
    """
    cfg = make_config("edge10", max_slots=40, arrival_rate=2.0)
    heads, lone = CentralHeads(cfg, copies=2), EdgeSchedCentralEnv(cfg)
    heads.reset([5, 6])
    lone.reset(options={"workload_seed": 5})
    rng = np.random.default_rng(1)
    deepest, full_chunks, placed_in_chunk = 0, 0, 0
    for _ in range(1500):
        obs, masks = heads.observations(), heads.masks()
        np.testing.assert_array_equal(masks[0], lone.action_masks())
        np.testing.assert_array_equal(obs[0], lone.heads.observations()[0])
        cursor, chunk = int(lone.heads._cursor[0]), lone.heads._chunk
        deepest = max(deepest, cursor)
        full_chunks += len(chunk[0]) == LONE_ROWS and cursor == chunk[2]
        feasible = np.flatnonzero(masks[0])
        a = int(rng.choice(feasible[1:])) if len(feasible) > 1 and rng.random() < 0.3 else 0
        placed_in_chunk += a > 0 and cursor > chunk[2]
        heads.step([a, 0])
        _, _, term, trunc, _ = lone.step(a)
        if term or trunc:
            break
    assert deepest > 2 * LONE_ROWS  # rounds longer than a chunk
    assert full_chunks > 5 and placed_in_chunk > 5


def test_a_head_pickled_before_the_kept_rows_resumes_as_the_uninterrupted_one():
    """A checkpoint's heads from before ``_chunk`` existed unpickle and step identically."""
    cfg = make_config("edge10", max_slots=20, arrival_rate=1.0)
    heads = CentralHeads(cfg)
    heads.reset([3])
    rng = np.random.default_rng(2)
    for _ in range(40):
        heads.step([int(rng.choice(np.flatnonzero(heads.masks()[0])))])
    state = heads.__dict__.copy()
    del state["_chunk"]  # what an earlier version pickled
    old = CentralHeads.__new__(CentralHeads)
    old.__setstate__(pickle.loads(pickle.dumps(state)))
    for _ in range(60):
        np.testing.assert_array_equal(old.masks(), heads.masks())
        np.testing.assert_array_equal(old.observations(), heads.observations())
        a = [int(rng.choice(np.flatnonzero(heads.masks()[0])))]
        r_old, _ = old.step(a)
        r_new, _ = heads.step(a)
        np.testing.assert_array_equal(r_old, r_new)
        if heads.ended[0]:
            break


def test_one_copy_runs_a_lone_simulator_and_many_copies_one_batched():
    assert CentralHeads(make_config("edge10")).sim.lone
    heads = CentralHeads(make_config("edge10"), copies=4)
    assert not heads.sim.lone and heads.sim.copies == 4


def test_bad_input_is_named():
    heads = CentralHeads(make_config("edge10", invalid_action="raise"), copies=2)
    heads.reset([0, 1])
    with pytest.raises(InvalidActionError, match=r"shape \(2,\)"):
        heads.step(np.zeros(3, dtype=np.int64))
    with pytest.raises(InvalidActionError, match="integer array"):
        heads.step(np.zeros(2))
    with pytest.raises(InvalidActionError, match=r"action 9999 \(copy 1\) is out of range"):
        heads.step(np.array([0, 9999]))
    assert heads.sim.counters_of(1).invalid_actions == 0  # refused before counting
    with pytest.raises(ValueError, match="copies=0"):
        CentralHeads(make_config("edge10"), copies=0)
    with pytest.raises(ValueError, match="seeds has 1 entries"):
        heads.reset([0])


def test_a_finished_copy_must_be_reset_before_the_next_step():
    heads = CentralHeads(make_config("edge10", max_slots=3), copies=2)
    heads.reset([0, 1])
    while not heads.ended.any():
        heads.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(RuntimeError, match="have finished their episode"):
        heads.step(np.zeros(2, dtype=np.int64))


def test_advance_copies_runs_the_selected_copies_only():
    from edgesched.envs import EdgeClusterSim

    sim = EdgeClusterSim(make_config("edge10"), copies=3)
    sim.reset(seeds=[0, 1, 2])
    rewards = sim.advance_copies(np.array([True, False, True]))
    assert sim.tc.tolist() == [1, 0, 1] and rewards[1] == 0.0
    with pytest.raises(ValueError, match=r"copies must be a bool array of shape \(3,\)"):
        sim.advance_copies(np.ones(3))


# ---------------------------------------------------------------------------- vector view
def test_vector_view_copies_equal_lone_views_through_autoresets():
    """Sub-environment b follows a lone central view on the same workload seeds, across
    NEXT_STEP autoresets (the step after an end returns the next episode's first
    observation with reward 0)."""
    from edgesched.envs import EdgeSchedCentralVectorEnv

    cfg = make_config("edge10", max_slots=8, arrival_rate=0.7)
    vec = EdgeSchedCentralVectorEnv(cfg, num_envs=3)
    obs, info = vec.reset(seed=40)
    assert info["slot"].tolist() == [0, 0, 0] and info["_slot"].all()
    lone = [EdgeSchedCentralEnv(cfg) for _ in range(3)]
    firsts = [env.reset(options={"workload_seed": 40 + b})[0] for b, env in enumerate(lone)]
    np.testing.assert_array_equal(obs, np.stack(firsts))
    rng = np.random.default_rng(1)
    pending: list[int | None] = [None] * 3  # seeds of the restarts due at the next step
    restarts = 0
    for _ in range(700):
        masks = vec.action_masks()
        acts = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        obs, rew, term, trunc, info = vec.step(acts)
        for b, env in enumerate(lone):
            if pending[b] is not None:
                o, _ = env.reset(options={"workload_seed": pending[b]})
                assert rew[b] == 0.0 and not term[b] and not trunc[b]
                pending[b] = None
                restarts += 1
            else:
                o, r, t, u, _ = env.step(int(acts[b]))
                assert (rew[b], term[b], trunc[b]) == (r, t, u)
                if t or u:
                    assert info["_episode_metrics"][b]
                    m = env.last_episode_metrics
                    assert info["episode_metrics"]["jct_mean"][b] == m["jct_mean"]
                    pending[b] = vec.autoreset_seeds[b]
            np.testing.assert_array_equal(obs[b], o)
    assert restarts >= 3


def test_gymnasium_make_vec_builds_the_batched_heads():
    import gymnasium as gym
    from gymnasium.vector import SyncVectorEnv

    from edgesched.envs import EdgeSchedCentralVectorEnv

    vec = gym.make_vec("edgesched/Edge10-v1", num_envs=2)
    assert isinstance(vec, EdgeSchedCentralVectorEnv) and vec.num_envs == 2
    assert vec.single_observation_space.shape == vec.observation_space.shape[1:]
    obs, _ = vec.reset(seed=0)
    assert vec.observation_space.contains(obs)
    sync = gym.make_vec("edgesched/Edge10-v1", num_envs=2, vectorization_mode="sync")
    assert isinstance(sync, SyncVectorEnv)


def test_vector_view_names_bad_input():
    from edgesched.envs import EdgeSchedCentralVectorEnv

    vec = EdgeSchedCentralVectorEnv("edge10", num_envs=2)
    with pytest.raises(RuntimeError, match="before reset"):
        vec.step(np.zeros(2, dtype=np.int64))
    vec.reset(seed=0)
    with pytest.raises(InvalidActionError, match=r"shape \(num_envs,\) = \(2,\)"):
        vec.step(np.zeros((2, 1), dtype=np.int64))
    with pytest.raises(ValueError, match="reset_mask"):
        vec.reset(options={"reset_mask": np.zeros(2, dtype=bool)})
