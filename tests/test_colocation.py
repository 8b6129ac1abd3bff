"""Golden tests of ``collision_mode='measured'`` on hand-checked tiny clusters.

Expected rates are read from the committed measured table (``envs/data/colocation.json``),
so the tests survive a re-derivation; the values at the time of writing are quoted:

* v100, cifar10 (ResNet-18) with bert (Transformer): 0.86 and 0.50 of their speed alone;
  cifar10 with cifar10: 0.55 each;
* k80, imagenet (ResNet-50 at batch 64) with itself: the shared run failed (out of memory);
* Muri's interleaving multiplier of 3 jobs: 1.5 / 1.015 = 1.478;
* Synergy, ResNet-18 at 1 core per GPU: 0.37, at 2: 0.72 (of its 3-core throughput);
* Muri's restart overhead of imagenet (VGG-16) on one GPU: 7 s.

A single-worker job's progress in one slot is ``slot_seconds / iteration * local_bsz``; a
worker at rate ``r`` needs ``1 / r`` times the compute time, so it makes ``r`` times the
samples of the same worker alone.
"""

from __future__ import annotations

import importlib.util
import json
import os
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_golden import BASE as GOLDEN_BASE
from test_golden import _defer, _place

from edgesched.envs import EdgeClusterSim, SimConfig
from edgesched.envs.colocation import colocation_table
from edgesched.envs.config import ConfigError
from edgesched.envs.core import QUEUED, RUNNING
from edgesched.envs.sharing import _sum, gpu_occupants, node_outcome

# test_golden's hand-checked set-up (nothing random or modulated, every link alike), with
# more arrivals, targets no job reaches in these few slots, and the measured model
BASE: dict[str, Any] = {
    **GOLDEN_BASE,
    "arrival_rate": 4.0,
    "target_quality": (0.99, 0.99),
    "collision_mode": "measured",
}
ROOT = Path(__file__).resolve().parents[1]
TABLE = json.loads(resources.files("edgesched.envs").joinpath("data/colocation.json").read_text())


def _pair(gpu: str, a: str, b: str) -> tuple[float, float]:
    m = TABLE["models"]
    ra, rb = TABLE["pair_tput"][gpu][m.index(a)][m.index(b)]
    return ra, rb


def _sim(caps, classes, seed: int = 3, **overrides: Any) -> EdgeClusterSim:
    params = {**BASE, "custom_capacities": caps, "custom_gpu_classes": classes, **overrides}
    params["num_nodes"] = len(caps)
    params["neighbors_k"] = len(caps) - 1
    sim = EdgeClusterSim(SimConfig.from_dict(params))
    sim.reset(seed)
    return sim


def _data_dir() -> Path:
    """The real-data folder (``EDGESCHED_DATA_DIR``, else ``../shared/data``)."""
    return Path(os.environ.get("EDGESCHED_DATA_DIR", ROOT / ".." / "shared" / "data"))


def _load_script(rel: str) -> ModuleType:
    """Import a script of the checkout (``scripts/`` and ``benchmarks/`` are no packages)."""
    spec = importlib.util.spec_from_file_location(Path(rel).stem, ROOT / rel)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _jobs_of(sim: EdgeClusterSim, model: str, n: int) -> list[int]:
    m = sim.model_names.index(model)
    ids = np.flatnonzero((sim.j_model == m) & (sim.status == QUEUED))[:n]
    assert len(ids) == n, f"seed has fewer than {n} {model} jobs"
    return ids.tolist()


def test_a_fitting_pair_runs_at_its_measured_throughputs():
    caps, classes = ((8, 1, 64), (8, 1, 64)), ("v100", "v100")
    kw = dict(models=(("cifar10", 0.5), ("bert", 0.5)), arrival_rate=8.0)
    alone, shared = _sim(caps, classes, **kw), _sim(caps, classes, **kw)
    (c,), (b,) = _jobs_of(shared, "cifar10", 1), _jobs_of(shared, "bert", 1)
    _place(alone, c, 0)
    _place(alone, b, 1)
    _place(shared, c, 0)
    _place(shared, b, 0)  # two 1-GPU workers on a 1-GPU node: they share it
    _defer(alone)
    _defer(shared)
    rc, rb = _pair("v100", "cifar10", "bert")
    assert (rc, rb) == pytest.approx((0.86, 0.50), abs=0.01)
    assert shared.progress[c] == pytest.approx(alone.progress[c] * rc, rel=1e-12)
    assert shared.progress[b] == pytest.approx(alone.progress[b] * rb, rel=1e-12)
    assert shared.counters.shared_gpu_slots == 2
    assert shared.counters.crashes == 0


def test_a_failing_pair_crashes_the_newer_job_which_restarts_paying_its_overhead():
    caps, classes = ((8, 1, 64), (8, 1, 64)), ("k80", "")
    sim = _sim(caps, classes, models=(("imagenet", 1.0),))
    ref = _sim(caps, classes, models=(("imagenet", 1.0),))
    a, b = _jobs_of(sim, "imagenet", 2)
    assert _pair("k80", "imagenet", "imagenet") == (0.0, 0.0)  # measured: the run failed
    _place(sim, a, 0)
    _place(sim, b, 0)  # newer
    _place(ref, a, 0)
    _defer(sim)
    _defer(ref)
    assert sim.status[a] == RUNNING and sim.status[b] == QUEUED
    assert sim.placed[b] == 0 and b in sim.queued_pairs()[1]
    assert sim.progress[a] == pytest.approx(ref.progress[a], rel=1e-12)  # ran alone
    assert sim.progress[b] == 0.0
    np.testing.assert_allclose(sim.used[0], sim.j_alloc[a, 0])
    cnt = sim.counters
    assert (cnt.crashes, cnt.crash_slots_lost, cnt.restart_seconds) == (1, 0, 7)
    assert sim.view().crashes_by_cause() == {"memory": 0, "gpu_pair": 1}
    assert sim.startup_s[b] == 7.0
    # B restarts alone on node 1 (unmeasured class: no sharing there): its first slot
    # loses the 7 restart seconds of 60
    _place(sim, b, 1)
    _place(ref, b, 1)
    before = ref.progress[b]
    _defer(sim)
    _defer(ref)
    assert before == 0.0
    assert sim.progress[b] == pytest.approx(ref.progress[b] * (60.0 - 7.0) / 60.0, rel=1e-12)
    assert sim.startup_s[b] == 0.0
    jc = sim.job_counts()
    assert jc["arrived"] == jc["queued"] + jc["running"] + jc["done"]


@pytest.mark.parametrize("scale", [0.0, 3.0])
def test_restart_seconds_scale_multiplies_the_measured_restart(scale):
    # the failing-pair case above: the crashed ResNet-50 owes Muri's 7 s times the scale
    caps, classes = ((8, 1, 64), (8, 1, 64)), ("k80", "")
    kw = dict(models=(("imagenet", 1.0),), restart_seconds_scale=scale)
    sim, ref = _sim(caps, classes, **kw), _sim(caps, classes, **kw)
    a, b = _jobs_of(sim, "imagenet", 2)
    _place(sim, a, 0)
    _place(sim, b, 0)
    _defer(sim)
    _defer(ref)
    assert sim.status[b] == QUEUED and sim.startup_s[b] == 7.0 * scale
    assert sim.counters.restart_seconds == round(7.0 * scale)
    _place(sim, b, 1)
    _place(ref, b, 1)
    _defer(sim)
    _defer(ref)
    want = ref.progress[b] * (60.0 - 7.0 * scale) / 60.0
    assert sim.progress[b] == pytest.approx(want, rel=1e-12)


def test_host_memory_over_capacity_crashes_the_newer_job_counted_as_a_memory_crash():
    # two cifar10 workers (2 cores, 1 GPU, 4 GiB each) on a 2-GPU node with 6 GiB: each has
    # its own GPU (nothing shared), but 8 GiB of memory do not fit
    caps, classes = ((8, 2, 6), (8, 1, 64)), ("v100", "")
    sim = _sim(caps, classes, models=(("cifar10", 1.0),))
    a, b = _jobs_of(sim, "cifar10", 2)
    np.testing.assert_allclose(sim.j_alloc[[a, b], 0], [[2, 1, 4], [2, 1, 4]])
    _place(sim, a, 0)
    _place(sim, b, 0)  # newer
    _defer(sim)
    assert sim.status[a] == RUNNING and sim.status[b] == QUEUED
    assert sim.counters.crashes == 1 and sim.counters.shared_gpu_slots == 0
    assert sim.view().crashes_by_cause() == {"memory": 1, "gpu_pair": 0}


def test_a_crash_loses_exactly_the_work_since_the_last_checkpoint():
    sim = _sim(((8, 1, 64), (8, 1, 64)), ("v100", "v100"), checkpoint_interval=5)
    (j,) = _jobs_of(sim, "cifar10", 1)
    _place(sim, j, 0)
    seen = []
    for _ in range(7):
        _defer(sim)
        seen.append(float(sim.progress[j]))
    assert sim.ckpt_progress[j] == seen[4]  # checkpoint after the 5th slot
    sim._crash(np.array([j]), np.array([], dtype=np.int64))  # as a failing pair would
    assert sim.progress[j] == seen[4]
    assert sim.counters.crash_slots_lost == 2
    assert sim.status[j] == QUEUED and sim.placed[j] == 0
    assert (sim.used == 0).all()
    u = (seen[4] / sim.j_tau[j]) ** sim.j_k[j]
    assert sim.quality[j] == pytest.approx(-np.expm1(-u), rel=1e-12)


def test_three_jobs_on_one_gpu_interleave_at_muris_multiplier():
    caps, classes = ((12, 1, 64), (12, 1, 64)), ("p100", "p100")
    alone, shared = _sim(caps, classes), _sim(caps, classes)
    jobs = _jobs_of(shared, "cifar10", 3)
    _place(alone, jobs[0], 1)
    for j in jobs:
        _place(shared, j, 0)
    _defer(alone)
    _defer(shared)
    m3 = TABLE["interleave_multiplier"][2]
    assert m3 == pytest.approx(1.5 / 1.015, rel=1e-5)
    for j in jobs:
        assert shared.progress[j] == pytest.approx(alone.progress[jobs[0]] / (3 * m3), rel=1e-12)


@pytest.mark.parametrize("victim", ["newest", "in_pair"])
def test_crash_victim_on_a_gpu_of_three_with_one_failing_pair(victim):
    """Two imagenet workers (a failing pair on a K80) and a newer cifar10 worker on one GPU.
    ``newest`` (v1) crashes both the cifar10 job (the GPU's newest, in no failing pair) and
    the pair's newer job, so the oldest runs alone; ``in_pair`` crashes only the pair's newer
    job, and the other two share the GPU at their measured pair rates."""
    caps, classes = ((12, 1, 64), (12, 1, 64)), ("k80", "k80")
    kw = dict(models=(("imagenet", 0.5), ("cifar10", 0.5)), arrival_rate=8.0)
    sim, alone = _sim(caps, classes, crash_victim=victim, **kw), _sim(caps, classes, **kw)
    a, b = _jobs_of(sim, "imagenet", 2)
    (c,) = _jobs_of(sim, "cifar10", 1)
    for j in (a, b, c):  # placement order: c is the newest
        _place(sim, j, 0)
    _place(alone, a, 0)
    _place(alone, c, 1)
    _defer(sim)
    _defer(alone)
    crashed = [b, c] if victim == "newest" else [b]
    assert sim.counters.crashes == len(crashed)
    assert sim.view().crashes_by_cause() == {"memory": 0, "gpu_pair": len(crashed)}
    assert {j for j in (a, b, c) if sim.status[j] == QUEUED} == set(crashed)
    if victim == "newest":  # a ran alone
        assert sim.progress[a] == pytest.approx(alone.progress[a], rel=1e-12)
    else:  # a and c shared the GPU at their measured rates
        ra, rc = _pair("k80", "imagenet", "cifar10")
        assert 0 < ra < 1 and 0 < rc < 1
        assert sim.progress[a] == pytest.approx(alone.progress[a] * ra, rel=1e-12)
        assert sim.progress[c] == pytest.approx(alone.progress[c] * rc, rel=1e-12)


def test_cpu_starvation_at_one_core_follows_the_measured_curve():
    # node 1 has one core; a cifar10 worker is allocated 2 (placed directly, past the mask)
    caps, classes = ((8, 2, 64), (1, 1, 64)), ("v100", "v100")
    alone, starved = _sim(caps, classes), _sim(caps, classes)
    (j,) = _jobs_of(starved, "cifar10", 1)
    _place(alone, j, 0)
    _place(starved, j, 1)
    _defer(alone)
    _defer(starved)
    curve = dict(map(tuple, TABLE["cpu_curve"]["cifar10"]))
    assert (curve[1.0], curve[2.0]) == (0.37, 0.72)
    assert starved.progress[j] == pytest.approx(alone.progress[j] * 0.37 / 0.72, rel=1e-12)
    assert starved.counters.cpu_starved_slots == 1


def test_one_shared_worker_slows_the_whole_synchronous_job():
    caps, classes = ((8, 1, 64), (8, 1, 64)), ("v100", "v100")
    kw = dict(workers_dist=((1, 0.5), (2, 0.5)), arrival_rate=8.0)
    alone, shared = _sim(caps, classes, **kw), _sim(caps, classes, **kw)
    two = int(np.flatnonzero((shared.j_workers == 2) & (shared.status == QUEUED))[0])
    one = int(np.flatnonzero((shared.j_workers == 1) & (shared.status == QUEUED))[0])
    for sim in (alone, shared):
        _place(sim, two, 0)
        _place(sim, two, 1)
    _place(shared, one, 1)  # shares node 1's GPU with the job's second worker
    _defer(alone)
    _defer(shared)
    r = _pair("v100", "cifar10", "cifar10")[0]
    t0, sync = alone.w_iter0[two, 0], alone.sync_time[two]
    assert sync > 0
    # iteration = slowest worker's compute + sync: t0 alone, t0 / r with one shared worker
    expect = alone.progress[two] * (t0 + sync) / (t0 / r + sync)
    assert shared.progress[two] == pytest.approx(expect, rel=1e-12)


def test_timeshare_is_the_v0_overload_rule():
    caps = ((8, 1, 64), (8, 1, 64))
    runs = []
    for mode in ("overload", "timeshare"):
        sim = _sim(caps, ("", ""), collision_mode=mode)
        a, b = _jobs_of(sim, "cifar10", 2)
        _place(sim, a, 0)
        _place(sim, b, 0)
        _defer(sim)
        runs.append(sim.progress.copy())
    np.testing.assert_array_equal(runs[0], runs[1])
    assert runs[0].max() > 0


def test_gpu_packing_wraps_in_placement_order():
    assert gpu_occupants(np.array([1.0, 1.0, 1.0]), 2) == [[0, 2], [1]]
    assert gpu_occupants(np.array([0.5, 0.5, 1.0]), 2) == [[0, 1], [2]]
    assert gpu_occupants(np.array([2.0, 1.0]), 2) == [[0, 1], [0]]
    assert gpu_occupants(np.array([0.0, 1.0]), 1) == [[1]]


def test_bad_measured_settings_name_the_parameter():
    with pytest.raises(ConfigError, match="custom_gpu_classes"):
        _sim(((8, 1, 64), (8, 1, 64)), ("v100", "a100"))
    with pytest.raises(ConfigError, match="progress_model"):
        _sim(
            ((8, 1, 64), (8, 1, 64)),
            ("v100", "v100"),
            progress_model="tapfinger",
            models=(("IMG", 1.0),),
        )
    with pytest.raises(ConfigError, match="models"):
        colocation_table(("resnet",))
    for key, bad, allowed in (
        ("crash_order", "oldest", "random"),
        ("crash_victim", "x", "in_pair"),
    ):
        with pytest.raises(ConfigError, match=rf"{key}='{bad}'.*{allowed}"):
            _sim(((8, 1, 64), (8, 1, 64)), ("v100", "v100"), **{key: bad})


def test_the_committed_table_reproduces_from_the_data():
    """``scripts/derive_colocation.py --check`` (skips without ``../shared/data``)."""
    data = _data_dir()
    if not (data / "colocation").is_dir():
        pytest.skip(f"co-location data not found at {data.resolve()}")
    mod = _load_script("scripts/derive_colocation.py")
    assert mod.build_table(data.resolve()) == TABLE


def test_records_carry_the_measured_metrics_the_simulator_reports():
    from edgesched.envs.metrics import MEASURED_METRICS
    from edgesched.protocol import COLOCATION_METRICS

    assert COLOCATION_METRICS == MEASURED_METRICS
    sim = _sim(((8, 1, 64), (8, 1, 64)), ("k80", "k80"), models=(("imagenet", 1.0),))
    a, b = _jobs_of(sim, "imagenet", 2)
    _place(sim, a, 0)
    _place(sim, b, 0)
    _defer(sim)
    m = sim.episode_metrics()
    assert {k: m[k] for k in MEASURED_METRICS}["crashes"] == 1


def _part_gpu_trace(path) -> str:
    """Three Alibaba pods: two asking for half a GPU (gpu_milli 500) at second 0, one later."""
    path.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
        "creation_time,deletion_time,scheduled_time\n"
        "pod-a,2000,4096,1,500,,BE,Succeeded,0,600,0\n"
        "pod-b,2000,4096,1,500,,BE,Succeeded,0,600,0\n"
        "pod-c,2000,4096,1,1000,,BE,Succeeded,6000,6600,6000\n"
    )
    return str(path)


def _part_gpu_options(trace: str) -> dict[str, Any]:
    """Scenario options that replay ``_part_gpu_trace`` from its start (cifar10 jobs)."""
    return dict(
        trace_path=trace,
        trace_format="alibaba",
        trace_window_start_hours=0.0,
        arrival_rate=0.02,
        arrival_slots=10,
        models=(("cifar10", 1.0),),
    )


def test_part_gpu_trace_jobs_become_workers_that_share_a_gpu(tmp_path):
    kw = _part_gpu_options(_part_gpu_trace(tmp_path / "pods.csv"))
    caps, classes = ((8, 1, 64), (8, 1, 64)), ("v100", "v100")
    shared = _sim(caps, classes, trace_fractional_gpus=True, **kw)
    alone = _sim(caps, classes, trace_fractional_gpus=True, **kw)
    whole = _sim(caps, classes, **kw)
    a, b = np.flatnonzero(shared.status == QUEUED)[:2]
    # half a GPU per worker at every level; off (v0), a whole GPU
    assert shared.j_alloc[a, 0, 1] == pytest.approx(0.5 * whole.j_alloc[a, 0, 1])
    assert whole.j_alloc[a, 0, 1] == pytest.approx(1.0)
    _place(shared, a, 0)
    _place(shared, b, 0)  # two half-GPU workers fit one GPU: no overload, but they share it
    assert shared.used[0, 1] == pytest.approx(1.0)
    _place(alone, a, 0)
    _defer(shared)
    _defer(alone)
    r, _ = _pair("v100", "cifar10", "cifar10")
    assert r == pytest.approx(0.55, abs=0.01)
    assert shared.progress[a] == pytest.approx(alone.progress[a] * r, rel=1e-12)
    assert shared.progress[b] == pytest.approx(alone.progress[a] * r, rel=1e-12)
    assert shared.episode_metrics()["shared_gpu_slots"] == 2  # both workers, one slot
    assert alone.episode_metrics()["shared_gpu_slots"] == 0
    # whole GPUs (v0): after the first job, node 0 has no GPU left for the second
    _place(whole, a, 0)
    assert whole.capacity[0, 1] - whole.used[0, 1] < whole.j_alloc[b, 0, 1]


@pytest.mark.parametrize(("scenario", "copies"), [("edge50-highload", 1), ("edge50", 3)])
def test_stored_rates_equal_a_fresh_evaluation_of_every_node(scenario, copies):
    """Rates are stored per worker and re-evaluated only on dirty nodes; after every slot,
    every node not due for re-evaluation must hold what a from-scratch evaluation gives, and
    a node not flagged ``_node_slowed`` only default rates and flags (what lets a calm dirty
    node skip its write)."""
    import edgesched

    sim = edgesched.make_batched(scenario, copies)
    sim.reset(seeds=list(range(copies)))
    rng = np.random.default_rng(11)
    checked = slowed_nodes = 0
    for _ in range(250):
        act = (rng.random(sim.mask.shape) * sim.mask).argmax(axis=1)
        sim.step(act.reshape(copies, -1))
        done = np.flatnonzero(sim.terminated | sim.truncated)
        if len(done):
            sim.reset_copies(done, [50 + int(b) for b in done])
        run = sim.running
        nodes = sim.w_node[run]
        for n in range(sim.num_agents):
            r, w = np.nonzero(nodes == n)
            if not len(r):
                continue
            jobs = run[r]
            order = np.argsort(sim.w_seq[jobs, w])
            jobs, w = jobs[order], w[order]
            crash, rate, shared, starved = sim._node_outcome(
                n, sim.j_model[jobs], sim.w_alloc[jobs, w]
            )
            if sim._dirty_nodes[n]:
                continue  # its workers changed after this slot's evaluation: next slot's
            assert not crash, "a node holding a crash is re-checked next slot"
            np.testing.assert_array_equal(sim.w_rate[jobs, w], rate)
            np.testing.assert_array_equal(sim.w_gshared[jobs, w], shared)
            assert (sim.w_starved[jobs, w] == starved).all()
            if not sim._node_slowed[n]:
                assert (sim.w_rate[jobs, w] == 1.0).all()
                assert not sim.w_gshared[jobs, w].any() and not sim.w_starved[jobs, w].any()
            slowed_nodes += int((sim.w_rate[jobs, w] != 1.0).any())
            checked += 1
    assert checked > 1000 and slowed_nodes > 100  # the slowed case was exercised


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0.0, 1e4, allow_nan=False), min_size=0, max_size=12))
def test_the_outcome_sum_is_numpys_bit_for_bit(x):
    """The memoized outcome must not depend on which form (lists or arrays) computed it."""
    assert _sum(x) == float(np.sum(np.asarray(x, dtype=np.float64)))


def test_node_outcome_takes_lists_or_arrays_alike():
    tab = colocation_table(tuple(TABLE["models"]))
    rng = np.random.default_rng(5)
    for _ in range(200):
        k = int(rng.integers(1, 10))
        models = rng.integers(0, len(TABLE["models"]), size=k)
        alloc = np.column_stack(
            [rng.integers(0, 6, k), rng.choice([0.5, 1.0, 2.0], k), rng.integers(1, 9, k)]
        ).astype(np.float64)
        cap = np.array([8.0, 2.0, 24.0])
        cls = int(rng.integers(0, len(tab.classes)))
        args = (tab, tab.pair[cls].tolist(), tab.fail[cls].tolist())
        a = node_outcome(*args, cap, models, alloc, 0.5)
        b = node_outcome(*args, cap.tolist(), models.tolist(), alloc.tolist(), 0.5)
        assert a == b


def test_tier_gpu_classes_replace_the_declared_mapping():
    from edgesched.envs.colocation import TIER_GPU_CLASS
    from edgesched.envs.scenarios import get_scenario

    cfg = get_scenario("edge10").config()
    assert cfg.collision_mode == "measured"

    def classes_of(c: SimConfig) -> dict[str, set[str]]:
        sim = EdgeClusterSim(c)
        sim.reset(0)
        names = ("", *sim._coloc.classes)  # -1 (unmeasured) reads ""
        tiers = sim.cluster.tier_names
        out: dict[str, set[str]] = {}
        for t, k in zip(sim.cluster.tier, sim._node_class, strict=True):
            out.setdefault(tiers[t], set()).add(names[k + 1])
        return out

    default = classes_of(cfg)
    assert {t: {TIER_GPU_CLASS[t] or ""} for t in default} == default
    assert "gpu_server" in default  # the tier the override below moves
    moved = classes_of(cfg.replace(tier_gpu_classes=(("gpu_server", "v100"), ("jetson", "k80"))))
    assert moved["gpu_server"] == {"v100"}
    assert moved.get("jetson", {"k80"}) == {"k80"}
    assert all(moved[t] == default[t] for t in default if t not in ("gpu_server", "jetson"))
    unmeasured = classes_of(cfg.replace(tier_gpu_classes=(("gpu_server", ""),)))
    assert unmeasured["gpu_server"] == {""}
    for bad in ((("gpu_server", "a100"),), (("t4_box", "p100"),), (("gpu_server",),)):
        with pytest.raises(ConfigError, match="tier_gpu_classes entry"):
            cfg.replace(tier_gpu_classes=bad)


def test_gavel_model_map_rereads_only_the_assumed_models():
    """``largest_batch``: bert, deepspeech2, yolov3 at their stand-in's largest batch."""
    models = tuple(TABLE["models"])
    alt = TABLE["gavel_map_alternatives"]["largest_batch"]
    assert set(alt["gavel"]) == {"bert", "deepspeech2", "yolov3"}
    for m, job in alt["gavel"].items():  # the same architecture as the declared entry
        assert job.split(" (")[0] == TABLE["model_map"][m]["gavel"].split(" (")[0]
    declared, heavy = colocation_table(models), colocation_table(models, "largest_batch")
    fixed = [models.index(m) for m in models if m not in alt["gavel"]]
    ix = np.ix_(range(len(declared.classes)), fixed, fixed)
    np.testing.assert_array_equal(heavy.pair[ix], declared.pair[ix])
    assert not np.array_equal(heavy.pair, declared.pair)
    y = models.index("yolov3")
    # ResNet-50 at batch 128 failed with every partner Gavel paired it with on K80
    assert heavy.fail[0, y].all() and heavy.fail[0, :, y].all()
    assert heavy.fail.sum() > declared.fail.sum()
    with pytest.raises(ConfigError, match="gavel_model_map='nearest'"):
        colocation_table(models, "nearest")
    with pytest.raises(ConfigError, match="gavel_model_map"):
        SimConfig.from_dict({**BASE, "gavel_model_map": "nearest"})


def test_largest_batch_crashes_a_pair_the_declared_map_lets_share():
    caps, classes = ((8, 1, 64), (8, 1, 64)), ("k80", "k80")
    kw = dict(models=(("cifar10", 0.5), ("yolov3", 0.5)), arrival_rate=8.0)
    runs = {}
    for reading in ("declared", "largest_batch"):
        sim = _sim(caps, classes, gavel_model_map=reading, **kw)
        (c,), (y,) = _jobs_of(sim, "cifar10", 1), _jobs_of(sim, "yolov3", 1)
        _place(sim, c, 0)
        _place(sim, y, 0)  # newer, on the same 1-GPU node
        _defer(sim)
        runs[reading] = (sim, c, y)
    sim, c, y = runs["declared"]
    assert _pair("k80", "cifar10", "yolov3") != (0.0, 0.0)
    assert sim.status[c] == RUNNING and sim.status[y] == RUNNING
    assert sim.counters.crashes == 0 and sim.counters.shared_gpu_slots == 2
    sim, c, y = runs["largest_batch"]
    assert sim.status[c] == RUNNING and sim.status[y] == QUEUED
    assert sim.counters.crashes == 1 and sim.counters.shared_gpu_slots == 0


def test_the_study_sweeps_each_assumption_once_around_the_defaults():
    """benchmarks/colocation_study.py: one row per swept value, the default's row not
    repeated, each row the measured model with exactly one assumption changed."""
    from edgesched.envs.scenarios import get_scenario

    mod = _load_script("benchmarks/colocation_study.py")
    cfg = get_scenario("edge50-highload").config()
    rows = mod.models_to_run(
        [0.5, cfg.unmeasured_gpu_share],
        [0, cfg.checkpoint_interval],
        ["k80", "p100"],
        cfg,
        (0.0,),
        ("largest_batch", "declared"),
        (("jetson", "k80"), ("small_server", "k80"), ("small_server", "p100")),
        (1.0, 8.0),
        ("agent", "random"),
        ("newest", "in_pair"),
    )
    labels = [label for label, _ in rows]
    assert labels == [
        "timeshare",
        "measured",
        "measured, unmeasured_gpu_share=0.5",
        "measured, checkpoint_interval=0",
        "measured, gpu_server T4 as k80",
        "measured, jetson as k80",
        "measured, small_server as p100",
        "measured, cpu_starvation_weight=0",
        "measured, gavel_model_map=largest_batch",
        "measured, restart_seconds_scale=8",
        "measured, crash_order=random",
        "measured, crash_victim=in_pair",
    ]
    for _, overrides in rows[2:]:
        changed = dict(overrides)
        assert changed.pop("collision_mode") == "measured" and len(changed) == 1
        cfg.replace(**changed)  # each is a valid configuration
    assert rows[5][1] == {"collision_mode": "measured", "tier_gpu_classes": (("jetson", "k80"),)}
    assert rows[-4][1] == {"collision_mode": "measured", "gavel_model_map": "largest_batch"}
    assert rows[-3][1] == {"collision_mode": "measured", "restart_seconds_scale": 8.0}
    assert rows[-2][1] == {"collision_mode": "measured", "crash_order": "random"}
    assert rows[-1][1] == {"collision_mode": "measured", "crash_victim": "in_pair"}


def test_the_most_failing_gavel_jobs_are_the_ones_the_page_names():
    """``leaderboards/colocation.md`` names them (skips without ``../shared/data``)."""
    from edgesched.leaderboard.colocation import MOST_FAILING_GAVEL_JOBS

    data = _data_dir()
    path = data / "colocation" / "gavel_physical_cluster_throughputs.json"
    if not path.is_file():
        pytest.skip(f"co-location data not found at {data.resolve()}")
    mod = _load_script("scripts/derive_colocation.py")
    counts = mod.failing_partners(mod.load_gavel(path), "k80")
    ranked = sorted(counts, key=lambda j: -counts[j][0])
    assert tuple(ranked[:2]) == MOST_FAILING_GAVEL_JOBS
    assert [counts[j] for j in MOST_FAILING_GAVEL_JOBS] == [(26, 26), (13, 26)]


def test_colocation_binding_counts_what_it_says():
    """benchmarks/colocation_binding.py: five 1-GPU workers on one GPU, cores 10 on 8."""
    from edgesched.envs.view import ClusterView

    mod = _load_script("benchmarks/colocation_binding.py")
    caps, classes = ((8, 1, 64), (8, 1, 64)), ("v100", "v100")
    sim = _sim(caps, classes, models=(("cifar10", 1.0),), arrival_rate=8.0)
    jobs = _jobs_of(sim, "cifar10", 5)
    for j in jobs:
        _place(sim, j, 0)  # (2 cores, 1 GPU) each: 10 cores and 5 GPUs on (8, 1)
    view = ClusterView(sim)
    assert set(view.running.tolist()) == set(jobs)
    got = mod.binding_counts(view)
    assert got["gpu_nodes"] == 2 and got["gpu_over4"] == 1
    assert got["workers"] == 5 and got["starved"] == 5
    # 2 cores per GPU at a share of 8/10: 1.6 cores per GPU, not below one
    assert got["below_one"] == 0
    _place(sim, _jobs_of(sim, "cifar10", 1)[0], 0)  # 12 cores on 8: 2 x 2/3 = 1.33
    assert mod.binding_counts(view)["below_one"] == 0
    for j in _jobs_of(sim, "cifar10", 3):
        _place(sim, j, 0)  # 18 cores on 8: 2 x 4/9 = 0.89 cores per GPU
    assert mod.binding_counts(view)["below_one"] == 9


def test_colocation_binding_episode_counts_crashes_by_cause():
    """The script's episode sums carry the simulator's crashes by cause."""
    mod = _load_script("benchmarks/colocation_binding.py")
    tot = mod.run_episode("edge50-highload", "least_loaded", 10_000)
    # the board's first held-out workload crashes jobs for both reasons
    assert tot["crash_memory"] > 0 and tot["crash_pair"] > 0


def test_a_resize_that_repacks_a_failing_pair_crashes_the_newer_job_at_its_checkpoint():
    """The crash path end to end: a re-packing, not a placement, brings a failing pair.

    A 2-GPU K80 node packs workers in placement order: B (ResNet-50, 1 GPU) on GPU 0, X
    (ResNet-18 at scale 2, 2 GPUs) on GPUs 1 and 0, C (ResNet-50, 1 GPU) on GPU 1; each
    ResNet-50 shares with ResNet-18, which fits. After 5 slots X shrinks to 1 GPU (GPU 1),
    so C wraps onto GPU 0 with B: ResNet-50 with itself fails on the K80, and C, the newer,
    crashes back to its checkpoint of slot 3, having run 5 slots.
    """
    caps, classes = ((16, 2, 64), (16, 2, 64)), ("k80", "k80")
    sim = _sim(
        caps,
        classes,
        models=(("imagenet", 0.5), ("cifar10", 0.5)),
        arrival_rate=8.0,
        checkpoint_interval=3,
    )
    (b, c), (x,) = _jobs_of(sim, "imagenet", 2), _jobs_of(sim, "cifar10", 1)
    _place(sim, b, 0)
    _place(sim, x, 0, level=1)  # scale 2: 2 GPUs
    _place(sim, c, 0)
    assert sim.w_alloc[x, 0, 1] == 2.0
    seen = []
    for _ in range(5):
        _defer(sim)
        assert sim.counters.crashes == 0
        seen.append(float(sim.progress[c]))
    assert sim.ckpt_progress[c] == seen[2] and seen[4] > seen[2] > 0
    progress_b = float(sim.progress[b])
    assert sim.resize(np.array([x]), np.array([-1])).all()
    _defer(sim)
    assert sim.counters.crashes == 1
    assert sim.status[c] == QUEUED and sim.placed[c] == 0
    assert sim.progress[c] == seen[2]  # back at its checkpoint
    assert sim.counters.crash_slots_lost == 2  # slots 4 and 5 since it
    assert sim.status[b] == RUNNING and sim.progress[b] > progress_b  # the older one runs on
    assert sim.counters.restart_seconds > 0


@pytest.mark.parametrize("order", ["agent", "random"])
def test_crash_order_decides_whose_job_a_same_round_overflow_crashes(order):
    """Two agents place a cifar10 worker each on a node whose memory holds one, in one round.
    ``agent`` (v1): the higher-numbered agent's job always crashes; ``random``: either, drawn
    from a generator of the order's own (the same seed, the same victim; the simulator's
    other draws stay those of ``agent``)."""
    caps, classes = ((8, 2, 6), (8, 2, 6)), ("v100", "v100")

    def same_round_overflow(seed: int, rule: str) -> tuple[int, dict]:
        sim = _sim(caps, classes, seed=seed, models=(("cifar10", 1.0),), crash_order=rule)
        queued = np.flatnonzero(sim.status == QUEUED)
        a = int(queued[sim.j_home[queued] == 0][0])
        b = int(queued[sim.j_home[queued] == 1][0])
        sim.place(np.array([0, 1]), np.array([a, b]), np.array([0, 0]), np.array([0, 0]))
        _defer(sim)
        assert sim.counters.crashes == 1
        assert sorted(sim.status[[a, b]].tolist()) == sorted([RUNNING, QUEUED])
        return (0 if sim.status[a] == QUEUED else 1), sim.rngs[0].bit_generator.state

    victims = []
    for seed in range(12):
        victim, state = same_round_overflow(seed, order)
        assert same_round_overflow(seed, order)[0] == victim  # seeded
        assert same_round_overflow(seed, "agent")[1] == state  # the order drew elsewhere
        victims.append(victim)
    assert set(victims) == ({1} if order == "agent" else {0, 1})


@pytest.mark.parametrize("name", ["edge10", "edge50", "edge50-highload", "edge100", "edge500"])
def test_no_edge_board_has_a_v100_node(name):
    """docs/srole.md: the V100's lossy pairs (44% of its fitting pairs below 0.8 together)
    never occur on the edge boards, whose tiers read as the K80, the P100 and the
    unmeasured Jetson. A scenario that gains a V100 tier must revisit that paragraph."""
    import edgesched
    from edgesched.envs.colocation import node_gpu_class

    sim = edgesched.make_parallel(name).sim
    sim.reset(10_000)
    c = sim.cluster
    classes = tuple(TABLE["gpu_classes"])
    got = node_gpu_class(c.tier_names, c.tier, classes, tuple(sim.cfg.tier_gpu_classes))
    used = {classes[i] if i >= 0 else None for i in got.tolist()}
    assert "v100" not in used
    assert used <= {"k80", "p100", None}
