"""The official API checkers of PettingZoo, Gymnasium and stable-baselines3 on every scenario."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from conftest import scenario_params
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test

import edgesched
from edgesched.envs.core import DONE, NOT_ARRIVED, EdgeClusterSim

# Short episodes keep the checkers fast; the dynamics are the same as in full episodes.
SHORT = {"max_slots": 25, "max_steps": 60}


@pytest.mark.parametrize("name", scenario_params())
def test_parallel_api(name):
    parallel_api_test(edgesched.make_parallel(name, **SHORT), num_cycles=200)


@pytest.mark.parametrize("name", scenario_params())
def test_parallel_seed(name):
    # PettingZoo's seed test samples actions without the mask: it must pass with the defaults
    # (masked actions defer and are counted), as generic PettingZoo tooling expects
    parallel_seed_test(lambda: edgesched.make_parallel(name, **SHORT), num_cycles=100)


def test_parallel_seed_test_samples_invalid_actions_that_are_counted():
    """The seed test above really exercises the invalid-action path (so it would catch a
    default that raises), and each deferred action is counted, per step and per episode."""
    env = edgesched.make_parallel("edge10", **SHORT)
    env.reset(seed=0)
    for a in env.agents:
        env.action_space(a).seed(0)
    per_step = 0
    while env.agents:
        acts = {a: env.action_space(a).sample() for a in env.agents}  # unmasked, as PZ does
        _, _, _, _, infos = env.step(acts)
        per_step += infos["node_0"]["invalid_actions"]
        assert infos["node_0"]["invalid_actions"] == sum(
            i["invalid_action"] for i in infos.values()
        )
    assert per_step > 0
    assert (
        env.last_episode_metrics["invalid_actions"] == per_step == env.sim.counters.invalid_actions
    )


@pytest.mark.parametrize("name", scenario_params())
def test_aec_api(name):
    api_test(edgesched.make_aec(name, **SHORT), num_cycles=100)


@pytest.mark.parametrize("name", scenario_params())
def test_gymnasium_central_check_env(name):
    from gymnasium.utils.env_checker import check_env

    env = gym.make(edgesched.get_scenario(name).gym_id, max_slots=15)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any checker warning is a defect
        check_env(env.unwrapped, skip_render_check=False)


@pytest.mark.parametrize("name", scenario_params())
def test_sb3_central_check_env(name):
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    env = gym.make(edgesched.get_scenario(name).gym_id, max_slots=15)
    sb3_checker.check_env(env.unwrapped, warn=True)


def test_registry_ids_and_gym_registration():
    names = edgesched.list_scenarios()
    required = {
        "edge10",
        "edge50",
        "edge100",
        "edge500",
        "edge50-highload",
        "edge50-stragglers",
        "edge50-stale",
        "melbourne125",
        "tapfinger-hetero6",
    }
    assert required <= set(names)
    for name in names:
        s = edgesched.get_scenario(name)
        assert s.gym_id in gym.registry
        assert edgesched.get_scenario(s.id) is s  # versioned ids resolve too
    assert edgesched.get_scenario("edge50").gym_id == "edgesched/Edge50-v1"
    # the earlier version keeps its Gymnasium id
    assert edgesched.get_scenario("edge50-v0").gym_id == "edgesched/Edge50-v0"
    assert "edgesched/Edge50-v0" in gym.registry


def test_central_view_episode_runs_and_reports_metrics():
    env = gym.make("edgesched/Edge10-v1", max_slots=60)
    obs, info = env.reset(seed=3)
    rng = np.random.default_rng(0)
    total, done, steps = 0.0, False, 0
    while not done:
        mask = env.unwrapped.action_masks()
        a = int(rng.choice(np.flatnonzero(mask)))
        obs, r, term, trunc, info = env.step(a)
        assert env.observation_space.contains(obs)
        total += r
        done = term or trunc
        steps += 1
    assert "episode" not in info  # SB3's Monitor owns that key
    ep = env.unwrapped.last_episode_metrics
    assert ep["slots"] <= 60 and ep["jobs_arrived"] > 0
    assert ep["collisions_proposed"] == 0  # one decision-maker cannot collide with itself
    assert ep["episode_return_mean"] == pytest.approx(total)
    assert ep["invalid_actions"] == 0


def test_array_fast_path_matches_dict_api():
    """The dict API is a thin layer: same actions give the same observations and rewards."""
    env = edgesched.make_parallel("edge10", max_slots=40)
    sim = EdgeClusterSim(env.config, env.sim.cluster)
    obs, _ = env.reset(seed=11)
    sim.reset(seed=11)
    rng = np.random.default_rng(5)
    while env.agents:
        for i, a in enumerate(env.possible_agents):
            np.testing.assert_array_equal(obs[a]["observation"], sim.obs[i])
            np.testing.assert_array_equal(obs[a]["action_mask"], sim.mask[i].astype(np.int8))
        act = (rng.random(sim.mask.shape) * sim.mask).argmax(1)
        obs, rew, _, _, _ = env.step(dict(zip(env.possible_agents, act.tolist(), strict=True)))
        r, _ = sim.step(act)
        assert [rew[a] for a in env.possible_agents] == r.tolist()
    assert env.last_episode_metrics is not None


def test_state_and_spaces():
    env = edgesched.make_parallel("edge50")
    env.reset(seed=0)
    st = env.state()
    assert st.shape == env.state_space.shape and st.dtype == np.float32
    sp = env.observation_space("node_0")
    assert sp is env.observation_space("node_0")
    assert sp["observation"].shape == (env.sim.obs_dim,)
    assert env.action_space("node_7").n == env.sim.num_actions


@pytest.mark.parametrize("mode", ["ansi", "rgb_array"])
def test_render_modes(mode):
    env = edgesched.make_parallel("edge10", render_mode=mode)
    env.reset(seed=0)
    env.step({a: 0 for a in env.agents})
    out = env.render()
    if mode == "ansi":
        assert isinstance(out, str) and "slot 1" in out
    else:
        assert out.dtype == np.uint8 and out.ndim == 3 and out.shape[2] == 3


def test_episode_metrics_in_final_infos():
    env = edgesched.make_parallel("edge10", max_slots=80)
    env.reset(seed=1)
    info = None
    while env.agents:
        masks = np.stack([env.sim.mask[i] for i in range(env.sim.num_agents)])
        act = np.where(masks[:, 1:].any(1), masks[:, 1:].argmax(1) + 1, 0)
        *_, info = env.step(dict(zip(env.possible_agents, act.tolist(), strict=True)))
    assert "episode" not in info["node_0"]
    ep = env.last_episode_metrics
    for key in (
        "jct_mean",
        "jct_p95",
        "makespan",
        "median_node_utilization",
        "collisions_proposed",
        "collisions_executed",
        "overload_node_slots",
        "jct_by_priority",
        "final_quality",
        "jct_lower_bound",
        "jct_lower_bound_mean",
    ):
        assert key in ep
    assert ep["jobs_done"] > 0
    # recomputed job by job: arrival to finish, or to the end for unfinished jobs
    sim = env.sim
    jct = [
        (int(sim.finish_slot[j]) if sim.status[j] == DONE else sim.t) - int(sim.j_arrival[j])
        for j in range(sim.num_jobs)
        if sim.status[j] != NOT_ARRIVED
    ]
    assert ep["jct_mean"] == pytest.approx(sum(jct) / len(jct))
    assert ep["jct_p95"] == pytest.approx(np.percentile(jct, 95))
    assert ep["makespan"] >= max(jct)
    assert len(ep["jct_lower_bound"]) == ep["jobs_done"]
    assert ep["jct_lower_bound"].mean() <= ep["jct_mean_completed"]
    assert len(ep["jct_by_priority"]) == len(env.config.priority_probs)


def test_central_view_runs_the_multi_agent_workload_of_a_seed():
    from edgesched.envs import EdgeSchedCentralEnv

    central = EdgeSchedCentralEnv("edge10")
    central.reset(options={"workload_seed": 10_064})
    par = edgesched.make_parallel("edge10")
    par.reset(seed=10_064)
    for attr in ("j_arrival", "j_model", "j_workers", "j_home"):
        assert np.array_equal(getattr(central.sim, attr), getattr(par.sim, attr)), attr
    with pytest.raises(ValueError, match="workload_seed"):
        central.reset(options={"workload_seed": -1})


# ---------------------------------------------------------------------------- infos
def _assert_flat_numeric(info: dict, keys: tuple) -> None:
    assert tuple(sorted(info)) == tuple(sorted(keys))
    for k, v in info.items():
        assert type(v) in (int, float), f"info[{k!r}] = {v!r} is not a plain number"


def test_parallel_infos_have_the_same_flat_keys_at_reset_and_every_step():
    """TorchRL stacks infos into tensors: the key set must never change, values are numbers."""
    from edgesched.envs.parallel import INFO_KEYS

    env = edgesched.make_parallel("edge10", max_slots=12)
    _, infos = env.reset(seed=0)
    assert set(infos) == set(env.possible_agents)
    for info in infos.values():
        _assert_flat_numeric(info, INFO_KEYS)
        assert all(v == 0 for v in info.values())
    rng = np.random.default_rng(0)
    steps = 0
    while env.agents:
        n = env.action_space("node_0").n
        acts = {a: int(rng.integers(n)) for a in env.agents}  # some are invalid
        _, _, _, _, infos = env.step(acts)
        for info in infos.values():
            _assert_flat_numeric(info, INFO_KEYS)
        steps += 1
    assert steps == 12 and info["slot"] == 12
    assert env.sim.counters.invalid_actions > 0  # the per-agent branch was exercised


def test_each_agent_gets_its_own_info_dict():
    """Clients write into infos (SuperSuit adds terminal_observation per agent): one agent's
    entry must not show up in another's."""
    env = edgesched.make_parallel("edge10", max_slots=3)
    _, infos = env.reset(seed=0)
    infos["node_0"]["mine"] = 1
    assert "mine" not in infos["node_1"]
    _, _, _, _, infos = env.step(dict.fromkeys(env.agents, 0))
    infos["node_0"]["mine"] = 1
    assert "mine" not in infos["node_1"]


def test_last_episode_metrics_lifecycle():
    env = edgesched.make_parallel("edge10", max_slots=3)
    assert env.last_episode_metrics is None
    env.reset(seed=0)
    for _ in range(3):
        assert env.last_episode_metrics is None
        env.step(dict.fromkeys(env.agents, 0))
    m = env.last_episode_metrics
    assert m["slots"] == 3
    assert m.keys() == env.sim.episode_metrics().keys()
    assert m["jobs_arrived"] == env.sim.episode_metrics()["jobs_arrived"]
    env.reset(seed=1)
    assert env.last_episode_metrics is None  # cleared, never a stale episode's


def test_central_infos_have_the_same_flat_keys_and_metrics_lifecycle():
    from edgesched.envs.central import INFO_KEYS

    env = gym.make("edgesched/Edge10-v0", max_slots=10)
    _, info = env.reset(seed=0)
    _assert_flat_numeric(info, INFO_KEYS)
    assert env.unwrapped.last_episode_metrics is None
    done, n = False, env.action_space.n
    rng = np.random.default_rng(1)
    while not done:
        _, _, term, trunc, info = env.step(int(rng.integers(n)))
        _assert_flat_numeric(info, INFO_KEYS)
        done = term or trunc
    ep = env.unwrapped.last_episode_metrics
    assert ep["slots"] == 10 and ep["invalid_actions"] > 0
    env.reset(seed=1)
    assert env.unwrapped.last_episode_metrics is None


def test_aec_view_runs_with_flat_infos():
    from edgesched.envs.parallel import INFO_KEYS

    aec = edgesched.make_aec("edge10", max_slots=5)
    aec.reset(seed=0)
    for _agent in aec.agent_iter():
        _, _, term, trunc, info = aec.last()
        assert set(info) == set(INFO_KEYS)
        aec.step(None if term or trunc else 0)


def test_a_new_scenario_version_keeps_the_old_one_resolvable():
    """``edge50`` may move to v1 while records of ``edge50-v0`` still resolve."""
    import dataclasses

    from edgesched.envs import scenarios as reg

    v0 = reg.Scenario("test-versions", 0, "a test scenario", {"num_nodes": 3, "neighbors_k": 2})
    v1 = dataclasses.replace(
        v0, version=1, params={**v0.params, "pending_slots": 2}, history=("v0", "v1: slots")
    )
    try:
        reg.register_scenario(v0)
        reg.register_scenario(v1)
        assert reg.get_scenario("test-versions") is v1
        assert reg.get_scenario("test-versions-v0") is v0
        assert reg.get_scenario("test-versions-v1") is v1
        assert reg.scenario_versions("test-versions") == [v0, v1]
        assert reg.get_scenario("test-versions-v0").config().pending_slots == 1
        with pytest.raises(ValueError, match="already registered"):
            reg.register_scenario(v1)
        with pytest.raises(ValueError, match="next version"):
            reg.register_scenario(dataclasses.replace(v1, version=3))
        with pytest.raises(ValueError, match="history"):
            reg.register_scenario(dataclasses.replace(v1, version=2))
    finally:
        reg._REGISTRY.pop("test-versions", None)
        reg._VERSIONS.pop("test-versions", None)
