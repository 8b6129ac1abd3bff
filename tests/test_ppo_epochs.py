"""The PPO update's shared outer loop (``edgesched.algos.common.PPOEpochs``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from edgesched.algos.common import PPO_STAT_KEYS, PPOEpochs, TrainingDivergedError


def _cfg(**kw):
    base = dict(
        epochs=3,
        minibatches=4,
        ent_coef_start=0.02,
        ent_coef_end=0.002,
        vf_coef=0.5,
        max_grad_norm=0.5,
        clip=0.2,
    )
    return SimpleNamespace(**{**base, **kw})


def _loop(n: int, seed: int = 7, progress: float = 0.25, **kw):
    w = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([w], lr=0.1)
    gen = torch.Generator().manual_seed(seed)
    return PPOEpochs(_cfg(**kw), n, gen, progress, opt, [w], update=5), w, gen


def test_minibatches_cut_one_permutation_per_epoch_from_the_generator():
    loop, _, _ = _loop(10)
    got = [idx.tolist() for idx in loop]
    # 10 // 4 = 2 rows per minibatch: 5 minibatches per epoch, 3 epochs
    assert len(got) == 15 and all(len(i) == 2 for i in got)
    ref = torch.Generator().manual_seed(7)
    for e in range(3):
        perm = torch.randperm(10, generator=ref).tolist()
        epoch = [r for mb in got[5 * e : 5 * e + 5] for r in mb]
        assert epoch == perm


def test_rows_fewer_than_minibatches_and_no_rows():
    loop, _, _ = _loop(3, epochs=2)
    assert [len(i) for i in loop] == [1, 1, 1, 1, 1, 1]
    loop, _, gen = _loop(0)
    state = gen.get_state()
    assert list(loop) == []
    assert torch.equal(gen.get_state(), state)  # nothing drawn
    out = loop.result()
    assert all(out[k] == 0.0 for k in PPO_STAT_KEYS)


def test_step_descends_and_result_averages_with_the_entropy_schedule():
    loop, w, _ = _loop(4, epochs=1, minibatches=1, progress=0.5)
    ratio = torch.tensor([1.0, 1.5])
    for _ in loop:
        pg = (w**2).sum()
        loop.step(pg, torch.tensor(2.0), torch.tensor(0.25), ratio)
    assert loop.count == 1
    assert torch.all(w < 1.0)  # one SGD step on the clipped gradient
    out = loop.result()
    assert out["policy_loss"] == pytest.approx(2.0)
    assert out["value_loss"] == pytest.approx(2.0)
    assert out["entropy"] == pytest.approx(0.25)
    assert out["clip_frac"] == pytest.approx(0.5)
    assert out["ent_coef"] == pytest.approx(0.02 + 0.5 * (0.002 - 0.02))


def test_non_finite_loss_raises_and_steps_nothing():
    loop, w, _ = _loop(4, epochs=1, minibatches=1)
    with pytest.raises(TrainingDivergedError, match="update 5"):
        loop.step(torch.tensor(float("nan")), torch.tensor(1.0), torch.tensor(0.0), torch.ones(1))
    assert torch.equal(w.detach(), torch.ones(2)) and loop.count == 0


def test_anneal_lr_sets_the_step_size_from_the_budget_used():
    loop, _, _ = _loop(4, progress=0.25, anneal_lr=True, lr=0.4)
    assert loop.opt.param_groups[0]["lr"] == pytest.approx(0.3)
    assert loop.result()["lr"] == pytest.approx(0.3)
    plain, _, _ = _loop(4, progress=0.25, lr=0.4)  # off (and configs stored without it)
    assert plain.opt.param_groups[0]["lr"] == 0.1 and "lr" not in plain.result()


def _run_with_ratio(loop, w, ratio):
    for _ in loop:
        loop.step((w**2).sum(), w.sum() * 0, torch.tensor(0.0), ratio)
    return loop.result()


@pytest.mark.parametrize(("target", "epochs_run"), [(0.0, 3), (1.0, 3), (1e-3, 1)])
def test_target_kl_stops_after_the_first_epoch_over_it(target, epochs_run):
    loop, w, gen = _loop(8, target_kl=target)
    # a ratio of 1.5 everywhere: approximate KL (r - 1) - log r = 0.0945 per minibatch
    out = _run_with_ratio(loop, w, torch.tensor([1.5, 1.5]))
    assert loop.count == 4 * epochs_run
    if target:
        assert out["ppo_epochs"] == epochs_run
    else:
        assert "ppo_epochs" not in out
    # an early stop draws no further permutation: the generator is where the epochs left it
    ref = torch.Generator().manual_seed(7)
    for _ in range(epochs_run):
        torch.randperm(8, generator=ref)
    assert torch.equal(gen.get_state(), ref.get_state())


# ---------------------------------------------------------------------------- policy rows
def test_choice_rows_loss_normalizes_and_averages_over_the_choice_rows_only():
    """``algo.policy_rows='choice'``: the forced rows' advantages neither shift nor scale the
    choice rows', the gradient reaches only the choice rows, and the entropy is their mean."""
    from edgesched.algos.common import choice_rows_loss, clipped_surrogate

    gen = torch.Generator().manual_seed(3)
    logp = torch.randn(6, 5, generator=gen).requires_grad_()
    old = logp.detach() + 0.05 * torch.randn(6, 5, generator=gen)
    choice = torch.rand(6, 5, generator=gen) < 0.3
    # forced rows: an advantage far from the choice rows' (they set the all-row mean)
    adv = torch.where(choice, torch.randn(6, 5, generator=gen), torch.full((6, 5), -20.0))
    ent = torch.where(choice, torch.rand(6, 5, generator=gen), torch.zeros(6, 5))
    pg, ratio, entropy = choice_rows_loss(logp, old, adv, ent, choice, 0.2)
    want_pg, want_ratio = clipped_surrogate(logp[choice], old[choice], adv[choice], 0.2)
    assert torch.equal(pg, want_pg) and torch.equal(ratio, want_ratio)
    assert entropy == ent[choice].mean()
    all_pg, _ = clipped_surrogate(logp, old, adv, 0.2)
    assert not torch.isclose(pg, all_pg)  # the all-row normalization differs
    pg.backward()
    assert (logp.grad[~choice] == 0).all() and (logp.grad[choice] != 0).any()


def test_choice_rows_loss_without_a_choice_row_is_zero():
    from edgesched.algos.common import choice_rows_loss

    logp = torch.zeros(2, 3)
    pg, ratio, entropy = choice_rows_loss(
        logp, logp, torch.ones(2, 3), torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.bool), 0.2
    )
    assert float(pg) == 0.0 and float(entropy) == 0.0 and torch.equal(ratio, torch.ones(1))
