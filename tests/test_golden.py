"""Golden-value tests: tiny hand-checked scenarios of the simulator dynamics (DESIGN §3, §4.4).

Every expected number is derived by hand in the comments, from the documented formulas:

* worker throughput ``base * speed * g ** alpha * min(1, c / (kappa g)) ** gamma`` samples/s,
  so one iteration of ``local_bsz`` samples takes ``t0 = local_bsz / throughput`` seconds;
* a node at oversubscription ``r`` (largest used / capacity) slows its tasks by
  ``r ** contention_exponent``;
* iteration time = slowest worker's compute time (stragglers included) + sync time;
* samples per slot = ``slot_seconds / iteration * workers * local_bsz * efficiency``;
* quality after ``x`` samples ``1 - exp(-(x / tau) ** k)``; completion at the target quality or
  at ``max_epochs * x90 / 10`` samples;
* sync (``sync.py`` docstring): ps ``2 sum_i M / bw(ps, i) + 2 lat``, ring all-reduce
  ``2 (w-1)/w M / min_bw + 2 (w-1) lat``, gossip ``M / min_bw + lat``, with ``M`` in MB,
  bandwidth in Gbit/s (so ``M * 8e-3 / bw`` seconds) and latency in ms;
* TapFinger (DESIGN §4.4): IMG +0.25 per slot, LM ``tanh(g/16) sqrt(1.2 - p)``.

Model figures (base throughput, batch size, ...) are read from the committed catalog so the
tests survive a re-derivation of the profiles; the values current at the time of writing are
quoted in the comments (cifar10: base 1326.29 samples/s, local_bsz 182, alpha 0.93804,
kappa 2, conv_k 0.652509, 45 MB; bert: base 11.3756, local_bsz 8, 440 MB).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from edgesched.envs import EdgeClusterSim, SimConfig, make_config, model_catalog
from edgesched.envs.core import DONE, QUEUED, RUNNING
from edgesched.envs.topology import INTRA_NODE_GBPS

# Everything random or modulated switched off; all jobs arrive in slot 0; every link has
# 2 Gbit/s and 5 ms (log-uniform / linear ranges of zero width).
BASE: dict[str, Any] = dict(
    topology="full",
    straggler_scale=0.0,
    diurnal_amplitude=0.0,
    burst_prob=0.0,
    arrival_slots=1,
    arrival_rate=3.0,
    job_size_sigma=0.0,
    target_quality=(0.9, 0.9),
    priority_probs=(1.0,),
    link_bandwidth_gbps=(2.0, 2.0),
    link_latency_ms=(5.0, 5.0),
    models=(("cifar10", 1.0),),
    workers_dist=((1, 1.0),),
    sync_mix=(("ps", 1.0),),
    max_slots=50,
    max_steps=200,
)
SLOT = 60.0
BW, LAT = 2.0, 5.0


def _sim(seed: int = 3, **overrides: Any) -> EdgeClusterSim:
    params = {**BASE, **overrides}
    params.setdefault("num_nodes", len(params.get("custom_capacities", ())) or 2)
    params.setdefault("neighbors_k", params["num_nodes"] - 1)
    sim = EdgeClusterSim(SimConfig.from_dict(params))
    sim.reset(seed)
    return sim


def _model(name: str) -> dict[str, float]:
    cat = model_catalog()
    i = cat.index(name)
    return {
        "base": float(cat.base_tput[i]),
        "bsz": float(cat.local_bsz[i]),
        "alpha": float(cat.gpu_alpha[i]),
        "kappa": float(cat.cpu_per_gpu[i]),
        "gamma": float(cat.cpu_gamma[i]),
        "mb": float(cat.model_mb[i]),
        "k": float(cat.conv_k[i]),
        "min_cpu": float(cat.min_demand[i, 0]),
    }


def _place(sim: EdgeClusterSim, job: int, node: int, level: int = 0) -> dict[str, Any]:
    """Place the next worker of ``job`` on ``node`` directly (state set-up, no mask)."""
    return sim.place(
        np.array([sim.j_home[job]]), np.array([job]), np.array([node]), np.array([level])
    )


def _defer(sim: EdgeClusterSim) -> tuple[np.ndarray, dict[str, Any]]:
    return sim.step(np.zeros(sim.num_agents, dtype=np.int64))


def _k_of(sim: EdgeClusterSim, agent: int, node: int) -> int:
    return int(np.flatnonzero(sim.cluster.neighbors[agent] == node)[0])


# ------------------------------------------------------------------------------- 1 collisions
# Nodes 0 and 1 are (8 cpu, 2 gpu, 64 GiB); node 2 is (4, 1, 64). A cifar10 task at level 0
# needs (2, 1, 4): it fits node 2 alone, two of them need 2 GPUs > 1.
COLLIDE_CAPS = ((8, 2, 64), (8, 2, 64), (4, 1, 64))


def _collide(mode: str) -> tuple[EdgeClusterSim, dict[str, Any], np.ndarray]:
    sim = _sim(seed=3, custom_capacities=COLLIDE_CAPS, collision_mode=mode)
    jobs = sim.head[:2, 0].copy()
    assert (jobs >= 0).all() and (sim.j_home[jobs] == [0, 1]).all()
    assert np.allclose(sim.j_alloc[jobs, 0], [2, 1, 4])
    actions = np.zeros(3, dtype=np.int64)
    for a in (0, 1):
        actions[a] = sim.encode(0, _k_of(sim, a, 2), 0)
        assert sim.mask[a, actions[a]]  # each placement is feasible on its own
    _, info = sim.step(actions)
    return sim, info, jobs


def test_collision_overload_admits_both_and_overloads():
    sim, info, jobs = _collide("overload")
    assert info["proposals"] == 2
    assert info["collisions"] == 1
    assert info["rejected"] == 0
    assert info["placements"] == 2
    assert sim.counters.collisions_proposed == 1
    assert sim.counters.collisions_executed == 1
    assert sim.counters.collision_agents == 2
    assert (sim.status[jobs] == RUNNING).all()
    # used on node 2: 2 x (2, 1, 4) = (4, 2, 8) > capacity (4, 1, 64) in GPUs
    np.testing.assert_allclose(sim.used[2], [4, 2, 8])
    assert (sim.used[2] > sim.capacity[2]).any()
    # oversubscription max(4/4, 2/1, 8/64) = 2 -> contention factor 2 on node 2 only
    np.testing.assert_allclose(sim.contention(), [1.0, 1.0, 2.0])
    assert sim.counters.overload_node_slots == 1  # the slot that just ran


def test_collision_reject_admits_exactly_one():
    sim, info, jobs = _collide("reject")
    assert info["collisions"] == 1
    assert info["rejected"] == 1
    assert info["placements"] == 1
    assert sim.counters.collisions_proposed == 1
    assert sim.counters.collisions_executed == 0
    assert sim.counters.rejected == 1
    st = sim.status[jobs]
    assert sorted(st.tolist()) == [QUEUED, RUNNING]
    loser = jobs[st == QUEUED][0]
    assert sim.placed[loser] == 0
    assert loser in sim.queued_pairs()[1]  # still queued at its home agent
    np.testing.assert_allclose(sim.used[2], [2, 1, 4])
    assert (sim.used <= sim.capacity + 1e-9).all()
    assert sim.counters.overload_node_slots == 0


# ------------------------------------------------------------------------- 2 overload slowdown
@pytest.mark.parametrize("exponent", [1.0, 2.0])
def test_overload_slows_every_task_by_ratio_power(exponent):
    # One node (8 cpu, 2 gpu, 64 GiB), speed 0.5, single-worker cifar10 jobs at level 0
    # (2 cpu, 1 gpu, 4 GiB): no sync time, no stragglers.
    # t0 = bsz / (base * speed * 1**alpha * min(1, 2/(2*1))**gamma) = 182 / (1326.29 * 0.5)
    #    = 0.27445 s; one slot alone: 60 / t0 * 182 = 60 * 1326.29 * 0.5 = 39788.7 samples.
    # Three tasks: gpu 3/2 = 1.5, cpu 6/8, mem 12/64 -> r = 1.5; slowdown 1.5 ** exponent,
    # so each job makes 39788.7 / 1.5 = 26525.8 (exp 1) or 39788.7 / 2.25 = 17683.9 (exp 2).
    m = _model("cifar10")
    kw = dict(
        custom_capacities=((8, 2, 64),),
        custom_speeds=(0.5,),
        arrival_rate=5.0,
        contention_exponent=exponent,
    )
    alone, crowded = _sim(seed=3, **kw), _sim(seed=3, **kw)
    jobs = crowded.head[0, :1]
    assert crowded.num_jobs >= 3
    _place(alone, int(jobs[0]), 0)
    crowded.place(np.zeros(3, np.int64), np.arange(3), np.zeros(3, np.int64), np.zeros(3, np.int64))
    assert crowded.counters.collisions_executed == 1
    np.testing.assert_allclose(crowded.contention(), [1.5**exponent])
    _defer(alone)
    _defer(crowded)
    t0 = m["bsz"] / (m["base"] * 0.5)
    solo = SLOT / t0 * m["bsz"]
    assert solo == pytest.approx(SLOT * m["base"] * 0.5)
    assert alone.progress[0] == pytest.approx(solo, rel=1e-12)
    for j in range(3):
        # per-iteration compute time ratio = samples ratio = r ** exponent
        assert alone.progress[0] / crowded.progress[j] == pytest.approx(1.5**exponent, rel=1e-12)
        assert crowded.progress[j] == pytest.approx(solo / 1.5**exponent, rel=1e-12)
    assert crowded.counters.overload_node_slots == 1
    assert alone.counters.overload_node_slots == 0


# ---------------------------------------------------------------------------------- 3 stragglers
def _straggler_setup():
    # Two nodes (8, 2, 64), speed 1, 2 Gbit/s / 5 ms link; cifar10, ps; a 2-worker job J2 with
    # workers on nodes 0 and 1 and a 1-worker job J1 on node 0 (2 GPUs used of 2: no overload).
    sim = _sim(
        seed=3,
        custom_capacities=((8, 2, 64), (8, 2, 64)),
        arrival_rate=6.0,
        workers_dist=((1, 0.5), (2, 0.5)),
    )
    j2 = int(np.flatnonzero(sim.j_workers == 2)[0])
    j1 = int(np.flatnonzero(sim.j_workers == 1)[0])
    _place(sim, j2, 0)
    _place(sim, j2, 1)
    _place(sim, j1, 0)
    assert sorted(sim.running.tolist()) == sorted([j1, j2])
    return sim, j1, j2


def test_straggler_delays_synchronous_job_only(monkeypatch):
    m = _model("cifar10")
    # t0 = 182 / 1326.29 = 0.137225 s (1 gpu, 2 cpu = kappa*g, speed 1)
    t0 = m["bsz"] / m["base"]
    # ps sync of J2: 2 * (45 MB * 8e-3 / 2 Gbit/s) + 2 * 5 ms = 0.36 + 0.01 = 0.37 s
    sync = 2 * m["mb"] * 8e-3 / BW + 2 * LAT * 1e-3
    assert sync == pytest.approx(0.37)

    ref, j1, j2 = _straggler_setup()
    assert ref.sync_time[j2] == pytest.approx(sync, rel=1e-12)
    _defer(ref)
    # unstraggled: iteration 0.137225 + 0.37 = 0.507225 s;
    # 60 / 0.507225 * 2 workers * 182 * 1.0 = 43057.8 samples
    plain2 = SLOT / (t0 + sync) * 2 * m["bsz"]
    assert ref.progress[j2] == pytest.approx(plain2, rel=1e-12)
    # J1 alone: 60 / 0.137225 * 182 = 60 * 1326.29 = 79577.4 samples
    plain1 = SLOT / t0 * m["bsz"]
    assert ref.progress[j1] == pytest.approx(plain1, rel=1e-12)

    sim, j1, j2 = _straggler_setup()

    def fake(shape):
        f = np.ones(shape)
        f[np.flatnonzero(sim.running == j2)[0], 1] = 3.0  # J2's worker 1 (node 1) straggles
        return f

    monkeypatch.setattr(sim, "draw_stragglers", fake)
    _defer(sim)
    # iteration = max(t0, 3 t0) + sync = 0.411675 + 0.37 = 0.781675 s
    # 60 / 0.781675 * 2 * 182 = 27940.0 samples
    it = 3 * t0 + sync
    assert sim.progress[j2] == pytest.approx(SLOT / it * 2 * m["bsz"], rel=1e-12)
    assert sim.progress[j2] == pytest.approx(27940.0, rel=2e-5)
    assert sim.progress[j2] < plain2
    # the 1-worker job on node 0 does not feel J2's straggler
    assert sim.progress[j1] == pytest.approx(plain1, rel=1e-12)


def test_straggler_on_any_worker_counts_once():
    # compute time = max over workers, not a sum: factors (3, 2) give 3 t0
    sim, _, j2 = _straggler_setup()
    m = _model("cifar10")
    t0 = m["bsz"] / m["base"]

    def fake(shape):
        f = np.ones(shape)
        f[np.flatnonzero(sim.running == j2)[0]] = [3.0, 2.0]
        return f

    sim.draw_stragglers = fake
    _defer(sim)
    it = 3 * t0 + sim.sync_time[j2]
    assert sim.progress[j2] == pytest.approx(SLOT / it * 2 * m["bsz"], rel=1e-12)


# ----------------------------------------------------------------------------------- 4 sync time
def _two_worker_bert(scheme: str, nodes: tuple[int, ...], **kw: Any):
    n = kw.pop("num_nodes", 2)
    sim = _sim(
        seed=3,
        num_nodes=n,
        custom_capacities=((16, 4, 128),) * n,
        arrival_rate=6.0,
        models=(("bert", 1.0),),
        workers_dist=((len(nodes), 1.0),),
        sync_mix=((scheme, 1.0),),
        **kw,
    )
    j = 0
    for node in nodes:
        _place(sim, j, node)
    assert sim.status[j] == RUNNING
    return sim, j


# bert, M = 440 MB over 2 Gbit/s: 440 * 8e-3 / 2 = 1.76 s per transfer; 5 ms latency.
#   ps:        2 * 1.76 + 2 * 0.005               = 3.53 s
#   allreduce: 2 * (1/2) * 1.76 + 2 * 1 * 0.005   = 1.77 s
#   gossip:    1.76 + 0.005                        = 1.765 s
@pytest.mark.parametrize(
    ("scheme", "expected", "eff"),
    [("ps", 3.53, 1.0), ("allreduce", 1.77, 1.0), ("gossip", 1.765, 0.85)],
)
def test_sync_time_two_nodes(scheme, expected, eff):
    sim, j = _two_worker_bert(scheme, (0, 1))
    bw, lat = sim.cluster.pair_bw[0, 1], sim.cluster.pair_lat[0, 1]
    assert bw == pytest.approx(BW) and lat == pytest.approx(LAT)
    mb = _model("bert")["mb"]
    formula = {
        "ps": 2 * (mb * 8e-3 / bw) + 2 * lat * 1e-3,
        "allreduce": 2 * (2 - 1) / 2 * mb * 8e-3 / bw + 2 * (2 - 1) * lat * 1e-3,
        "gossip": mb * 8e-3 / bw + lat * 1e-3,
    }[scheme]
    assert formula == pytest.approx(expected)
    assert sim.sync_time[j] == pytest.approx(formula, rel=1e-12)
    # one slot: 60 / (t0 + sync) * 2 workers * 8 * efficiency, t0 = 8 / 11.3756 = 0.70326 s
    m = _model("bert")
    t0 = m["bsz"] / (m["base"] * 1.0 ** m["alpha"] * min(1.0, 2 / (m["kappa"] * 1)) ** m["gamma"])
    _defer(sim)
    assert sim.progress[j] == pytest.approx(SLOT / (t0 + formula) * 2 * m["bsz"] * eff, rel=1e-12)


# Co-located workers exchange over INTRA_NODE_GBPS = 100 Gbit/s with 0 latency:
#   440 * 8e-3 / 100 = 0.0352 s per transfer.
#   allreduce: 2 * (1/2) * 0.0352 = 0.0352 s; gossip: 0.0352 s.
@pytest.mark.parametrize("scheme", ["allreduce", "gossip"])
def test_sync_time_colocated_uses_intra_node_bandwidth(scheme):
    sim, j = _two_worker_bert(scheme, (0, 0))
    assert sim.cluster.pair_bw[0, 0] == INTRA_NODE_GBPS
    assert sim.sync_time[j] == pytest.approx(440 * 8e-3 / INTRA_NODE_GBPS, rel=1e-12)
    assert sim.sync_time[j] == pytest.approx(0.0352)


def test_sync_time_colocated_ps_uses_intra_node_bandwidth():
    # ps: worker 1 pushes and pulls over the intra-node bus: 2 * 0.0352 + 2 * 0 ms = 0.0704 s
    sim, j = _two_worker_bert("ps", (0, 0))
    assert sim.sync_time[j] == pytest.approx(2 * 440 * 8e-3 / INTRA_NODE_GBPS, rel=1e-12)


def test_single_worker_has_no_sync_time():
    sim = _sim(seed=3, custom_capacities=((16, 4, 128),) * 2, models=(("bert", 1.0),))
    _place(sim, 0, 1)
    assert sim.status[0] == RUNNING
    assert sim.sync_time[0] == 0.0


@pytest.mark.parametrize("scheme", ["ps", "allreduce", "gossip"])
def test_sync_time_three_nodes_heterogeneous_links(scheme):
    # Link bandwidths drawn in [1, 10] Gbit/s (read back from pair_bw, widest path), equal 5 ms
    # latencies. Workers on nodes (2, 0, 1): ps sits on node 2.
    sim, j = _two_worker_bert(scheme, (2, 0, 1), num_nodes=3, link_bandwidth_gbps=(1.0, 10.0))
    pb, pl = sim.cluster.pair_bw, sim.cluster.pair_lat
    assert len(np.unique(pb[np.triu_indices(3, 1)])) >= 2  # links really differ
    np.testing.assert_allclose(pl[np.triu_indices(3, 1)], LAT)
    mb = 440.0
    ring_bw = min(pb[2, 0], pb[0, 1], pb[1, 2])
    expected = {
        "ps": 2 * (mb * 8e-3 / pb[2, 0] + mb * 8e-3 / pb[2, 1]) + 2 * LAT * 1e-3,
        "allreduce": 2 * (3 - 1) / 3 * mb * 8e-3 / ring_bw + 2 * (3 - 1) * LAT * 1e-3,
        "gossip": mb * 8e-3 / ring_bw + LAT * 1e-3,
    }[scheme]
    assert sim.sync_time[j] == pytest.approx(expected, rel=1e-12)


# ------------------------------------------------------------------------------ 5 TapFinger
def _level(sim: EdgeClusterSim, job: int, cpu: int, gpu: int) -> int:
    return int(np.flatnonzero((sim.j_alloc[job] == [cpu, gpu, 0]).all(axis=1))[0])


def _tap(seed: int = 1, **kw: Any) -> EdgeClusterSim:
    sim = EdgeClusterSim(make_config("tapfinger-hetero6", arrival_slots=1, arrival_rate=12.0, **kw))
    sim.reset(seed)
    return sim


def test_tapfinger_progress_formulas():
    sim = _tap()
    lm_id, img_id = sim.model_names.index("LM"), sim.model_names.index("IMG")
    lms = np.flatnonzero(sim.j_model == lm_id)[:4]
    img = int(np.flatnonzero(sim.j_model == img_id)[0])
    gpus = [1, 4, 8, 16]
    jobs = np.concatenate([lms, [img]])
    levels = np.array(
        [_level(sim, int(j), 2, g) for j, g in zip(lms, gpus, strict=True)]
        + [_level(sim, img, 2, 16)]
    )
    # LM tasks (2 cpu, g gpu) on cluster 5 = (32, 32): 8 cpu, 1+4+8+16 = 29 gpu, fits;
    # the IMG task gets (2 cpu, 16 gpu) on cluster 4 = (24, 24).
    targets = np.array([5, 5, 5, 5, 4])
    info = sim.place(targets.copy(), jobs, targets, levels)
    assert info["placements"] == 5 and info["collisions"] == 0
    assert (sim.status[jobs] == RUNNING).all()

    # Hand values of p_{t+1} = p_t + tanh(g/16) sqrt(1.2 - p_t), p_0 = 0, frozen once >= 1:
    #   g=16: tanh(1) = 0.761594; p1 = 0.761594 * sqrt(1.2) = 0.761594 * 1.095445 = 0.834285;
    #         p2 = 0.834285 + 0.761594 * sqrt(0.365715) = 0.834285 + 0.460569 = 1.294854
    #         -> done after 2 slots
    #   g=8:  tanh(0.5) = 0.462117: 0.506224, 0.891136, 1.147960 -> done after 3 slots
    #   g=4:  tanh(0.25) = 0.244919: 0.268295, 0.504702, 0.708927, 0.880557, 1.018984 -> 5
    #   g=1:  tanh(1/16) = 0.062419: 0.068376, 0.134776, 0.199198, 0.261642, 0.322106,
    #         0.380590 (still running after 6 slots)
    hand = {
        1: [0.068376, 0.134776, 0.199198, 0.261642, 0.322106, 0.380590],
        4: [0.268295, 0.504702, 0.708927, 0.880557, 1.018984, 1.018984],
        8: [0.506224, 0.891136, 1.147960, 1.147960, 1.147960, 1.147960],
        16: [0.834285, 1.294854, 1.294854, 1.294854, 1.294854, 1.294854],
    }
    done_after = {1: None, 4: 5, 8: 3, 16: 2}
    p = np.zeros(4)
    for slot in range(6):
        t = sim.t
        _, info = _defer(sim)
        assert info["advanced"] and sim.t == t + 1
        # the recursion, evaluated independently of the simulator
        active = p < 1.0 - 1e-12
        step = np.tanh(np.array(gpus) / 16.0) * np.sqrt(np.maximum(1.2 - p, 0.0))
        p = np.where(active, p + step, p)
        for i, (j, g) in enumerate(zip(lms, gpus, strict=True)):
            assert sim.progress[j] == pytest.approx(p[i], rel=1e-12)
            assert sim.progress[j] == pytest.approx(hand[g][slot], abs=1e-6)
            finished = done_after[g] is not None and slot + 1 >= done_after[g]
            assert sim.status[j] == (DONE if finished else RUNNING)
        # IMG: +0.25 per slot whatever its 16 GPUs; done after exactly 4 slots
        assert sim.progress[img] == pytest.approx(0.25 * min(slot + 1, 4))
        assert (sim.status[img] == DONE) == (slot + 1 >= 4)
    assert sim.finish_slot[img] == 4
    np.testing.assert_array_equal(sim.finish_slot[lms], [-1, 5, 3, 2])
    assert sim.quality[lms[3]] == 1.0
    assert sim.quality[lms[0]] == pytest.approx(p[0])


def test_tapfinger_img_progress_ignores_resources():
    a, b = _tap(), _tap()
    img = int(np.flatnonzero(a.j_model == a.model_names.index("IMG"))[0])
    # (2 cpu, 1 gpu) on cluster 0 versus (16 cpu, 16 gpu) on cluster 5
    a.place(np.array([0]), np.array([img]), np.array([0]), np.array([_level(a, img, 2, 1)]))
    b.place(np.array([5]), np.array([img]), np.array([5]), np.array([_level(b, img, 16, 16)]))
    for _ in range(4):
        _defer(a)
        _defer(b)
        assert a.progress[img] == b.progress[img]
    assert a.status[img] == b.status[img] == DONE
    assert a.finish_slot[img] == b.finish_slot[img] == 4


def _shared_job(sim: EdgeClusterSim) -> tuple[int, int, int, int, int]:
    """A job in the pending slots of two agents that can both run it at (2 cpu, 1 gpu)."""
    for j in range(sim.num_jobs):
        rows, slots = np.nonzero(sim.head == j)
        if len(rows) >= 2:
            return j, int(rows[0]), int(slots[0]), int(rows[1]), int(slots[1])
    raise AssertionError("no shared job in this workload")


def _argmax_round(weights=None) -> tuple[EdgeClusterSim, int, int, int, dict]:
    """Two agents propose the same shared job on their own clusters under ``fit_argmax``."""
    sim = _tap(conflict_rule="fit_argmax")
    j, a1, s1, a2, s2 = _shared_job(sim)
    lvl = _level(sim, j, 2, 1)
    actions = np.zeros(6, dtype=np.int64)
    actions[a1] = sim.encode(s1, 0, lvl)
    actions[a2] = sim.encode(s2, 0, lvl)
    state = [r.bit_generator.state for r in sim.rngs]
    _, info = sim.step(actions, conflict_weights=weights)
    assert [r.bit_generator.state for r in sim.rngs] == state, "argmax draws nothing"
    return sim, j, a1, a2, info


def test_fit_argmax_gives_a_conflict_to_the_largest_weight_times_fit():
    sim, j, a1, a2, info = _argmax_round()
    # fit = min over resources of free / the task's minimum (2 cores, 1 GPU), own cluster
    fit = [min(sim.capacity[a, 0] / 2.0, sim.capacity[a, 1] / 1.0) for a in (a1, a2)]
    assert fit[0] != fit[1]
    assert info["task_conflicts"] == 1
    assert sim.owner[j] == (a1, a2)[int(np.argmax(fit))]
    # the weights (the policy's pointer probabilities) multiply in: the smaller fit wins
    # when its proposer's weight is large enough
    loser = (a1, a2)[int(np.argmin(fit))]
    w = np.full(6, 1e-3)
    w[loser] = 1.0
    sim, j, *_ = _argmax_round(w)
    assert sim.owner[j] == loser
    # equal scores: the lower agent wins
    w = np.zeros(6)
    sim, j, a1, a2, _ = _argmax_round(w)
    assert sim.owner[j] == min(a1, a2)


def test_conflict_weights_are_checked():
    sim = _tap(conflict_rule="fit_argmax")
    a = np.zeros(6, dtype=np.int64)
    with pytest.raises(ValueError, match=r"conflict_weights must have the actions' shape"):
        sim.step(a, conflict_weights=np.ones(5))
    with pytest.raises(ValueError, match=r"conflict_weights must be finite and >= 0"):
        sim.step(a, conflict_weights=np.array([1, 1, -1, 1, 1, 1.0]))
    with pytest.raises(ValueError, match=r"conflict_weights must be finite"):
        sim.step(a, conflict_weights=np.array([1, 1, np.nan, 1, 1, 1.0]))
    assert sim.t == 0 and sim.counters.steps == 0  # refused rounds change nothing


def test_tapfinger_when_idle_clock_conflicts_and_rewards():
    sim = _tap()
    j, a1, s1, a2, s2 = _shared_job(sim)
    lvl = _level(sim, j, 2, 1)
    actions = np.zeros(6, dtype=np.int64)
    actions[a1] = sim.encode(s1, 0, lvl)
    actions[a2] = sim.encode(s2, 0, lvl)
    assert sim.mask[a1, actions[a1]] and sim.mask[a2, actions[a2]]
    rewards, info = sim.step(actions)
    # one winner; the loser's action is void; agents placed -> the clock stays at slot 0
    assert info["task_conflicts"] == 1
    assert sim.counters.task_conflicts == 1
    assert info["placements"] == 1
    assert sim.status[j] == RUNNING
    assert sim.owner[j] in (a1, a2)
    assert sim.placed.sum() == 1
    winner = sim.owner[j]
    np.testing.assert_allclose(sim.used[winner], [2, 1, 0])
    assert sim.used.sum() == 3
    assert not info["advanced"] and sim.t == 0
    np.testing.assert_array_equal(rewards, 0.0)
    assert j not in sim.queued_pairs()[1]  # gone from every queue

    # another placement round: still no advance
    b = next(a for a in range(6) if a != winner and sim.head[a, 0] >= 0)
    act = np.zeros(6, dtype=np.int64)
    act[b] = sim.encode(0, 0, _level(sim, int(sim.head[b, 0]), 2, 1))
    _, info = sim.step(act)
    assert not info["advanced"] and sim.t == 0

    # nobody places: the clock advances one slot; reward per agent
    # = -(its running tasks + the queued tasks whose home it is), counted at the start of the
    # slot. A shared task sits in several queues but is charged once, to its home agent (the
    # first that saw it), so the agents' rewards sum to -(tasks in the system).
    _, q_job = sim.queued_pairs()
    queued = np.bincount(sim.j_home[np.unique(q_job)], minlength=6)
    assert len(q_job) > len(np.unique(q_job))  # the duplicate-entry case is exercised
    running = np.bincount(sim.owner[sim.running], minlength=6)
    assert running.sum() == 2
    rewards, info = _defer(sim)
    assert info["advanced"] and sim.t == 1
    np.testing.assert_array_equal(rewards, -(queued + running).astype(float))


# ----------------------------------------------------------------------------- 6 convergence
def test_convergence_curve_and_target_completion():
    # cifar10, one worker at level 1 = (4 cpu, 2 gpu, 4 GiB) on a (8, 2, 64) node, speed 1.
    # x90 = median_slots * slot * ref_tput = 6 * 60 * 1326.29 * min(1, 2/2)**0.5 = 477464.4
    # tau = x90 / (-ln 0.1) ** (1/k) = 477464.4 / 2.302585 ** (1/0.652509)
    #     = 477464.4 / 3.590147 = 132993.0
    # throughput = 1326.29 * 2 ** 0.93804 * min(1, 4/(2*2)) ** 0.5 = 1326.29 * 1.915924
    #   = 2541.07 samples/s, so S = 60 * 2541.07 = 152464.2 samples per slot;
    # quality after n slots 1 - exp(-(n S / tau) ** k):
    #   n=1: 0.6649, n=2: 0.8207, n=3: 0.8934 (< target 0.9), n=4: 0.9329 -> done in slot 4.
    m = _model("cifar10")
    sim = _sim(seed=3, custom_capacities=((8, 2, 64),), arrival_rate=1.0, max_epochs=15.0)
    x90 = 6 * SLOT * m["base"] * min(1.0, m["min_cpu"] / m["kappa"]) ** m["gamma"]
    assert sim.j_x90[0] == pytest.approx(x90, rel=1e-12)
    tau = x90 / (-math.log(0.1)) ** (1 / m["k"])
    assert sim.j_tau[0] == pytest.approx(tau, rel=1e-12)
    assert sim.j_k[0] == m["k"]
    _place(sim, 0, 0, level=1)
    per_slot = SLOT * m["base"] * 2 ** m["alpha"]
    hand = [0.6649, 0.8207, 0.8934, 0.9329]
    for n in range(1, 5):
        _defer(sim)
        x = n * per_slot
        assert sim.progress[0] == pytest.approx(x, rel=1e-12)
        q = 1 - math.exp(-((x / tau) ** m["k"]))
        assert sim.quality[0] == pytest.approx(q, rel=1e-12)
        assert sim.quality[0] == pytest.approx(hand[n - 1], abs=5e-4)
        assert (sim.status[0] == DONE) == (n == 4)
    assert sim.finish_slot[0] == 4
    assert sim.quality[0] >= sim.j_target[0] == pytest.approx(0.9)


def test_completion_at_epoch_limit():
    # target 0.999 is out of reach; max_epochs = 8 -> max samples = 8 * x90 / 10
    #   = 0.8 * 477464.4 = 381971.5. Level 0 (2 cpu, 1 gpu): 60 * 1326.29 = 79577.4 samples per
    #   slot, i.e. 4.8 slots -> stops after slot 5 at x = 397887 samples,
    #   x / tau = (300 / 360) * 3.590147 = 2.991789, quality
    #   1 - exp(-2.991789 ** 0.652509) = 0.8705 < 0.999.
    m = _model("cifar10")
    sim = _sim(
        seed=3,
        custom_capacities=((8, 2, 64),),
        arrival_rate=1.0,
        max_epochs=8.0,
        target_quality=(0.999, 0.999),
    )
    x90 = 6 * SLOT * m["base"]
    assert sim.j_max_samples[0] == pytest.approx(0.8 * x90, rel=1e-12)
    _place(sim, 0, 0, level=0)
    for n in range(1, 6):
        _defer(sim)
        assert (sim.status[0] == DONE) == (n == 5)
    assert sim.finish_slot[0] == 5
    assert sim.progress[0] == pytest.approx(5 * SLOT * m["base"], rel=1e-12)
    assert sim.quality[0] == pytest.approx(0.8705, abs=5e-4)
    assert sim.quality[0] < sim.j_target[0]


# ----------------------------------------------------------------------------- 7 lower bound
def test_lower_bound_tiny_job_by_hand():
    # Same job as the convergence test: best fitting level on (8, 2, 64) is level 1 (2 GPUs;
    # level 2 needs 4). LB = ceil(x90 / (60 * base * 2**alpha)) = ceil(6 / 2**0.93804)
    #   = ceil(6 / 1.915924) = ceil(3.1316) = 4 slots; realized alone at level 1: 4 slots.
    m = _model("cifar10")
    sim = _sim(seed=3, custom_capacities=((8, 2, 64),), arrival_rate=1.0)
    lb = sim.lower_bound_slots()
    assert lb[0] == math.ceil(6 / 2 ** m["alpha"]) == 4
    _place(sim, 0, 0, level=1)
    for _ in range(4):
        _defer(sim)
    assert sim.status[0] == DONE
    assert sim.finish_slot[0] - sim.j_arrival[0] == lb[0]


def test_lower_bound_tapfinger_by_hand():
    # IMG: 4 slots (0.25 each). LM at the best g = 16 (grid max; cluster 3+ has >= 16 GPUs):
    # p1 = 0.834282, p2 = 1.294855 -> 2 slots.
    sim = _tap()
    lb = sim.lower_bound_slots()
    is_lm = sim.j_model == sim.model_names.index("LM")
    np.testing.assert_array_equal(lb[~is_lm], 4)
    np.testing.assert_array_equal(lb[is_lm], 2)


def _greedy(sim: EdgeClusterSim, rng: np.random.Generator) -> np.ndarray:
    """Each agent: the feasible placement with the largest allocation level, ties broken at
    random; defer when nothing fits."""
    act = np.zeros(sim.num_agents, dtype=np.int64)
    for a in range(sim.num_agents):
        ok = np.flatnonzero(sim.mask[a, 1:]) + 1
        if len(ok):
            _, _, lvl = sim.decode(ok)
            best = ok[lvl == lvl.max()]
            act[a] = rng.choice(best)
    return act


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_lower_bound_never_exceeds_realized_jct_edge10(seed):
    # a property every scheduler must respect: no job finishes faster than its bound, even
    # with collisions, overloads, stragglers and sync costs in play
    sim = EdgeClusterSim(make_config("edge10", arrival_slots=60, max_slots=300, max_steps=300))
    sim.reset(seed)
    rng = np.random.default_rng(seed)
    while not (sim.terminated or sim.truncated):
        sim.step(_greedy(sim, rng))
    done = sim.status == DONE
    assert done.sum() >= 8
    lb = sim.lower_bound_slots()
    jct = sim.finish_slot - sim.j_arrival
    assert (lb[done] >= 1).all()
    assert (lb[done] <= jct[done]).all()
    m = sim.episode_metrics()
    assert m["jct_lower_bound"].mean() <= m["jct_mean_completed"]
    np.testing.assert_array_equal(m["jct_lower_bound"], lb[done])


def test_obs_delay_shows_neighbours_load_from_that_many_slots_ago():
    from edgesched.envs.core import NODE_FEATURES
    from edgesched.policy import EnvSpec

    delay = 2
    sim = EdgeClusterSim(make_config("edge10", obs_delay=delay, max_slots=30))
    sim.reset(4)
    spec = EnvSpec.of(sim)
    block = spec.obs_slices()["targets"]
    nbr = sim.cluster.neighbors
    history = [sim._node_feat.copy()]
    rng = np.random.default_rng(0)
    for _ in range(12):
        sim.step((rng.random(sim.mask.shape) * sim.mask).argmax(1))
        history.append(sim._node_feat.copy())
        targets = sim.obs[:, block].reshape(sim.num_agents, sim.k1, NODE_FEATURES + 3)
        stale = history[max(len(history) - 1 - delay, 0)]
        np.testing.assert_array_equal(targets[..., :NODE_FEATURES], stale[nbr])
        # the agent's own block is current
        np.testing.assert_array_equal(sim.obs[:, :NODE_FEATURES], history[-1])
    assert not np.array_equal(history[-1], history[-1 - delay])  # the delay is visible


def test_priority_aging_reorders_queues_and_lets_waiting_jobs_overtake():
    """Starvation protection: one class up per ``priority_aging_slots`` slots waited."""
    from edgesched.envs import EdgeClusterSim, make_config
    from edgesched.envs.core import QUEUED

    def queues_after(aging: int, slots: int) -> tuple[EdgeClusterSim, list[list[int]]]:
        sim = EdgeClusterSim(
            make_config("edge10", arrival_rate=0.5, priority_aging_slots=aging, max_slots=60)
        )
        sim.reset(5)
        for _ in range(slots):
            sim.step(np.zeros(sim.num_agents, dtype=np.int64))  # everyone defers
        sim._update_qlen()
        bounds = np.concatenate([sim._q_start, [sim._q_start[-1] + sim.qlen[-1]]])
        return sim, [sim.q_job[bounds[i] : bounds[i + 1]].tolist() for i in range(10)]

    every, slots = 4, 12
    sim, aged = queues_after(every, slots)
    eff = np.maximum(sim.j_prio - (sim.t - sim.j_arrival) // every, 0)
    overtakes = 0
    for agent, q in enumerate(aged):
        # each queue is ordered by aged class, then arrival (job id)
        assert q == sorted(q, key=lambda j: (eff[j], j)), agent
        assert set(q) == set(np.flatnonzero((sim.j_home == agent) & (sim.status == QUEUED)))
        overtakes += sum(sim.j_prio[a] > sim.j_prio[b] for i, a in enumerate(q) for b in q[i + 1 :])
    assert overtakes > 0  # some older low-class job now stands ahead of a newer high-class one
    sim0, strict = queues_after(0, slots)
    for q in strict:
        assert q == sorted(q, key=lambda j: (sim0.j_prio[j], j))


def test_central_head_visits_jobs_in_aged_class_order():
    """The central view's round follows the same aged classes as the multi-agent queues."""
    from edgesched.envs.central import EdgeSchedCentralEnv

    every = 4
    env = EdgeSchedCentralEnv(
        make_config("edge10", arrival_rate=0.5, priority_aging_slots=every, max_slots=60)
    )
    env.reset(seed=5)
    sim = env.sim
    overtakes = 0
    while sim.t < 12:
        t0 = sim.t
        round_ = env.heads.round_of(0).tolist()
        eff = np.maximum(sim.j_prio - (sim.t - sim.j_arrival) // every, 0)
        assert round_ == sorted(np.flatnonzero(sim.status == QUEUED), key=lambda j: (eff[j], j))
        overtakes += sum(
            sim.j_prio[a] > sim.j_prio[b] for i, a in enumerate(round_) for b in round_[i + 1 :]
        )
        while sim.t == t0:  # pass over every job of the round: the clock advances
            env.step(0)
    assert overtakes > 0  # an older low-class job ahead of a newer high-class one


def test_resize_shrinks_and_grows_a_running_job_exactly():
    """RLPTO's elastic resizing: exact resource bookkeeping and iteration times."""
    from edgesched.envs import EdgeClusterSim, make_config
    from edgesched.envs.core import RUNNING

    cfg = make_config("edge10", arrival_rate=0.3, straggler_scale=0.0, collision_mode="reject")
    sim = EdgeClusterSim(cfg)
    sim.reset(2)
    levels = sim.num_levels
    for _ in range(30):  # place each head at the highest level that fits
        pm = sim.mask[:, 1:].reshape(sim.num_agents, sim.pending_slots, sim.k1, levels)
        a = np.zeros(sim.num_agents, dtype=np.int64)
        for i in range(sim.num_agents):
            ok = np.argwhere(pm[i, 0])
            if len(ok):
                k, lv = ok[np.argmax(ok[:, 1])]
                a[i] = 1 + int(k) * levels + int(lv)
        sim.step(a)
    fits = (sim.used <= sim.capacity + 1e-9).all(axis=1)  # not overloaded by a collision
    run = [
        j
        for j in sim.running
        if (sim.w_level[j, : sim.j_workers[j]] >= 1).all()
        and fits[sim.w_node[j, : sim.j_workers[j]]].all()
    ]
    assert run, "no running job above the lowest level on nodes within capacity"
    j = int(run[0])
    w = int(sim.j_workers[j])
    nodes, lv0 = sim.w_node[j, :w], sim.w_level[j, :w].copy()
    used0, it0 = sim.used.copy(), sim.w_iter0[j, :w].copy()
    assert sim.resize(np.array([j]), np.array([-1])).tolist() == [True]
    freed = sim.j_alloc[j, lv0] - sim.j_alloc[j, lv0 - 1]
    want = used0.copy()
    np.subtract.at(want, nodes, freed)
    np.testing.assert_allclose(sim.used, want)
    assert (sim.w_iter0[j, :w] > it0).all()  # less resource, slower iterations
    np.testing.assert_allclose(
        sim.w_iter0[j, :w], sim._j_iter_at_speed1[j, lv0 - 1] / sim.cluster.speed[nodes]
    )
    assert sim.resize(np.array([j]), np.array([1])).tolist() == [True]  # grow back
    np.testing.assert_allclose(sim.used, used0)
    np.testing.assert_allclose(sim.w_iter0[j, :w], it0)
    # down to the lowest level, where shrinking changes nothing
    for _ in range(levels):
        sim.resize(np.array([j]), np.array([-1]))
    assert (sim.w_level[j, :w] == 0).all()
    assert sim.resize(np.array([j]), np.array([-1])).tolist() == [False]
    # growth that does not fit is refused and changes nothing
    before = sim.used.copy()
    sim.used[nodes] = sim.capacity[nodes]
    assert sim.resize(np.array([j]), np.array([1])).tolist() == [False]
    assert (sim.w_level[j, :w] == 0).all()
    sim.used[:] = before
    m = sim.episode_metrics()
    assert m["resized_up"] == 1 and m["resized_down"] >= 2
    assert sim.status[j] == RUNNING
    with pytest.raises(ValueError, match="running"):
        sim.resize(np.array([int(np.flatnonzero(sim.status != RUNNING)[0])]), np.array([1]))
    with pytest.raises(ValueError, match="delta"):
        sim.resize(np.array([j]), np.array([2]))


# ------------------------------------------------------------------- re-allocation and switching
def test_a_resize_costs_switch_weight_of_the_slot_in_which_it_happens():
    # One node (8 cpu, 2 gpu, 64 GiB), a single-worker cifar10 job at level 0 (1 GPU).
    # Slot 1 at level 0; resize up to level 1 (scale 2: 2 GPUs, 4 cores); slot 2 runs the new
    # allocation at switch_weight 0.5 of its samples; slot 3 at full rate.
    kw = dict(custom_capacities=((8, 2, 64),), switch_weight=0.5, alloc_scales=(1.0, 2.0))
    sim = _sim(seed=3, **kw)
    j = int(sim.head[0, 0])
    _place(sim, j, 0)
    _defer(sim)
    x1 = sim.progress[j]
    assert sim.resize(np.array([j]), np.array([1])).tolist() == [True]
    assert sim.w_level[j, 0] == 1 and sim.switched[j]
    t_new = sim.w_iter0[j, 0]
    full = SLOT / t_new * sim.j_samples_per_iter[j]
    _defer(sim)
    assert sim.progress[j] - x1 == pytest.approx(0.5 * full, rel=1e-12)
    assert not sim.switched[j]
    x2 = sim.progress[j]
    _defer(sim)
    assert sim.progress[j] - x2 == pytest.approx(full, rel=1e-12)


def test_grid_resize_moves_one_gpu_at_the_same_cpus():
    # Grid 0..4 cores x 0..2 GPUs; cifar10 needs (2, 1, 4): levels with >= 2 cores and >= 1
    # GPU are admitted. A worker placed at (2 cores, 1 GPU) grows to (2, 2), then cannot
    # grow further (2 GPUs is the grid's maximum) and shrinks back; at (2, 1) a shrink to
    # (2, 0) is refused (the model needs a GPU).
    kw = dict(custom_capacities=((8, 2, 64),), alloc_mode="grid", alloc_grid_max=(4, 2))
    sim = _sim(seed=3, **kw)
    add = sim._alloc_add
    level = int(np.flatnonzero((add[:, 0] == 2) & (add[:, 1] == 1))[0])
    j = int(sim.head[0, 0])
    _place(sim, j, 0, level=level)
    _defer(sim)

    def at() -> tuple[float, float]:
        return tuple(sim.w_alloc[j, 0, :2].tolist())

    assert at() == (2.0, 1.0)
    assert sim.resize(np.array([j]), np.array([1])).tolist() == [True]
    assert at() == (2.0, 2.0)
    np.testing.assert_allclose(sim.used[0, :2], [2.0, 2.0])
    assert sim.resize(np.array([j]), np.array([1])).tolist() == [False]
    assert sim.resize(np.array([j]), np.array([-1])).tolist() == [True]
    assert at() == (2.0, 1.0)
    assert sim.resize(np.array([j]), np.array([-1])).tolist() == [False]
    assert at() == (2.0, 1.0)


def test_every_viewer_pays_for_a_shared_waiting_job_when_asked():
    # Shared visibility: each job is queued at a random subset of agents. With the default
    # charge only its home agent pays 1 per slot; with every_viewer each agent pays for every
    # entry of its queue (TapFinger's original per-agent reward).
    kw = dict(custom_capacities=((8, 2, 64),) * 3, visibility="shared", arrival_rate=2.0)
    home = _sim(seed=5, **kw)
    every = _sim(seed=5, waiting_charge="every_viewer", **kw)
    agents, jobs = every.queued_pairs()
    assert len(jobs) > len(set(jobs.tolist()))  # some job is seen by several agents
    r_home, _ = home.step(np.zeros(3, dtype=np.int64))
    r_every, _ = every.step(np.zeros(3, dtype=np.int64))
    # rewards of the slot: minus the jobs each agent is charged for (nothing runs yet)
    np.testing.assert_array_equal(-r_every, np.bincount(agents, minlength=3))
    np.testing.assert_array_equal(-r_home, np.bincount(home.j_home[np.unique(jobs)], minlength=3))


def test_on_advance_refill_keeps_a_freed_slot_empty_until_the_clock_advances():
    # One node, two pending slots, jobs arriving in slots 0 and 1 (TapFinger's original
    # pending rule). After placing slot 0's job (advance=when_idle: the clock stays), the slot
    # stays empty although older jobs wait in the queue; when the clock advances, slot 1's
    # new arrivals take it before those older jobs.
    kw = dict(
        custom_capacities=((64, 16, 512),),
        arrival_slots=2,
        arrival_rate=10.0,
        pending_slots=2,
        advance="when_idle",
        pending_refill="on_advance",
        max_slots=10,
    )
    sim = _sim(seed=7, **kw)
    arrival = sim.j_arrival
    first = np.flatnonzero(arrival == 0)
    later = np.flatnonzero(arrival == 1)
    assert len(first) >= 3 and len(later) >= 1  # the seed gives an overflow and arrivals
    np.testing.assert_array_equal(sim.head[0], first[:2])
    act = np.array([sim.encode(0, 0, 0)])
    sim.step(act)  # place slot 0's job; nobody deferred, so the clock does not advance
    assert sim.t == 0
    assert sim.head[0, 0] == -1 and sim.head[0, 1] == first[1]
    assert sim.mask[0, 1 : 1 + sim.k1 * sim.num_levels].sum() == 0  # empty slot: no action
    _defer(sim)  # the clock advances: slot 1's first arrival takes the empty slot
    assert sim.t == 1
    assert sim.head[0, 0] == later[0] and sim.head[0, 1] == first[1]
    immediate = _sim(seed=7, **{**kw, "pending_refill": "immediate"})
    immediate.step(act)
    np.testing.assert_array_equal(immediate.head[0], first[1:3])  # v0: refilled at once
