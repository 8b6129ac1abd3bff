"""Input validation at the edges a fault campaign found.

Trace files that are not plain UTF-8, allocation scales no node can host, arrival rates whose
arrays would not fit in memory, EdgeGossip stop thresholds that let jobs beat their own lower
bound, and a batched action array of the wrong dtype.
"""

from __future__ import annotations

import codecs
from pathlib import Path

import numpy as np
import pytest

import edgesched
from edgesched.envs import BatchedSim, ConfigError, EdgeClusterSim, SimConfig, make_config
from edgesched.envs.config import (
    EDGEGOSSIP_MAX_MIN_GAIN,
    MAX_EXPECTED_JOBS,
    MAX_JOB_ARRAY_BYTES,
)
from edgesched.envs.core import DONE, InvalidActionError
from edgesched.envs.progress import accuracy_stop_u as _accuracy_stop_u
from edgesched.envs.workloads import TraceFormatError, detect_format, read_trace

# ------------------------------------------------------------------ 1. trace encodings
# One tiny file per supported format; the third line (second job) is where a bad byte goes.
TRACES = {
    "philly": [
        "timestamp,duration,num_gpus,gpu_time,cluster",
        "2017-10-01 00:00:00,120.0,2,240.0,abc",
        "2017-10-01 00:10:00,600.0,1,600.0,{x}",
        "2017-10-01 01:00:00,60.0,4,240.0,abc",
    ],
    "pollux": [
        "name,time,application,num_replicas,batch_size",
        "cifar10-0,0,cifar10,1,128",
        "bert-1,45,bert{x},2,12",
        "ncf-2,60,ncf,4,32768",
    ],
    "alibaba": [
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
        "creation_time,deletion_time,scheduled_time",
        "p1,88000,327680,8,1000,,LS,Running,0,1332357,0",
        "p2{x},4000,15258,1,220,,BE,Running,100,400,150",
        "p3,16000,32768,2,1000,,LS,Running,900,2000,1000",
    ],
}


def _trace_bytes(fmt: str, insert: bytes = b"", bom: bool = False) -> bytes:
    text = "\n".join(TRACES[fmt]) + "\n"
    data = text.replace("{x}", "\x00").encode("utf-8").replace(b"\x00", insert)
    return (codecs.BOM_UTF8 if bom else b"") + data


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("fmt", sorted(TRACES))
def test_a_utf8_byte_order_mark_is_read_like_plain_utf8(tmp_path, fmt):
    plain = read_trace(_write(tmp_path, "plain.csv", _trace_bytes(fmt)))
    bom_path = _write(tmp_path, "bom.csv", _trace_bytes(fmt, bom=True))
    assert detect_format(bom_path) == fmt  # the header's first column keeps its name
    for given in ("auto", fmt):
        with_bom = read_trace(bom_path, given)
        assert with_bom.format == fmt and len(with_bom) == len(plain) == 3
        np.testing.assert_array_equal(with_bom.submit, plain.submit)
        np.testing.assert_array_equal(with_bom.gpus, plain.gpus)
        np.testing.assert_array_equal(with_bom.line, plain.line)
        assert list(with_bom.application) == list(plain.application)


@pytest.mark.parametrize("bom", [False, True])
@pytest.mark.parametrize("given", ["auto", "explicit"])
@pytest.mark.parametrize("fmt", sorted(TRACES))
def test_bytes_that_are_not_utf8_name_file_line_and_offset(tmp_path, fmt, given, bom):
    bad = b"\xe9"  # latin-1 e-acute: a lone UTF-8 lead byte
    data = _trace_bytes(fmt, insert=bad, bom=bom)
    path = _write(tmp_path, f"{fmt}.csv", data)
    with pytest.raises(TraceFormatError) as err:
        read_trace(path, fmt if given == "explicit" else "auto")
    msg = str(err.value)
    assert f"{path}:3:" in msg, msg
    assert f"byte offset {data.index(bad)}" in msg, msg  # counted in the file's own bytes
    assert "not UTF-8" in msg and "\\xe9" in msg


@pytest.mark.parametrize("fmt", sorted(TRACES))
def test_a_header_that_is_not_utf8_is_reported_on_line_1(tmp_path, fmt):
    data = b"\xff" + _trace_bytes(fmt)
    path = _write(tmp_path, "h.csv", data)
    for call in (detect_format, read_trace, lambda p: read_trace(p, fmt)):
        with pytest.raises(TraceFormatError, match=r"h\.csv:1: byte b'\\xff' at byte offset 0"):
            call(path)


# ------------------------------------------------------------------ 2. allocation scales
def test_every_registered_scenario_still_validates():
    names = edgesched.list_scenarios()
    assert len(names) >= 10
    for name in names:
        edgesched.get_scenario(name).config()


def test_a_smallest_scale_no_tier_can_host_is_rejected_with_the_allowed_range():
    # the default tiers' largest node has 4 GPUs and every catalog model needs 1 per worker
    SimConfig.from_dict({"alloc_scales": (4.0, 8.0)})  # level 4 fits a gpu_server
    with pytest.raises(ConfigError) as err:
        SimConfig.from_dict({"alloc_scales": (8.0, 16.0)})
    msg = str(err.value)
    assert "alloc_scales=(8.0, 16.0)" in msg
    assert "smallest level 8" in msg and "cifar10 (cpu 16, gpu 8)" in msg
    assert "must lie in [1.0, 4]" in msg
    # a tier with zero weight is never drawn, so it cannot host anything
    mix = (("jetson", 1.0), ("v100_server", 0.0))
    with pytest.raises(ConfigError, match=r"must lie in \[1.0, 1\]"):
        SimConfig.from_dict({"tier_mix": mix, "alloc_scales": (2.0,)})
    SimConfig.from_dict(
        {"tier_mix": (("jetson", 1.0), ("v100_server", 0.1)), "alloc_scales": (2.0,)}
    )


def _hostable_in_sim(cfg: SimConfig) -> bool:
    """Whether, by the simulator's own tables, every model has a level some node can host."""
    sim = EdgeClusterSim(cfg)
    alloc, ok = sim._m_alloc, sim._m_ok
    fits = (alloc[:, :, None, :] <= sim.capacity[None, None] + 1e-9).all(-1) & ok[:, :, None]
    return bool(fits.any(axis=(1, 2)).all())


@pytest.mark.parametrize("smallest", [1.0, 1.5, 2.0, 2.5, 3.0, 4.0])
def test_validation_accepts_exactly_the_scales_the_simulator_can_place(smallest):
    # (8 cpu, 2 gpu, 64 GiB) nodes: cifar10/bert/ncf need (2, 1), imagenet and co (4, 1)
    base = {"num_nodes": 2, "neighbors_k": 1, "custom_capacities": ((8, 2, 64), (8, 2, 64))}
    # the dataclass constructor skips validation, so the simulator can judge the scale itself
    placeable = _hostable_in_sim(SimConfig(**base, alloc_scales=(smallest,)))
    assert placeable == (smallest <= 2.0)
    params = {**base, "alloc_scales": (smallest, 4.0)}
    if placeable:
        SimConfig.from_dict(params)
    else:
        with pytest.raises(ConfigError, match=r"custom_capacities.*must lie in \[1.0, 2\]"):
            SimConfig.from_dict(params)


def test_a_grid_that_never_reaches_the_minimum_demand_is_rejected():
    with pytest.raises(
        ConfigError, match=r"alloc_grid_max=\(1, 16\).*need alloc_grid_max >= \(2, 1\)"
    ):
        make_config("tapfinger-hetero6", alloc_grid_max=(1, 16))
    make_config("tapfinger-hetero6", alloc_grid_max=(2, 1))


# ------------------------------------------------------------------ 3. workload size
def test_an_arrival_rate_near_its_maximum_is_rejected_before_anything_is_drawn():
    with pytest.raises(ConfigError) as err:
        SimConfig.from_dict({"arrival_rate": 1e6})
    msg = str(err.value)
    assert "arrival_rate=1000000.0" in msg and f"{MAX_EXPECTED_JOBS:,} expected jobs" in msg
    # max_jobs does not help: every arrival is drawn before the cap truncates them
    with pytest.raises(ConfigError, match=r"arrival_rate=1000000\.0"):
        SimConfig.from_dict({"arrival_rate": 1e6, "max_jobs": 10})
    # the suggested rate is accepted
    limit = float(msg.split("need arrival_rate <= ")[1].split(" ")[0])
    SimConfig.from_dict({"arrival_rate": limit * 0.999})


def test_grid_levels_count_toward_the_memory_limit():
    cfg = make_config("tapfinger-hetero6", max_jobs=0)
    # the largest rate whose expected jobs pass the job cap; its 288-level arrays do not
    rate = cfg.arrival_rate * MAX_EXPECTED_JOBS / cfg.expected_jobs() * 0.99
    with pytest.raises(ConfigError, match=r"288 allocation levels .* GiB of per-job arrays"):
        cfg.replace(arrival_rate=rate)
    assert cfg.replace(arrival_rate=rate, max_jobs=1000).job_array_bytes() < MAX_JOB_ARRAY_BYTES


def test_arrival_cells_are_bounded_under_node_scope():
    with pytest.raises(ConfigError, match=r"arrival_slots=10000000 x num_nodes=10 .* limit"):
        SimConfig.from_dict({"arrival_slots": 10_000_000, "arrival_rate": 0.0})
    SimConfig.from_dict(
        {"arrival_slots": 10_000_000, "arrival_rate": 0.0, "arrival_scope": "cluster"}
    )


@pytest.mark.parametrize("name", ["edge50", "tapfinger-hetero6"])
def test_expected_jobs_is_an_upper_estimate_of_the_jobs_drawn(name):
    cfg = make_config(name, max_jobs=0)
    sim = EdgeClusterSim(cfg)
    drawn = []
    for seed in range(5):
        sim.reset(seed)
        drawn.append(sim.num_jobs)
    assert np.mean(drawn) <= cfg.expected_jobs()
    assert np.mean(drawn) >= 0.5 * cfg.expected_jobs()  # an estimate, not a loose bound


# ------------------------------------------------------------------ 4. EdgeGossip stop
def test_a_stop_threshold_above_the_curves_peak_gain_is_rejected():
    for bad in (0.5, 0.2, EDGEGOSSIP_MAX_MIN_GAIN * 1.01):
        with pytest.raises(
            ConfigError, match=r"edgegossip_min_gain=.* need a number in \[0.0, 0.1\]"
        ):
            make_config("edge50-edgegossip", edgegossip_min_gain=bad)
    make_config("edge50-edgegossip", edgegossip_min_gain=EDGEGOSSIP_MAX_MIN_GAIN)


def test_the_stop_point_is_where_the_simulators_gain_first_drops_below_the_threshold():
    sim = EdgeClusterSim(make_config("edge10"))
    k, q90f = sim.progress_model.convk, sim.progress_model.q90f
    for g in (0.001, 0.01, 0.05, 0.1):
        u = _accuracy_stop_u(k, q90f, g)
        gain = lambda v: 0.1 * k * q90f * v ** (1 - 1 / k) * np.exp(-v)  # noqa: E731
        inflection = np.maximum(1 - 1 / k, 1e-12)
        at = np.isclose(u, inflection)
        assert (gain(u)[~at] >= g).all()  # not past it yet
        assert (gain(u * (1 + 1e-6)) < g).all()  # just past it the stop fires
        assert (gain(inflection)[at] < g).all()  # stopped at the peak: the whole tail is below


def _greedy(sim: EdgeClusterSim, rng: np.random.Generator) -> np.ndarray:
    """The feasible placement with the largest level, so jobs run near their lower bound."""
    act = np.zeros(sim.num_agents, dtype=np.int64)
    for a in range(sim.num_agents):
        ok = np.flatnonzero(sim.mask[a, 1:]) + 1
        if len(ok):
            _, _, lvl = sim.decode(ok)
            act[a] = rng.choice(ok[lvl == lvl.max()])
    return act


@pytest.mark.parametrize("min_gain", [0.01, 0.05, EDGEGOSSIP_MAX_MIN_GAIN])
def test_no_edgegossip_job_finishes_below_its_lower_bound(min_gain):
    stopped_early = 0
    for seed in (0, 1):
        cfg = make_config(
            "edge10",
            sync_mix=(("edgegossip", 1.0),),
            edgegossip_min_gain=min_gain,
            arrival_slots=60,
            max_slots=300,
            max_steps=300,
        )
        sim = EdgeClusterSim(cfg)
        sim.reset(seed)
        rng = np.random.default_rng(seed)
        while not (sim.terminated or sim.truncated):
            sim.step(_greedy(sim, rng))
        done = sim.status == DONE
        assert done.sum() >= 10
        jct = (sim.finish_slot - sim.j_arrival)[done]
        assert (sim.lower_bound_slots()[done] <= jct).all()
        stopped_early += int((sim.quality[done] < sim.j_target[done]).sum())
    assert stopped_early > 0  # the stop fired before some targets: the case under test


# ------------------------------------------------------------------ 5. batched actions
def test_batched_actions_of_the_wrong_dtype_or_shape_report_what_was_passed():
    bs = BatchedSim(make_config("edge10"), 3)
    bs.reset(seed=0)
    with pytest.raises(InvalidActionError) as err:
        bs.step(np.zeros((3, 10), dtype=np.float64))
    msg = str(err.value)
    assert "integer array of shape (3, 10); got shape (3, 10) dtype float64" in msg
    assert "(30,)" not in msg  # the flattened shape the caller never passed
    with pytest.raises(InvalidActionError, match=r"got shape \(30,\) dtype int64"):
        bs.step(np.zeros(30, dtype=np.int64))
    bs.step(np.zeros((3, 10), dtype=np.int32))  # any integer dtype is accepted


def test_num_nodes_beyond_the_dense_topology_limit_is_rejected():
    from edgesched.envs.config import MAX_NODES

    with pytest.raises(ConfigError, match=r"num_nodes=2001 .*\[1, 2000\]"):
        SimConfig.from_dict({"num_nodes": MAX_NODES + 1})
    SimConfig.from_dict({"num_nodes": MAX_NODES})  # the limit itself validates (nothing built)
