"""``probs_of``: the fast ``exp`` of masked log-probabilities must equal the plain one."""

from __future__ import annotations

import pytest
import torch

from edgesched.algos.common import MASKED_LOGIT, masked_logits, probs_of


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_probs_of_matches_exp_in_value_and_gradient(dtype):
    gen = torch.Generator().manual_seed(0)
    raw = torch.randn(64, 40, generator=gen, dtype=dtype) * 30.0
    # spread a few rows wide enough that feasible actions underflow, subnormal or not
    raw[:4] = 0.0
    raw[:4, 1:9] = torch.tensor([-60.0, -90.0, -100.0, -103.0, -104.0, -110.0, -800.0, -1e5])
    mask = torch.rand(64, 40, generator=gen) < 0.3
    mask[:, 0] = True  # defer is always feasible
    mask[:4, :9] = True
    grads = []
    for fn in (torch.exp, probs_of):
        x = raw.clone().requires_grad_(True)
        logp = torch.log_softmax(masked_logits(x, mask), dim=-1)
        p = fn(logp)
        entropy = -(p * logp.clamp_min(-1e4)).sum(-1).mean()
        (entropy + p[:, 1:5].sum()).backward()
        grads.append((p.detach(), x.grad))
    (p0, g0), (p1, g1) = grads
    assert torch.equal(p0, p1)
    assert torch.equal(g0, g1)
    assert (p1[~mask] == 0).all()
    assert (p1[:4, 2] > 0).all()  # a feasible action whose probability is subnormal


def test_probs_of_zeroes_masked_entries_without_exp_underflow():
    logp = torch.tensor([[0.0, MASKED_LOGIT, -1e30, float("-inf")]])
    assert probs_of(logp).tolist() == [[1.0, 0.0, 0.0, 0.0]]
