"""Client libraries work unchanged on every registered scenario.

TorchRL's ``PettingZooWrapper`` and SuperSuit's vector conversion on the multi-agent view;
stable-baselines3 and sb3-contrib's ``MaskablePPO`` on the Gymnasium central view. Each
client is imported with ``pytest.importorskip``, so the env-only install still runs the
rest of the suite. Episodes are two slots or decision rounds long (``max_slots``,
``max_steps``) so that every run crosses an episode end, where infos used to change shape,
and budgets are tiny: this checks that the pieces fit, not that anything learns.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from conftest import scenario_params

import edgesched
from edgesched.envs.parallel import INFO_KEYS


def _parallel(name: str, steps: int = 2):
    # max_steps too: under advance='when_idle' (tapfinger-hetero6) the clock may stand still
    return edgesched.make_parallel(name, max_slots=steps, max_steps=steps)


# ---------------------------------------------------------------------------- TorchRL
def _masked_random_policy(group: str, seed: int):
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(seed)

    def policy(td: Any) -> Any:
        mask = td[group, "action_mask"].bool()
        probs = mask.float() / mask.float().sum(-1, keepdim=True)
        td[group, "action"] = torch.multinomial(probs, 1, generator=gen).squeeze(-1)
        return td

    return policy


@pytest.mark.parametrize("name", scenario_params())
def test_torchrl_pettingzoo_wrapper_rolls_out_across_episode_ends(name):
    pytest.importorskip("torchrl")
    from torchrl.envs.libs.pettingzoo import PettingZooWrapper

    slots = 2
    env = PettingZooWrapper(env=_parallel(name, slots), use_mask=True, seed=0)
    (group,) = env.group_map
    # no policy: TorchRL samples from the masked action spec; the episode ends inside the
    # rollout, where infos once turned into a nested dict TorchRL cannot store
    td = env.rollout(slots + 1, break_when_any_done=False)
    assert td["next", "done"].any()
    info = td["next", group, "info"]
    assert set(info.keys()) == set(INFO_KEYS)
    assert info["invalid_action"].sum() == 0, "the rollout must respect the action mask"
    assert (info["invalid_actions"] == 0).all()
    # a random policy that reads the mask from the tensordict
    td = env.rollout(slots + 1, _masked_random_policy(group, 0), break_when_any_done=False)
    assert td["next", "done"].any()
    assert td["next", group, "info", "invalid_action"].sum() == 0


def test_torchrl_counts_unmasked_actions_instead_of_failing():
    pytest.importorskip("torchrl")
    torch = pytest.importorskip("torch")
    from torchrl.envs.libs.pettingzoo import PettingZooWrapper

    env = PettingZooWrapper(env=_parallel("edge10", 3), use_mask=True)
    gen = torch.Generator().manual_seed(0)

    def unmasked(td: Any) -> Any:
        shape = td["node", "action_mask"].shape
        td["node", "action"] = torch.randint(0, shape[-1], shape[:-1], generator=gen)
        return td

    td = env.rollout(4, unmasked, break_when_any_done=False)
    info = td["next", "node", "info"]
    assert info["invalid_action"].sum() > 0
    # every agent sees the step's total; the flags sum to it
    assert (info["invalid_actions"][:, 0] == info["invalid_action"].sum(-1)).all()


# ---------------------------------------------------------------------------- SuperSuit
@pytest.mark.parametrize("name", scenario_params())
def test_supersuit_vector_env_with_unmasked_sampling_counts_invalid_actions(name):
    ss = pytest.importorskip("supersuit")
    vec = ss.pettingzoo_env_to_vec_env_v1(_parallel(name))
    vec = ss.concat_vec_envs_v1(vec, 2, num_cpus=0, base_class="gymnasium")
    vec.reset(seed=0)
    vec.action_space.seed(0)
    invalid, ended = 0, False
    for _ in range(3):  # crosses the episode end (SuperSuit resets by itself)
        acts = np.array([vec.action_space.sample() for _ in range(vec.num_envs)])
        _, _, term, trunc, infos = vec.step(acts)  # the default mode must not raise
        invalid += sum(i["invalid_action"] for i in infos)
        ended |= bool(np.any(term) or np.any(trunc))
        assert all(set(INFO_KEYS) <= set(i) for i in infos)
    assert ended
    assert invalid > 0, "unmasked samples must hit masked actions, or this tests nothing"


def test_supersuit_terminal_observations_are_each_agents_own():
    """SuperSuit writes each agent's terminal observation into that agent's info: with one
    info dict shared by all agents, every agent got the last agent's observation."""
    ss = pytest.importorskip("supersuit")
    vec = ss.pettingzoo_env_to_vec_env_v1(edgesched.make_parallel("edge10", max_slots=2))
    twin = edgesched.make_parallel("edge10", max_slots=2)
    vec.reset(seed=3)
    twin.reset(seed=3)
    for _ in range(2):
        acts = np.zeros(vec.num_envs, dtype=np.int64)
        _, _, _, trunc, infos = vec.step(acts)
        obs, *_ = twin.step(dict.fromkeys(twin.possible_agents, 0))
    assert trunc.all()
    for i, agent in enumerate(twin.possible_agents):
        np.testing.assert_array_equal(
            infos[i]["terminal_observation"]["observation"], obs[agent]["observation"]
        )
    assert not np.array_equal(obs["node_0"]["observation"], obs["node_1"]["observation"])


# ---------------------------------------------------------------------------- SB3
class _InvalidCount(gym.Wrapper):
    """Sums ``info['invalid_actions']`` and keeps each ended episode's metrics."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.invalid = 0
        self.episodes: list[dict[str, Any]] = []

    def step(self, action):
        obs, r, term, trunc, info = self.env.step(action)
        self.invalid += info["invalid_actions"]
        if term or trunc:
            self.episodes.append(self.env.unwrapped.last_episode_metrics)
        return obs, r, term, trunc, info


def _central(name: str) -> _InvalidCount:
    return _InvalidCount(gym.make(edgesched.get_scenario(name).gym_id, max_slots=2))


# head decisions: enough for an episode of two slots to end even on edge500 (about 60)
STEPS = 128


def _learn(algo: type, env: gym.Env):
    """Train ``algo`` (an SB3 on-policy class) for STEPS head decisions with a tiny net."""
    model = algo(
        "MlpPolicy",
        env,
        n_steps=STEPS // 2,
        batch_size=STEPS // 2,
        n_epochs=1,
        policy_kwargs={"net_arch": [16]},
        seed=0,
        device="cpu",
    )
    # SB3's default logger leaves an SB3-<timestamp> folder in the temp dir on every learn()
    from stable_baselines3.common.logger import Logger

    model.set_logger(Logger(folder=None, output_formats=[]))
    model.learn(STEPS)
    assert model.num_timesteps == STEPS
    return model


@pytest.mark.parametrize("name", scenario_params())
def test_sb3_ppo_learns_on_the_central_view(name):
    sb3 = pytest.importorskip("stable_baselines3")
    env = _central(name)
    model = _learn(sb3.PPO, env)
    assert env.episodes, "no episode ended within the budget"
    assert env.episodes[0]["slots"] == 2
    # Monitor's own summary, under the key it owns (ours must not collide with it)
    ep = model.ep_info_buffer[0]
    assert {"r", "l", "t"} <= set(ep) and "jct_mean" not in ep


@pytest.mark.parametrize("name", scenario_params())
def test_sb3_contrib_maskable_ppo_respects_the_mask(name):
    sb3c = pytest.importorskip("sb3_contrib")
    env = _central(name)
    _learn(sb3c.MaskablePPO, env)
    assert env.episodes
    assert env.invalid == 0, "MaskablePPO reads action_masks(): no action may be infeasible"
    assert all(m["invalid_actions"] == 0 for m in env.episodes)
