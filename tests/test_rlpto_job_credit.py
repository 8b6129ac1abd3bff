"""RLPTO's per-job credit (``algo.credit=job``): reward split, trajectory GAE, training."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")
pytest.importorskip("statsmodels")
import torch
from omegaconf import OmegaConf

from edgesched.algos import config_from_dict
from edgesched.algos.common import VecSim, gae
from edgesched.algos.rlpto.job_credit import job_rewards, job_shares, sequence_gae
from edgesched.algos.rlpto.trainer import RLPTOTrainer
from edgesched.envs import EdgeClusterSim, make_config
from edgesched.experiment.schema import AlgoConfig
from edgesched.policy import EnvSpec


def _trainer(scenario: str = "edge10", seed: int = 0, **kw) -> RLPTOTrainer:
    cfg = OmegaConf.structured(AlgoConfig(name="rlpto", credit="job", hidden=[16, 16]))
    for k, v in kw.items():
        cfg[k] = v
    return RLPTOTrainer(cfg, EnvSpec.of(EdgeClusterSim(make_config(scenario))), seed=seed)


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    ends=st.lists(st.booleans(), min_size=4, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_sequence_gae_is_gae_along_each_interleaved_trajectory(lengths, ends, seed):
    """Rows of several jobs, interleaved by slot, get exactly the advantages that
    ``gae`` gives each job's trajectory on its own."""
    rng = np.random.default_rng(seed)
    gamma, lam = 0.97, 0.9
    slot, nxt, rew, val, boot, owner = [], [], [], [], [], []
    starts = rng.integers(0, 4, len(lengths))
    # lay the rows out slot by slot, as the trainer appends them
    by_job = {j: [] for j in range(len(lengths))}
    for t in range(int((starts + np.asarray(lengths)).max())):
        for j, n in enumerate(lengths):
            if starts[j] <= t < starts[j] + n:
                row = len(slot)
                if by_job[j]:
                    nxt[by_job[j][-1]] = row
                by_job[j].append(row)
                slot.append(t)
                nxt.append(-1)
                owner.append(j)
                rew.append(rng.normal())
                val.append(rng.normal())
                boot.append(0.0)
    rew, val, boot = np.array(rew), np.array(val), np.array(boot)
    end_value = rng.normal(size=len(lengths))
    for j, rows in by_job.items():
        boot[rows[-1]] = 0.0 if ends[j] else end_value[j]
    adv, ret = sequence_gae(np.array(slot), np.array(nxt), rew, val, boot, gamma, lam)
    for j, rows in by_job.items():
        done = np.zeros(len(rows))
        done[-1] = float(ends[j])
        want, want_ret = gae(rew[rows], val[rows], np.float64(end_value[j]), done, gamma, lam)
        np.testing.assert_allclose(adv[rows], want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ret[rows], want_ret, rtol=1e-12, atol=1e-12)


def test_job_rewards_sum_to_the_slots_team_reward():
    gain = np.array([0.1, 0.0, 0.3])
    share = np.array([0.2, 0.1, 0.1])
    in_sys = np.array([True, True, False])
    r = job_rewards(
        gain, share, in_sys, queued=4, num_agents=10, resource_weight=1.0, accuracy_weight=2.0
    )
    team = 2.0 * gain.sum() - share.sum() - (in_sys.sum() + 4) / 10
    assert r.sum() == pytest.approx(team)
    # the queue's waiting is charged in proportion to the share held
    np.testing.assert_allclose(r + share - 2.0 * gain + in_sys / 10, -0.4 * share / 0.4)
    # an empty queue charges nothing: growing costs only the resources
    r0 = job_rewards(gain, share, in_sys, 0, 10, 1.0, 2.0)
    np.testing.assert_allclose(r0, 2.0 * gain - share - in_sys / 10)


def test_job_shares_add_up_to_the_occupied_share_on_a_cluster_within_capacity():
    from edgesched.baselines import make_baseline

    sim = EdgeClusterSim(make_config("edge10", collision_mode="reject"))
    placer = make_baseline("least_loaded", EnvSpec.of(sim))
    sim.reset(1)
    view = sim.view()
    for _ in range(60):
        sim.step(placer.act(sim.obs, sim.mask, None))
        if len(view.running) >= 3 and (view.used <= view.capacity + 1e-9).all():
            break
    assert len(view.running) >= 3
    shares = job_shares(view, view.running)
    assert (shares > 0).all()
    assert shares.sum() == pytest.approx(view.occupied_share())


def test_job_credit_trains_resumes_and_only_learns_from_decisions():
    import io
    import pickle

    tr = _trainer()
    assert tr.actor.job_critic is not None
    vec = VecSim(make_config("edge10", max_slots=30), 2, seed=0)
    batch = tr.collect(vec, 16)
    n = len(batch["adv"])
    assert n > 0 and batch["feats"].shape == (n, tr.job_dim)
    # decision rows have two or more feasible actions; rows of forced jobs do not learn
    assert (batch["mask"][batch["learn"]].sum(1) > 1).all()
    assert np.isfinite(batch["adv"]).all() and np.isfinite(batch["ret"]).all()
    assert batch["rewards"].shape == (16, 2)
    before = [p.detach().clone() for p in tr.actor.job_critic.parameters()]
    stats = tr.update(batch, 0.0)
    assert np.isfinite(stats["value_loss"])
    assert any(
        not torch.equal(a, b) for a, b in zip(before, tr.actor.job_critic.parameters(), strict=True)
    )
    # checkpoint at an episode boundary: the last slot's quality snapshot (the gain
    # feature's reference) is not part of a checkpoint, and a new episode starts without one
    tr.update(tr.collect(vec, 14), 0.5)
    buf = io.BytesIO()
    torch.save(tr.state_dict(), buf)
    vec_state = pickle.dumps(vec)
    first = tr.collect(vec, 8)
    resumed = _trainer()
    buf.seek(0)
    resumed.load_state_dict(torch.load(buf, weights_only=False))
    again = resumed.collect(pickle.loads(vec_state), 8)
    np.testing.assert_array_equal(first["adv"], again["adv"])
    np.testing.assert_array_equal(first["actions"], again["actions"])


def test_stored_configs_without_credit_load_as_team_which_builds_no_job_critic():
    old = config_from_dict({"name": "rlpto"})
    assert old.credit == "team"
    assert config_from_dict({"name": "rlpto", "credit": "job"}).credit == "job"
    cfg = OmegaConf.structured(AlgoConfig(name="rlpto", credit="team"))
    tr = RLPTOTrainer(cfg, EnvSpec.of(EdgeClusterSim(make_config("edge10"))), seed=0)
    assert tr.actor.job_critic is None
    assert "job_critic.0.weight" not in tr.actor.state_dict()


@pytest.mark.parametrize("credit", ["team", "job"])
def test_a_learning_curve_evaluation_leaves_training_unchanged(credit):
    """Curve points evaluate mid-run with a forecaster fitted on the history so far; the
    training forecaster comes back afterwards, so a run's training does not depend on
    whether it recorded a curve."""

    def run(evaluate_between: bool) -> list[np.ndarray]:
        tr = _trainer(credit=credit, forecast_refit=2)
        vec = VecSim(make_config("edge10", max_slots=20, arrival_slots=40), 2, seed=0)
        out = []
        for k in range(6):
            b = tr.collect(vec, 20)
            tr.update(b, 0.0)
            out += [b["forecast"], b["adv"]]
            if evaluate_between and k in (2, 4):  # between refits (every 2 updates)
                tr.evaluate("edge10", {"max_slots": 20}, [10_000], 1)
        return out

    for a, b in zip(run(False), run(True), strict=True):
        np.testing.assert_array_equal(a, b)
