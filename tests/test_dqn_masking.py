"""``dqn_central`` with action masking: the mask reaches the observation, the Q-network, the
bootstrap targets and the exploration; stored configs without the key stay unmasked."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from test_training import make_cfg

from edgesched.algos import algo_config, config_from_dict, make_trainer
from edgesched.algos.central_vec import CentralVecEnv, work_conserving
from edgesched.algos.dqn_central import MASKED_Q
from edgesched.envs import make_config
from edgesched.envs.central import EdgeSchedCentralEnv
from edgesched.envs.handle import resolve_scenario
from edgesched.experiment.runner import run


def _trainer(masking: bool, budget: int = 200, conserving: bool = False):
    cfg = algo_config("dqn_central", hidden=[16, 16], learning_starts=16, batch_size=8)
    cfg.action_masking = masking
    cfg.work_conserving = conserving
    spec = resolve_scenario("edge10", max_slots=20).spec
    tr = make_trainer("dqn_central", cfg, spec, seed=0)
    tr.set_budget(budget)
    tr._build(resolve_scenario("edge10", max_slots=20).config)
    return tr


def test_mask_is_appended_to_the_observation():
    env = CentralVecEnv(make_config("edge10", max_slots=20), 2, seed=1, masked=True)
    obs = env.reset()
    n = env.action_space.n
    np.testing.assert_array_equal(obs[:, -n:], env.heads.masks().astype(np.float32))
    np.testing.assert_array_equal(obs[:, :-n], env.heads.observations())
    assert all(env.observation_space.contains(o) for o in obs)
    assert env.observation_space.shape[0] == env.heads.obs_size + n


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
    """The work-conserving masked head is the default; configs stored before it keep theirs."""
    default = algo_config("dqn_central")
    assert default.action_masking is True and default.work_conserving is True
    old = config_from_dict({"name": "dqn_central", "lr": 1e-3})
    assert old.action_masking is False and old.work_conserving is False
    masked = config_from_dict({"name": "dqn_central", "action_masking": True})
    assert masked.action_masking and masked.work_conserving is False
    both = config_from_dict(
        {"name": "dqn_central", "action_masking": True, "work_conserving": True}
    )
    assert both.action_masking and both.work_conserving


@pytest.mark.parametrize("masking", [True, False])
def test_both_forms_train_save_and_reproduce(tmp_path, masking):
    from edgesched.experiment.evaluation import load_policy

    cfg = make_cfg(tmp_path / "run", algo="dqn_central", total_env_steps=256)
    cfg.algo.learning_starts = 32
    cfg.algo.action_masking = masking
    cfg.algo.work_conserving = masking  # the default form, or the unmasked one
    summary = run(cfg)
    head, env, overrides = load_policy(str(tmp_path / "run" / "policy.pt"))
    assert head.cfg.action_masking is masking
    again = head.evaluate(env, overrides, [10_000], 1)["summary"]
    assert again["jct_mean"] == summary["jct_mean"]


def test_slot_discount_buffer_discounts_per_slot_advanced():
    """Samples carry gamma ** (slots the decision advanced); SB3's DQN target uses them."""
    from edgesched.algos.dqn_central import SlotDiscountReplayBuffer

    cfg = algo_config("dqn_central", hidden=[16, 16], learning_starts=16, batch_size=8)
    cfg.discount_unit = "slot"
    cfg.gamma = 0.9
    spec = resolve_scenario("edge10", max_slots=20).spec
    tr = make_trainer("dqn_central", cfg, spec, seed=0)
    tr.set_budget(200)
    tr._build(resolve_scenario("edge10", max_slots=20).config)
    buf = tr.model.replay_buffer
    assert isinstance(buf, SlotDiscountReplayBuffer)
    obs = np.zeros((1, *tr.model.observation_space.shape), np.float32)
    for adv in (0, 1, 3, 0):
        buf.add(obs, obs, np.zeros((1, 1)), np.zeros(1), np.zeros(1), [{"advanced": adv}])
    s = buf._get_samples(np.arange(4))
    np.testing.assert_allclose(s.discounts.numpy().ravel(), [1.0, 0.9, 0.729, 1.0], rtol=1e-6)
    # one SB3 gradient step runs on them (their shape fits its TD target)
    tr.model.train(gradient_steps=1, batch_size=4)
    # per decision is SB3's own buffer, with its constant gamma
    per_decision = algo_config("dqn_central", hidden=[16], learning_starts=16, batch_size=8)
    per_decision.discount_unit = "decision"
    tr = make_trainer("dqn_central", per_decision, spec, seed=0)
    tr.set_budget(200)
    tr._build(resolve_scenario("edge10", max_slots=20).config)
    assert type(tr.model.replay_buffer).__name__ == "ReplayBuffer"


def test_slot_discounting_trains_saves_and_reproduces(tmp_path):
    from edgesched.experiment.evaluation import load_policy

    cfg = make_cfg(tmp_path / "run", algo="dqn_central", total_env_steps=256)
    cfg.algo.learning_starts = 32
    cfg.algo.discount_unit = "slot"
    summary = run(cfg)
    head, env, overrides = load_policy(str(tmp_path / "run" / "policy.pt"))
    assert head.cfg.discount_unit == "slot"
    again = head.evaluate(env, overrides, [10_000], 1)["summary"]
    assert again["jct_mean"] == summary["jct_mean"]


@pytest.mark.parametrize("per_slot", [True, False])
def test_queue_shaping_is_potential_based(per_slot):
    """Each shaped reward is the plain one plus d * phi(s') - phi(s), with phi(s) = -k *
    (jobs queued in s), counted on a lone central view stepped beside the vector env, and
    phi = 0 at a terminal state; so the shaping changes no policy's ranking (Ng et al.
    1999). The potential must move: an earlier version counted every job of the workload."""
    from edgesched.protocol import train_episode_seed

    k, gamma = 0.5, 0.9
    cfg = make_config("edge10", max_slots=40, arrival_rate=0.5)
    shaped = CentralVecEnv(cfg, 1, seed=3, shaping=k, gamma=gamma, per_slot=per_slot)
    plain = CentralVecEnv(cfg, 1, seed=3, gamma=gamma, per_slot=per_slot)
    twin = EdgeSchedCentralEnv(cfg)
    shaped.reset(), plain.reset()
    twin.reset(options={"workload_seed": train_episode_seed(3, 0, 0)})
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(5000):
        q0 = int(np.count_nonzero(twin.view.queued))
        a = int(rng.choice(np.flatnonzero(twin.action_masks())))
        _, r_s, done, infos = shaped.step(np.array([a]))
        _, r_p, _, _ = plain.step(np.array([a]))
        _, _, term, trunc, info = twin.step(a)
        q1 = int(np.count_nonzero(twin.view.queued))
        seen.add(q1)
        assert infos[0]["advanced"] == info["advanced"]
        d = gamma ** info["advanced"] if per_slot else gamma
        expect = float(r_p[0]) + d * (0.0 if term else -k * q1) + k * q0
        assert float(r_s[0]) == pytest.approx(expect, rel=1e-6, abs=1e-4)
        if term or trunc:
            assert done[0]
            break
    assert len(seen) > 3  # the potential moved


def test_work_conserving_mask_drops_pass_only_while_a_placement_fits():
    np.testing.assert_array_equal(
        work_conserving(np.array([True, False, True])), [False, False, True]
    )
    np.testing.assert_array_equal(
        work_conserving(np.array([True, False, False])), [True, False, False]
    )
    m = np.array([True, True])
    work_conserving(m)
    assert m[0], "the caller's mask is not modified"


def test_a_work_conserving_head_never_passes_while_a_placement_fits():
    tr = _trainer(True, conserving=True)
    obs = _busy_obs(tr)
    n = tr.model.action_space.n
    # the observation carries the work-conserving mask: pass is masked in the Q-values
    assert obs[0, -n] == 0.0 and (obs[0, -n + 1 :] > 0.5).any()
    q = tr.model.q_net(torch.as_tensor(obs)).detach().numpy()[0]
    assert q[0] == MASKED_Q
    tr.model.exploration_rate = 1.0
    assert all(int(tr.model.predict(obs, deterministic=False)[0][0]) != 0 for _ in range(100))
    # evaluation's greedy choice, even if the network valued passing most
    env = EdgeSchedCentralEnv("edge10", max_slots=20)
    o, _ = env.reset(seed=1)
    for _ in range(60):
        mask = env.action_masks()
        if mask[1:].any():
            break
        o, *_ = env.step(0)
    with torch.no_grad():  # make the network value passing most
        tr.actor.q_net[-1].bias[0] += 1e6
    assert tr.greedy(o, mask) != 0
    tr.cfg.work_conserving = False
    tr.cfg.action_masking = True
    assert tr.greedy(o, mask) == 0  # the same network passes when allowed to


def test_a_work_conserving_head_built_in_code_needs_masking():
    with pytest.raises(ValueError, match=r"work_conserving=True with action_masking=False"):
        _trainer(False, conserving=True)


@pytest.mark.parametrize("masking", [True, False])
def test_greedy_q_values_are_the_q_networks_bit_for_bit(masking):
    """Evaluation's layer-by-layer forward pass equals the Q-network's, also after learning
    changed the weights in place (records must reproduce under ``validate``)."""
    tr = _trainer(masking, conserving=masking)
    env = EdgeSchedCentralEnv("edge10", max_slots=20)
    o, _ = env.reset(seed=2)

    def network_q(obs, mask):
        x = np.concatenate([obs, mask.astype(np.float32)]) if masking else obs
        with torch.no_grad():
            return tr.actor(torch.as_tensor(x[None], dtype=torch.float32))[0].numpy()

    for learned in (False, True):
        if learned:
            tr.model.learn(64, reset_num_timesteps=False)  # gradient steps update in place
            with torch.no_grad():
                tr.actor.q_net[0].weight.mul_(1.5)  # and a direct in-place edit
        for _ in range(30):
            mask = env.action_masks()
            q = network_q(o, mask)
            got = tr._q_row(np.asarray(o, np.float32))
            np.testing.assert_array_equal(got[mask], q[mask])
            assert tr.greedy(o, mask) == int(np.where(mask, q, -np.inf).argmax())
            o, _, term, trunc, _ = env.step(tr.greedy(o, mask))
            if term or trunc:
                o, _ = env.reset(seed=3)


def test_central_view_mask_is_fresh_after_every_step_and_reset():
    """The memoized mask equals one computed from scratch at every decision."""
    env = EdgeSchedCentralEnv("edge10", max_slots=30)
    env.reset(seed=4)
    rng = np.random.default_rng(0)
    for i in range(300):
        m = env.action_masks()
        np.testing.assert_array_equal(m, env.heads._compute_masks()[0])
        m[:] = False  # the caller's copy: mutating it leaves the view's mask intact
        assert env.action_masks()[0] or env.action_masks()[1:].any()
        _, _, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
        if term or trunc:
            env.reset(seed=5 + i)
            np.testing.assert_array_equal(env.action_masks(), env.heads._compute_masks()[0])


def test_a_pickled_central_view_resumes_and_an_old_layout_is_refused():
    """Checkpoints pickle the head's training view: a current one resumes bit for bit; one
    pickled before the head's dynamics moved into CentralHeads is refused by name."""
    import pickle

    env = EdgeSchedCentralEnv("edge10", max_slots=20)
    env.reset(seed=1)
    env.action_masks()
    twin = pickle.loads(pickle.dumps(env))
    rng = np.random.default_rng(0)
    for _ in range(40):
        a = int(rng.choice(np.flatnonzero(env.action_masks())))
        o1, r1, t1, u1, _ = env.step(a)
        o2, r2, t2, u2, _ = twin.step(a)
        np.testing.assert_array_equal(o1, o2)
        assert (r1, t1, u1) == (r2, t2, u2)
        if t1 or u1:
            break
    old = {k: v for k, v in vars(env).items() if k != "heads"}
    old |= {"_round": np.zeros(0, np.int64), "_cursor": 0}
    fake = EdgeSchedCentralEnv.__new__(EdgeSchedCentralEnv)
    with pytest.raises(ValueError, match="before the batched central view"):
        fake.__setstate__(old)


def test_a_policy_trained_with_shape_changing_overrides_reloads(tmp_path):
    """The head rebuilt for evaluation takes the run's overrides, not the registered shapes."""
    from edgesched.envs.central import EdgeSchedCentralEnv
    from edgesched.experiment.evaluation import load_policy

    cfg = make_cfg(tmp_path / "run", algo="dqn_central", total_env_steps=128)
    cfg.algo.learning_starts = 32
    cfg.env.overrides = {"num_nodes": 12}  # edge10 with two more nodes: more inputs, actions
    summary = run(cfg)
    head, env, overrides = load_policy(str(tmp_path / "run" / "policy.pt"))
    central = EdgeSchedCentralEnv(env, **overrides)
    linears = [m for m in head.actor.modules() if isinstance(m, torch.nn.Linear)]
    assert linears[-1].out_features == central.action_space.n
    again = head.evaluate(env, overrides, [10_000], 1)["summary"]
    assert again["jct_mean"] == summary["jct_mean"]


def test_heads_side_by_side_train_save_and_reproduce(tmp_path):
    """``algo.copies=4``: four heads on one batched simulator, one gradient step per copy
    every train_freq vector steps; the stored policy reproduces its evaluation."""
    from edgesched.experiment.evaluation import load_policy

    cfg = make_cfg(tmp_path / "run", algo="dqn_central", total_env_steps=512)
    cfg.algo.learning_starts = 64
    cfg.algo.copies = 4
    cfg.algo.discount_unit = "slot"  # its buffer reads the sampled copies' discounts
    cfg.env.overrides = {"max_slots": 15}
    summary = run(cfg)
    head, env, overrides = load_policy(str(tmp_path / "run" / "policy.pt"))
    assert head.cfg.copies == 4
    again = head.evaluate(env, overrides, [10_000], 1)["summary"]
    assert again["jct_mean"] == summary["jct_mean"]

    tr = _trainer(True, budget=400)
    tr.cfg.copies = 4
    tr._build(resolve_scenario("edge10", max_slots=15).config)
    assert tr.model.n_envs == 4 and tr.model.gradient_steps == 4
    tr.model.learn(400, reset_num_timesteps=False)
    assert tr.model.num_timesteps == 400
    assert len(tr.env.finished) >= 4  # every head finished episodes (15 slots each)
    assert tr.env.episode == 4 + len(tr.env.finished)  # one training workload per episode


def test_slot_discounts_are_read_from_the_sampled_copies():
    """The buffer draws SB3's environment columns itself (same generator state) and reads
    those columns' discounts: every sample's discount is that of its own transition."""
    from edgesched.algos.dqn_central import SlotDiscountReplayBuffer

    box = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
    buf = SlotDiscountReplayBuffer(16, box, gym.spaces.Discrete(3), n_envs=3, gamma=0.5)
    for t in range(8):
        # copy b's transitions carry b in their observation and ran b slots
        obs = np.array([[t, b] for b in range(3)], np.float32)
        infos = [{"advanced": b} for b in range(3)]
        buf.add(obs, obs, np.zeros((3, 1)), np.zeros(3), np.zeros(3), infos)
    np.random.seed(0)  # noqa: NPY002
    s = buf.sample(64)
    copy = s.observations.numpy()[:, 1]
    assert set(copy.tolist()) == {0.0, 1.0, 2.0}
    np.testing.assert_array_equal(s.discounts.numpy().ravel(), 0.5**copy)
