"""The batched Gymnasium vector view (EdgeSchedVectorEnv): spaces, seeding, NEXT_STEP autoreset."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from conftest import scenario_params
from gymnasium.vector import AutoresetMode

from edgesched.envs import EdgeSchedVectorEnv, get_scenario, make_config, make_vector
from edgesched.envs.core import STEP_INFO_KEYS, EdgeClusterSim, InvalidActionError


def masked_actions(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random feasible action per agent of every copy: (B, N) int64."""
    return np.argmax(rng.random(mask.shape) * mask, axis=-1).astype(np.int64)


@pytest.mark.parametrize("name", scenario_params())
def test_spaces_contain_observations(name: str) -> None:
    env = make_vector(name, 2, max_steps=3)
    assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert env.single_action_space.shape == (env.sim.agents_per_copy,)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert all(np.all(info[k] == 0) and info[f"_{k}"].all() for k in STEP_INFO_KEYS)
    rng = np.random.default_rng(0)
    for _ in range(5):  # crosses the end (3 steps) and the autoreset step
        actions = masked_actions(env.action_masks(), rng)
        assert env.action_space.contains(actions)
        obs, rewards, term, trunc, info = env.step(actions)
        assert env.observation_space.contains(obs)
        assert rewards.shape == term.shape == trunc.shape == (2,)
        assert rewards.dtype == np.float64 and term.dtype == trunc.dtype == np.bool_
        assert info["invalid_actions"].sum() == 0
    env.close()


def _run(env: EdgeSchedVectorEnv, seed: int, steps: int) -> list:
    rng = np.random.default_rng(seed)
    out = [env.reset(seed=seed)]
    for _ in range(steps):
        out.append(env.step(masked_actions(env.action_masks(), rng)))
    return out


def _assert_same(x, y) -> None:
    if isinstance(x, dict):
        assert x.keys() == y.keys()
        for k in x:
            _assert_same(x[k], y[k])
    elif isinstance(x, tuple | list):
        assert len(x) == len(y)
        for a, b in zip(x, y, strict=True):
            _assert_same(a, b)
    else:
        np.testing.assert_array_equal(x, y)


def test_same_seed_same_trajectory() -> None:
    a = _run(make_vector("edge10", 3, max_steps=8), 11, 20)
    b = _run(make_vector("edge10", 3, max_steps=8), 11, 20)
    _assert_same(a, b)
    c = _run(make_vector("edge10", 3, max_steps=8), 12, 20)
    assert not np.array_equal(a[5][0]["observation"], c[5][0]["observation"])


@pytest.mark.parametrize("reward_mode", ["sum", "mean"])
def test_each_copy_equals_a_lone_simulator(reward_mode: str) -> None:
    """Copy b == a lone simulator with the same seeds and actions, across NEXT_STEP resets."""
    b_envs, seed, max_steps = 3, 5, 9
    env = make_vector("edge10", b_envs, reward_mode=reward_mode, max_steps=max_steps)
    cfg = make_config("edge10", max_steps=max_steps)
    sid = get_scenario("edge10").id
    lone = [EdgeClusterSim(cfg, scenario_id=sid) for _ in range(b_envs)]
    obs, _ = env.reset(seed=seed)
    for i, sim in enumerate(lone):
        sim.reset(seed + i)
    rng = np.random.default_rng(0)

    def check_obs(obs: dict, i: int) -> None:
        np.testing.assert_array_equal(obs["observation"][i], lone[i].obs)
        np.testing.assert_array_equal(obs["action_mask"][i], lone[i].mask.astype(np.int8))
        np.testing.assert_array_equal(obs["state"][i], lone[i].state())

    for i in range(b_envs):
        check_obs(obs, i)
    pending = np.zeros(b_envs, dtype=bool)  # copies whose next step is the autoreset step
    next_seed: list = [None] * b_envs
    mixed_autoresets = ends = 0
    for t in range(3 * max_steps + 4):
        if t == 4:  # offset copy 1 so that copies end (and autoreset) at different steps
            obs, info = env.reset(seed=100, options={"reset_mask": np.array([0, 1, 0], bool)})
            lone[1].reset(101)
            pending[1] = False
            check_obs(obs, 1)
            assert np.all(info["slot"] == 0)
        actions = masked_actions(env.action_masks(), rng)
        obs, rewards, term, trunc, info = env.step(actions)
        if pending.any() and not pending.all():
            mixed_autoresets += 1
        for i, sim in enumerate(lone):
            if pending[i]:  # NEXT_STEP: reset with the drawn seed, reward 0, not done
                sim.reset(next_seed[i])
                assert rewards[i] == 0.0 and not term[i] and not trunc[i]
                assert all(info[k][i] == 0 for k in STEP_INFO_KEYS)
                assert not info.get("_episode_metrics", np.zeros(b_envs, bool))[i]
            else:
                r, sinfo = sim.step(actions[i])
                want = r.sum() if reward_mode == "sum" else r.mean()
                assert rewards[i] == pytest.approx(want, rel=1e-12, abs=1e-12)
                assert term[i] == sim.terminated and trunc[i] == sim.truncated
                for k in STEP_INFO_KEYS:
                    assert info[k][i] == sinfo[k], k
                if sim.terminated or sim.truncated:
                    ends += 1
                    assert info["_episode_metrics"][i]
                    em = info["episode_metrics"]
                    metrics = sim.episode_metrics()
                    for k in ("jct_mean", "jobs_done", "jobs_arrived", "makespan", "steps"):
                        assert em[f"_{k}"][i]
                        assert em[k][i] == pytest.approx(metrics[k])
            check_obs(obs, i)
        pending = term | trunc
        next_seed = env.autoreset_seeds
    assert ends >= 2 * b_envs and mixed_autoresets >= 1


def test_bad_actions_raise_naming_the_shape() -> None:
    env = make_vector("edge10", 2, max_steps=5)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros((2, 10), np.int64))
    env.reset(seed=0)
    with pytest.raises(InvalidActionError, match=r"\(2, 10\)"):
        env.step(np.zeros((10,), np.int64))
    with pytest.raises(InvalidActionError, match=r"\(2, 10\)"):
        env.step(np.zeros((2, 10), np.float32))
    with pytest.raises(InvalidActionError, match=r"\(2, 10\)"):
        env.step(np.zeros((2, 10), bool))
    with pytest.raises(ValueError, match="num_envs=2"):
        env.reset(seed=[1, 2, 3])
    with pytest.raises(ValueError, match="reward_mode"):
        make_vector("edge10", 2, reward_mode="max")
    # a masked action defers and is counted (invalid_action='defer', the default)
    mask = env.action_masks()
    bad = np.zeros((2, 10), np.int64)
    n_bad = 0
    for b in range(2):
        for n in range(10):
            off = np.flatnonzero(~mask[b, n])
            if len(off):
                bad[b, n] = off[0]
                n_bad += b == 0
    _, _, _, _, info = env.step(bad)
    assert info["invalid_actions"][0] == n_bad


def test_record_episode_statistics() -> None:
    env = gymnasium.wrappers.vector.RecordEpisodeStatistics(make_vector("edge10", 2, max_steps=4))
    env.reset(seed=3)
    rng = np.random.default_rng(1)
    returns = np.zeros(2)
    seen = 0
    for _ in range(11):
        actions = masked_actions(env.unwrapped.action_masks(), rng)
        _, rewards, term, trunc, info = env.step(actions)
        returns += rewards
        if (term | trunc).any():
            seen += 1
            done = term | trunc
            np.testing.assert_allclose(info["episode"]["r"][done], returns[done])
            assert np.all(info["episode"]["l"][done] == 4)
            assert info["_episode_metrics"][done].all()
            returns[done] = 0.0
    assert seen == 2
    assert len(env.return_queue) == 4
