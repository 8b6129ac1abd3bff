"""PPO learners skip the actor for agents with a single feasible action.

On the edge scenarios most agents can only defer in a round (about 95% of edge50's agent
decisions). Such a decision has log-probability exactly 0, entropy 0 and no gradient, so
``PPOTrainer`` runs its actor only on the other rows (rollouts and PPO updates), and the
preemptive shield's one-agent-at-a-time commit visits only agents with a feasible placement
(the s-th such agent of every copy at once).
These tests hold each shortcut to the full computation it replaces: bit for bit where the
arithmetic is the same (the preemptive loop), to float rounding where the matrix products
run on fewer rows (the actor). The centralized critic's state block, computed once per copy
instead of once per agent, is held to the concatenation it replaces in the same way.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgesched.algos import algo_config, make_trainer
from edgesched.algos.common import VecSim, masked_logits, probs_of
from edgesched.envs.handle import resolve_scenario


def _trainer_and_vec(algo="mappo", shield="none", scenario="edge50-highload", rounds=6, copies=2):
    h = resolve_scenario(scenario, max_slots=60)
    tr = make_trainer(algo, algo_config(algo), h.spec, 0, shield, {})
    vec = VecSim(h.config, copies, 0, h.id)
    for _ in range(rounds):  # a few rounds in: queues are long, some agents can place
        tr.collect(vec, 1)
    return tr, vec


def _reference_preemptive(tr, obs, mask, vec, gen):
    """The preemptive loop as it was written before the shortcut and the batching: every
    agent visited, one copy after another."""
    e, n, a_dim = mask.shape
    with torch.no_grad():
        o = torch.from_numpy(obs.reshape(-1, obs.shape[-1]))
        logits = tr.actor(o).double().numpy().reshape(e, n, a_dim)
    eff = mask.copy()
    actions = np.zeros((e, n), np.int64)
    probs = np.zeros((e, n, a_dim))
    regional = tr.shield_name == "regional"
    place = np.arange(1, a_dim)
    for c, copy in enumerate(vec.copies):
        view = copy.view()
        slot, k, lvl = view.decode(place)
        jobs = np.asarray(view.pending)[:, slot]
        nodes = np.asarray(view.neighbors)[:, k]
        alloc = view.alloc(np.maximum(jobs, 0), np.broadcast_to(lvl, jobs.shape))
        region = np.asarray(view.regions) if regional else np.zeros(n, np.int64)
        free = {r: view.free for r in np.unique(region).tolist()}
        order = torch.randperm(n, generator=gen).numpy()
        u = torch.rand(n, generator=gen, dtype=torch.float64).numpy()
        for i in order.tolist():
            room = free[int(region[i])]
            ok = eff[c, i, 1:] & (jobs[i] >= 0) & (nodes[i] >= 0)
            ok &= (alloc[i] <= room[np.maximum(nodes[i], 0)] + 1e-9).all(-1)
            eff[c, i, 1:] = ok
            z = np.where(eff[c, i], logits[c, i], -np.inf)
            p = np.exp(z - z.max())
            p /= p.sum()
            choice = min(int(np.searchsorted(np.cumsum(p), u[i] * p.sum())), a_dim - 1)
            while not eff[c, i, choice]:
                choice -= 1
            actions[c, i] = choice
            probs[c, i] = p
            if choice > 0:
                room[nodes[i, choice - 1]] -= alloc[i, choice - 1]
    logp = np.log(probs[np.arange(e)[:, None], np.arange(n)[None, :], actions])
    return actions, logp.astype(np.float32), probs, eff


@pytest.mark.parametrize("copies", [2, 5])
@pytest.mark.parametrize("shield", ["central", "regional"])
def test_preemptive_loop_skips_forced_agents_bit_for_bit(shield, copies):
    """The batched commit (step s commits every copy's s-th active agent) is the per-copy
    loop over every agent, bit for bit."""
    tr, vec = _trainer_and_vec("srole", shield, copies=copies)
    forced = ~vec.mask[..., 1:].any(-1)
    assert forced.any() and (~forced).any()  # both kinds of agent are in this round
    gen = torch.Generator()
    gen.set_state(tr.gen.get_state())
    want = _reference_preemptive(tr, vec.obs, vec.mask, vec, gen)
    got = tr._act_preemptive(vec.obs, vec.mask, vec)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    # the generator advanced exactly as before: later draws are unchanged too
    assert torch.equal(tr.gen.get_state(), gen.get_state())


def _full_log_policy(tr, o, m):
    return torch.log_softmax(masked_logits(tr.actor(o), m), dim=-1)


def test_log_policy_of_the_choice_rows_equals_the_network():
    tr, vec = _trainer_and_vec()
    o = torch.from_numpy(vec.obs.reshape(-1, vec.obs.shape[-1]))
    m = torch.from_numpy(vec.mask.reshape(-1, vec.mask.shape[-1]))
    rows = torch.nonzero(m.sum(-1) != 1).squeeze(-1)
    assert 0 < len(rows) < len(m)  # both kinds of agent are in this round
    with torch.no_grad():
        got, want = tr._log_policy(o, m, rows), _full_log_policy(tr, o, m)[rows]
    mr = m[rows]
    # feasible entries: the same log-probabilities; infeasible: probability exactly 0
    np.testing.assert_allclose(got[mr].numpy(), want[mr].numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(probs_of(got).numpy(), probs_of(want).numpy(), atol=1e-6)
    assert (probs_of(got)[~mr] == 0).all()


def test_sampled_actions_follow_the_full_distribution():
    """``act`` (sampling, as in rollouts) draws from the same probabilities as the network."""
    tr, vec = _trainer_and_vec()
    state = tr.gen.get_state()
    a, logp, probs = tr.act(vec.obs, vec.mask, with_probs=True)
    after = tr.gen.get_state()
    o = torch.from_numpy(vec.obs.reshape(-1, vec.obs.shape[-1]))
    m = torch.from_numpy(vec.mask.reshape(-1, vec.mask.shape[-1]))
    with torch.no_grad():
        want = probs_of(_full_log_policy(tr, o, m))
    # every row, single-choice rows (a one-hot the actor never computed) included
    np.testing.assert_allclose(probs.reshape(want.shape), want.numpy(), atol=1e-6)
    # drawn from the network's probabilities where there is a choice, one draw per such
    # row; a single feasible action is taken without a draw
    tr.gen.set_state(state)
    rows = torch.nonzero(m.sum(-1) != 1).squeeze(-1)
    ref = m.to(torch.uint8).argmax(-1)
    ref[rows] = torch.multinomial(want[rows], 1, generator=tr.gen).squeeze(-1)
    ref = ref.numpy()
    np.testing.assert_array_equal(a.reshape(-1), ref)
    assert torch.equal(tr.gen.get_state(), after)  # and no other draw was made
    assert vec.mask.reshape(-1, vec.mask.shape[-1])[np.arange(len(ref)), ref].all()
    single = vec.mask.sum(-1) == 1
    assert (logp[single] == 0).all()


def test_ppo_loss_terms_and_gradients_equal_the_full_computation():
    tr, vec = _trainer_and_vec()
    batch = tr.collect(vec, 4)
    g = batch["actions"].shape[0] * batch["actions"].shape[1]
    n = batch["actions"].shape[2]
    obs = torch.from_numpy(batch["obs"].reshape(g, n, -1))
    mask = torch.from_numpy(batch["mask"].reshape(g, n, -1))
    actions = torch.from_numpy(batch["actions"].reshape(g, n))
    weight = torch.linspace(-1.0, 1.0, g * n).reshape(g, n)  # stands for the advantages

    def loss_and_grads(logp, ent):
        tr.actor.zero_grad()
        loss = (logp * weight).mean() - 0.01 * ent.mean()
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in tr.actor.parameters()]

    choice = mask.sum(-1) != 1
    assert choice.any() and (~choice).any()
    logp, ent = tr._logp_entropy(obs, mask, actions, choice)
    got = loss_and_grads(logp, ent)
    full = _full_log_policy(tr, obs.reshape(g * n, -1), mask.reshape(g * n, -1))
    want_lp = full.gather(-1, actions.reshape(-1, 1)).reshape(g, n)
    want_ent = -(probs_of(full) * full.clamp_min(-1e4)).sum(-1).reshape(g, n)
    np.testing.assert_allclose(logp.detach().numpy(), want_lp.detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(ent.detach().numpy(), want_ent.detach().numpy(), atol=1e-6)
    assert (logp[~choice] == 0).all() and (ent[~choice] == 0).all()
    want = loss_and_grads(want_lp, want_ent)
    np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=1e-6)
    for a, b in zip(got[1], want[1], strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("hidden", [[64, 64], [32], [16, 8, 8]])
def test_centralized_critic_equals_the_concat_it_replaces(hidden):
    """The state's block of the head's first layer is computed once per copy and broadcast:
    values and gradients match ``head([enc_obs(obs), enc_state(state)])`` to float rounding."""
    from edgesched.algos.mappo import Critic

    torch.manual_seed(3)
    critic = Critic(12, 40, hidden)
    obs, state = torch.randn(5, 7, 12), torch.randn(5, 40)
    target = torch.randn(5, 7)

    def reference():
        z = critic.enc_obs(obs)
        zs = critic.enc_state(state)[:, None, :].expand(-1, obs.shape[1], -1)
        return critic.head(torch.cat([z, zs], dim=-1)).squeeze(-1)

    grads = []
    for fn in (reference, lambda: critic(obs, state)):
        critic.zero_grad()
        v = fn()
        ((v - target) ** 2).mean().backward()
        grads.append((v.detach(), [p.grad.clone() for p in critic.parameters()]))
    (v_ref, g_ref), (v_new, g_new) = grads
    assert v_new.shape == (5, 7)
    torch.testing.assert_close(v_new, v_ref, rtol=1e-5, atol=1e-6)
    for a, b in zip(g_new, g_ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
