"""SROLE's two ways of training with a shield (``algo.shield_training``) and the penalty rule.

* preemptive: agents commit one by one, each masked by the earlier commitments, so under
  the central shield no proposal collides and the stored log-probabilities are exactly those
  of the stored (effective) masks, which PPO re-evaluates;
* post-posed with ``penalize='changed'``: only agents whose action the shield changed pay.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgesched.algos import algo_config, make_trainer
from edgesched.algos.common import VecSim, masked_logits
from edgesched.envs.handle import resolve_scenario


def _collect(shield="central", steps=8, **cfg):
    h = resolve_scenario("edge50", max_slots=40)
    c = algo_config("srole")
    c.shield_training = "postposed"  # unless a test asks for preemptive
    for k, v in cfg.items():
        setattr(c, k, v)
    tr = make_trainer("srole", c, h.spec, 0, shield, {})
    vec = VecSim(h.config, 2, 0, h.id)
    return tr, tr.collect(vec, steps)


def test_preemptive_central_proposes_no_collision_and_keeps_ppo_exact():
    tr, b = _collect(shield_training="preemptive")
    log = b["log"]
    assert log["collisions_proposed_per_step"] == 0.0
    assert log["interventions_per_step"] == 0.0 and log["collisions_executed_per_step"] == 0.0
    o = torch.from_numpy(b["obs"].reshape(-1, b["obs"].shape[-1]))
    m = torch.from_numpy(b["mask"].reshape(-1, b["mask"].shape[-1]))
    a = torch.from_numpy(b["actions"].reshape(-1))
    with torch.no_grad():
        lp = torch.log_softmax(masked_logits(tr.actor(o), m), -1).gather(-1, a[:, None])[:, 0]
    np.testing.assert_allclose(lp.numpy(), b["logp"].reshape(-1), atol=1e-5)
    assert m.gather(-1, a[:, None]).all()  # every action lies in the mask it came from


def test_preemptive_masks_shrink_the_simulator_masks_and_commitments_fit():
    """One round on a busy cluster: each effective mask lies inside the simulator's, some
    placement was excluded by an earlier commitment, and what was committed fits."""
    h = resolve_scenario("edge50-highload", max_slots=60)
    c = algo_config("srole")
    tr = make_trainer("srole", c, h.spec, 0, "central", {})
    vec = VecSim(h.config, 2, 0, h.id)
    for _ in range(6):  # a few rounds in, queues are long and nodes fill up
        tr.collect(vec, 1)
    actions, _, _, eff = tr._act_preemptive(vec.obs, vec.mask, vec)
    assert not (eff & ~vec.mask).any()
    assert (eff.sum() < vec.mask.sum()) and eff[..., 0].all()
    for copy, act in zip(vec.copies, actions, strict=True):
        view = copy.view()
        used = np.zeros_like(view.free)
        placed = np.flatnonzero(act > 0)
        slot, k, lvl = view.decode(act[placed])
        jobs = np.asarray(view.pending)[placed, slot]
        nodes = np.asarray(view.neighbors)[placed, k]
        np.add.at(used, nodes, view.alloc(jobs, lvl))
        assert (used <= view.free + 1e-9).all()


def _proposed(shield, mode):
    h = resolve_scenario("edge50-highload", max_slots=60)
    c = algo_config("srole")
    c.shield_training = mode
    tr = make_trainer("srole", c, h.spec, 0, shield, {})
    return tr.collect(VecSim(h.config, 2, 0, h.id), 32)["log"]["collisions_proposed_per_step"]


def test_preemptive_regional_leaves_only_cross_region_collisions():
    """Commitments are seen within a region only, so some proposals still collide at region
    boundaries (the regional shield corrects them), fewer than without preemption, and none
    under the central order."""
    assert _proposed("central", "preemptive") == 0.0
    regional = _proposed("regional", "preemptive")
    assert 0.0 < regional < _proposed("regional", "postposed")


def test_changed_only_penalty_charges_exactly_the_corrected_agents():
    _, free = _collect(penalize="changed", collision_penalty=0.0)
    _, paid = _collect(penalize="changed", collision_penalty=1.0)
    # the penalty does not change what is sampled or executed, only the learner's reward
    np.testing.assert_array_equal(free["actions"], paid["actions"])
    charged = float((free["rewards"] - paid["rewards"]).sum())
    assert charged == pytest.approx(paid["log"]["interventions_per_step"] * 8 * 2)
    _, col = _collect(penalize="collided", collision_penalty=1.0)
    assert float((free["rewards"] - col["rewards"]).sum()) == pytest.approx(
        col["log"]["collision_agents_per_step"] * 8 * 2
    )


def test_preemptive_is_the_default():
    assert algo_config("srole").shield_training == "preemptive"


def test_bad_shield_training_settings_name_the_key(tmp_path):
    from test_training import make_cfg

    from edgesched.experiment.runner import run
    from edgesched.experiment.schema import ExperimentConfigError

    cfg = make_cfg(tmp_path / "r", algo="srole")
    cfg.shield.name = "central"
    cfg.algo.shield_training = "both"
    with pytest.raises(ExperimentConfigError, match=r"algo\.shield_training"):
        run(cfg)
    cfg.algo.shield_training = "preemptive"
    cfg.algo.penalize = "all"
    with pytest.raises(ExperimentConfigError, match=r"algo\.penalize"):
        run(cfg)


def test_a_config_stored_before_the_option_loads_as_post_posed():
    """Runs stored before ``shield_training`` existed trained post-posed, the only form then."""
    from edgesched.algos import config_from_dict

    legacy = {"name": "srole", "collision_penalty": 1.0, "variant": ""}
    assert config_from_dict(legacy).shield_training == "postposed"
    assert config_from_dict({**legacy, "shield_training": "preemptive"}).shield_training == (
        "preemptive"
    )
