"""Leaderboard statistics, records, generated tables and validation (DESIGN §6).

Fixture: ``tests/fixtures/leaderboard/records.jsonl`` holds raw records on edge10 with
``max_slots=20`` (4 evaluation seeds): the ``random`` and ``local_only`` baselines as written
by ``evaluate_baseline`` (re-evaluated on ``edge10-v1`` with ``refresh``), and MAPPO/IPPO
records (3 training seeds) from a smoke sweep (``train.py -m +benchmark=edge10
experiment=smoke +env.overrides.max_slots=20``) trimmed to those seeds. The learned records
were run on ``edge10-v0`` and relabelled ``edge10-v1``: they have no policy to re-run and
serve only as numbers for the statistics and the table format. After an intended change
of the table format, regenerate the expected files with

    python -m edgesched.leaderboard build --results tests/fixtures/leaderboard/records.jsonl \
        --out tests/fixtures/leaderboard/expected --no-png
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from edgesched.leaderboard import stats
from edgesched.leaderboard.__main__ import main
from edgesched.leaderboard.build import build, compute_rows
from edgesched.leaderboard.collect import collect, parse_seeds
from edgesched.leaderboard.records import (
    Record,
    RecordError,
    check_record,
    group_tables,
    load_records,
)
from edgesched.leaderboard.validate import diff, validate_records

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "leaderboard"
RECORDS = FIXTURES / "records.jsonl"


def _fixture_rows() -> list[dict]:
    return [json.loads(line) for line in RECORDS.read_text().splitlines()]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ----------------------------------------------------------------------------- statistics
def test_iqm_of_known_vectors_is_exact():
    assert stats.iqm(np.arange(1.0, 9.0)) == 4.5  # middle of 1..8: 3, 4, 5, 6
    assert stats.iqm([10.0, 1.0, 100.0, 2.0, 3.0, 4.0, 5.0, -50.0]) == 3.5
    # n = 10: int(2.5) = 2 cut from each end, as scipy.stats.trim_mean(x, 0.25)
    x = np.array([0.0, 1, 2, 3, 4, 5, 6, 7, 8, 1000])
    assert stats.iqm(x) == 4.5
    assert stats.iqm([np.array([1.0, 2.0]), np.array([3.0, 4.0])]) == 2.5


@pytest.mark.parametrize("statistic", ["mean", "iqm"])
def test_bootstrap_ci_matches_scipy(statistic):
    x = np.random.default_rng(7).normal(10.0, 2.0, size=40)
    ours = stats.stratified_bootstrap([x], statistic)
    fn = np.mean if statistic == "mean" else (lambda a, axis: sps.trim_mean(a, 0.25, axis=axis))
    ref = sps.bootstrap(
        (x,), fn, method="percentile", n_resamples=20_000, rng=np.random.default_rng(123)
    ).confidence_interval
    point = x.mean() if statistic == "mean" else sps.trim_mean(x, 0.25)
    assert ours.value == pytest.approx(point, abs=1e-12)
    assert ours.low == pytest.approx(ref.low, abs=0.05)
    assert ours.high == pytest.approx(ref.high, abs=0.05)
    assert ours.low < point < ours.high
    # fixed seed: the same interval every time
    assert stats.stratified_bootstrap([x], statistic) == ours


def test_stratified_bootstrap_resamples_within_strata():
    rng = np.random.default_rng(3)
    strata = [rng.normal(0, 1, 6), rng.normal(50, 1, 6)]
    ours = stats.stratified_bootstrap(strata, "mean")
    # reference: resample each stratum independently (numpy), pool, take the mean
    g = np.random.default_rng(11)
    reps = [
        np.concatenate([g.choice(s, size=len(s), replace=True) for s in strata]).mean()
        for _ in range(20_000)
    ]
    lo, hi = np.percentile(reps, [2.5, 97.5])
    assert ours.low == pytest.approx(lo, abs=0.05)
    assert ours.high == pytest.approx(hi, abs=0.05)
    # an unstratified bootstrap mixing the two groups would be far wider
    assert ours.high - ours.low < 2.0
    one = stats.stratified_bootstrap([np.array([3.0])], "mean")
    assert one.value == 3.0 and np.isnan(one.low) and np.isnan(one.high)


def test_probability_of_improvement_and_normalized_score():
    better, worse = [np.array([3.0, 4.0])], [np.array([1.0, 2.0])]
    assert stats.probability_of_improvement(better, worse) == 1.0
    assert stats.probability_of_improvement(worse, better) == 0.0
    assert stats.probability_of_improvement([np.array([1.0])], [np.array([1.0])]) == 0.5
    # averaged over strata
    assert stats.probability_of_improvement(
        [np.array([2.0]), np.array([0.0])], [np.array([1.0]), np.array([1.0])]
    ) == pytest.approx(0.5)
    assert stats.normalized_score(10.0, 10.0, 2.0) == 0.0
    assert stats.normalized_score(2.0, 10.0, 2.0) == 1.0
    assert stats.normalized_score(6.0, 10.0, 2.0) == 0.5


def test_relative_reduction_is_paired_over_seeds():
    y = np.array([10.0, 40.0, 20.0, 80.0, 30.0])
    # exactly half on every seed: 50% lower, and no resample can change that
    half = stats.relative_reduction(y / 2, y)
    assert half.value == pytest.approx(0.5)
    assert half.low == pytest.approx(0.5) and half.high == pytest.approx(0.5)
    same = stats.relative_reduction(y, y)
    assert same.value == 0.0 and same.low == same.high == 0.0
    # noisy but paired: the point value is 1 - sum(x)/sum(y), the CI brackets it and
    # equals scipy's paired percentile bootstrap of that statistic
    rng = np.random.default_rng(1)
    x = y * rng.uniform(0.6, 1.0, len(y))
    e = stats.relative_reduction(x, y)
    assert e.value == pytest.approx(1 - x.sum() / y.sum())
    assert e.low <= e.value <= e.high
    ref = sps.bootstrap(
        (x, y),
        lambda a, b, axis=-1: 1 - a.mean(axis) / b.mean(axis),
        paired=True,
        vectorized=True,
        n_resamples=stats.N_RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(stats.SEED),
    ).confidence_interval
    assert (e.low, e.high) == pytest.approx((ref.low, ref.high))
    # an unpaired bootstrap would see the 10..80 spread between seeds; the paired one not
    assert e.high - e.low < 0.4
    assert np.isnan(stats.relative_reduction(x[:1], y[:1]).low)
    with pytest.raises(ValueError, match="paired samples, got 2 and 3"):
        stats.relative_reduction(x[:2], y[:3])


def test_relative_reduction_runs_carries_the_spread_between_training_runs():
    y = np.array([[10.0, 40.0, 20.0, 80.0, 30.0]])  # a heuristic: one run
    # three training runs, each the same fraction of y on every seed, but unlike each other
    x = np.stack([y[0] * f for f in (0.5, 0.8, 1.1)])
    e = stats.relative_reduction_runs(x, y)
    assert e.value == pytest.approx(1 - x.mean() / y.mean())
    assert e.low <= e.value <= e.high
    # holding the runs fixed (their per-seed mean) the ratio is the same on every seed, so
    # the seed-only interval is a point; resampling the runs shows their spread
    fixed = stats.relative_reduction(x.mean(axis=0), y[0])
    assert fixed.high - fixed.low == pytest.approx(0.0, abs=1e-12)
    assert e.low < 0.1 and e.high > 0.4
    # runs that agree leave only the seeds' paired spread: no wider than the fixed interval
    same = stats.relative_reduction_runs(np.repeat(x[1:2], 3, axis=0), y)
    assert same.low == pytest.approx(0.2) and same.high == pytest.approx(0.2)
    # one run on both sides: the plain paired interval, bit for bit
    z = y * np.array([0.9, 0.7, 1.0, 0.8, 0.95])
    assert stats.relative_reduction_runs(z, y) == stats.relative_reduction(z[0], y[0])
    # seeded: the same call gives the same interval
    assert stats.relative_reduction_runs(x, y) == e
    assert np.isnan(stats.relative_reduction_runs(x[:, :1], y[:, :1]).low)
    with pytest.raises(ValueError, match="same evaluation seeds, got 5 and 4 columns"):
        stats.relative_reduction_runs(x, y[:, :4])
    # the same policies evaluated two ways draw their runs together: each run 0.9 of itself
    # is 10% lower whichever runs are drawn, while independent draws see the runs' spread
    together = stats.relative_reduction_runs(0.9 * x, x, same_runs=True)
    assert together.low == pytest.approx(0.1) and together.high == pytest.approx(0.1)
    apart = stats.relative_reduction_runs(0.9 * x, x)
    assert apart.low < 0.0 < 0.1 < apart.high
    with pytest.raises(ValueError, match="same_runs=True\\) needs the same runs, got 3 and 1"):
        stats.relative_reduction_runs(x, y, same_runs=True)


# -------------------------------------------------------------------------------- build
def test_build_fixture_matches_expected_table(tmp_path):
    written = build([RECORDS], [], tmp_path, plots=False)
    assert sorted(p.name for p in written) == ["coverage.md", "edge10.csv", "edge10.md"]
    for name in ("edge10.md", "edge10.csv"):
        assert (tmp_path / name).read_bytes() == (FIXTURES / "expected" / name).read_bytes(), name


def test_coverage_page_counts_seeds_and_lists_what_the_protocol_lacks(tmp_path):
    from edgesched.algos import list_algorithms
    from edgesched.baselines import list_baselines

    build([RECORDS], [], tmp_path, plots=False)
    page = (tmp_path / "coverage.md").read_text()
    header = next(line for line in page.splitlines() if line.startswith("| entry"))
    assert header == "| entry | kind | edge10 | edge50 | edge100 | tapfinger-hetero6 |"
    rows = {line.split(" | ")[0][2:]: line for line in page.splitlines() if line.count("|") > 5}
    assert rows["mappo"] == "| mappo | learned | 3 train | - | - | - |"
    assert rows["random"] == "| random | heuristic | 4 eval | - | - | - |"
    for name in list_baselines() + list_algorithms():
        assert name in rows, name  # every registered entry has a row, with records or not
    missing = page.split("Still missing for the protocol: ")[1].strip().split("; ")
    assert "mappo on edge50 (0 of 3 training seeds)" in missing
    assert not [m for m in missing if m.startswith("mappo on edge10 ")]
    assert "random on edge10 (4 of 10 evaluation seeds)" in missing  # the fixture has 4
    assert "random on edge100 (0 of 10 evaluation seeds)" in missing


def test_fixture_numbers_match_a_direct_computation():
    rows = {r.algo: r for r in compute_rows(load_records([RECORDS]))}
    recs = {(d["algo"], d["train_seed"]): d for d in _fixture_rows()}
    rnd = np.array([e["jct_mean"] for e in recs["random", None]["per_episode"]])
    loc = recs["local_only", None]["per_episode"]
    loc_jct = np.array([e["jct_mean"] for e in loc])
    bound = np.mean([e["jct_lower_bound_mean"] for e in loc])
    r = rows["local_only"]
    assert r.mean.value == pytest.approx(loc_jct.mean())
    assert r.iqm.value == pytest.approx(sps.trim_mean(loc_jct, 0.25))
    assert r.normalized_score == pytest.approx((rnd.mean() - loc_jct.mean()) / (rnd.mean() - bound))
    assert r.p_improvement == pytest.approx(np.mean((loc_jct < rnd) + 0.5 * (loc_jct == rnd)))
    m = rows["mappo"]
    mappo = [recs["mappo", s]["summary"]["jct_mean"] for s in (0, 1, 2)]
    assert m.mean.value == pytest.approx(np.mean(mappo)) and m.train_seeds == [0, 1, 2]


def test_build_syncs_the_readme_only_from_its_own_leaderboards(tmp_path):
    from edgesched.leaderboard.build import README_END, README_START

    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{README_START}\nold\n{README_END}\nrest\n")
    results = ROOT / "leaderboards" / "results" / "baselines_edge_v1.jsonl"
    args = ["build", "--results", str(results), "--no-png", "--readme", str(readme)]
    # a scratch build (often of a subset of the records) leaves the README alone
    assert main([*args, "--out", str(tmp_path / "scratch")]) == 0
    assert (tmp_path / "scratch" / "edge50.md").exists()
    assert "old" in readme.read_text()
    assert main([*args, "--out", str(tmp_path / "leaderboards")]) == 0
    text = readme.read_text()
    assert "old" not in text and "| least_loaded |" in text and text.endswith("rest\n")


def test_build_writes_png_and_is_deterministic(tmp_path):
    assert main(["build", "--results", str(RECORDS), "--out", str(tmp_path / "a")]) == 0
    build([RECORDS], [], tmp_path / "b")
    assert (tmp_path / "a" / "edge10.png").stat().st_size > 1000
    for name in ("edge10.md", "edge10.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_committed_leaderboards_are_generated(tmp_path):
    committed = sorted(
        p for p in (ROOT / "leaderboards").glob("*.md") if p.name.lower() != "readme.md"
    )
    results = ROOT / "leaderboards" / "results"
    if not committed:
        pytest.skip("no leaderboards/<scenario>.md committed yet")
    assert results.is_dir(), "leaderboards/*.md exist but leaderboards/results/ does not"
    build(
        [results], [], tmp_path, plots=False, studies=ROOT / "leaderboards" / "studies", root=ROOT
    )
    for md in committed:
        fresh = tmp_path / md.name
        assert fresh.exists(), f"{md.name} is not generated from leaderboards/results/"
        assert md.read_bytes() == fresh.read_bytes(), (
            f"leaderboards/{md.name} differs from `python -m edgesched.leaderboard build`"
        )
        csv = md.with_suffix(".csv")
        # study pages (srole.md) have no table of their own
        assert csv.exists() == (tmp_path / csv.name).exists(), csv.name
        if csv.exists():
            assert csv.read_bytes() == (tmp_path / csv.name).read_bytes(), csv.name


# ---------------------------------------------------------------------------- bad records
def test_missing_field_names_file_line_and_record(tmp_path):
    rows = _fixture_rows()
    del rows[3]["config_hash"]
    path = _write(tmp_path / "bad.jsonl", rows)
    with pytest.raises(RecordError) as err:
        load_records([path])
    msg = str(err.value)
    assert f"{path}:4" in msg and "algo='local_only'" in msg and "config_hash" in msg


def test_unknown_scenario_version_is_rejected(tmp_path):
    rows = _fixture_rows()
    for r in rows:
        r["scenario"] = "edge10-v7"
    path = _write(tmp_path / "stale.jsonl", rows)
    with pytest.raises(RecordError) as err:
        group_tables(load_records([path]))
    msg = str(err.value)
    assert str(path) in msg and "edge10-v7" in msg and "edge10-v1" in msg and "algo=" in msg
    rows[0]["scenario"] = "edge11-v0"
    path = _write(tmp_path / "unknown.jsonl", rows[:1])
    with pytest.raises(RecordError, match=r"unknown\.jsonl:1: .*unknown scenario 'edge11-v0'"):
        load_records([path])


def test_mixed_versions_in_one_table_are_rejected(tmp_path):
    rows = _fixture_rows()
    rows[-1]["scenario"] = "edge10-v0"
    a = _write(tmp_path / "a.jsonl", rows[:-1])
    b = _write(tmp_path / "b.jsonl", rows[-1:])
    with pytest.raises(RecordError) as err:
        build([a, b], [], tmp_path / "out", plots=False)
    msg = str(err.value)
    assert "mixes scenario versions" in msg and f"{b}:1" in msg and "edge10-v0" in msg
    assert "algo='random'" in msg
    assert main(["build", "--results", str(a), str(b), "--out", str(tmp_path / "o")]) == 2


def test_duplicate_and_inconsistent_records_are_rejected(tmp_path):
    rows = _fixture_rows()
    dup = _write(tmp_path / "dup.jsonl", [*rows, rows[-1]])
    with pytest.raises(RecordError, match="duplicate entry"):
        group_tables(load_records([dup]))
    other = copy.deepcopy(rows)
    other[0]["env_overrides"] = {"max_slots": 30}
    with pytest.raises(RecordError, match="mixes env_overrides"):
        group_tables(load_records([_write(tmp_path / "ov.jsonl", other)]))
    bad = copy.deepcopy(rows)
    bad[0]["per_episode"] = bad[0]["per_episode"][:-1]
    with pytest.raises(
        RecordError, match=r"bad\.jsonl:1: .*per_episode covers other .* missing \[\(10003, 0\)\]"
    ):
        load_records([_write(tmp_path / "bad.jsonl", bad)])


@pytest.mark.parametrize(
    ("where", "key", "value", "shown"),
    [
        ("per_episode", "jct_mean", "41.2", "'41.2' (a string)"),
        ("per_episode", "jct_p95", "41.2", "'41.2' (a string)"),
        ("per_episode", "makespan", "120", "'120' (a string)"),
        ("per_episode", "jct_p95", float("nan"), "nan"),
        ("per_episode", "collisions_executed", None, "None"),
        ("per_episode", "median_node_utilization", True, "True (a boolean)"),
        ("per_episode", "shield_interventions", float("inf"), "inf"),
        ("per_episode", "jct_by_priority", [3.0, "4.0"], "'4.0' (a string)"),
        ("summary", "jct_mean", "41.2", "'41.2' (a string)"),
        ("summary", "jct_p95", float("nan"), "nan"),
    ],
)
def test_metrics_must_be_finite_numbers(tmp_path, capsys, where, key, value, shown):
    """A number stored as a string, a boolean, NaN or an infinity stops build and validate
    (exit 2) with one line naming the record's file and line, the field and the value."""
    rows = _fixture_rows()
    rec = rows[3]
    target = rec["per_episode"][2] if where == "per_episode" else rec["summary"]
    target[key] = value
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # NaN/Infinity as Python writes
    field = f"per_episode[2].{key}" if where == "per_episode" else f"summary.{key}"
    if key == "jct_by_priority":
        field += "[1]"
    with pytest.raises(RecordError) as err:
        load_records([path])
    assert f"{path}:4" in str(err.value) and field in str(err.value)
    assert f"got {shown}" in str(err.value)
    for cmd in ("build", "validate"):
        out = tmp_path / cmd
        assert main([cmd, "--results", str(path), *(["--out", str(out)] * (cmd == "build"))]) == 2
        msg = capsys.readouterr().err
        assert msg.count("\n") == 1 and f"{path}:4" in msg and field in msg and shown in msg
    assert not (tmp_path / "build").exists()


def test_nullable_metrics_may_be_null():
    """Undefined metrics (no job completed, no job of a priority class) are null in records."""
    rows = _fixture_rows()
    rows[3]["per_episode"][2].update(jct_mean_completed=None, final_quality_mean=None)
    rows[3]["per_episode"][2]["jct_by_priority"][0] = None
    rows[3]["summary"]["final_quality_mean"] = None
    check_record(Record(rows[3], RECORDS, 4))


BLOCK_EXTRAS = """
import runpy, sys
BLOCKED = {"omegaconf", "hydra", "yaml", "torch", "scipy", "matplotlib", "tqdm", "pandas",
           "stable_baselines3", "torch_geometric", "statsmodels", "wandb"}
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
for m in [m for m in sys.modules if m.partition(".")[0] in BLOCKED]:
    del sys.modules[m]
sys.argv = ["python -m edgesched.leaderboard", *sys.argv[1:]]
runpy.run_module("edgesched.leaderboard", run_name="__main__", alter_sys=True)
"""


def _cli_without_extras(*args: str) -> subprocess.CompletedProcess:
    """``python -m edgesched.leaderboard ARGS`` where the ``train`` extra cannot be imported."""
    return subprocess.run(
        [sys.executable, "-c", BLOCK_EXTRAS, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_cli_help_works_without_the_train_extra(tmp_path):
    for args in (["--help"], ["build", "--help"], ["validate", "-h"]):
        proc = _cli_without_extras(*args)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("usage: python -m edgesched.leaderboard"), proc.stdout
    assert "edgesched[train]" in _cli_without_extras("--help").stdout
    for args in (
        ["build", "--results", str(RECORDS), "--out", str(tmp_path / "out"), "--no-png"],
        ["validate", "--results", str(RECORDS)],
        ["collect", "--runs", str(tmp_path), "--out", str(tmp_path / "c.jsonl")],
        ["baselines", "--scenarios", "edge10", "--seeds", "1", "--out", str(tmp_path / "b.jsonl")],
        ["refresh", str(tmp_path / "r.jsonl")],
    ):
        proc = _cli_without_extras(*args)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1, proc.stderr
        assert "needs the 'train' extra" in proc.stderr
        assert 'pip install "edgesched[train]"' in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_baselines_refuse_to_relax_strict_evaluation(tmp_path, capsys):
    out = tmp_path / "b.jsonl"
    args = ["baselines", "--scenarios", "edge10", "--seeds", "10000", "--out", str(out)]
    assert main([*args, "--override", "invalid_action=defer"]) == 2
    assert "invalid_action='raise'" in capsys.readouterr().err
    assert not out.exists()


# ------------------------------------------------------------------------------ validate
def test_validate_ignores_wall_clock_fields_but_not_results():
    """Wall-clock fields (rlpto's per-episode wall_s, shield latencies) never reproduce and
    are skipped; every other number must match."""
    rec = {"per_episode": [{"jct_mean": 10.0, "wall_s": 0.2, "shield_latency_ms": 1.0}]}
    rerun = {"per_episode": [{"jct_mean": 10.0, "wall_s": 67.7, "shield_latency_ms": 9.0}]}
    assert diff(rec, rerun, 1e-6) == []
    rerun["per_episode"][0]["jct_mean"] = 10.5
    assert diff(rec, rerun, 1e-6) == [".per_episode[0].jct_mean: recorded 10.0, re-run 10.5"]
    del rerun["per_episode"][0]["wall_s"]  # presence is still checked
    assert ".per_episode[0].wall_s: only in record" in diff(rec, rerun, 1e-6)


def test_validate_reproduces_heuristics_and_detects_tampering(tmp_path, capsys):
    rows = _fixture_rows()
    heuristics = [r for r in rows if r["train_seed"] is None]
    good = _write(tmp_path / "good.jsonl", heuristics)
    report = validate_records(load_records([good]))
    assert report.passed and len(report.ok) == 2

    tampered = copy.deepcopy(heuristics)
    tampered[1]["per_episode"][2]["jct_mean"] += 0.01  # random, third episode
    bad = _write(tmp_path / "tampered.jsonl", tampered)
    report = validate_records(load_records([bad]))
    assert not report.passed and len(report.mismatches) == 1
    assert "tampered.jsonl:2" in report.mismatches[0]
    assert "per_episode[2].jct_mean" in report.mismatches[0]
    assert main(["validate", "--results", str(bad)]) == 1
    assert "MISMATCH" in capsys.readouterr().out
    # learned entries without a policy file are skipped, not failed
    learned = _write(tmp_path / "learned.jsonl", [r for r in rows if r["train_seed"] is not None])
    report = validate_records(load_records([learned]))
    assert report.passed and len(report.skipped) == 6


def test_validate_reads_each_folder_of_a_tree_as_its_own_tables(tmp_path, capsys):
    """Studies keep one scenario per folder under other settings: together they are no one
    board, but each folder is, and validating the tree re-runs every record."""
    heuristics = [r for r in _fixture_rows() if r["train_seed"] is None]
    for d in "ab":
        (tmp_path / "studies" / d).mkdir(parents=True)
    _write(tmp_path / "studies" / "a" / "x.jsonl", heuristics)
    _write(tmp_path / "studies" / "b" / "x.jsonl", heuristics)  # the same entries again
    assert main(["validate", "--results", str(tmp_path / "studies")]) == 0
    assert "validated 4 records: 4 reproduced" in capsys.readouterr().out
    # two files given at once are two groups as well
    a, b = (str(tmp_path / "studies" / d / "x.jsonl") for d in "ab")
    assert main(["validate", "--results", a, b]) == 0
    # nothing selected is an error, not a pass: a typo in a filter, an empty folder
    assert main(["validate", "--results", a, "--scenarios", "edge5"]) == 2
    assert "no records to validate in " + a + " for --scenarios edge5" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["validate", "--results", str(tmp_path / "empty")]) == 2
    assert "no records to validate" in capsys.readouterr().err


def test_validate_in_parallel_reports_as_one_process(tmp_path, capsys):
    rows = [r for r in _fixture_rows() if r["train_seed"] is None]
    tampered = copy.deepcopy(rows)
    tampered[0]["per_episode"][1]["jct_mean"] += 0.5
    path = _write(tmp_path / "mixed.jsonl", [*rows, *tampered])
    records = load_records([path], [])
    lines: list[str] = []
    serial = validate_records(records)
    parallel = validate_records(records, jobs=2, log=lines.append)
    assert not serial.passed and len(serial.ok) == 3 and len(serial.mismatches) == 1
    assert (parallel.ok, parallel.mismatches, parallel.skipped) == (
        serial.ok,
        serial.mismatches,
        serial.skipped,
    )
    # one progress line per record, in record order
    assert [line.split()[0] for line in lines] == ["ok", "ok", "MISMATCH", "ok"]
    with pytest.raises(ValueError, match="jobs=0"):
        validate_records(records, jobs=0)
    with pytest.raises(SystemExit):
        main(["validate", "--results", str(path), "--jobs", "0"])
    assert "--jobs='0' is not allowed; use 1 or more" in capsys.readouterr().err


def test_collect_copies_policies_and_sets_paths(tmp_path):
    rows = [r for r in _fixture_rows() if r["algo"] == "mappo"]
    for r in rows:
        run = tmp_path / "sweep" / f"seed{r['train_seed']}"
        run.mkdir(parents=True)
        (run / "eval.json").write_text(json.dumps(r))
        (run / "policy.pt").write_bytes(b"weights%d" % r["train_seed"])
    out = tmp_path / "results" / "learned.jsonl"
    collect([tmp_path / "sweep"], out, policies=tmp_path / "pol", root=tmp_path)
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["policy"] for r in got] == [f"pol/edge10/mappo_seed{k}.pt" for k in (0, 1, 2)]
    assert (tmp_path / "pol/edge10/mappo_seed1.pt").read_bytes() == b"weights1"
    assert parse_seeds(["10000..10002", "7,9"]) == [10000, 10001, 10002, 7, 9]


def test_collect_merge_keeps_the_seeds_whose_run_folders_are_gone(tmp_path):
    rows = [r for r in _fixture_rows() if r["algo"] == "mappo"]

    def runs(name, subset):
        for r in subset:
            run = tmp_path / name / f"seed{r['train_seed']}"
            run.mkdir(parents=True, exist_ok=True)
            (run / "eval.json").write_text(json.dumps(r))
            (run / "policy.pt").write_bytes(b"weights%d" % r["train_seed"])
        return tmp_path / name

    out = tmp_path / "study.jsonl"
    kw = dict(policies=tmp_path / "pol", root=tmp_path)
    collect([runs("first", rows[:1])], out, **kw)
    # a later session has only seeds 1 and 2: without --merge seed 0 would be dropped
    later = runs("later", rows[1:])
    collect([later], out, merge=True, **kw)
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["train_seed"] for r in got] == [0, 1, 2]
    assert got[0]["policy"] == "pol/edge10/mappo_seed0.pt"
    # re-collecting a seed replaces its record rather than duplicating it
    lines: list[str] = []
    collect([later], out, merge=True, log=lines.append, **kw)
    assert len(out.read_text().splitlines()) == 3
    assert sum("replaced by the run's record" in line for line in lines) == 2
    collect([later], out, **kw)  # the default writes the runs' records only
    assert [json.loads(line)["train_seed"] for line in out.read_text().splitlines()] == [1, 2]
    # a merged seed must share the entry's budget
    collect([runs("first", rows[:1])], out, merge=True, **kw)
    longer = copy.deepcopy(rows[1])
    longer["train_seed"] = 7
    longer["train"] = {"env_steps": 2_000_000, "updates": 999}
    with pytest.raises(RecordError, match="share the budget"):
        collect([runs("other", [longer])], out, merge=True, **kw)
    assert len(out.read_text().splitlines()) == 3  # nothing written on failure


def test_readme_shows_the_generated_edge50_table():
    from edgesched.leaderboard.build import README_END, README_START, table_lines

    root = Path(__file__).resolve().parents[1]
    md = root / "leaderboards" / "edge50.md"
    if not md.exists():
        pytest.skip("no leaderboards/edge50.md committed yet")
    readme = (root / "README.md").read_text()
    region = readme.partition(README_START)[2].partition(README_END)[0]
    assert region.strip() == table_lines(md.read_text()).strip()


def test_the_readme_copies_the_ranking_and_not_the_curves_table():
    from edgesched.leaderboard.build import table_lines

    md = "# t\n\n| a |\n|---|\n| 1 |\n\ntext\n\n| entry | steps |\n|---|---|\n| x | 5 |\n"
    assert table_lines(md) == "| a |\n|---|\n| 1 |\n"
    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    assert "| entry | training seeds | K |" not in readme


# ---------------------------------------------------------------------------- studies
def _row(algo, shield, learned, jct, lo, hi, coll_exec, coll_prop=10.0, util=0.5, seed_scores=None):
    from edgesched.leaderboard.build import Row

    metrics = {
        "collisions_proposed": coll_prop,
        "collisions_executed": coll_exec,
        "median_node_utilization": util,
        "shield_interventions": 3.0 if shield != "none" else float("nan"),
    }
    return Row(
        algo=algo,
        shield=shield,
        learned=learned,
        train_seeds=[0, 1, 2] if learned else [],
        eval_seeds=list(range(10_000, 10_010)),
        episodes=1,
        mean=stats.Estimate(jct, lo, hi),
        iqm=stats.Estimate(jct, lo, hi),
        metrics=metrics,
        normalized_score=0.5,
        p_improvement=0.5,
        commits=["abc"],
        config_hashes=["h"],
        episode_jcts=[jct],
        seed_scores=seed_scores if seed_scores is not None else [],
    )


def test_srole_study_computes_the_targets_from_the_rows():
    from edgesched.leaderboard.studies import render_srole

    assert render_srole({"edge50": [_row("mappo", "none", True, 50, 45, 55, 40)]}) is None
    rows = [
        _row("srole", "central", True, 30.0, 28, 32, 0.0),  # 40% lower JCT, 100% fewer
        _row("srole", "regional", True, 40.0, 38, 42, 30.0),  # 20% lower JCT, 25% fewer
        _row("mappo", "none", True, 50.0, 45, 55, 40.0),
        _row("dqn_central", "none", True, 45.0, 40, 50, 0.0),
        _row("optimus", "none", False, 35.0, 33, 37, 20.0),
        _row("random", "none", False, 60.0, 55, 65, 50.0),
    ]
    md = render_srole({"edge50-highload": rows})
    assert "## edge50-highload" in md and "## edge50\n" not in md
    assert "optimus (best heuristic)" in md and "random" not in md.split("## edge50")[1]
    central = next(
        line for line in md.splitlines() if line.startswith("- srole + central vs mappo")
    )
    assert "40.0% lower (target >= 30% lower: met)" in central
    assert "100.0% fewer (target >= 45% fewer: met)" in central
    regional = next(
        line for line in md.splitlines() if line.startswith("- srole + regional vs mappo")
    )
    assert "20.0% lower (target >= 30% lower: missed)" in regional
    assert "25.0% fewer (target >= 45% fewer: missed)" in regional
    assert "mean JCT 30.00 vs 50.00, 40.0% lower" in central
    vs = [line for line in md.splitlines() if "Target (lower than dqn_central and optimus" in line]
    assert "vs dqn_central 30.00 vs 45.00, lower (95% CIs disjoint)" in vs[0]
    assert "vs optimus 30.00 vs 35.00, lower (95% CIs disjoint)" in vs[0]
    assert vs[0].endswith("CIs disjoint): met.")
    # regional: lower than the DQN head (overlapping CIs) but higher than optimus
    assert "vs dqn_central 40.00 vs 45.00, lower (CIs overlap)" in vs[1]
    assert "vs optimus 40.00 vs 35.00, higher (95% CIs disjoint)" in vs[1]
    assert vs[1].endswith("missed.")
    worse = render_srole({"edge50": [_row("srole", "central", True, 60.0, 58, 62, 0.0), rows[2]]})
    assert "60.00 vs 50.00, 20.0% higher (target >= 30% lower: missed)" in worse


def test_rlpto_study_computes_its_targets_from_the_rows():
    from edgesched.leaderboard.studies import render_rlpto

    def row(algo, learned, jct, reward, p0, extra=None):
        r = _row(algo, "none", learned, jct, jct - 1, jct + 1, 0.0)
        r.metrics.update(
            cluster_reward=reward,
            final_quality_mean=0.9,
            occupied_share_mean=0.4,
            jct_prio_0=p0,
            jct_prio_1=p0 + 5,
            jct_prio_2=p0 + 10,
            **(extra or {}),
        )
        return r

    assert render_rlpto({"edge50": [row("mappo", True, 40, -10, 20)]}) is None
    rl = row(
        "rlpto",
        True,
        45,
        -5.0,
        12,
        {"gpus_per_job_small": 1.5, "gpus_per_job_large": 2.5, "rule_shrinks": 7.0},
    )
    rows = [
        rl,
        row("mappo", True, 40, -8.0, 20),
        row("fifo", False, 50, -9.0, 11),
        row("optimus", False, 38, -7.0, 15),
    ]
    md = render_rlpto({"edge50-highload": rows})
    assert "## edge50-highload" in md and "## edge50\n" not in md
    assert "rlpto -5.0, best other optimus -7.0 (rlpto highest: met; 3 entries" in md
    assert "rlpto 12.00; lower than 1 of 2 heuristics (not: fifo)." in md
    assert "1.50 GPUs per running job for jobs below the median size and 2.50 above" in md
    rl.metrics["cluster_reward"] = -7.5
    assert "rlpto not highest: missed" in render_rlpto({"edge50": rows})
    # with per-seed rewards the verdict needs the paired interval above zero
    base = np.linspace(-10.0, -5.0, 10)
    rows[3].seed_cluster_rewards = list(base)  # optimus
    rows[1].seed_cluster_rewards = list(base - 3)  # mappo
    rows[2].seed_cluster_rewards = list(base - 3)  # fifo
    rows[3].metrics["cluster_reward"] = float(base.mean())
    rl.seed_cluster_rewards = list(base + 1.0)  # ahead by 1.0 on every seed
    rl.metrics["cluster_reward"] = float(base.mean() + 1.0)
    md = render_rlpto({"edge50": rows})
    assert "(rlpto highest: met; rlpto minus optimus, paired over evaluation seeds: " in md
    assert "+1.0 [+1.0, +1.0]" in md
    # ahead on the mean, but by less than the seed-to-seed noise of the difference
    noise = np.array([4.0, -4.0] * 5)
    rl.seed_cluster_rewards = list(base + 0.5 + noise)
    md = render_rlpto({"edge50": rows})
    assert "rlpto highest on the point estimate only, not separable: missed" in md
    rl.seed_cluster_rewards = list(base[:3])  # other seeds: not comparable, plain verdict
    rl.eval_seeds = rl.eval_seeds[:3]
    assert "(rlpto highest: met; 3 entries" in render_rlpto({"edge50": rows})


def test_paired_difference_is_paired_over_seeds():
    y = np.array([-10.0, -40.0, -20.0, -80.0, -30.0])
    shifted = stats.paired_difference(y + 2.0, y)
    assert shifted.value == pytest.approx(2.0)
    assert shifted.low == pytest.approx(2.0) and shifted.high == pytest.approx(2.0)
    rng = np.random.default_rng(0)
    x = y + rng.normal(0.0, 3.0, len(y))
    e = stats.paired_difference(x, y)
    assert e.value == pytest.approx(x.mean() - y.mean())
    assert e.low <= e.value <= e.high
    assert np.isnan(stats.paired_difference(x[:1], y[:1]).low)
    with pytest.raises(ValueError, match="paired samples, got 5 and 4"):
        stats.paired_difference(x, y[:4])


def test_refresh_reevaluates_in_place_and_adds_new_metrics(tmp_path):
    rows = [r for r in _fixture_rows() if r["train_seed"] is None]
    old = copy.deepcopy(rows)
    for r in rows:  # a record written before the metrics existed
        for ep in r["per_episode"]:
            ep.pop("occupied_share_mean", None)
            ep.pop("quality_total", None)
        r["summary"].pop("occupied_share_mean", None)
        r["summary"].pop("quality_total", None)
    path = _write(tmp_path / "old.jsonl", rows)
    assert main(["refresh", str(path), "--algos", "random"]) == 0
    fresh = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["algo"] for r in fresh] == [r["algo"] for r in rows]  # order and count kept
    by = {r["algo"]: r for r in fresh}
    assert "occupied_share_mean" in by["random"]["summary"]
    assert all("quality_total" in ep for ep in by["random"]["per_episode"])
    assert "occupied_share_mean" not in by["local_only"]["summary"]  # not chosen
    # the numbers themselves reproduce
    assert (
        by["random"]["summary"]["jct_mean"]
        == next(r for r in old if r["algo"] == "random")["summary"]["jct_mean"]
    )
    assert validate_records(load_records([path])).passed


def test_tapfinger_study_reports_paired_reductions_and_targets():
    from edgesched.leaderboard.studies import render_tapfinger

    base = np.linspace(10.0, 100.0, 10)  # per evaluation seed: workloads differ a lot

    def row(algo, learned, factor):
        scores = np.tile(base * factor, (3 if learned else 1, 1))
        m = float(scores.mean())
        return _row(algo, "none", learned, m, m - 1, m + 1, 0.0, seed_scores=scores.tolist())

    assert render_tapfinger({"edge50": [row("optimus", False, 1.0)]}) is None
    hetero = [
        row("tapfinger", True, 0.5),
        row("tapfinger-noattn", True, 0.5),
        row("tapfinger-noptr", True, 0.8),
        row("optimus", False, 0.6),
        row("tiresias", False, 1.0),
        row("random", False, 2.0),
        row("min_alloc", False, 1.25),
        row("fifo", False, 0.4),  # the best heuristic, not a paper baseline
    ]
    md = render_tapfinger({"tapfinger-hetero6": hetero})
    assert "## tapfinger-hetero6" in md and "## edge50" not in md
    assert "| fifo (best heuristic) | heuristic | 10 eval |" in md
    assert "| random | heuristic | 10 eval |" in md and "75.0% lower [75.0%, 75.0%]" in md
    assert "| min_alloc | heuristic | 10 eval |" in md and "60.0% lower" in md
    assert "| optimus | heuristic | 10 eval |" in md and "16.7% lower" in md
    target = next(line for line in md.splitlines() if line.startswith("- tapfinger vs"))
    # the paper's baselines only: beating them all meets the target even though fifo wins
    assert "optimus, tiresias, random, min_alloc" in target and "fifo" not in target
    assert "against 4 of 4" in target and "largest reduction 75.0%" in target
    assert target.endswith("Target (beats all): met.")
    # issue #22's bar: 30% below the best of Optimus, Tiresias and their preemptive forms
    bar = next(line for line in md.splitlines() if line.startswith("- tapfinger vs the best"))
    assert "the best of optimus, tiresias (optimus, " in bar
    assert "16.7% lower (paired: 16.7% lower [16.7%, 16.7%])" in bar
    assert bar.endswith("Target (at least 30% lower): missed.")
    stronger = [row("tapfinger", True, 0.5), row("optimus", False, 0.8), row("tiresias", False, 1)]
    bar = next(
        line
        for line in render_tapfinger({"tapfinger-hetero6": stronger}).splitlines()
        if line.startswith("- tapfinger vs the best")
    )
    assert "37.5% lower" in bar and bar.endswith("Target (at least 30% lower): met.")
    noptr = next(line for line in md.splitlines() if "Ablation tapfinger-noptr" in line)
    assert "37.5% lower" in noptr and "without the pointer (the component helps)" in noptr
    noattn = next(line for line in md.splitlines() if "Ablation tapfinger-noattn" in line)
    assert "0.0% lower" in noattn and "no benefit of the component shown" in noattn
    # an ablation trained before a default moved is compared with the entry that kept its
    # other settings (provenance.matched_bases), which the table then lists too
    moved = [*hetero, row("tapfinger-noclip", True, 0.8)]
    bases = {
        ("tapfinger-hetero6", "tapfinger-noattn"): ("tapfinger-noclip", ("graph_attention",)),
        ("tapfinger-hetero6", "tapfinger-noptr"): ("tapfinger", ("pointer", "pointer_clip")),
    }
    md2 = render_tapfinger({"tapfinger-hetero6": moved}, bases=bases)
    assert "| tapfinger-noclip | learned | 3 train |" in md2
    noattn = next(line for line in md2.splitlines() if "Ablation tapfinger-noattn" in line)
    assert "against `tapfinger-noclip` (trained with the same settings but graph attention)" in (
        noattn
    )
    assert "`tapfinger-noclip`'s mean JCT is 60.0% higher" in noattn
    noptr = next(line for line in md2.splitlines() if "Ablation tapfinger-noptr" in line)
    assert "against `tapfinger` (which differs in pointer_clip too)" in noptr
    # on edge50 every heuristic counts, and a worse tapfinger reads "higher"
    edge = [row("tapfinger", True, 0.5), row("optimus", False, 0.6), row("fifo", False, 0.4)]
    md = render_tapfinger({"edge50": edge})
    target = next(line for line in md.splitlines() if line.startswith("- tapfinger vs"))
    assert "every heuristic (optimus, fifo)" in target and "against 1 of 2 (not: fifo)" in target
    assert target.endswith("missed.") and "25.0% higher [25.0%, 25.0%]" in md
    assert "- tapfinger vs the best" not in md  # that target is set on tapfinger-hetero6 only


def test_reduction_text_flips_the_interval_of_an_increase():
    from edgesched.leaderboard.studies import reduction_text

    assert reduction_text(stats.Estimate(0.321, 0.25, 0.383)) == "32.1% lower [25.0%, 38.3%]"
    assert reduction_text(stats.Estimate(-0.682, -0.775, -0.6)) == "68.2% higher [60.0%, 77.5%]"
    assert reduction_text(None).startswith("n/a")


def test_committed_archives_are_generated(tmp_path):
    """Each ``leaderboards/archive/vK`` is ``build --superseded`` of its own results."""
    archives = sorted((ROOT / "leaderboards" / "archive").glob("v*"))
    if not archives:
        pytest.skip("no archived boards")
    for folder in archives:
        out = tmp_path / folder.name
        build([folder / "results"], [], out, plots=False, superseded=True, root=ROOT)
        for md in sorted(folder.glob("*.md")):
            if md.name.lower() == "readme.md":
                continue
            fresh = out / md.name
            assert fresh.exists() and md.read_bytes() == fresh.read_bytes(), md
        # every learned entry of the archive still has its policy file
        for rec in load_records([folder / "results"]):
            if rec.data.get("policy"):
                assert (ROOT / rec.data["policy"]).is_file(), rec.data["policy"]


def test_superseded_records_build_only_as_an_archive(tmp_path):
    rows = _fixture_rows()
    for r in rows:
        r["scenario"] = "edge10-v0"
    path = _write(tmp_path / "v0.jsonl", rows)
    with pytest.raises(RecordError, match="not the registered one"):
        build([path], [], tmp_path / "current", plots=False)
    build([path], [], tmp_path / "archive", plots=False, superseded=True)
    page = (tmp_path / "archive" / "edge10.md").read_text()
    assert "**Superseded.** `edge10-v0`" in page and "`edge10-v1`" in page
    assert "build --superseded" in page
    # a current-version table has no such note
    build([RECORDS], [], tmp_path / "now", plots=False)
    assert "Superseded" not in (tmp_path / "now" / "edge10.md").read_text()


def test_best_learned_vs_best_heuristic_section():
    """coverage.md's target line: disjoint CIs decide it; the paired reduction is beside it."""
    from edgesched.leaderboard.studies import render_learned_vs_heuristics

    base = np.linspace(10.0, 100.0, 10)  # workloads differ a lot: wide heuristic CIs

    def row(algo, shield, learned, factor, lo, hi):
        scores = np.tile(base * factor, (3 if learned else 1, 1))
        m = float(scores.mean())
        return _row(algo, shield, learned, m, lo, hi, 0.0, seed_scores=scores.tolist())

    edge = [
        row("mappo", "none", True, 0.9, 48.0, 51.0),  # best learned, 10% lower on every seed
        row("tapfinger-noptr", "none", True, 0.5, 26.0, 29.0),  # an ablation: not a candidate
        row("least_loaded", "central", False, 1.0, 35.0, 75.0),  # best heuristic (shielded)
        row("random", "none", False, 2.0, 80.0, 140.0),
    ]
    clear = [
        row("srole", "central", True, 0.5, 26.0, 29.0),
        row("optimus", "none", False, 1.0, 40, 70),
    ]
    tf = [
        row("tapfinger", "none", True, 1.5, 80.0, 85.0),
        row("optimus", "none", False, 1.0, 40, 70),
    ]
    lines = render_learned_vs_heuristics(
        {"edge50": edge, "edge10": clear, "tapfinger-hetero6": tf, "edge100": edge[2:]},
        ["edge10", "edge50", "edge100", "tapfinger-hetero6"],
    )
    table = {
        line.split(" | ")[0][2:]: line
        for line in lines
        if line.startswith("| edge") or line.startswith("| tap")
    }
    assert set(table) == {"edge10", "edge50", "tapfinger-hetero6"}  # edge100: no learned entry
    e50 = table["edge50"]
    assert "| mappo | 49.50 [48.00, 51.00] | least_loaded (central) |" in e50
    # the CIs overlap, so the target is missed, although the paired reduction is clear
    assert "| no | 10.0% lower [10.0%, 10.0%] | missed |" in e50
    assert table["edge10"].endswith("| yes | 50.0% lower [50.0%, 50.0%] | met |")
    assert table["tapfinger-hetero6"].endswith(
        "| yes | 50.0% higher [50.0%, 50.0%] | n/a (see tapfinger.md) |"
    )
    assert render_learned_vs_heuristics({"edge50": edge[2:]}, ["edge50"]) == []
    # a verdict by an entry trained short of the board's budget says so
    short = row("srole", "central", True, 0.5, 26.0, 29.0)
    short.train_budget = (149_504, 292)  # edge50's benchmark budget is 299,520 steps
    (line,) = [
        ln
        for ln in render_learned_vs_heuristics(
            {"edge50": [short, clear[1]]}, ["edge50"], {"edge50": 300_000}, 150_000
        )
        if ln.startswith("| edge50")
    ]
    assert line.endswith("| met (by an entry trained at 149,504 of the board's 300,000 steps) |")
    # at a board's default budget (an archived version has no set one) it is no handicap
    (line,) = [
        ln
        for ln in render_learned_vs_heuristics(
            {"edge50": [short, clear[1]]}, ["edge50"], {}, 150_000
        )
        if ln.startswith("| edge50")
    ]
    assert line.endswith("| met |")
    short.train_budget = (299_520, 585)
    (line,) = [
        ln
        for ln in render_learned_vs_heuristics(
            {"edge50": [short, clear[1]]}, ["edge50"], {"edge50": 300_000}, 150_000
        )
        if ln.startswith("| edge50")
    ]
    assert line.endswith("| met |")


def test_heuristics_with_identical_records_share_one_row(tmp_path):
    from edgesched.leaderboard.build import merge_identical

    rows = _fixture_rows()
    rnd = next(r for r in rows if r["algo"] == "random")
    twin = copy.deepcopy(rnd)
    twin["algo"] = "fifo"
    # a learned entry with the same numbers as another is never merged
    learned = [r for r in rows if r["algo"] == "mappo"]
    clone = copy.deepcopy(learned)
    for r in clone:
        r["algo"] = "ippo2"
    path = _write(tmp_path / "r.jsonl", [*rows, twin, *clone])
    shown = merge_identical(compute_rows(load_records([path])))
    labels = [r.label for r in shown]
    assert "fifo = random" in labels and "random" not in labels and "fifo" not in labels
    assert "mappo" in labels and "ippo2" in labels
    build([path], [], tmp_path / "out", plots=False)
    md = (tmp_path / "out" / "edge10.md").read_text()
    assert "| fifo = random | none | heuristic |" in md and "stands for all of them" in md
    csv_rows = (tmp_path / "out" / "edge10.csv").read_text().splitlines()
    assert any(line.split(",")[1:3] == ["fifo", "random"] for line in csv_rows)
    # one differing episode keeps them apart
    twin["per_episode"][0]["jct_mean"] += 1.0
    path = _write(tmp_path / "s.jsonl", [*rows, twin])
    labels = [r.label for r in merge_identical(compute_rows(load_records([path])))]
    assert "fifo" in labels and "random" in labels


def test_colocation_study_takes_only_timeshare_records(tmp_path):
    studies = tmp_path / "studies" / "colocation"
    studies.mkdir(parents=True)
    rows = _fixture_rows()
    _write(studies / "bad.jsonl", rows)  # max_slots=20, not collision_mode=timeshare
    with pytest.raises(RecordError, match="collision_mode=timeshare records only"):
        build([RECORDS], [], tmp_path, plots=False, studies=tmp_path / "studies")


def test_colocation_page_reports_the_premise_from_the_rows():
    from edgesched.leaderboard.colocation import pair_summary, render_colocation
    from edgesched.leaderboard.stats import Estimate
    from edgesched.leaderboard.table import Row

    def row(algo, shield, jct, lo, hi, scores):
        return Row(
            algo=algo,
            shield=shield,
            learned=False,
            train_seeds=[],
            eval_seeds=[1, 2, 3],
            episodes=1,
            mean=Estimate(jct, lo, hi),
            iqm=Estimate(jct, lo, hi),
            metrics={"crashes": 2.0, "shared_gpu_slots": 10.0},
            normalized_score=0.0,
            p_improvement=0.5,
            commits=[],
            config_hashes=[],
            episode_jcts=list(scores),
            seed_scores=[list(scores)],
        )

    # measured: the shield cuts 20% with disjoint CIs; timeshare: nothing
    measured = {
        "edge50-highload": [
            row("least_loaded", "none", 100.0, 95.0, 105.0, [98, 100, 102]),
            row("least_loaded", "central", 80.0, 76.0, 84.0, [78, 80, 82]),
        ]
    }
    timeshare = {
        "edge50-highload": [
            row("least_loaded", "none", 80.0, 76.0, 84.0, [78, 80, 82]),
            row("least_loaded", "central", 80.0, 76.0, 84.0, [78, 80, 82]),
        ]
    }
    page = render_colocation(measured, timeshare)
    assert "measured: mean JCT 20.0% lower, CIs disjoint" in page
    assert "Target: met." in page
    timeshare["edge50-highload"][0] = row("least_loaded", "none", 100.0, 95.0, 105.0, [98] * 3)
    assert "Target: missed." in render_colocation(measured, timeshare)
    assert render_colocation({}, timeshare) is None
    assert {c for c, *_ in pair_summary()} == {"k80", "p100", "v100"}
    # the spread the mean hides (colocation.json as derived from Gavel's profiles)
    v100 = next(p for p in pair_summary() if p.gpu_class == "v100")
    assert v100.lossy == pytest.approx(16 / 36) and v100.lowest_pair == ("ncf", "ncf")
    assert v100.lowest < 0.1 < v100.median and v100.fail == 0.0


def test_the_most_failing_gavel_jobs_are_mapped_to_no_model():
    """The co-location page says so; a change of the declared mapping must revisit it."""
    from edgesched.envs.colocation import load_colocation
    from edgesched.leaderboard.colocation import MOST_FAILING_GAVEL_JOBS

    mapped = {m["gavel"] for m in load_colocation()["model_map"].values()}
    assert mapped and not mapped & set(MOST_FAILING_GAVEL_JOBS)
