"""The ``hgc`` and ``edgegossip`` sync schemes inside the simulator."""

from __future__ import annotations

import numpy as np
import pytest

from edgesched.envs.config import ConfigError
from edgesched.envs.core import RUNNING, EdgeClusterSim
from edgesched.envs.scenarios import get_scenario, make_config
from edgesched.envs.sync import get_sync_scheme, list_sync_schemes
from edgesched.envs.sync_coded import hgc_groups, hgc_plan


def test_schemes_are_registered_and_hgc_binds_to_the_scenario():
    assert {"hgc", "edgegossip", "gossip", "ps", "allreduce"} <= set(list_sync_schemes())
    sim = EdgeClusterSim(make_config("edge50-hgc"))
    (scheme,) = sim._sync
    assert scheme.name == "hgc" and scheme.bind is None  # the bound, scenario-specific copy


def test_hgc_compute_time_is_the_two_level_order_statistic():
    cfg = make_config("edge50-hgc")
    scheme = EdgeClusterSim(cfg)._sync[0]
    rng = np.random.default_rng(0)
    compute = rng.exponential(1.0, (50, 4))
    valid = np.ones((50, 4), bool)
    # written out, not taken from the code under test: 4 workers in 2 edges of 2; at this
    # straggler level the plan tolerates one straggling worker per edge and no straggling
    # edge, so each worker computes (s_e+1)(s_w+1) = 2 sub-parts' worth: twice its share
    s_e, s_w, factor = 0, 1, 2.0
    assert hgc_groups(4) == (2, 2)
    got = hgc_plan(4, cfg.straggler_scale, cfg.straggler_prob_scale)
    assert got[:2] == (s_e, s_w)
    np.testing.assert_allclose(got[2], [factor] * 4)
    t = compute * factor
    edge = np.stack([np.sort(t[:, :2], 1)[:, 1 - s_w], np.sort(t[:, 2:], 1)[:, 1 - s_w]], 1)
    expected = np.sort(edge, 1)[:, 1 - s_e]
    np.testing.assert_allclose(scheme.compute_time(compute, valid), expected)
    # uncoded single workers are untouched
    one = np.zeros((3, 4))
    one[:, 0] = [1.0, 2.0, 3.0]
    v1 = np.zeros((3, 4), bool)
    v1[:, 0] = True
    np.testing.assert_allclose(scheme.compute_time(one, v1), [1.0, 2.0, 3.0])


def test_hgc_pays_off_in_the_heavy_straggler_scenario():
    # the same workloads and placements policy, synchronized by allreduce or by hgc
    from edgesched.baselines import make_baseline
    from edgesched.experiment.evaluation import evaluate_scheduler
    from edgesched.policy import EnvSpec

    seeds = [10_000, 10_001]
    out = {}
    for mix in ("allreduce", "hgc"):
        ov = {"sync_mix": ((mix, 1.0),), "max_slots": 150}
        spec = EnvSpec.of(EdgeClusterSim(make_config("edge50-hgc", **ov)))
        policy = make_baseline("least_loaded", spec, seed=0)
        out[mix] = evaluate_scheduler(policy, "edge50-hgc", ov, seeds, 1)["summary"]["jct_mean"]
    assert out["hgc"] < out["allreduce"]


def _started_multiworker_jobs(sim: EdgeClusterSim, rng: np.random.Generator, steps: int):
    for _ in range(steps):
        score = rng.random(sim.mask.shape) * sim.mask
        sim.step(score.argmax(axis=1))
    running = np.flatnonzero((sim.status == RUNNING) & (sim.j_workers > 1))
    assert len(running) > 5
    return running


def test_edgegossip_load_balancing_evens_out_iteration_times():
    spread = {}
    for mix in ("gossip", "edgegossip"):
        sim = EdgeClusterSim(make_config("edge50-edgegossip", sync_mix=((mix, 1.0),)))
        sim.reset(3)
        jobs = _started_multiworker_jobs(sim, np.random.default_rng(0), 60)
        t = sim.w_iter0[jobs]
        w = sim.j_workers[jobs]
        valid = np.arange(t.shape[1])[None, :] < w[:, None]
        hi = np.where(valid, t, -np.inf).max(1)
        lo = np.where(valid, t, np.inf).min(1)
        spread[mix] = float(np.mean(hi / lo))
    assert spread["gossip"] > 1.05  # heterogeneous tiers: equal shares are uneven in time
    assert spread["edgegossip"] == pytest.approx(1.0)


def test_accuracy_aware_stop_trades_a_little_accuracy_for_time():
    from edgesched.baselines import make_baseline
    from edgesched.experiment.evaluation import evaluate_scheduler
    from edgesched.policy import EnvSpec

    res = {}
    for el in (0.0, 0.01):
        ov = {"edgegossip_min_gain": el}
        spec = EnvSpec.of(EdgeClusterSim(make_config("edge50-edgegossip", **ov)))
        policy = make_baseline("least_loaded", spec, seed=0)
        res[el] = evaluate_scheduler(policy, "edge50-edgegossip", ov, [10_000], 1)["summary"]
    assert res[0.01]["jct_mean_completed"] < res[0.0]["jct_mean_completed"]
    assert res[0.01]["final_quality_mean"] < res[0.0]["final_quality_mean"]
    assert res[0.0]["final_quality_mean"] - res[0.01]["final_quality_mean"] < 0.01


def test_bad_sync_parameters_are_rejected():
    with pytest.raises(ConfigError, match="edgegossip_min_gain"):
        make_config("edge50-edgegossip", edgegossip_min_gain=-1.0)
    with pytest.raises(KeyError, match="registered schemes"):
        get_sync_scheme("hgcc")
    assert get_scenario("edge50-hgc-v0").version == 0


@pytest.mark.parametrize("scheme_name", list_sync_schemes())
@pytest.mark.parametrize("width", [2, 4, 8, 12])
def test_sync_time_rows_are_independent(scheme_name, width):
    """The simulator computes the sync times of all of a slot's new placements in one call
    per scheme: each row must come out bit-identical to the same row computed alone."""
    sim = EdgeClusterSim(make_config("edge50"))
    scheme = get_sync_scheme(scheme_name)
    if scheme.bind is not None:
        scheme = scheme.bind(make_config("edge50-hgc"))
    rng = np.random.default_rng(width)
    rows = 40
    nodes = rng.integers(0, sim.agents_per_copy, (rows, width))
    workers = rng.integers(1, width + 1, rows)
    nodes[np.arange(width)[None, :] >= workers[:, None]] = -1
    mb = rng.uniform(5.0, 500.0, rows)
    bw, lat = sim.cluster.pair_bw, sim.cluster.pair_lat
    together = scheme.sync_time(nodes, nodes >= 0, mb, bw, lat)
    alone = [
        scheme.sync_time(nodes[i : i + 1], nodes[i : i + 1] >= 0, mb[i : i + 1], bw, lat)[0]
        for i in range(rows)
    ]
    assert together.tolist() == alone
