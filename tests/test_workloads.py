"""Trace readers, trace-driven scenarios and the real topology (issue: real workloads)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA_DIR, needs_data, needs_scenario_data

from edgesched.envs import ConfigError, EdgeClusterSim, make_config
from edgesched.envs.topology import build_cluster, topology_zoo_link_speeds
from edgesched.envs.workloads import (
    Trace,
    TraceFormatError,
    TraceWorkload,
    detect_format,
    read_alibaba_pods,
    read_philly,
    read_pollux_workload,
    read_trace,
)
from edgesched.experiment.schema import scenario_overrides

FIXTURES = Path(__file__).parent / "fixtures" / "traces"
PHILLY = FIXTURES / "philly_small.csv"
POLLUX = FIXTURES / "pollux_small.csv"
ALIBABA = FIXTURES / "alibaba_small.csv"


# ------------------------------------------------------------------ fixtures of each format
def test_philly_fixture_is_read_sorted_with_seconds_from_first_submission():
    t = read_philly(PHILLY)
    assert t.format == "philly" and len(t) == 5  # the trailing blank line is not a job
    np.testing.assert_array_equal(t.submit, [0, 600, 1800, 3600, 7200])
    np.testing.assert_array_equal(t.duration, [120, 600, 60, 3600, 1800])
    np.testing.assert_array_equal(t.gpus, [2, 1, 1, 8, 4])
    np.testing.assert_array_equal(t.line, [3, 2, 5, 4, 6])
    assert t.epoch == "2017-10-01T00:00:00"
    assert np.isnan(t.cpus).all() and (t.application == "").all()


def test_pollux_fixture_keeps_model_names():
    t = read_pollux_workload(POLLUX)
    np.testing.assert_array_equal(t.submit, [0, 45, 60, 600])
    assert list(t.application) == ["cifar10", "ncf", "bert", "imagenet"]
    np.testing.assert_array_equal(t.gpus, [1, 4, 2, 16])
    assert np.isnan(t.duration).all()  # Pollux workloads record no durations


def test_alibaba_fixture_durations_shares_and_cpu_only_pods():
    t = read_alibaba_pods(ALIBABA)
    # sorted by creation time: pods 1, 4, 2, 5, 3
    np.testing.assert_array_equal(t.line, [2, 5, 3, 6, 4])
    np.testing.assert_allclose(t.submit, [0, 62503, 241678, 262503, 529561])
    # duration from the scheduled time; unknown (NaN) without a deletion time
    np.testing.assert_allclose(t.duration[[0, 1, 2, 4]], [1332357, 100000, 294651, 1512])
    assert np.isnan(t.duration[3])
    # GPU-sharing pod asks 220 milli-GPU; a CPU-only pod asks none; gpu_milli counts only
    # for one-GPU pods (pod 5 asks 2 GPUs with gpu_milli 500: still 2 whole GPUs)
    np.testing.assert_allclose(t.gpus, [8, 0, 0.22, 2, 1])
    np.testing.assert_allclose(t.cpus, [88, 2, 4, 8, 16])
    np.testing.assert_allclose(t.mem_gib[0], 320.0)


@pytest.mark.parametrize(
    ("path", "fmt"), [(PHILLY, "philly"), (POLLUX, "pollux"), (ALIBABA, "alibaba")]
)
def test_format_is_detected_from_the_header(path, fmt):
    assert detect_format(path) == fmt
    assert read_trace(path).format == fmt


def _write(tmp_path: Path, src: Path, line: int, new: str | None) -> Path:
    """Copy a fixture with 1-based ``line`` replaced (``None``: appended as is)."""
    lines = src.read_text().splitlines()
    lines[line - 1] = new
    out = tmp_path / src.name
    out.write_text("\n".join(lines) + "\n")
    return out


@pytest.mark.parametrize(
    ("src", "line", "text", "match"),
    [
        (PHILLY, 3, "2017-13-45 00:00:00,120.0,2,240.0,abc", "timestamp"),
        (PHILLY, 4, "2017-10-01 01:00:00,-5,8,1.0,def", "duration"),
        (PHILLY, 5, "2017-10-01 00:30:00,60.0,0,60.0,def", "num_gpus"),
        (PHILLY, 6, "2017-10-01 02:00:00,1800.0,4", "fields"),
        (POLLUX, 3, "bert-1,soon,bert,2,12", "time"),
        (POLLUX, 4, "ncf-2,45,,4,32768", "application"),
        (ALIBABA, 3, "p,4000,15258,1.5,220,,BE,Running,9679175,9973826,9679175", "num_gpu"),
        (ALIBABA, 4, "p,16000,32768,1,1000,,LS,Running,9967058,9967000,9967063", "deletion_time"),
    ],
)
def test_malformed_rows_name_file_and_line(tmp_path, src, line, text, match):
    bad = _write(tmp_path, src, line, text)
    with pytest.raises(TraceFormatError, match=match) as err:
        read_trace(bad)
    assert f"{bad}:{line}" in str(err.value)


def test_bad_headers_and_missing_files_are_clear(tmp_path):
    other = tmp_path / "x.csv"
    other.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(TraceFormatError, match=r"x\.csv:1: header .* matches no known"):
        read_trace(other)
    with pytest.raises(TraceFormatError, match="lacks column"):
        read_trace(other, "philly")
    with pytest.raises(TraceFormatError, match="not found"):
        read_trace(tmp_path / "missing.csv")
    with pytest.raises(TraceFormatError, match="format='gcp' is not allowed"):
        read_trace(PHILLY, "gcp")
    only_header = tmp_path / "h.csv"
    only_header.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n")
    with pytest.raises(TraceFormatError, match="no jobs"):
        read_trace(only_header)


# ------------------------------------------------------------------ preparation rules
def test_preparation_rescales_rate_and_maps_workers_sizes_models():
    t = read_trace(ALIBABA)
    tw = TraceWorkload.prepare(t, jobs_per_slot=2.0, max_workers=4, model_names=("bert",))
    assert tw.dropped == 1  # the CPU-only pod
    # 4 GPU pods over the span of their submissions: 3 gaps -> rate 3 / span
    span = t.submit[-1] - t.submit[0]
    assert tw.seconds_per_slot == pytest.approx(2.0 / (3 / span))
    assert (len(tw.submit) - 1) / tw.span_slots == pytest.approx(2.0)
    np.testing.assert_array_equal(tw.workers, [4, 1, 2, 1])  # 8 GPUs capped; 0.22 -> 1
    known = np.array([1332357, 294651, 1512])
    np.testing.assert_allclose(tw.size_factor[[0, 1, 3]], np.clip(known / 294651, 0.05, 20))
    assert tw.size_factor[2] == 1.0  # unknown duration: the median job
    assert (tw.model == -1).all()  # no model names in this trace: drawn per episode


def test_pollux_applications_must_be_scenario_models():
    t = read_trace(POLLUX)
    tw = TraceWorkload.prepare(t, 1.0, 4, ("bert", "cifar10", "imagenet", "ncf"))
    np.testing.assert_array_equal(tw.model, [1, 3, 0, 2])
    with pytest.raises(ConfigError, match=r"pollux_small\.csv:5: application 'imagenet'"):
        TraceWorkload.prepare(t, 1.0, 4, ("bert", "cifar10", "ncf"))


def _trace_sim(path: Path, **kw) -> EdgeClusterSim:
    return EdgeClusterSim(make_config("edge10", trace_path=str(path), **kw))


def test_simulator_replays_the_trace_window_exactly(tmp_path):
    # 400 jobs at known times; the window of the episode is fixed so counts are comparable
    rng = np.random.default_rng(3)
    submit = np.sort(rng.uniform(0, 40 * 3600, 400)).round()
    stamps = np.datetime64("2020-01-01T00:00:00") + submit.astype("timedelta64[s]")
    path = tmp_path / "philly.csv"
    rows = [f"{str(s).replace('T', ' ')},{60 + i},{1 + i % 3},1,c" for i, s in enumerate(stamps)]
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n" + "\n".join(rows) + "\n")
    sim = _trace_sim(path, trace_window_start_hours=5.0, arrival_slots=100)
    sim.reset(0)
    tw = sim._trace_wl
    per_slot = tw.seconds_per_slot
    # rescaled: the trace's long-run mean is the scenario's 10 nodes x 0.03 jobs per slot
    assert (len(tw.submit) - 1) / tw.span_slots == pytest.approx(10 * 0.03)
    start = 5 * 3600.0  # hours after the first submission
    for window in (1, 10, 25):
        edges = start + np.arange(0, 100 + window, window) * per_slot
        edges[-1] = min(edges[-1], start + 100 * per_slot)
        want = np.histogram(submit - submit[0], bins=edges)[0]
        got = np.bincount(sim.j_arrival // window, minlength=len(want))[: len(want)]
        np.testing.assert_array_equal(got, want)
    # workers follow the GPU counts of the replayed jobs
    in_window = (submit - submit[0] >= start) & (submit - submit[0] < start + 100 * per_slot)
    np.testing.assert_array_equal(
        np.sort(sim.j_workers), np.sort(np.minimum(1 + np.flatnonzero(in_window) % 3, 4))
    )


def test_random_windows_are_seeded_and_differ_between_seeds():
    sim = _trace_sim(PHILLY, arrival_slots=2)
    sim.reset(1)
    a = (sim.workload().trace_window_start, sim.j_arrival.copy())
    sim.reset(1)
    assert sim.workload().trace_window_start == a[0]
    np.testing.assert_array_equal(sim.j_arrival, a[1])
    starts = set()
    for seed in range(5):
        sim.reset(seed)
        starts.add(sim.workload().trace_window_start)
    assert len(starts) == 5


def test_empty_window_gives_an_episode_without_jobs():
    sim = _trace_sim(PHILLY, trace_window_start_hours=1.5, arrival_slots=1)
    sim.reset(0)
    assert sim.num_jobs == 0
    sim.step(np.zeros(sim.num_agents, dtype=np.int64))
    # nothing arrives, so the episode ends after its one arrival slot, not at max_slots
    assert sim.terminated and not sim.truncated and sim.t == 1
    m = sim.episode_metrics()
    assert m["jobs_arrived"] == 0 == m["jobs_done"] and m["makespan"] == 0


def test_trace_errors_name_the_parameter():
    with pytest.raises(ConfigError, match=r"trace_path='/no/such\.csv': no such file"):
        _trace_sim(Path("/no/such.csv"))
    with pytest.raises(ConfigError, match=r"trace_window_start_hours=9\.0 lies beyond"):
        _trace_sim(PHILLY, trace_window_start_hours=9.0).reset(0)
    with pytest.raises(ConfigError, match="trace_format='csv' is not allowed"):
        make_config("edge10", trace_path=str(PHILLY), trace_format="csv")
    with pytest.raises(ConfigError, match="trace_size_clip"):
        make_config("edge10", trace_path=str(PHILLY), trace_size_clip=(2.0, 1.0))


def test_hydra_env_trace_maps_to_simulator_parameters(tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    shutil.copy(PHILLY, tmp_path / "mine.csv")
    monkeypatch.chdir(tmp_path)
    env = OmegaConf.create(
        {"name": "edge50-trace", "overrides": {}, "trace": {"path": "mine.csv", "format": None}}
    )
    assert scenario_overrides(env) == {"trace_path": str(tmp_path / "mine.csv")}
    env.overrides = {"trace_path": "other.csv"}
    with pytest.raises(ValueError, match=r"conflicts with env\.overrides\.trace_path"):
        scenario_overrides(env)
    # configs written before env.trace existed still load
    old = OmegaConf.create({"name": "edge50", "overrides": {"arrival_rate": 0.05}})
    assert scenario_overrides(old) == {"arrival_rate": 0.05}


# ------------------------------------------------------------------ the real files
@needs_data("philly")
def test_real_philly_trace_is_read_whole():
    t = read_trace(DATA_DIR / "pollux-osdi21" / "traces" / "philly.csv")
    assert t.format == "philly" and len(t) == 82247
    assert t.epoch == "2017-09-04T10:30:41"
    assert t.span_seconds / 86400 == pytest.approx(108.9, abs=0.1)
    assert set(np.unique(t.gpus)) <= {1, 2, 4, 8, 12, 16, 24, 32, 64, 128}
    assert (t.duration >= 0).all() and np.all(np.diff(t.submit) >= 0)


@needs_data("pollux-workload-1")
def test_real_pollux_workloads_name_only_catalog_models():
    from edgesched.envs import model_catalog

    # every workload here: all 32 in ../shared/data, only the registered one in a fetch cache
    files = sorted((DATA_DIR / "pollux-osdi21").glob("workloads*/workload-*.csv"))
    assert DATA_DIR / "pollux-osdi21" / "workloads" / "workload-1.csv" in files
    for f in files:
        t = read_trace(f)
        assert t.format == "pollux" and len(t) > 0
        assert set(t.application) <= set(model_catalog().names), f


@needs_scenario_data("edge50-philly")
def test_edge50_philly_rescales_the_trace_to_edge50s_rate():
    sim = EdgeClusterSim(make_config("edge50-philly"))
    tw = sim._trace_wl
    assert (len(tw.submit) - 1) / tw.span_slots == pytest.approx(50 * 0.03)
    counts = []
    for seed in range(20):
        sim.reset(seed)
        assert (sim.j_arrival < 200).all() and (sim.j_workers <= 4).all()
        counts.append(sim.num_jobs)
    # Philly is bursty: the median window holds fewer jobs than the long-run mean (300)
    assert 0 < np.median(counts) < 300 and max(counts) > 0


@needs_scenario_data("melbourne125")
def test_aarnet_link_capacities_drive_melbourne():
    speeds = topology_zoo_link_speeds("Aarnet")
    assert len(speeds) == 22 and set(np.unique(speeds)) == {0.155, 1.0, 2.5, 10.0}
    cluster = build_cluster(make_config("melbourne125"))
    assert set(np.unique(cluster.link_bw)) <= set(speeds)
    with pytest.raises(ConfigError, match="did you mean"):
        topology_zoo_link_speeds("Aarnett")


# ------------------------------------------------------------- records that never ran, windows
NEVER_RAN = {
    "alibaba": (FIXTURES / "alibaba_never_ran.csv", [True, False, False, True]),
    "philly": (FIXTURES / "philly_never_ran.csv", [True, False, True, False]),
}


@pytest.mark.parametrize("fmt", sorted(NEVER_RAN))
def test_records_that_never_ran_are_flagged_and_dropped_on_request(fmt):
    # Alibaba: pods 0102 (pending) and 0103 (failed before scheduling) have no
    # scheduled_time; Philly: the two zero-second jobs. Rows are in submission order.
    path, ran = NEVER_RAN[fmt]
    trace = read_trace(path, fmt)
    assert trace.ran.tolist() == ran
    if fmt == "alibaba":
        # a pod never scheduled but deleted lasts from its creation: 0103, 3000 -> 3050
        assert trace.duration[2] == 50.0 and np.isnan(trace.duration[1])
    kept = TraceWorkload.prepare(trace, 1.0, 4, ("cifar10",))
    dropped = TraceWorkload.prepare(trace, 1.0, 4, ("cifar10",), drop_never_ran=True)
    assert len(kept.submit) == 4 and kept.dropped == 0
    assert len(dropped.submit) == sum(ran) and dropped.dropped == 4 - sum(ran)
    np.testing.assert_array_equal(dropped.submit + trace.submit[ran][0], trace.submit[ran])


def test_pollux_records_all_ran():
    assert read_trace(POLLUX, "pollux").ran.all()


def _skewed_trace() -> TraceWorkload:
    """20 jobs spread over 1M s, then 1,000 jobs within 10k s."""
    sparse = np.arange(20) * 50_000.0
    dense = 1_000_000.0 + np.linspace(0.0, 10_000.0, 1_000)
    submit = np.concatenate([sparse, dense])
    n = len(submit)
    trace = Trace(
        source="synthetic",
        format="philly",
        submit=submit,
        duration=np.full(n, 60.0),
        gpus=np.ones(n),
        cpus=np.full(n, np.nan),
        mem_gib=np.full(n, np.nan),
        application=np.full(n, "", dtype=object),
        line=np.arange(2, n + 2),
    )
    return TraceWorkload.prepare(trace, 1.0, 4, ("cifar10",))


def test_per_job_windows_fall_where_the_trace_has_jobs():
    # a window of 5 slots is ~5k trace seconds: around a sparse job it holds 1 job, in the
    # dense burst hundreds. Uniform starts (redrawn while empty) mostly land on sparse jobs;
    # starts around a uniformly drawn job land in the burst 1000 times in 1020.
    tw = _skewed_trace()
    counts = {}
    for rule in ("any_job", "per_job"):
        rng = np.random.default_rng(0)
        sizes = [len(tw.window(rng, 5, -1.0, rule)[1]) for _ in range(300)]
        assert min(sizes) >= 1
        counts[rule] = np.mean(np.array(sizes) >= 10)
    assert counts["any_job"] < 0.3
    assert counts["per_job"] > 0.9
