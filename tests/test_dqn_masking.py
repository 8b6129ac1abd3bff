"""``dqn_central`` with action masking: the mask reaches the observation, the Q-network, the
bootstrap targets and the exploration; stored configs without the key stay unmasked."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_training import make_cfg

from edgesched.algos import algo_config, config_from_dict, make_trainer
from edgesched.algos.dqn_central import MASKED_Q, _MaskInObs
from edgesched.envs.central import EdgeSchedCentralEnv
from edgesched.envs.handle import resolve_scenario
from edgesched.experiment.runner import run


def _trainer(masking: bool, budget: int = 200):
    cfg = algo_config("dqn_central", hidden=[16, 16], learning_starts=16, batch_size=8)
    cfg.action_masking = masking
    spec = resolve_scenario("edge10", max_slots=20).spec
    tr = make_trainer("dqn_central", cfg, spec, seed=0)
    tr.set_budget(budget)
    tr._build(resolve_scenario("edge10", max_slots=20).config)
    return tr


def test_mask_is_appended_to_the_observation():
    env = _MaskInObs(EdgeSchedCentralEnv("edge10", max_slots=20))
    obs, _ = env.reset(seed=1)
    n = env.action_space.n
    inner = env.unwrapped
    np.testing.assert_array_equal(obs[-n:], inner.action_masks().astype(np.float32))
    assert env.observation_space.contains(obs)
    assert env.observation_space.shape[0] == inner.observation_space.shape[0] + n


def test_infeasible_actions_get_the_masked_q_value():
    tr = _trainer(True)
    env = tr.model.env
    obs = env.reset()
    n = tr.model.action_space.n
    mask = obs[0, -n:] > 0.5
    assert (~mask).any(), "a reset state with some infeasible action"
    q = tr.model.q_net(torch.as_tensor(obs)).detach().numpy()[0]
    np.testing.assert_array_equal(q[~mask], MASKED_Q)
    assert (q[mask] > MASKED_Q).all()
    # the target network masks too, so a bootstrap max ranges over feasible actions
    qt = tr.model.q_net_target(torch.as_tensor(obs)).detach().numpy()[0]
    np.testing.assert_array_equal(qt[~mask], MASKED_Q)
    # the feature extractor sees the observation without the mask columns
    feats = tr.model.q_net.extract_features(torch.as_tensor(obs), tr.model.q_net.features_extractor)
    assert feats.shape[1] == obs.shape[1] - n


def _busy_obs(tr):
    """A state with several feasible actions (the first after a reset may be a wait)."""
    env = tr.model.env
    obs = env.reset()
    n = tr.model.action_space.n
    for _ in range(50):
        if (obs[0, -n:] > 0.5).sum() > 2:
            return obs
        obs, *_ = env.step(np.zeros(1, dtype=np.int64))
    raise AssertionError("no state with several feasible actions")


def test_exploration_draws_feasible_actions_only():
    tr = _trainer(True)
    obs = _busy_obs(tr)
    n = tr.model.action_space.n
    mask = obs[0, -n:] > 0.5
    tr.model.exploration_rate = 1.0
    picks = {int(tr.model.predict(obs, deterministic=False)[0][0]) for _ in range(200)}
    assert picks <= set(np.flatnonzero(mask).tolist())
    assert len(picks) > 1  # still random among them
    unmasked = _trainer(False)
    unmasked.model.exploration_rate = 1.0
    o = unmasked.model.env.reset()
    picks = {int(unmasked.model.predict(o, deterministic=False)[0][0]) for _ in range(400)}
    assert not picks <= set(np.flatnonzero(mask).tolist()), "unmasked explores everything"


def test_stored_configs_without_the_key_stay_unmasked():
    assert algo_config("dqn_central").action_masking is False
    assert config_from_dict({"name": "dqn_central", "lr": 1e-3}).action_masking is False
    assert config_from_dict({"name": "dqn_central", "action_masking": True}).action_masking


@pytest.mark.parametrize("masking", [True, False])
def test_both_forms_train_save_and_reproduce(tmp_path, masking):
    from edgesched.experiment.evaluation import load_policy

    cfg = make_cfg(tmp_path / "run", algo="dqn_central", total_env_steps=256)
    cfg.algo.learning_starts = 32
    cfg.algo.action_masking = masking
    summary = run(cfg)
    head, env, overrides = load_policy(str(tmp_path / "run" / "policy.pt"))
    assert head.cfg.action_masking is masking
    again = head.evaluate(env, overrides, [10_000], 1)["summary"]
    assert again["jct_mean"] == summary["jct_mean"]
