"""``dqn_central`` checkpoints: the replay buffer is kept as its filled rows, not a pickle.

A pickled SB3 buffer serialized its whole allocation as one ``bytes`` object that
``torch.save`` then copied again; on ``tapfinger-hetero6`` that took 10.4 GB for a 1.5 GB
buffer and the kernel killed the run while it checkpointed.
"""

from __future__ import annotations

import io
import pickle

import numpy as np
import pytest
import torch

from edgesched.algos import algo_config, make_trainer
from edgesched.algos.dqn_central import replay_state, restore_replay
from edgesched.envs.handle import resolve_scenario


def _trainer(buffer_size: int = 8, discount_unit: str = "slot"):
    cfg = algo_config("dqn_central", hidden=[16, 16], learning_starts=16, batch_size=8)
    cfg.buffer_size = buffer_size
    cfg.discount_unit = discount_unit
    handle = resolve_scenario("edge10", max_slots=20)
    tr = make_trainer("dqn_central", cfg, handle.spec, seed=0)
    tr.set_budget(200)
    tr._build(handle.config)
    return tr


def _fill(tr, n: int, seed: int = 0) -> None:
    """``n`` random transitions (random observations, actions, rewards, slots advanced)."""
    rng = np.random.default_rng(seed)
    buf = tr.model.replay_buffer
    shape = (1, *tr.model.observation_space.shape)
    for _ in range(n):
        obs, nxt = rng.random(shape, np.float32), rng.random(shape, np.float32)
        act = rng.integers(0, tr.model.action_space.n, (1, 1))
        infos = [{"advanced": int(rng.integers(0, 3))}]
        buf.add(obs, nxt, act, rng.random(1), rng.random(1) < 0.1, infos)


def _arrays(buf) -> dict[str, np.ndarray]:
    return {k: v for k, v in vars(buf).items() if isinstance(v, np.ndarray)}


@pytest.mark.parametrize(("added", "rows", "full"), [(5, 5, False), (11, 8, True)])
def test_replay_rows_round_trip_through_torch_save(added, rows, full):
    tr = _trainer()
    _fill(tr, added)
    buf = tr.model.replay_buffer
    state = replay_state(buf)
    assert state["full"] is full and state["pos"] == added % 8
    assert all(len(t) == rows for t in state["arrays"].values())
    # only the written rows travel (the slot discounts too: they are per transition)
    per_transition = ("observations", "next_observations", "actions", "rewards", "dones")
    per_transition += ("timeouts", "discount")
    assert {k: t.shape[0] for k, t in state["arrays"].items()} == dict.fromkeys(
        per_transition, rows
    )
    f = io.BytesIO()
    torch.save(state, f)
    f.seek(0)
    fresh = _trainer()
    restore_replay(fresh.model.replay_buffer, torch.load(f, weights_only=False))
    got, want = _arrays(fresh.model.replay_buffer), _arrays(buf)
    assert got.keys() == want.keys()
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    assert (fresh.model.replay_buffer.pos, fresh.model.replay_buffer.full) == (buf.pos, buf.full)
    # the same samples come out of both
    idx = np.arange(rows)
    a, b = buf._get_samples(idx), fresh.model.replay_buffer._get_samples(idx)
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)


def test_a_replay_state_of_another_buffer_is_refused_by_name():
    tr = _trainer(discount_unit="slot")
    _fill(tr, 3)
    plain = _trainer(discount_unit="decision")  # SB3's own buffer: no per-slot discount
    with pytest.raises(ValueError, match=r"replay buffer does not fit.*discount"):
        restore_replay(plain.model.replay_buffer, replay_state(tr.model.replay_buffer))


def test_checkpoints_with_a_pickled_buffer_still_load():
    """A checkpoint written before the rows format (``replay``: the pickled buffer)."""
    tr = _trainer()
    _fill(tr, 6)
    new = tr.state_dict()
    old = {k: v for k, v in new.items() if k != "replay_rows"}
    old["replay"] = pickle.dumps(tr.model.replay_buffer)
    for sd in (new, old):
        f = io.BytesIO()
        torch.save(sd, f)
        f.seek(0)
        back = _trainer()
        back.load_state_dict(torch.load(f, weights_only=False))
        got, want = _arrays(back.model.replay_buffer), _arrays(tr.model.replay_buffer)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)
        assert back.model.replay_buffer.pos == 6


def test_a_checkpoint_of_the_per_environment_wrappers_is_refused_by_name():
    """Before CentralVecEnv, the checkpoint held SB3's DummyVecEnv of wrapped central views;
    the view's old state cannot continue, and loading says so instead of failing later."""
    from edgesched.algos.common import OutdatedCheckpointError
    from edgesched.envs.central import EdgeSchedCentralEnv

    tr = _trainer()
    sd = tr.state_dict()
    env = EdgeSchedCentralEnv("edge10", max_slots=20)
    env.reset(seed=0)
    del env.heads  # the old view kept its round and cursor itself, no CentralHeads
    sd["vec_env"] = pickle.dumps(env)
    with pytest.raises(OutdatedCheckpointError, match="DummyVecEnv of central views"):
        _trainer().load_state_dict(sd)
