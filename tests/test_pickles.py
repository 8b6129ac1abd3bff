"""Simulators pickled by earlier versions (a resumed run's checkpoint) resume identically.

Each migration in ``edgesched/envs/pickles.py`` is checked by turning a current pickle back
into what the earlier version stored and stepping the restored simulator beside the
original; a state that cannot be rebuilt exactly must be refused with a message.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from test_colocation import _part_gpu_options, _part_gpu_trace, _sim

import edgesched
from edgesched.envs.core import EdgeClusterSim
from edgesched.envs.layout import _NO_ARRIVAL


def _as_stored_allocs(sim: EdgeClusterSim) -> dict:
    """``sim``'s pickled state as versions that stored every job's allocation table held it:
    a (J, L, 3) ``j_alloc`` (the model's table, GPU times the share; zeros for unused ids)
    and an ``alloc`` table on each copy's workload, no shares."""
    state = pickle.loads(pickle.dumps(sim)).__dict__
    used = state["j_arrival"] < _NO_ARRIVAL
    table = state["_m_alloc"][state["j_model"]]
    table[..., 1] *= state.pop("j_gpu_share")[:, None]
    table[~used] = 0.0
    state["j_alloc"] = table
    del state["_gpu_shared"]
    jc = state["_job_capacity"]
    for b, wl in enumerate(state["_wl"]):
        del wl.__dict__["gpu_share"]
        wl.alloc = table[b * jc : b * jc + wl.num_jobs].copy()
    return state


def _restore(state: dict) -> EdgeClusterSim:
    old = EdgeClusterSim.__new__(EdgeClusterSim)
    old.__setstate__(state)
    return old


def _lockstep(new: EdgeClusterSim, old: EdgeClusterSim, rounds: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(rounds):
        m = new.mask
        a = (rng.random(m.shape) * m).argmax(1)
        a = a.reshape(new.copies, -1) if new.copies > 1 else a  # a lone one: (N,)
        r_new, _ = new.step(a)
        r_old, _ = old.step(a)
        np.testing.assert_array_equal(r_old, r_new)
        np.testing.assert_array_equal(old.obs, new.obs)
        np.testing.assert_array_equal(old.mask, new.mask)
        np.testing.assert_array_equal(old.progress, new.progress)
        if np.any(new.terminated) or np.any(new.truncated):
            break


@pytest.mark.parametrize("scenario", ["edge50", "tapfinger-hetero6"])
def test_a_stored_allocation_table_becomes_shares_and_resumes_identically(scenario):
    sim = edgesched.make_batched(scenario, copies=2)
    sim.reset(seeds=[0, 1])
    rng = np.random.default_rng(1)
    for _ in range(10):
        m = sim.mask
        sim.step((rng.random(m.shape) * m).argmax(1).reshape(2, -1))
    old = _restore(_as_stored_allocs(sim))
    assert "j_alloc" not in old.__dict__ and not old._gpu_shared
    np.testing.assert_array_equal(old.j_gpu_share, sim.j_gpu_share)
    np.testing.assert_array_equal(old.workload(1).gpu_share, sim.workload(1).gpu_share)
    assert not hasattr(old.workload(0), "alloc")
    _lockstep(sim, old, 30)


def test_part_gpu_shares_are_read_back_exactly(tmp_path):
    kw = _part_gpu_options(_part_gpu_trace(tmp_path / "pods.csv"))
    sim = _sim(((8, 1, 64), (8, 1, 64)), ("v100", "v100"), trace_fractional_gpus=True, **kw)
    assert sim._gpu_shared and (sim.j_gpu_share[:2] == 0.5).all()  # the two half-GPU pods
    old = _restore(_as_stored_allocs(sim))
    assert old._gpu_shared
    np.testing.assert_array_equal(old.j_gpu_share, sim.j_gpu_share)
    np.testing.assert_array_equal(old.j_alloc, sim.j_alloc)
    _lockstep(sim, old, 20)


def test_a_table_shares_cannot_rebuild_is_refused():
    sim = edgesched.make_batched("edge50", copies=1)
    sim.reset(seeds=[0])
    state = _as_stored_allocs(sim)
    state["j_alloc"][0, 0, 0] += 1.0  # a CPU amount no model's table has
    with pytest.raises(ValueError, match="start the run afresh"):
        _restore(state)
